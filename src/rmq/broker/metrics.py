"""The broker's Prometheus endpoint (``metricsExporterType=PROM``): RocketMQ 5.x's metric names and
labels where 5.x has the metric (BrokerMetricsConstant, RemotingMetricsConstant,
DefaultStoreMetricsConstant), ``rmq_`` names where it has none.

    exporter = MetricsExporter(controller).start()   # prometheus_client's own HTTP server thread
    exporter.shutdown()

Nothing is counted per message: a scrape reads what the broker keeps anyway, as the stats log does
(``rmq.broker.stats_log``). Messages in are each ConsumeQueue's growth since the broker started;
their bytes and the message size histogram come from the sizes the new ConsumeQueue entries record
(the stored record's bytes, as RocketMQ's wroteBytes), summed with numpy. Messages out are the
pull processor's ``GetCounts``. Consumer lag is each queue's max offset minus the group's committed
offset. The one thing measured per request is its latency on the broker (one ``perf_counter``
pair and a bucket increment in a plain list, ``RpcLatency``), from the request's dispatch to its
answer being queued: a SYNC_FLUSH send's includes its wait for the flush, a parked pull's its wait
for messages (RocketMQ labels those is_long_polling; here they are in the same series). A oneway
request has ``response_code="-1"`` and its processing time. A code that ``rmq.protocol.codes`` does not
name is labelled ``"unknown"`` (all of them one series), so the codes a client makes up cannot grow
the table or the scrape.

Every series carries RocketMQ's ``cluster``, ``node_type`` ("broker") and ``node_id`` (brokerName)
labels. Counters restart at 0 with the broker, as RocketMQ's do.

===================================  ==========================================================
rocketmq_messages_in_total           counter, messages stored, by topic
rocketmq_throughput_in_total         counter, bytes stored, by topic
rocketmq_message_size                histogram, bytes a stored message takes, by topic
rocketmq_messages_out_total          counter, messages pulls handed out, by topic, consumer_group
rocketmq_throughput_out_total        counter, bytes pulls handed out, by topic, consumer_group
rocketmq_consumer_lag_messages       gauge, messages stored and not yet committed, by topic, group
rocketmq_consumer_connections        gauge, consumer clients online, by consumer_group
rocketmq_rpc_latency                 histogram, ms per request, by protocol_type, request_code,
                                     response_code: "remoting" requests by their codes; "grpc_v2"
                                     (the gRPC endpoint, rmq.proxy) by method and status Code
rocketmq_storage_size                gauge, bytes of the store's files on disk
rocketmq_storage_flush_behind_bytes  gauge, CommitLog bytes not yet flushed
rocketmq_topic_number                gauge, topics
rmq_connections                      gauge, open client connections
rmq_connections_refused_total        counter, connections closed at once: serverMaxConnections were open
rmq_storage_flush_rounds_total       counter, CommitLog flushes (SYNC_FLUSH: group commit rounds)
rmq_storage_flush_last_round_seconds gauge, the last SYNC_FLUSH round's msync
rmq_replication_lag_bytes, _ms       gauge, each slave's lag behind this master, by slave
rmq_storage_disk_used_ratio          gauge, used fraction of the store's disk
rocketmq_processor_watermark         gauge, requests queued, by processor ("send": sends stored
                                     and not yet answered, the queue sendThreadPoolQueueCapacity
                                     bounds; rmq.broker.processor.send)
rmq_system_busy_total                counter, sends refused SYSTEM_BUSY, by reason (OVERLOAD,
                                     PCBUSY_CLEAN_QUEUE, TIMEOUT_CLEAN_QUEUE)
===================================  ==========================================================

Every SYSTEM_BUSY answer is also in ``rocketmq_rpc_latency_count{response_code="2"}``; messages per flush is
``rate(rocketmq_messages_in_total) / rate(rmq_storage_flush_rounds_total)``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector

from rmq._rpc_latency import PROTOCOL_REMOTING, RPC_LATENCY_BOUNDS_MS, LatencyTable
from rmq.errors import ConfigError
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.store.layout import CQ_STORE_UNIT_SIZE

if TYPE_CHECKING:
    from rmq.broker.services import MetricsServices

log = logging.getLogger("rmq.broker")

# RocketMQ 5.x's buckets: BrokerMetricsManager's messageSizeBuckets (bytes)
MESSAGE_SIZE_BOUNDS = (1024, 4 * 1024, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)
DEFERRED = -1  # response_code of a oneway request (timed to its processor's return)
UNKNOWN = -2  # a request or response code rmq.protocol.codes does not name
UNKNOWN_LABEL = "unknown"
_REQUEST_CODES = frozenset(int(code) for code in RequestCode)
_RESPONSE_CODES = frozenset(int(code) for code in ResponseCode) | {DEFERRED}
# a ConsumeQueue entry: CommitLog offset, size, tag hash (big-endian)
_CQ_ENTRY = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tag", ">i8")])
assert _CQ_ENTRY.itemsize == CQ_STORE_UNIT_SIZE
_READ_CHUNK = 65536


class RpcLatency(LatencyTable):
    """The remoting server's requests, keyed (request code, response code); observed on the event
    loop thread, read by scrapes."""

    __slots__ = ()

    def observe(self, request_code: int, response_code: int | None, seconds: float) -> None:
        if request_code not in _REQUEST_CODES:
            request_code = UNKNOWN
        if response_code is None:
            response_code = DEFERRED
        elif response_code not in _RESPONSE_CODES:
            response_code = UNKNOWN
        self.observe_key((request_code, response_code), seconds)


class _TopicPuts:
    """What each topic's ConsumeQueues grew by since the broker started: messages, bytes and
    message sizes per MESSAGE_SIZE_BOUNDS bucket. Only the entries new since the last scrape are read."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.seen: dict[tuple[str, int], int] = {
            (cq.topic, cq.queue_id): cq.max_offset_in_queue for cq in store.consume_queues()
        }
        self.topics: dict[str, list[int]] = {}  # topic -> [messages, bytes, bucket counts...]

    def update(self) -> dict[str, list[int]]:
        for cq in self.store.consume_queues():
            key = (cq.topic, cq.queue_id)
            end = cq.max_offset_in_queue
            start = self.seen.get(key, 0)
            if end <= start:
                continue
            self.seen[key] = end
            totals = self.topics.setdefault(cq.topic, [0] * (len(MESSAGE_SIZE_BOUNDS) + 3))
            totals[0] += end - start
            offset = max(start, cq.min_offset)
            while offset < end:
                view = cq.read_entries(offset, min(_READ_CHUNK, end - offset))
                if view is None or len(view) < CQ_STORE_UNIT_SIZE:
                    break
                n = len(view) // CQ_STORE_UNIT_SIZE
                sizes = np.frombuffer(view, dtype=_CQ_ENTRY, count=n)["size"]
                totals[1] += int(sizes.sum(dtype=np.int64))
                buckets = np.bincount(
                    np.searchsorted(MESSAGE_SIZE_BOUNDS, sizes), minlength=len(MESSAGE_SIZE_BOUNDS) + 1
                )
                for i, count in enumerate(buckets.tolist()):
                    totals[2 + i] += count
                offset += n
        return {topic: list(totals) for topic, totals in self.topics.items()}


