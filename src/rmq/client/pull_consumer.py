"""The lite pull consumer: the application polls (RocketMQ's DefaultLitePullConsumer).

    from rmq.client import PullConsumer

    with PullConsumer("reporting", "127.0.0.1:9876", auto_commit=False) as consumer:
        consumer.subscribe("OrderTopic", "*")        # queues shared out in the group...
        # ...or consumer.assign(consumer.fetch_message_queues("OrderTopic")) to choose them
        while running:
            for msg in consumer.poll(timeout=1.0):
                handle(msg)
            consumer.commit()

Queues are pulled in the background (long polling) into a buffer that ``poll`` drains.
``commit()`` writes the offsets of everything polled so far to the broker (or the local file in
broadcasting mode) before it returns; with ``auto_commit`` (default) polled offsets are committed
every 5 s and at shutdown. ``seek`` moves a queue: messages already buffered for it are discarded.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rmq.client.consumer import ConsumerBase, ConsumerConfig
from rmq.client.message import MessageExt
from rmq.client.process_queue import ProcessQueue
from rmq.client.route import subscribe_queues
from rmq.errors import ClientError
from rmq.protocol.heartbeat import ConsumeType
from rmq.protocol.message_queue import MessageQueue
from rmq.settings import DEFAULT_NAMESRV_ADDR

log = logging.getLogger("rmq.client")

__all__ = ["PullConsumer", "PullConsumerConfig"]


@dataclass
class PullConsumerConfig(ConsumerConfig):
    auto_commit: bool = True
    # Messages buffered per queue before its pulls pause.
    pull_threshold_for_queue: int = 1000
    # poll() returns at most this many messages.
    max_poll_records: int = 32


class PullConsumer(ConsumerBase):
    """A lite pull consumer of ``group``; see the module docstring. Options are the fields of
    PullConsumerConfig."""

    consume_type = ConsumeType.CONSUME_ACTIVELY
    config_class = PullConsumerConfig
    config: PullConsumerConfig

    def __init__(self, group: str, namesrv_addr: str = DEFAULT_NAMESRV_ADDR, **options: Any):
        super().__init__(group, namesrv_addr, **options)
        self._buffer: queue.Queue[tuple[MessageQueue, ProcessQueue, list[MessageExt]]] = queue.Queue()
        self._assigned: list[MessageQueue] | None = None
        # queue -> next offset to consume, from what poll() returned (committed by commit())
        self._polled: dict[MessageQueue, int] = {}
        self._leftover: list[MessageExt] = []
        self._leftover_from: tuple[MessageQueue, ProcessQueue] | None = None
        # Without auto commit only commit() moves the stored offsets.
        self.correct_tags_offset = self.config.auto_commit

    # -- choosing queues ------------------------------------------------------------------------

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of ``topic``."""
        route = self.instance.update_route(topic)
        if route is None:
            raise ClientError(f"no route for topic {topic!r}: create it first")
        return subscribe_queues(topic, route)

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        """Consume exactly these queues (no rebalance, no group sharing)."""
        mqs = sorted(set(mqs))
        self._assigned = mqs
        for mq in mqs:
            if mq.topic not in self.subscriptions:
                self.subscribe(mq.topic, "*")
        if self._running:
            self.instance.scheduler.run_soon(self.rebalance)

    def _rebalance_topic(self, topic: str) -> None:
        if self._assigned is None:
            super()._rebalance_topic(topic)
        else:
            self._update_process_queues(topic, {mq for mq in self._assigned if mq.topic == topic})

    # -- polling --------------------------------------------------------------------------------

    def _deliver(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        pq.put(msgs)
        self._buffer.put((mq, pq, msgs))

    def poll(self, timeout: float = 5.0) -> list[MessageExt]:
        """Up to ``max_poll_records`` messages, waiting at most ``timeout`` seconds for some."""
        if not self._running:
            raise ClientError(f"consumer {self.group} is not started")
        deadline = time.monotonic() + timeout
        while True:
            if self._leftover and self._leftover_from is not None:
                mq, pq = self._leftover_from
                msgs = self._leftover
            else:
                try:
                    mq, pq, msgs = self._buffer.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    return []
            if pq.dropped or self.process_queues.get(mq) is not pq:
                self._leftover = []
                continue  # the queue was given up or moved by seek
            limit = self.config.max_poll_records
            taken, self._leftover = msgs[:limit], msgs[limit:]
            self._leftover_from = (mq, pq)
            offset = pq.remove(taken)
            if offset >= 0:
                self._polled[mq] = offset
                if self.config.auto_commit:
                    self.offset_store.update(mq, offset)
            return taken

    def commit(self) -> None:
        """Commit the offsets of every message polled so far, and return once they are stored."""
        for mq, offset in list(self._polled.items()):
            if mq in self.process_queues:
                self.offset_store.update(mq, offset)
        self.persist_offsets()

    def committed(self, mq: MessageQueue) -> int:
        """The committed offset of ``mq`` as stored (-1: none)."""
        return self.offset_store.read_store(mq)

    # -- moving ---------------------------------------------------------------------------------

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Consume ``mq`` from ``offset`` on; what was buffered for it is discarded."""
        old = self.process_queues.get(mq)
        if old is None:
            raise ClientError(f"{mq} is not assigned to this consumer (assign() it, or wait for the rebalance)")
        api, timeout = self.instance.api, self.instance.config.request_timeout
        low, high = self.instance.call_in_admin(
            mq.broker_name,
            mq.topic,
            lambda addr: (api.get_min_offset(addr, mq, timeout), api.get_max_offset(addr, mq, timeout)),
        )
        if not low <= offset <= high:
            raise ClientError(f"cannot seek {mq} to {offset}: its offsets are {low}..{high}")
        with self._rebalance_lock:
            old.dropped = True
            pq = ProcessQueue()
            self.process_queues[mq] = pq
            self.next_offsets[mq] = offset
            self._polled[mq] = offset
            if self.config.auto_commit:
                self.offset_store.update(mq, offset)
        self._pull(mq, pq)

    def seek_to_begin(self, mq: MessageQueue) -> None:
        api, timeout = self.instance.api, self.instance.config.request_timeout
        self.seek(
            mq, self.instance.call_in_admin(mq.broker_name, mq.topic, lambda a: api.get_min_offset(a, mq, timeout))
        )

    def seek_to_end(self, mq: MessageQueue) -> None:
        api, timeout = self.instance.api, self.instance.config.request_timeout
        self.seek(
            mq, self.instance.call_in_admin(mq.broker_name, mq.topic, lambda a: api.get_max_offset(a, mq, timeout))
        )

    def seek_to_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> None:
        """Consume ``mq`` from its first message stored at or after ``timestamp_ms``."""
        api, timeout = self.instance.api, self.instance.config.request_timeout
        self.seek(
            mq,
            self.instance.call_in_admin(
                mq.broker_name, mq.topic, lambda a: api.search_offset(a, mq, timestamp_ms, timeout)
            ),
        )
