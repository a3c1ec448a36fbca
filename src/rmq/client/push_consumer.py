"""The push consumer: a listener called with messages as they arrive (RocketMQ's DefaultMQPushConsumer).

    from rmq.client import PushConsumer, ConsumeConcurrentlyStatus

    def on_messages(msgs):
        for msg in msgs:
            print(msg.msg_id, msg.tags, msg.body)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS   # None counts as success too

    with PushConsumer("order-consumers", "127.0.0.1:9876") as consumer:   # started on entry
        ...

    consumer = PushConsumer("order-consumers", "127.0.0.1:9876", consume_from_where="FIRST_OFFSET")
    consumer.subscribe("OrderTopic", "created || paid")
    consumer.register_listener(on_messages)
    consumer.start()

Concurrent listeners run on a pool of ``consume_thread_max`` threads (``rmq-consume-<group>_<n>``,
docs/threads.md), ``consume_message_batch_max_size`` messages per call. RECONSUME_LATER, or an
exception (logged), sends the messages back to the broker (CONSUMER_SEND_MSG_BACK): they return
through ``%RETRY%<group>`` (subscribed automatically in clustering mode) after a delay, and go to
``%DLQ%<group>`` after ``max_reconsume_times``. Listeners registered with ``orderly=True`` get each
queue's messages in order, one thread per queue, on queues locked on the broker (LOCK_BATCH_MQ,
renewed every 20 s); SUSPEND_CURRENT_QUEUE_A_MOMENT retries the same messages after
``suspend_current_queue_time``.
"""

from __future__ import annotations

import enum
import logging
import operator
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from rmq._clock import now_ms
from rmq._service import PeriodicHandle
from rmq.client.consume_pool import ConsumePool
from rmq.client.consumer import (
    PULL_DELAY_WHEN_FLOW_CONTROL,
    PULL_DELAY_WHEN_NOT_LOCKED,
    ConsumerBase,
    ConsumerConfig,
)
from rmq.client.instance import group_by_broker
from rmq.client.message import MessageExt
from rmq.client.process_queue import ProcessQueue
from rmq.client.results import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from rmq.errors import ClientError, RemotingError, ResponseError
from rmq.protocol.message import MessageProperty, retry_topic
from rmq.protocol.message_queue import MessageQueue
from rmq.protocol.running_info import CMResult
from rmq.settings import DEFAULT_NAMESRV_ADDR

log = logging.getLogger("rmq.client")

__all__ = ["PushConsumer", "PushConsumerConfig"]

# A failed send-back is consumed again here after this long (RocketMQ: 5 s).
CONSUME_LATER_DELAY = 5.0
# An orderly queue whose lock is missing is looked at again after this long.
ORDERLY_LOCK_RETRY_DELAY = 0.1
# An orderly consumer gives up a queue's thread after consuming this long without a break.
MAX_TIME_CONSUME_CONTINUOUSLY = 60.0
CONSUME_START_TIMESTAMP = MessageProperty.CONSUME_START_TIMESTAMP
# A listener call longer than this spreads the rest of its pull's messages over the idle threads:
# when it returns, or while it runs once the pool's watchdog (every WATCH_INTERVAL) sees it. One
# bound for both: a call the watchdog spreads would have spread the pull on return anyway, only
# later, so a fast listener (its calls made to look long by a thread waiting for the GIL, too)
# is spread no more often than it was before the watchdog looked.
SPREAD_AFTER = 0.002
NOT_CALLING = float("inf")  # a pull's call start while none runs: never SPREAD_AFTER ago

Listener = Callable[[list[MessageExt]], Any]
# a listener's answer to a message consumed directly; None is success to this SDK's listeners
DIRECT_RESULTS = {
    None: CMResult.CR_SUCCESS,
    ConsumeConcurrentlyStatus.CONSUME_SUCCESS: CMResult.CR_SUCCESS,
    ConsumeConcurrentlyStatus.RECONSUME_LATER: CMResult.CR_LATER,
    ConsumeOrderlyStatus.SUCCESS: CMResult.CR_SUCCESS,
    ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT: CMResult.CR_LATER,
}
# a listener's outcome: ConsumeConcurrentlyStatus or ConsumeOrderlyStatus
S = TypeVar("S", bound=enum.Enum)


@dataclass
class PushConsumerConfig(ConsumerConfig):
    consume_thread_max: int = 20
    consume_message_batch_max_size: int = 1
    max_reconsume_times: int = 16
    # 0: the broker picks the delay of the next try (level 3 + reconsume times).
    delay_level_when_next_consume: int = 0
    suspend_current_queue_time: float = 1.0
    # How long shutdown waits for running listeners.
    await_termination: float = 30.0