def _disk_bytes(path: str) -> int:
    """Bytes the files under ``path`` take on disk (allocated blocks: mapped files are sparse)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue  # deleted while we walked
    return total


def _code_label(code: int) -> str:
    return UNKNOWN_LABEL if code == UNKNOWN else str(code)


def _cumulative(counts: Sequence[float], bounds: tuple[int, ...]) -> list[tuple[str, float]]:
    buckets, running = [], 0.0
    for bound, count in zip(bounds, counts[: len(bounds)], strict=True):
        running += count
        buckets.append((str(float(bound)), running))
    buckets.append(("+Inf", running + counts[len(bounds)]))
    return buckets


class BrokerCollector:
    """A prometheus_client collector: every scrape reads the broker's state (module docstring)."""

    def __init__(self, controller: MetricsServices) -> None:
        self.controller = controller
        self.rpc_latency = RpcLatency()
        # other endpoints' tables (the gRPC endpoint's, keyed (method, Code)), added by who starts them
        self.rpc_latency_sources: list[tuple[str, LatencyTable]] = []
        self._puts = _TopicPuts(controller.store)
        self._lock = threading.Lock()  # two scrapes at once read new ConsumeQueue entries once
        config = controller.config
        self._base = {
            "cluster": config.broker_cluster_name,
            "node_type": "broker",
            "node_id": config.broker_name,
        }

    def _family(self, cls: type, name: str, doc: str, labels: tuple[str, ...] = (), **kw: Any) -> Any:
        return cls(name, doc, labels=[*self._base, *labels], **kw)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            yield from self._collect()

    def _collect(self) -> Iterator[Metric]:
        c = self.controller
        store = c.store
        base = list(self._base.values())

        puts = self._puts.update()
        messages_in = self._family(CounterMetricFamily, "rocketmq_messages_in_total", "Messages stored", ("topic",))
        bytes_in = self._family(CounterMetricFamily, "rocketmq_throughput_in_total", "Bytes stored", ("topic",))
        size = self._family(HistogramMetricFamily, "rocketmq_message_size", "Bytes of a stored message", ("topic",))
        for topic, totals in sorted(puts.items()):
            messages_in.add_metric([*base, topic], totals[0])
            bytes_in.add_metric([*base, topic], totals[1])
            size.add_metric([*base, topic], _cumulative(totals[2:], MESSAGE_SIZE_BOUNDS), sum_value=totals[1])
        yield from (messages_in, bytes_in, size)

        labels = ("topic", "consumer_group")
        messages_out = self._family(CounterMetricFamily, "rocketmq_messages_out_total", "Messages pulled", labels)
        bytes_out = self._family(CounterMetricFamily, "rocketmq_throughput_out_total", "Bytes pulled", labels)
        for (group, topic), (nums, nbytes) in sorted(c.get_counts.snapshot().items()):
            messages_out.add_metric([*base, topic, group], nums)
            bytes_out.add_metric([*base, topic, group], nbytes)
        yield from (messages_out, bytes_out)

        lag = self._family(
            GaugeMetricFamily, "rocketmq_consumer_lag_messages", "Messages stored and not yet consumed", labels
        )
        offsets = c.consumer_offset_manager
        for topic, group in sorted(offsets.topics_and_groups()):
            config = c.topic_config_manager.select_topic_config(topic)
            if config is None:
                continue
            committed = offsets.query_offsets(group, topic)
            behind = 0
            for queue_id in range(config.read_queue_nums):
                behind += max(0, store.get_max_offset_in_queue(topic, queue_id) - max(0, committed.get(queue_id, 0)))
            lag.add_metric([*base, topic, group], behind)
        yield lag

        consumers = self._family(
            GaugeMetricFamily, "rocketmq_consumer_connections", "Consumer clients online", ("consumer_group",)
        )
        for group in sorted(c.client_manager.consumers.groups()):
            consumers.add_metric([*base, group], len(c.client_manager.consumers.consumer_ids(group)))
        yield consumers

        rpc = self._family(
            HistogramMetricFamily,
            "rocketmq_rpc_latency",
            "ms from a request's dispatch to its answer (response_code -1: oneway)",
            ("protocol_type", "request_code", "response_code"),
        )
        rows = []
        for (request, response), counts in self.rpc_latency.snapshot():
            rows.append((PROTOCOL_REMOTING, _code_label(request), _code_label(response), counts))
        for protocol_type, table in self.rpc_latency_sources:
            for (request, response), counts in table.snapshot():
                rows.append((protocol_type, str(request), str(response), counts))
        for protocol_type, request_label, response_label, counts in sorted(rows):
            rpc.add_metric(
                [*base, protocol_type, request_label, response_label],
                _cumulative(counts[:-1], RPC_LATENCY_BOUNDS_MS),
                sum_value=counts[-1],
            )
        yield rpc

        yield self._gauge("rocketmq_storage_size", "Bytes of the store's files on disk", _disk_bytes(store.store_path))
        flushed = store.commit_log.get_flushed_where()
        yield self._gauge(
            "rocketmq_storage_flush_behind_bytes",
            "CommitLog bytes not yet flushed",
            max(0, store.get_max_phy_offset() - flushed),
        )
        yield self._gauge("rocketmq_topic_number", "Topics", len(c.topic_config_manager.topic_config_table()))
        yield self._gauge("rmq_connections", "Open client connections", len(c.server.channels))
        refused = self._family(
            CounterMetricFamily,
            "rmq_connections_refused_total",
            "Connections closed as soon as accepted: serverMaxConnections were open",
        )
        refused.add_metric(base, c.server.connections_refused)
        yield refused
        watermark = self._family(GaugeMetricFamily, "rocketmq_processor_watermark", "Requests queued", ("processor",))
        watermark.add_metric([*base, "send"], store.commit_queue_size)
        yield watermark
        busy = self._family(CounterMetricFamily, "rmq_system_busy", "Sends refused SYSTEM_BUSY", ("reason",))
        for reason, count in c.send_processor.busy_refusals.items():
            busy.add_metric([*base, reason], count)
        yield busy
        yield self._gauge("rmq_storage_disk_used_ratio", "Used fraction of the store's disk", store.disk_used_ratio())
        rounds = self._family(
            CounterMetricFamily, "rmq_storage_flush_rounds_total", "CommitLog flushes (SYNC_FLUSH: group commit rounds)"
        )
        rounds.add_metric(
            base,
            store.group_commit_flushes if store.sync_flush else store.commit_log.flush_count,  # type: ignore[attr-defined]
        )
        yield rounds
        last_round = self._family(
            GaugeMetricFamily, "rmq_storage_flush_last_round_seconds", "The last SYNC_FLUSH round's msync"
        )
        if store.sync_flush:  # ASYNC_FLUSH: the family without a sample
            _asked, woke, synced = store.group_commit.round_times
            last_round.add_metric(base, max(0.0, synced - woke))
        yield last_round
        ha_service = store.ha_service
        if ha_service is not None:
            lag_bytes = self._family(GaugeMetricFamily, "rmq_replication_lag_bytes", "Bytes a slave lags", ("slave",))
            lag_ms = self._family(GaugeMetricFamily, "rmq_replication_lag_ms", "ms a slave lags", ("slave",))
            for slave in ha_service.slaves():
                lag_bytes.add_metric([*base, slave.address], slave.lag_bytes)
                lag_ms.add_metric([*base, slave.address], slave.lag_ms)
            yield from (lag_bytes, lag_ms)

    def _gauge(self, name: str, doc: str, value: float) -> Metric:
        gauge = self._family(GaugeMetricFamily, name, doc)
        gauge.add_metric(list(self._base.values()), value)
        return gauge


class MetricsExporter:
    """The collector, served by prometheus_client's HTTP server thread on
    metricsPromExporterHost:metricsPromExporterPort; the event loop only times requests."""

    def __init__(self, controller: MetricsServices) -> None:
        config = controller.config
        self.host = config.metrics_prom_exporter_host or config.broker_ip1 or "0.0.0.0"
        self.port = config.metrics_prom_exporter_port
        self.collector = BrokerCollector(controller)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)  # type: ignore[arg-type]
        ProcessCollector(registry=self.registry)  # process_resident_memory_bytes, cpu seconds, fds
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> MetricsExporter:
        try:
            self._server, self._thread = start_http_server(self.port, self.host, self.registry)
            self._thread.name = "rmq-broker-metrics"
        except OSError as e:
            raise ConfigError(
                f"metricsPromExporterPort {self.port}: cannot serve metrics on {self.host}:{self.port}: {e}"
            ) from None
        log.info("metrics served on http://%s:%d/metrics", self.host, self.port)
        return self

    def shutdown(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = self._thread = None
