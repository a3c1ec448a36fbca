"""TimerMessageStore: messages delivered at any time (RocketMQ 5.x's timer message store).

**Accepting** (``redirect``, on the event loop, called by the send processor): a message carrying
``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS`` (both counted from the broker's receipt) or
``TIMER_DELIVER_MS`` (epoch ms), looked at in that order as 5.x does, is due at ``deliverMs``. A
time already past is stored in its topic at once; a later one is stored once, in the CommitLog,
under ``rmq_sys_wheel_timer`` queue 0 with ``TIMER_OUT_MS`` = deliverMs and its own topic and queue
in ``REAL_TOPIC`` / ``REAL_QID``. A value that is not a whole number >= 0, or a time more than
``timerMaxDelaySec`` ahead, is refused with MESSAGE_ILLEGAL (5.x's WHEEL_TIMER_MSG_ILLEGAL); with
``timerWheelEnable=false`` every timed message is refused (SYSTEM_ERROR, as 5.x). A DELAY level
wins over the TIMER_* properties, which are then dropped (5.x's rule).

**Enqueue** (``rmq-broker-timer-enqueue``): reads queue 0 of ``rmq_sys_wheel_timer`` in order and
files each message into the timing wheel (``rmq.broker.timer.wheel``: a unit in the TimerLog,
chained into the slot of its tick). A message whose tick has passed already is filed into the tick
being delivered. Its progress is the TimerLog itself (the last unit's queue offset).

**Dequeue** (``rmq-broker-timer-dequeue``): opens tick after tick when its time starts, loads the
tick's units and re-puts each message to REAL_TOPIC / REAL_QID at its deliverMs (to the
millisecond, not at the tick's end: none early, none a tick late), with the producer's UNIQ_KEY
(so the consumer sees the msgId it was sent with) and ``TIMER_DEQUEUE_MS``. A tick is closed when
its time is over and every unit filed into it, late ones included, is delivered. Only a master
delivers; a slave has the same CommitLog records (replication) and starts both services when it
is promoted.

**Crash consistency: none lost, none twice.** The checkpoint (``config/timerCheckpoint.json``,
written atomically) holds ``readSlot`` R, the first tick not closed, and ``commitLogOffset`` C, the
CommitLog's end when R was opened: every delivery of a tick >= R lies after C, every delivery of a
tick < R before it. It is published only once the CommitLog is flushed past C (and after the
TimerLog is flushed), so what it says is delivered is on disk. On start the wheel is rebuilt from
the TimerLog's units of ticks >= R, and the CommitLog from C to its end is read once: every
delivery there (a record outside the timer topic with TIMER_DEQUEUE_MS) names a UNIQ_KEY that is
not delivered again. The window is closed: a delivery either is in that scan (skipped) or was lost
with the CommitLog's unflushed tail (delivered again, once). The scan's set is dropped once the
tick open at restart is closed and the enqueue has read past the queue's end at restart. The
window's cost is the CommitLog written between two checkpoints (about a second of traffic).
Without a checkpoint (a fresh store, or a slave that never copied one) C is the CommitLog's first
offset: correct, but the scan reads the whole log.

**A promoted slave** has the master's CommitLog and timer queue (replication) and a copy of its
checkpoint (``GET_TIMER_CHECKPOINT``, with the other metadata every 10 s), no timer log. It files
the timer queue from its start, skipping what the checkpoint says was delivered (below its
``enqueueOffset`` and due before its ``readSlot``), and reads the CommitLog from its
``commitLogOffset`` for the rest, as after a crash: an older copy only makes that scan longer.

Not done: a message due more than the CommitLog's retention (fileReservedTime) after it was sent
loses its record when the file is deleted (5.x re-puts such messages, "rolls" them, every two days).
"""

from __future__ import annotations

import heapq
import logging
import os
import shutil
import threading
import time
from typing import Any

from rmq._clock import now_ms
from rmq._service import ServiceThread
from rmq.broker.config_manager import ConfigManager
from rmq.broker.timer.wheel import TimerLog, TimerWheel
from rmq.errors import RecordError, RequestRefused
from rmq.protocol.codes import ResponseCode
from rmq.protocol.message import (
    NAME_VALUE_SEPARATOR,
    TIMER_TOPIC,
    MessageProperty,
    decode_properties,
    encode_properties,
)
from rmq.protocol.record import StoredMessage, decode_record

log = logging.getLogger("rmq.broker")

