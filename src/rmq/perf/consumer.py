"""``rmq-perf consumer``: a push consumer that counts, as RocketMQ's ``benchmark/consumer.sh``::

    Current Time: 2026-11-25 00:41:07,512 | Consume TPS: 20817 | AVG(B2C) RT(ms):   1.204
        | AVG(S2C) RT(ms):   1.101 | MAX(B2C) RT(ms): 14 | MAX(S2C) RT(ms): 13 | Lag: 1520

(one line, broken here)
B2C: from the message's born timestamp (the producer's clock) to its consumption; S2C: from its
store timestamp (the broker's). Lag: the group's messages not yet consumed, summed over the topic's
queues (the broker's max offset minus the group's committed offset, as ``rmq-admin consumer
progress`` shows it: committed offsets trail by up to the client's persist interval).

Its perf-log records are ``interval``/``summary`` records with ``sent`` and ``acked`` 0,
``consumed`` and ``consume_lag`` set, an empty ``latency`` and the born-to-consume histogram in
``consume_latency`` (a field only consumer records have).
"""

from __future__ import annotations

import contextlib
import datetime
import threading
import time
from collections.abc import Callable
from typing import Any

from rmq.client import PushConsumer
from rmq.client.admin_client import AdminClient
from rmq.errors import RmqError
from rmq.perf.histogram import Histogram
from rmq.perf.load import IntervalReport
from rmq.perf.log import KIND_INTERVAL, KIND_SUMMARY, PerfLogWriter
from rmq.perf.producer import record


class ConsumeCounter:
    """What the listener saw since the last ``take``: messages, bytes, B2C and S2C latencies (ms)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.b2c: list[int] = []
        self.s2c: list[int] = []

    def listener(self, msgs: list[Any]) -> None:
        now = int(time.time() * 1000)
        with self.lock:
            self.count += len(msgs)
            self.b2c.extend(now - m.born_timestamp for m in msgs)
            self.s2c.extend(now - m.store_timestamp for m in msgs)

    def take(self) -> tuple[int, list[int], list[int]]:
        with self.lock:
            out = (self.count, self.b2c, self.s2c)
            self.count, self.b2c, self.s2c = 0, [], []
        return out


def group_lag(admin: AdminClient, group: str, topic: str) -> int | None:
    with contextlib.suppress(RmqError):
        return sum(max(0, q.broker_offset - q.consumer_offset) for q in admin.consume_progress(group, topic))
    return None


def run_consumer(
    namesrv: str,
    topic: str,
    group: str,
    expression: str,
    duration: float,
    cell: dict[str, Any],
    writer: PerfLogWriter | None,
    echo: Callable[[str], None],
    interval: float = 1.0,
) -> dict[str, Any]:
    """Consume for ``duration`` seconds (0: until interrupted), a line and a record per interval;
    the summary record."""
    counter = ConsumeCounter()
    consumer = PushConsumer(group, namesrv_addr=namesrv)
    consumer.subscribe(topic, expression)
    consumer.register_listener(counter.listener)
    total_b2c = Histogram()
    total = 0
    lag: int | None = None
    with AdminClient(namesrv) as admin:
        consumer.start()
        started = last = time.time()
        try:
            while not duration or time.time() - started < duration:
                time.sleep(max(0.0, last + interval - time.time()))
                now = time.time()
                count, b2c, s2c = counter.take()
                lag = group_lag(admin, group, topic)
                h = Histogram()
                h.record_us([v * 1000 for v in b2c])
                total_b2c.merge(h)
                total += count
                if writer is not None:
                    writer.write(_record(KIND_INTERVAL, cell, last, now, count, lag, h))
                echo(_line(now, count / (now - last), b2c, s2c, lag))
                last = now
        except KeyboardInterrupt:
            pass
        finally:
            consumer.shutdown()
    summary = _record(KIND_SUMMARY, cell, started, last, total, lag, total_b2c)
    if writer is not None:
        writer.write(summary)
    echo(f"[Complete] Consume Total: {total} | Consume TPS: {summary['consumed_per_s']:.0f} | Lag: {lag}")
    return summary


def _line(now: float, tps: float, b2c: list[int], s2c: list[int], lag: int | None) -> str:
    stamp = datetime.datetime.fromtimestamp(now).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]

    def avg(v: list[int]) -> float:
        return sum(v) / len(v) if v else 0.0

    return (
        f"Current Time: {stamp} | Consume TPS: {tps:.0f} | AVG(B2C) RT(ms): {avg(b2c):7.3f}"
        f" | AVG(S2C) RT(ms): {avg(s2c):7.3f} | MAX(B2C) RT(ms): {max(b2c, default=0)}"
        f" | MAX(S2C) RT(ms): {max(s2c, default=0)} | Lag: {'-' if lag is None else lag}"
    )


def _record(
    kind: str, cell: dict[str, Any], t_start: float, t_end: float, consumed: int, lag: int | None, h: Histogram
) -> dict[str, Any]:
    """A producer's record with nothing sent, and what was consumed."""
    rec = record(kind, cell, IntervalReport(-1), t_start, t_end, 0, 1)
    rec.update(
        consumed=consumed,
        consume_lag=lag,
        consumed_per_s=round(consumed / max(t_end - t_start, 1e-9), 1),
        consume_latency=h.to_json(),
    )
    if kind == KIND_SUMMARY:
        rec.update(p50_us=h.percentile(50), p99_us=h.percentile(99), p999_us=h.percentile(99.9), max_us=h.max_us())
    return rec