class PushConsumer(ConsumerBase):
    """A push consumer of ``group``; see the module docstring. Options are the fields of
    PushConsumerConfig (``message_model``, ``consume_from_where``, ``consume_thread_max``...)."""

    config_class = PushConsumerConfig
    config: PushConsumerConfig

    def __init__(self, group: str, namesrv_addr: str = DEFAULT_NAMESRV_ADDR, **options: Any):
        super().__init__(group, namesrv_addr, **options)
        self.listener: Listener | None = None
        self.orderly = False
        self._executor: ConsumePool | None = None
        self._lock_timer: PeriodicHandle | None = None
        self._retry_topic = retry_topic(group)
        self._listener_slow = False  # its last call took over SPREAD_AFTER: pulls are spread at once

    def register_listener(self, listener: Listener, orderly: bool = False) -> None:
        """``listener(msgs)`` returns a ConsumeConcurrentlyStatus (or, ``orderly``, a
        ConsumeOrderlyStatus); None counts as success and an exception as a failure."""
        if not callable(listener):
            raise ClientError(f"a listener must be callable, got {type(listener).__name__}")
        self.listener = listener
        self.orderly = orderly

    # -- life cycle -----------------------------------------------------------------------------

    def _on_start(self) -> None:
        if self.listener is None:
            raise ClientError(f"consumer {self.group}: register_listener() before start()")
        if not self.subscriptions:
            raise ClientError(f"consumer {self.group}: subscribe() to a topic before start()")
        if self.clustering:
            self.subscribe(retry_topic(self.group), "*")
        self._executor = ConsumePool(
            self.config.consume_thread_max, f"rmq-consume-{self.group}", look=self._spread_stuck
        )
        if self.orderly and self.clustering:
            self._lock_timer = self.instance.scheduler.schedule_periodic(self.config.rebalance_interval, self.lock_all)

    def start(self) -> PushConsumer:
        try:
            return super().start()
        except ClientError:
            self.shutdown()
            raise

    def _on_shutdown(self) -> None:
        if self._lock_timer is not None:
            self._lock_timer.cancel()
            self._lock_timer = None
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(self.config.await_termination)

    def _submit(self, fn: Callable[..., None], *args: Any) -> None:
        executor = self._executor
        if executor is None or not self._running:
            return
        try:
            executor.submit(fn, *args)
        except RuntimeError:  # shut down meanwhile
            pass

    def _submit_later(self, delay: float, fn: Callable[..., None], *args: Any) -> None:
        if self._running and self._instance is not None:
            self._later(delay, self._submit, fn, *args)

    # -- pulling --------------------------------------------------------------------------------

    def _pull_delay(self, mq: MessageQueue, pq: ProcessQueue) -> float | None:
        delay = super()._pull_delay(mq, pq)
        if delay is not None:
            return delay
        if not self.orderly and pq.span > self.config.consume_concurrently_max_span:
            log.debug("consumer %s: flow control on %s: offset span %d", self.group, mq, pq.span)
            return PULL_DELAY_WHEN_FLOW_CONTROL
        if self.orderly and self.clustering and not pq.locked:
            return PULL_DELAY_WHEN_NOT_LOCKED
        return None

    def _deliver(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        dispatch = pq.put(msgs)
        if self.orderly:
            if dispatch:
                self._submit(self._consume_orderly, mq, pq)
            return
        size = max(1, self.config.consume_message_batch_max_size)
        if size == 1:  # RocketMQ's default
            chunks = [[msg] for msg in msgs]
        else:
            chunks = [msgs[i : i + size] for i in range(0, len(msgs), size)]
        self._submit(self._consume_pulled, mq, pq, _Pulled(mq, pq, chunks))

    # -- concurrent consumption -----------------------------------------------------------------
    #
    # RocketMQ submits one ConsumeRequest per chunk of consume_message_batch_max_size messages (one
    # by default): a thread woken per message, which cost a Python consumer most of its CPU (the
    # loop thread's pool submit and the wake-ups, the ProcessQueue and offset locks per message).
    # Here a pull's messages go to the pool as one task, a shared iterator over its chunks: the
    # listener is still called once per chunk, and the offset moves once per task. A listener
    # call slower than SPREAD_AFTER calls the idle threads in to share the rest of its pull, and
    # while the listener stays slow every pull is shared from its start: slow listeners still run
    # on every thread at once, RocketMQ's concurrency. A call that has not returned yet (stuck on
    # a slow downstream, a lock) must not hold up the rest of its pull either, which RocketMQ's
    # other threads consume meanwhile: a pull not shared from its start is watched by the pool's
    # watchdog while its task runs (a set add and discard per pull, the call's start and end
    # stored per chunk), and _spread_stuck shares the rest of it once its call has run SPREAD_AFTER.
    # The stuck message stays in the ProcessQueue, the lowest offset there, so the offsets the
    # helpers commit stop below it until it is done.

    def _consume_pulled(self, mq: MessageQueue, pq: ProcessQueue, pulled: _Pulled) -> None:
        # _consume_concurrently inlined for its common case (a listener that returns success): this loop
        # runs once per message with the default chunk of one
        done: list[MessageExt] = []
        listener, success, prepare = self.listener, ConsumeConcurrentlyStatus.CONSUME_SUCCESS, self._prepare
        clock, stamp_ms, start = time.time, -1, ""
        watched = None
        if not pulled.spread:
            if self._listener_slow:
                self._spread(mq, pq, pulled)
            elif self._executor is not None:
                watched = self._executor
                watched.watch(pulled)
        try:
            for msgs in pulled.chunks:  # next() of a list iterator is atomic: helpers share it
                if pq.dropped:
                    return
                began = pulled.began = clock()  # wall clock: CONSUME_START_TIMESTAMP's, and a slow call's
                ms = int(began * 1000)
                if ms != stamp_ms:
                    stamp_ms, start = ms, str(ms)
                prepare(msgs, start)
                try:
                    status = listener(msgs)  # type: ignore[misc]  # start() refuses no listener
                except Exception:
                    status = self._listener_raised(msgs, ConsumeConcurrentlyStatus.RECONSUME_LATER)
                # between calls the thread may wait for the GIL as long as it likes: only a call counts
                pulled.began = NOT_CALLING
                # a queue dropped by a shutdown (not running) is still ours to commit: _consumed
                if (status is None or status is success) and not (pq.dropped and self._running):
                    done += msgs
                else:
                    consumed = self._after_listener(mq, pq, msgs, status)
                    if consumed is None:
                        return
                    done += consumed
                slow = self._listener_slow = clock() - began > SPREAD_AFTER
                if slow and not pulled.spread:
                    self._spread(mq, pq, pulled)
        finally:
            if watched is not None:
                watched.unwatch(pulled)
            self._consumed(mq, pq, done)

    def _spread(self, mq: MessageQueue, pq: ProcessQueue, pulled: _Pulled) -> None:
        """Call the idle threads in to share the rest of ``pulled``."""
        pulled.spread = True
        for _ in range(self.config.consume_thread_max - 1):
            self._submit(self._consume_pulled, mq, pq, pulled)

    def _spread_stuck(self, pulls: tuple[_Pulled, ...]) -> None:
        """The pool's look (its watchdog thread): share the rest of each pull whose listener call
        has run longer than SPREAD_AFTER. Its own thread may spread it at the same moment, on the
        call's return: the second lot of helpers finds the chunks taken, or shares them too."""
        now = time.time()  # the clock of _consume_pulled's began
        for pulled in pulls:
            if not pulled.spread and now - pulled.began > SPREAD_AFTER and operator.length_hint(pulled.chunks):
                self._spread(pulled.mq, pulled.pq, pulled)

    def _consumed(self, mq: MessageQueue, pq: ProcessQueue, done: list[MessageExt]) -> None:
        """Commit ``done``, messages whose listener returned while ``pq`` was still held. A queue
        given up to another consumer meanwhile is not ours to move; at shutdown it is, as a
        listener call per task would have committed them one by one (shutdown persists after the
        pool ends)."""
        if not done or (pq.dropped and self._running):
            return
        offset = pq.remove(done)
        if offset >= 0 and not (pq.dropped and self._running):
            self.offset_store.update(mq, offset, increase_only=True)

    def _prepare(self, msgs: Sequence[MessageExt], start: str = "") -> None:
        """Messages of the retry topic are shown with their original topic, as RocketMQ does;
        ``start`` (now by default) is the listener call's CONSUME_START_TIMESTAMP."""
        group_retry = self._retry_topic
        start = start or str(now_ms())
        for msg in msgs:
            if msg.topic == group_retry:
                original = msg.properties.get(MessageProperty.RETRY_TOPIC)
                if original:
                    msg.topic = original
            msg.properties[CONSUME_START_TIMESTAMP] = start

    def _listener_raised(self, msgs: list[MessageExt], failure: S) -> S:
        log.exception(
            "consumer %s: listener raised on %d message(s) (first %s); counted as %s",
            self.group,
            len(msgs),
            msgs[0].msg_id,
            failure.name,
        )
        return failure

    def _checked_status(self, status: Any, success: S, failure: S) -> S:
        if status is None:
            return success
        if not isinstance(status, type(success)):
            log.error(
                "consumer %s: listener returned %r, expected a %s; counted as %s",
                self.group,
                status,
                type(success).__name__,
                failure.name,
            )
            return failure
        return status

    def _call_listener(self, msgs: list[MessageExt], success: S, failure: S) -> S:
        listener = self.listener
        assert listener is not None, "start() refuses a consumer without a listener"
        try:
            status = listener(msgs)
        except Exception:
            return self._listener_raised(msgs, failure)
        return self._checked_status(status, success, failure)

    def _consume_concurrently(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """One chunk again (messages whose send-back failed), on its own."""
        if pq.dropped:
            return
        self._prepare(msgs)
        status = self._call_listener(
            msgs, ConsumeConcurrentlyStatus.CONSUME_SUCCESS, ConsumeConcurrentlyStatus.RECONSUME_LATER
        )
        consumed = self._after_listener(mq, pq, msgs, status)
        if consumed is not None:
            self._consumed(mq, pq, consumed)

    def _after_listener(
        self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt], status: Any
    ) -> list[MessageExt] | None:
        """The messages done with after the listener's ``status`` (consumed, or sent back to the
        retry topic); None when the queue was given up meanwhile (its offset must not move)."""
        if pq.dropped:
            log.info("consumer %s: %s was given up while consuming; its offset is not advanced", self.group, mq)
            return None
        status = self._checked_status(
            status, ConsumeConcurrentlyStatus.CONSUME_SUCCESS, ConsumeConcurrentlyStatus.RECONSUME_LATER
        )
        done = msgs
        if status is ConsumeConcurrentlyStatus.RECONSUME_LATER:
            if self.clustering:
                failed = [m for m in msgs if not self._send_back(m)]
                if failed:
                    for m in failed:
                        m.reconsume_times += 1
                    done = [m for m in msgs if m not in failed]
                    self._submit_later(CONSUME_LATER_DELAY, self._consume_concurrently, mq, pq, failed)
            else:
                log.warning(
                    "consumer %s (broadcasting): %d message(s) not consumed are dropped, first %s",
                    self.group,
                    len(msgs),
                    msgs[0].msg_id,
                )
        return done

    def _send_back(self, msg: MessageExt, delay_level: int | None = None) -> bool:
        """CONSUMER_SEND_MSG_BACK: the broker re-stores the message in the retry topic (or the DLQ)."""
        instance = self._instance
        if instance is None:
            return False
        level = self.config.delay_level_when_next_consume if delay_level is None else delay_level
        try:
            addr = instance.broker_addr_or_raise(msg.broker_name or "", msg.topic)
            instance.api.send_back(
                addr,
                self.group,
                msg.commit_log_offset,
                msg.msg_id,
                msg.topic,
                level,
                self.config.max_reconsume_times,
                instance.config.request_timeout,
            )
            return True
        except (RemotingError, ResponseError, ClientError) as exc:
            log.warning(
                "consumer %s: sending %s back failed (%s); consuming it again here later", self.group, msg.msg_id, exc
            )
            return False

    # -- orderly consumption --------------------------------------------------------------------

    # -- asked by an admin ------------------------------------------------------------------------

    def consume_message_directly(
        self, msg: MessageExt, broker_name: str, done: Callable[[dict[str, Any]], None]
    ) -> None:
        """Hand ``msg`` to the listener on the consume pool, outside any queue (CONSUME_MESSAGE_DIRECTLY,
        as Java's consumeMessageDirectly): its offset does not move and nothing is sent back whatever
        the listener says; ``done`` gets ConsumeMessageDirectlyResult's JSON."""
        if self._executor is None or not self._running:
            raise ClientError(f"consumer {self.group} is not running")
        self._submit(lambda: done(self._consume_directly(msg, broker_name)))

    def _consume_directly(self, msg: MessageExt, broker_name: str) -> dict[str, Any]:
        msg.broker_name = broker_name
        self._prepare([msg])
        result: dict[str, Any] = {"order": self.orderly, "autoCommit": True, "remark": None}
        began = time.monotonic()
        listener = self.listener
        assert listener is not None, "start() refuses a consumer without a listener"
        try:
            status = listener([msg])
        except Exception as exc:
            log.warning("consumer %s: listener raised on %s consumed directly: %r", self.group, msg.msg_id, exc)
            result["consumeResult"] = CMResult.CR_THROW_EXCEPTION.value
            result["remark"] = f"{type(exc).__name__}: {exc}"
        else:
            result["consumeResult"] = DIRECT_RESULTS.get(status, CMResult.CR_RETURN_NULL).value
        result["spentTimeMills"] = int((time.monotonic() - began) * 1000)
        return result

    def _new_process_queue(self, mq: MessageQueue) -> ProcessQueue | None:
        pq = ProcessQueue()
        if not (self.orderly and self.clustering):
            return pq
        if mq not in self._lock_batch([mq]):
            log.info("consumer %s: %s is locked by another consumer; not taken yet", self.group, mq)
            return None
        pq.locked, pq.last_lock_time = True, time.monotonic()
        return pq

    def _lock_batch(self, mqs: list[MessageQueue]) -> set[MessageQueue]:
        locked: set[MessageQueue] = set()
        for broker_name, queues in group_by_broker(mqs).items():
            try:
                addr = self.instance.broker_addr_or_raise(broker_name, queues[0].topic)
                locked |= self.instance.api.lock_batch(
                    addr, self.group, self.instance.client_id, queues, self.instance.config.request_timeout
                )
            except (RemotingError, ResponseError, ClientError) as exc:
                log.warning("consumer %s: locking queues of %s failed: %s", self.group, broker_name, exc)
        return locked

    def lock_all(self) -> None:
        """Renew the locks of every owned queue (every 20 s); a queue whose lock is lost stops."""
        if not self._running:
            return
        mqs = list(self.process_queues)
        locked = self._lock_batch(mqs)
        now = time.monotonic()
        for mq in mqs:
            pq = self.process_queues.get(mq)
            if pq is None:
                continue
            if mq in locked:
                pq.locked, pq.last_lock_time = True, now
            elif pq.locked:
                log.warning("consumer %s: lost the lock of %s", self.group, mq)
                pq.locked = False

    def _remove_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        if not (self.orderly and self.clustering):
            return super()._remove_queue(mq, pq)
        # Unlock only between two batches: the next owner must not start inside this one.
        if not pq.consume_lock.acquire(timeout=1.0):
            pq.dropped = False
            return False
        try:
            return super()._remove_queue(mq, pq)
        finally:
            pq.consume_lock.release()

    def _release_queues(self, mqs: list[MessageQueue]) -> None:
        if not (self.orderly and self.clustering) or self._instance is None:
            return
        for broker_name, queues in group_by_broker(mqs).items():
            try:
                addr = self.instance.broker_addr_or_raise(broker_name, queues[0].topic)
                self.instance.api.unlock_batch(
                    addr, self.group, self.instance.client_id, queues, self.instance.config.request_timeout
                )
            except (RemotingError, ResponseError, ClientError) as exc:
                log.warning("consumer %s: unlocking queues of %s failed: %s", self.group, broker_name, exc)

    def _consume_orderly(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        if pq.dropped:
            return
        with pq.consume_lock:
            began = time.monotonic()
            while not pq.dropped:
                if self.clustering and (not pq.locked or pq.lock_expired()):
                    self._submit_later(ORDERLY_LOCK_RETRY_DELAY, self._consume_orderly, mq, pq)
                    return
                if time.monotonic() - began > MAX_TIME_CONSUME_CONTINUOUSLY:
                    self._submit_later(0.01, self._consume_orderly, mq, pq)
                    return
                msgs = pq.take(self.config.consume_message_batch_max_size)
                if not msgs:
                    return
                self._prepare(msgs)
                status = self._call_listener(
                    msgs, ConsumeOrderlyStatus.SUCCESS, ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                )
                if pq.dropped:
                    return
                if status is ConsumeOrderlyStatus.SUCCESS:
                    offset = pq.commit()
                    if offset >= 0:
                        self.offset_store.update(mq, offset, increase_only=True)
                    continue
                for msg in msgs:
                    msg.reconsume_times += 1
                pq.rollback()
                self._submit_later(self.config.suspend_current_queue_time, self._consume_orderly, mq, pq)
                return


class _Pulled:
    """The chunks of one pull, taken in turn by the threads consuming them."""

    __slots__ = ("began", "chunks", "mq", "pq", "spread")

    def __init__(self, mq: MessageQueue, pq: ProcessQueue, chunks: list[list[MessageExt]]):
        self.mq, self.pq = mq, pq
        self.chunks = iter(chunks)
        self.spread = False  # helpers were called in for a slow listener
        self.began = NOT_CALLING  # when the current listener call began (time.time())