TIMER_QUEUE_ID = 0
# The properties a producer sets, in the order 5.x reads them (the first one present counts).
REQUEST_PROPERTIES = (MessageProperty.TIMER_DELAY_SEC, MessageProperty.TIMER_DELAY_MS, MessageProperty.TIMER_DELIVER_MS)
_UNIT_MS = {MessageProperty.TIMER_DELAY_SEC: 1000, MessageProperty.TIMER_DELAY_MS: 1}
# Ticks beyond twice the longest delay, so a wheel slot is never reused while its tick is pending.
BLANK_SLOTS = 60
# Messages the enqueue files per round before it looks at shutdown again.
ENQUEUE_BATCH = 1000
# The enqueue's longest sleep when nothing is new (a send wakes it sooner).
ENQUEUE_IDLE_WAIT = 0.05
# The dequeue's longest sleep (the enqueue wakes it when it files into the open tick).
DEQUEUE_MAX_WAIT = 0.2
# Empty ticks closed in one round when catching up (after downtime).
MAX_TICKS_PER_ROUND = 10_000
# After a failed re-put (disk full, store stopping), retry this much later.
RETRY_AFTER_FAILURE = 1.0
# Seconds between checkpoint publications.
PERSIST_INTERVAL = 1.0
_DEQUEUE_MARK = (MessageProperty.TIMER_DEQUEUE_MS + NAME_VALUE_SEPARATOR).encode()


class TimerCheckpoint(ConfigManager):
    """``config/timerCheckpoint.json``: ``{"readSlot", "precisionMs", "commitLogOffset",
    "enqueueOffset"}``; absent (``read_slot`` None) until the timer store first runs."""

    file_name = "timerCheckpoint.json"

    def __init__(self, store_path_root_dir: str | os.PathLike[str]):
        super().__init__(store_path_root_dir)
        self.read_slot: int | None = None
        self.precision_ms = 0
        self.commit_log_offset = 0
        self.enqueue_offset = 0

    def update(self, read_slot: int, precision_ms: int, commit_log_offset: int, enqueue_offset: int) -> None:
        with self._lock:
            self.read_slot = read_slot
            self.precision_ms = precision_ms
            self.commit_log_offset = commit_log_offset
            self.enqueue_offset = enqueue_offset
            self.mark_changed()

    def copy_from(self, obj: Any) -> None:
        """Take the master's checkpoint (``encode``'s shape): a slave, for when it is promoted."""
        if obj.get("readSlot") is None:
            return  # the master's timer store never ran
        before = self.encode()
        with self._lock:
            self.decode(obj)
        if self.encode() != before:
            self.mark_changed()
            self.persist()

    def encode(self) -> dict[str, Any]:
        with self._lock:
            return {
                "readSlot": self.read_slot,
                "precisionMs": self.precision_ms,
                "commitLogOffset": self.commit_log_offset,
                "enqueueOffset": self.enqueue_offset,
            }

    def decode(self, obj: Any) -> None:
        values = (int(obj["readSlot"]), int(obj["precisionMs"]), int(obj["commitLogOffset"]), int(obj["enqueueOffset"]))
        with self._lock:
            self.read_slot, self.precision_ms, self.commit_log_offset, self.enqueue_offset = values


def illegal(remark: str) -> RequestRefused:
    return RequestRefused(ResponseCode.MESSAGE_ILLEGAL, f"timer message illegal: {remark}")


