"""ScheduleMessageService: delivers delayed messages when their time comes (docs/messaging.md#delayed-messages).

A message with DELAY = L waits in queue L-1 of SCHEDULE_TOPIC_XXXX; the store wrote its deliver
time (store time + the level's delay) as the entry's tags code. Entries of one level are in deliver
order (same delay, increasing store time), so each level is a cursor: deliver entries from the
level's offset while they are due, stop at the first that is not. A due message is put again to
REAL_TOPIC / REAL_QID without DELAY, REAL_TOPIC and REAL_QID, and parked pulls are woken.

One service thread, ``rmq-broker-delay`` (docs/threads.md), runs every level's cursor; it sleeps
until the earliest head entry is due, and at most ``tick`` seconds, so new delayed messages are seen
within a tick and delivered within a few milliseconds of their deliver time.

Progress (level -> next offset) goes to the DelayOffsetManager (``config/delayOffset.json``), but
only up to re-puts the CommitLog has flushed: offsets are snapshotted with the CommitLog end, and a
snapshot is published once the flushed position passes that end. After a crash the scheduler
therefore resumes at or before the last durable re-put: a message may be delivered twice (RocketMQ's
at-least-once), never lost. ``shutdown`` publishes the final offsets; the store's own shutdown,
which comes after, flushes the re-puts they cover.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from rmq._clock import now_ms
from rmq._service import ServiceThread
from rmq.broker.delay import delay_level_to_queue_id
from rmq.errors import StoreError
from rmq.protocol.message import SCHEDULE_TOPIC, TRANS_HALF_TOPIC, MessageProperty
from rmq.protocol.record import decode_record
from rmq.settings import parse_delay_levels

log = logging.getLogger("rmq.broker")

# Properties that only mean something while a message waits in SCHEDULE_TOPIC_XXXX.
SCHEDULE_ONLY_PROPERTIES = (MessageProperty.DELAY_TIME_LEVEL, MessageProperty.REAL_TOPIC, MessageProperty.REAL_QUEUE_ID)
# Seconds between looks at the schedule queues when nothing is due sooner.
TICK_SECONDS = 0.1
# After a failed re-put (disk full, store stopping), retry the level this much later.
RETRY_AFTER_FAILURE_MS = 1000
# Seconds between publications of the delivered offsets to delayOffset.json (RocketMQ: 10 s).
PERSIST_INTERVAL_SECONDS = 1.0
# Entries a level delivers in one round before the other levels get their turn.
MAX_DELIVERIES_PER_ROUND = 1000


class ScheduleMessageService(ServiceThread):
    """The delay levels' cursors on one thread: ``start()`` / ``shutdown()`` / ``wakeup()``."""

    def __init__(self, controller: Any, tick: float = TICK_SECONDS, persist_interval: float = PERSIST_INTERVAL_SECONDS):
        super().__init__("rmq-broker-delay")
        self.controller = controller
        self.store = controller.store
        self.offsets_manager = controller.delay_offset_manager
        self.tick = tick
        self.persist_interval = persist_interval
        self.delay_ms = parse_delay_levels(self.store.config.message_delay_level)
        self._offsets: dict[int, int] = {}
        self._retry_at: dict[int, int] = {}
        # (offsets, CommitLog end when they were taken): published once the end is flushed
        self._snapshot: tuple[dict[int, int], int] | None = None
        self._next_persist = 0.0
        self.delivered = 0

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Resume every level where delayOffset.json says (corrected into the queue's range)."""
        self._offsets = {level: self._corrected(level, self.offsets_manager.offset(level)) for level in self.delay_ms}
        self._snapshot = None
        super().start()

    def on_shutdown(self) -> None:
        self._publish(dict(self._offsets))

    # -- delivery -----------------------------------------------------------------------------

    def run_once(self) -> None:
        now = now_ms()
        next_due = now + int(self.tick * 1000)
        for level, delay in self.delay_ms.items():
            if self.is_stopped:
                return
            due = self._deliver_level(level, delay, now)
            if due is not None:
                next_due = min(next_due, due)
            now = now_ms()
        self._persist_if_flushed()
        self.wait_for_running(max(0, next_due - now_ms()) / 1000)

    def _deliver_level(self, level: int, delay: int, now: int) -> int | None:
        """Deliver the level's due entries; the time its next entry is due (None: queue drained)."""
        if self._retry_at.get(level, 0) > now:
            return self._retry_at[level]
        queue = self.store.find_consume_queue(SCHEDULE_TOPIC, delay_level_to_queue_id(level))
        if queue is None:
            return None
        offset = self._corrected(level, self._offsets.get(level, 0))
        for _ in range(MAX_DELIVERIES_PER_ROUND):
            entry = queue.get_entry(offset)
            if entry is None:
                break
            phy_offset, size, deliver_at = entry
            if deliver_at > now + delay:
                # the clock went back (or the level's delay was shortened): deliver now, as RocketMQ
                deliver_at = now
            if deliver_at > now:
                self._offsets[level] = offset
                return deliver_at
            if not self._deliver(level, offset, phy_offset, size):
                self._offsets[level] = offset
                self._retry_at[level] = now + RETRY_AFTER_FAILURE_MS
                return self._retry_at[level]
            offset += 1
            now = now_ms()
        self._offsets[level] = offset
        return now if queue.get_entry(offset) is not None else None

    def _deliver(self, level: int, offset: int, phy_offset: int, size: int) -> bool:
        """Re-put one due message; False when the store refused it (retry later)."""
        record = self.store.look_message_by_offset(phy_offset, size)
        if record is None:
            log.warning(
                "delay level %d offset %d: no message at CommitLog offset %d (deleted by retention?); skipped",
                level,
                offset,
                phy_offset,
            )
            return True
        try:
            message = decode_record(record, check_crc=False)
        except StoreError as e:
            log.error("delay level %d offset %d: unreadable record at %d (%s); skipped", level, offset, phy_offset, e)
            return True
        properties = dict(message.properties)
        topic = properties.get(MessageProperty.REAL_TOPIC)
        queue_id = properties.get(MessageProperty.REAL_QUEUE_ID, "")
        if not topic or not queue_id.isdigit() or topic == TRANS_HALF_TOPIC:
            log.error(
                "delay level %d offset %d: message %s has no usable real destination "
                "(REAL_TOPIC %r, REAL_QID %r); discarded",
                level,
                offset,
                message.msg_id,
                topic,
                queue_id,
            )
            return True
        for key in SCHEDULE_ONLY_PROPERTIES:
            properties.pop(key, None)
        result = self.controller.put_again(message, topic, int(queue_id), properties)
        if not result.ok:
            log.error(
                "delay level %d: re-put of %s to %s queue %s failed (%s); retrying in %d ms",
                level,
                message.msg_id,
                topic,
                queue_id,
                result.status.name,
                RETRY_AFTER_FAILURE_MS,
            )
            return False
        self.delivered += 1
        return True

    def _corrected(self, level: int, offset: int) -> int:
        """``offset`` moved into the level queue's [min, max] (retention or a lost file moved them)."""
        queue = self.store.find_consume_queue(SCHEDULE_TOPIC, delay_level_to_queue_id(level))
        if queue is None:
            return offset
        corrected = min(max(offset, queue.min_offset), queue.max_offset_in_queue)
        if corrected != offset:
            log.error(
                "delay level %d: offset %d outside the queue's [%d, %d]; resuming at %d",
                level,
                offset,
                queue.min_offset,
                queue.max_offset_in_queue,
                corrected,
            )
        return corrected

    # -- progress -----------------------------------------------------------------------------

    def _persist_if_flushed(self) -> None:
        if time.monotonic() < self._next_persist:
            return
        self._next_persist = time.monotonic() + self.persist_interval
        if self._snapshot is not None and self.store.commit_log.get_flushed_where() >= self._snapshot[1]:
            self._publish(self._snapshot[0])
            self._snapshot = None
        if self._snapshot is None and self._offsets != self.offsets_manager.offset_table():
            self._snapshot = (dict(self._offsets), self.store.get_max_phy_offset())

    def _publish(self, offsets: dict[int, int]) -> None:
        for level, offset in offsets.items():
            self.offsets_manager.update_offset(level, offset)
        self.offsets_manager.persist()

    def offset_table(self) -> dict[int, int]:
        """Where each level's cursor is now (delivered up to, not necessarily persisted)."""
        return dict(self._offsets)