class TimerMessageStore:
    """The timing wheel of one broker: ``redirect`` (sends), ``start`` / ``shutdown`` (services)."""

    def __init__(self, controller: Any):
        self.controller = controller
        self.store = controller.store
        config = controller.store_config
        root = config.store_path_root_dir
        self.enabled = config.timer_wheel_enable
        self.precision_ms = config.timer_precision_ms
        self.max_delay_ms = config.timer_max_delay_sec * 1000
        self.slots_total = 2 * (-(-self.max_delay_ms // self.precision_ms)) + BLANK_SLOTS
        self.log_path = os.path.join(root, "timerlog")
        self.log_file_size = config.mapped_file_size_timer_log
        self.checkpoint = TimerCheckpoint(root)
        self.timer_log: TimerLog | None = None
        self._append_failing = False  # the last timer log append failed (ENOSPC): logged once
        self.wheel: TimerWheel | None = None
        self.enqueue_service = _EnqueueService(self)
        self.dequeue_service = _DequeueService(self)
        self._lock = threading.Lock()
        self._running = False
        # enqueue state (enqueue thread; read_slot is shared under the lock)
        self.enqueue_offset = 0
        self.read_slot = 0
        # dequeue state (dequeue thread)
        self._pending: list[tuple[int, int, int, int]] = []  # (deliverMs, queueOffset, offsetPy, sizePy)
        self._loaded_num = 0
        self._retry_at = 0.0
        self._snapshot: tuple[int, int, int] | None = None  # (readSlot, commitLogOffset, enqueueOffset)
        self._next_persist = 0.0
        # UNIQ_KEYs delivered after the checkpoint's CommitLog offset (the crash window), with when
        # the set may go: (tick that must be closed, queue offset the enqueue must reach)
        self._delivered_in_window: set[str] = set()
        self._window_until: tuple[int, int] = (0, 0)
        self._window_drop_after: int | None = None
        # (queue offset, tick): entries below both were delivered before the checkpoint
        self._delivered_below = (0, 0)
        self.delivered = 0
        self.duplicates_skipped = 0

    # -- accepting (event loop thread) --------------------------------------------------------

    def redirect(self, topic: str, queue_id: int, properties: str) -> tuple[str, int, str]:
        """Where a message that may carry TIMER_* properties is stored: unchanged when it has none
        (or its time has come), else ``rmq_sys_wheel_timer`` queue 0 with its deliver time and real
        topic in properties. RequestRefused for a value or time a timed message may not have."""
        props = decode_properties(properties)
        present = [key for key in REQUEST_PROPERTIES if key in props]
        if not present or topic == TIMER_TOPIC or MessageProperty.TIMER_OUT_MS in props:
            return topic, queue_id, properties
        if props.get(MessageProperty.DELAY_TIME_LEVEL, "0") not in ("", "0"):
            for key in present:  # a delay level wins (5.x)
                del props[key]
            return topic, queue_id, encode_properties(props).decode()
        if not self.enabled:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR, "accurate timer message is not enabled, timerWheelEnable is false"
            )
        key = present[0]
        text = props[key]
        try:
            value = int(text)
        except ValueError:
            value = -1
        if value < 0 or not text.strip().isdigit():
            raise illegal(f"{key} must be a whole number >= 0, got {text!r}")
        now = now_ms()
        deliver_ms = now + value * _UNIT_MS[key] if key in _UNIT_MS else value
        if deliver_ms - now > self.max_delay_ms:
            raise illegal(
                f"the delay time should not be bigger than the max delay {self.max_delay_ms}ms "
                f"(timerMaxDelaySec {self.max_delay_ms // 1000}): {key} {text} is {deliver_ms - now}ms ahead"
            )
        if deliver_ms <= now:
            return topic, queue_id, properties
        props[MessageProperty.TIMER_OUT_MS] = str(deliver_ms)
        props[MessageProperty.REAL_TOPIC] = topic
        props[MessageProperty.REAL_QUEUE_ID] = str(queue_id)
        self.enqueue_service.wakeup()
        return TIMER_TOPIC, TIMER_QUEUE_ID, encode_properties(props).decode()

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, promoted: bool = False) -> None:
        """Recover (rebuild the wheel, read the crash window) and start both services. On a master,
        after the store started; on a promoted slave, after its promotion (``promoted``): a timer log
        it has is from an older term as master, whose CommitLog offsets its rejoin may have cut, so
        it goes, and the wheel is rebuilt from the timer queue and the checkpoint copied from the
        last master."""
        if self._running:
            return
        started = time.monotonic()
        if promoted:
            shutil.rmtree(self.log_path, ignore_errors=True)
        self.checkpoint.load()
        self.timer_log = TimerLog(self.log_path, self.log_file_size)
        torn = self.timer_log.load()
        if torn:
            log.warning(
                "timer log %s: a torn unit dropped (%d bytes zeroed after the last whole one)", self.log_path, torn
            )
        self.wheel = TimerWheel(self.slots_total)
        units = self._recover_wheel()
        scanned = self._read_crash_window()
        self._snapshot = None
        self._running = True
        log.info(
            "timer store: %d units pending from tick %d, enqueue at offset %d, %d deliveries in the "
            "crash window, recovered in %.2f s",
            units,
            self.read_slot,
            self.enqueue_offset,
            scanned,
            time.monotonic() - started,
        )
        self.enqueue_service.start()
        self.dequeue_service.start()

    def shutdown(self) -> None:
        """Stop both services, publish the last checkpoint; before the store shuts down (it flushes
        the deliveries the checkpoint covers)."""
        if not self._running:
            return
        self.enqueue_service.shutdown()
        self.dequeue_service.shutdown()
        with self._lock:
            if self._snapshot is not None:
                self._publish(self._snapshot)
            assert self.timer_log is not None and self.wheel is not None
            self.timer_log.close()
            self.wheel.close()
        self._running = False

    def _recover_wheel(self) -> int:
        """The wheel from the TimerLog: every unit of a tick not closed (re-chained when
        timerPrecisionMs changed); where the enqueue resumes. Returns the units filed."""
        assert self.timer_log is not None and self.wheel is not None
        cp = self.checkpoint
        timer_log, wheel = self.timer_log, self.wheel
        last = timer_log.last_unit()
        if cp.read_slot is not None:
            read_slot = cp.read_slot
            if cp.precision_ms != self.precision_ms:
                read_slot = read_slot * cp.precision_ms // self.precision_ms
        else:
            read_slot = now_ms() // self.precision_ms
            first = next(timer_log.units(), None)
            if first is not None:
                read_slot = min(read_slot, first[1][2] // self.precision_ms)
            # no record of what was delivered: the crash window is the whole CommitLog
            cp.update(read_slot, self.precision_ms, self.store.commit_log.get_min_offset(), 0)
        rechain = cp.precision_ms != self.precision_ms
        filed = 0
        for pos, (prev_pos, slot, deliver_ms, _offset_py, _size_py, _magic, _q) in timer_log.units():
            if rechain:
                slot = max(deliver_ms // self.precision_ms, read_slot)
            if slot < read_slot:
                timer_log.note_slot(pos, slot)
                continue
            last_pos, num = wheel.get(slot)
            if last_pos != prev_pos or rechain:
                timer_log.set_prev(pos, last_pos, slot)
            else:
                timer_log.note_slot(pos, slot)
            wheel.put(slot, pos, num + 1)
            filed += 1
        self.read_slot = read_slot
        # On from the last unit filed (or the queue's start: a promoted slave has no timer log). An
        # entry below the checkpoint's enqueue offset due before its tick was filed and delivered
        # before that tick opened: read again, it is skipped.
        self.enqueue_offset = last[6] + 1 if last is not None else 0
        self._delivered_below = (cp.enqueue_offset, read_slot)
        if rechain:
            cp.update(read_slot, self.precision_ms, cp.commit_log_offset, self.enqueue_offset)
            cp.persist()
        self._loaded_num = 0
        self._pending = []
        return filed

    def _read_crash_window(self) -> int:
        """UNIQ_KEYs of the deliveries after the checkpoint's CommitLog offset (see the module's
        docstring); the number found."""
        store = self.store
        commit_log = store.commit_log
        end = store.get_max_phy_offset()
        pos = max(self.checkpoint.commit_log_offset, commit_log.get_min_offset())
        file_size = commit_log.mapped_file_size
        keys: set[str] = set()
        while pos < end:
            record = store.look_message_by_offset(pos)
            if record is None:  # the blank at a file's end: on to the next file
                pos = (pos // file_size + 1) * file_size
                continue
            if _DEQUEUE_MARK in bytes(record):
                try:
                    message = decode_record(record, check_crc=False)
                except RecordError:
                    message = None
                if message is not None and message.topic != TIMER_TOPIC:
                    uniq = message.properties.get(MessageProperty.UNIQ_KEY)
                    if uniq:
                        keys.add(uniq)
            pos += len(record)
        queue = store.find_consume_queue(TIMER_TOPIC, TIMER_QUEUE_ID)
        self._delivered_in_window = keys
        self._window_drop_after = None
        self._window_until = (
            now_ms() // self.precision_ms,
            queue.max_offset_in_queue if queue is not None else 0,
        )
        return len(keys)

    # -- enqueue (rmq-broker-timer-enqueue) ----------------------------------------------------

    def enqueue_round(self) -> int:
        """File the next messages of the timer queue into the wheel; how many."""
        queue = self.store.find_consume_queue(TIMER_TOPIC, TIMER_QUEUE_ID)
        if queue is None:
            return 0
        assert self.timer_log is not None and self.wheel is not None
        offset = max(self.enqueue_offset, queue.min_offset)
        filed = 0
        wake = False
        delivered_below_offset, delivered_below_slot = self._delivered_below
        for _ in range(ENQUEUE_BATCH):
            entry = queue.get_entry(offset)
            if entry is None:
                break
            offset_py, size_py, _tags_code = entry
            deliver_ms = self._deliver_ms_of(offset, offset_py, size_py)
            # under the lock with the filing: a tick's close sees every unit below enqueue_offset
            with self._lock:
                if deliver_ms is not None:
                    slot = deliver_ms // self.precision_ms
                    if offset >= delivered_below_offset or slot >= delivered_below_slot:
                        slot = max(slot, self.read_slot)
                        if slot - self.read_slot >= self.slots_total - 1:
                            break  # the dequeue is far behind (after downtime): let it catch up first
                        last_pos, num = self.wheel.get(slot)
                        try:
                            pos = self.timer_log.append(last_pos, slot, deliver_ms, offset_py, size_py, offset)
                        except OSError as e:
                            # a full disk: the message stays in the timer queue, filed once space is back
                            if not self._append_failing:
                                log.error("cannot file timed messages into the timer log: %s; retrying", e)
                            self._append_failing = True
                            break
                        if self._append_failing:
                            log.warning("timer log writable again: filing timed messages")
                            self._append_failing = False
                        self.wheel.put(slot, pos, num + 1)
                        wake = wake or slot == self.read_slot
                        filed += 1
                offset += 1
                self.enqueue_offset = offset
        if wake:
            self.dequeue_service.wakeup()
        return filed

    def _deliver_ms_of(self, queue_offset: int, offset_py: int, size_py: int) -> int | None:
        message = self._read_message(offset_py, size_py, f"timer queue offset {queue_offset}")
        if message is None:
            return None
        try:
            return int(message.properties[MessageProperty.TIMER_OUT_MS])
        except (KeyError, ValueError):
            log.error(
                "timer queue offset %d: message at %d has no usable TIMER_OUT_MS; skipped", queue_offset, offset_py
            )
            return None

    def _read_message(self, offset_py: int, size_py: int, what: str) -> StoredMessage | None:
        """The timer message at a CommitLog offset; None (logged) when it is gone or unreadable."""
        record = self.store.look_message_by_offset(offset_py, size_py)
        if record is None:
            log.warning("%s: no message at CommitLog offset %d (deleted by retention?); skipped", what, offset_py)
            return None
        try:
            return decode_record(record, check_crc=False)
        except RecordError as e:
            log.error("%s: unreadable message at CommitLog offset %d (%s); skipped", what, offset_py, e)
            return None

    # -- dequeue (rmq-broker-timer-dequeue) ----------------------------------------------------

    def dequeue_round(self) -> float:
        """Deliver what is due, close the ticks that are over; seconds to sleep."""
        wait = self._dequeue_ticks()
        self._persist_if_flushed()
        return wait

    def _dequeue_ticks(self) -> float:
        if time.monotonic() < self._retry_at:
            return self._retry_at - time.monotonic()
        for _ in range(MAX_TICKS_PER_ROUND):
            if self.dequeue_service.is_stopped:
                return 0
            now = now_ms()
            slot = self.read_slot
            if now < slot * self.precision_ms:
                return min(DEQUEUE_MAX_WAIT, (slot * self.precision_ms - now) / 1000)
            self._load_new_units(slot)
            pending = self._pending
            while pending and pending[0][0] <= now:
                if not self._deliver(*pending[0]):
                    self._retry_at = time.monotonic() + RETRY_AFTER_FAILURE
                    return RETRY_AFTER_FAILURE
                heapq.heappop(pending)
                now = now_ms()
            if pending:
                return min(DEQUEUE_MAX_WAIT, (pending[0][0] - now) / 1000)
            if now < (slot + 1) * self.precision_ms:
                return min(DEQUEUE_MAX_WAIT, ((slot + 1) * self.precision_ms - now) / 1000)
            assert self.wheel is not None
            with self._lock:
                if self.wheel.get(slot)[1] != self._loaded_num:
                    continue  # late units came in: deliver them first
                self.wheel.clear(slot)
                self.read_slot = slot + 1
                self._loaded_num = 0
                if self._snapshot is None:
                    # nothing of the new tick is delivered yet: its deliveries begin at the CommitLog's
                    # end; every unit below enqueue_offset is filed into a tick < slot + 1 or its own
                    self._snapshot = (slot + 1, self.store.get_max_phy_offset(), self.enqueue_offset)
            self._tick_closed(slot)
        return 0

    def _load_new_units(self, slot: int) -> None:
        """Units filed into the open tick since it was last looked at, into the pending heap."""
        assert self.wheel is not None and self.timer_log is not None
        with self._lock:
            pos, num = self.wheel.get(slot)
            for _ in range(num - self._loaded_num):
                prev_pos, _slot, deliver_ms, offset_py, size_py, _magic, queue_offset = self.timer_log.read(pos)
                heapq.heappush(self._pending, (deliver_ms, queue_offset, offset_py, size_py))
                pos = prev_pos
            self._loaded_num = num

    def _deliver(self, deliver_ms: int, queue_offset: int, offset_py: int, size_py: int) -> bool:
        """Re-put one due message to its topic; False when the store refused it (retry later)."""
        message = self._read_message(offset_py, size_py, f"timer message of queue offset {queue_offset}")
        if message is None:
            return True
        properties = dict(message.properties)
        topic = properties.pop(MessageProperty.REAL_TOPIC, None)
        queue_id = properties.pop(MessageProperty.REAL_QUEUE_ID, "")
        if not topic or not queue_id.isdigit():
            log.error(
                "timer message %s has no usable real destination (REAL_TOPIC %r, REAL_QID %r); discarded",
                message.msg_id,
                topic,
                queue_id,
            )
            return True
        uniq = properties.setdefault(MessageProperty.UNIQ_KEY, message.msg_id)
        if uniq in self._delivered_in_window:
            self._delivered_in_window.discard(uniq)
            self.duplicates_skipped += 1
            return True
        # as 5.x: when it was put in the timer topic, and when it was taken out
        properties[MessageProperty.TIMER_ENQUEUE_MS] = str(message.store_timestamp)
        properties[MessageProperty.TIMER_DEQUEUE_MS] = str(now_ms())
        result = self.controller.put_again(message, topic, int(queue_id), properties)
        if not result.ok:
            log.error(
                "timer: re-put of %s to %s queue %s failed (%s); retrying in %.0f s",
                uniq,
                topic,
                queue_id,
                result.status.name,
                RETRY_AFTER_FAILURE,
            )
            return False
        self.delivered += 1
        return True

    # -- progress ------------------------------------------------------------------------------

    def _tick_closed(self, slot: int) -> None:
        """Tick ``slot`` is delivered: the crash window's set may go."""
        if self._delivered_in_window:
            # The set goes once the tick open at restart is closed, the enqueue has read past the
            # queue's end at restart, and the tick that was open then (late units went there) is
            # closed too.
            tick, queue_offset = self._window_until
            if self._window_drop_after is None and self.enqueue_offset >= queue_offset:
                self._window_drop_after = max(tick, self.read_slot)
            if self._window_drop_after is not None and slot >= self._window_drop_after:
                self._delivered_in_window = set()

    def _persist_if_flushed(self) -> None:
        if time.monotonic() < self._next_persist or self._snapshot is None:
            return
        self._next_persist = time.monotonic() + PERSIST_INTERVAL
        if self.store.commit_log.get_flushed_where() < self._snapshot[1]:
            return
        with self._lock:
            self._publish(self._snapshot)
            assert self.timer_log is not None
            self.timer_log.delete_files_before(self._snapshot[0])
        self._snapshot = None

    def _publish(self, snapshot: tuple[int, int, int]) -> None:
        """The TimerLog flushed first: the checkpoint never counts on units a power cut could take."""
        assert self.timer_log is not None
        self.timer_log.flush()
        read_slot, commit_log_offset, enqueue_offset = snapshot
        self.checkpoint.update(read_slot, self.precision_ms, commit_log_offset, enqueue_offset)
        self.checkpoint.persist()


class _EnqueueService(ServiceThread):
    def __init__(self, timer: TimerMessageStore):
        super().__init__("rmq-broker-timer-enqueue")
        self.timer = timer

    def run_once(self) -> None:
        if self.timer.enqueue_round() == 0:
            self.wait_for_running(ENQUEUE_IDLE_WAIT)


class _DequeueService(ServiceThread):
    def __init__(self, timer: TimerMessageStore):
        super().__init__("rmq-broker-timer-dequeue")
        self.timer = timer

    def run_once(self) -> None:
        wait = self.timer.dequeue_round()
        if wait > 0:
            self.wait_for_running(wait)
