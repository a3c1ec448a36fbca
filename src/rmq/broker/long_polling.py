"""Long polling: pulls that found nothing new wait here until a message arrives on their queue
(RocketMQ's PullRequestHoldService), or until their suspend time passes.

Arrival wakes them directly: the send path calls ``notify_message_arriving(topic, queue_id)`` right
after the store took the message, so a parked pull is answered within the same loop iteration, with
no polling tick in between. Everything here runs on the broker's event loop thread; calls from other
threads (the delay scheduler's re-puts) hop there first.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Optional, Protocol

from rmq.net.loop import EventLoop, TimerHandle

if TYPE_CHECKING:
    from rmq.net.codec import RemotingCommand
    from rmq.store import TagFilter

log = logging.getLogger("rmq.broker")


class ParkedPull:
    """A pull request, parsed once, that may wait for messages."""

    __slots__ = (
        "channel",
        "request",
        "group",
        "topic",
        "queue_id",
        "queue_offset",
        "max_msgs",
        "tag_filter",
        "timeout_ms",
        "suggest_broker_id",
        "slow_broker_id",
        "deadline",
        "timer",
        "done",
    )

    def __init__(
        self,
        channel: Any,
        request: RemotingCommand,
        group: str,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_msgs: int,
        tag_filter: TagFilter | None,
        timeout_ms: int,
        suggest_broker_id: int,
        slow_broker_id: int,
    ):
        self.channel = channel
        self.request = request
        self.group = group
        self.topic = topic
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.max_msgs = max_msgs
        self.tag_filter = tag_filter
        self.timeout_ms = timeout_ms
        # the group's brokerId and whichBrokerWhenConsumeSlowly (suggestWhichBrokerId's choices)
        self.suggest_broker_id = suggest_broker_id
        self.slow_broker_id = slow_broker_id
        self.deadline = 0.0
        self.timer: TimerHandle | None = None
        self.done = False


# execute(pull, allow_suspend, expired) -> response, or None when it parked the pull again.
Executor = Callable[[ParkedPull, bool, bool], Optional["RemotingCommand"]]


class ArrivalListener(Protocol):
    """Other requests parked for arrivals (POP's long polls, rmq.broker.pop): every path that
    stores a message tells the hold service, and the hold service tells them."""

    @property
    def has_parked(self) -> bool: ...
    def notify_message_arriving(self, topic: str, queue_id: int) -> None: ...


class PullRequestHoldService:
    """(topic, queueId) -> the pulls parked on it."""

    def __init__(self, loop: EventLoop):
        self.loop = loop
        self._parked: dict[tuple[str, int], list[ParkedPull]] = {}
        self._execute: Executor | None = None
        self._listeners: list[ArrivalListener] = []

    def set_executor(self, execute: Executor) -> None:
        """The pull processor's re-read (set once it exists)."""
        self._execute = execute

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        self._listeners.append(listener)

    @property
    def has_parked(self) -> bool:
        """Any pull (or listener's request) waiting: a cheap test for the send path before it notifies."""
        return bool(self._parked) or any(listener.has_parked for listener in self._listeners)

    @property
    def parked_count(self) -> int:
        return sum(len(pulls) for pulls in self._parked.values())

    def park(self, pull: ParkedPull) -> None:
        """Hold ``pull`` until an arrival on its queue or its deadline (loop thread)."""
        if pull.timer is None:
            pull.deadline = time.monotonic() + pull.timeout_ms / 1000
            pull.timer = self.loop.call_at(pull.deadline, self._expire, pull)
        self._parked.setdefault((pull.topic, pull.queue_id), []).append(pull)

    def notify_message_arriving(self, topic: str, queue_id: int) -> None:
        """A message was stored on (topic, queue_id): answer the pulls waiting for it. Any thread."""
        if not self.loop.in_loop_thread():
            self.loop.call_soon_threadsafe(self.notify_message_arriving, topic, queue_id)
            return
        for listener in self._listeners:
            if listener.has_parked:
                listener.notify_message_arriving(topic, queue_id)
        if not self._parked:
            return
        waiting = self._parked.pop((topic, queue_id), None)
        if waiting:
            for pull in waiting:
                if not pull.done:
                    self._run(pull, expired=False)

    def wake_where_grown(self, max_offset: Callable[[str, int], int]) -> None:
        """Answer the parked pulls whose queue now holds their offset (loop thread). A slave's
        messages arrive by replication, not by sends that would notify: it calls this on a timer."""
        for (topic, queue_id), pulls in list(self._parked.items()):
            top = max_offset(topic, queue_id)
            if any(pull.queue_offset < top for pull in pulls):
                self.notify_message_arriving(topic, queue_id)

    def _expire(self, pull: ParkedPull) -> None:
        if pull.done:
            return
        waiting = self._parked.get((pull.topic, pull.queue_id))
        if waiting is not None:
            try:
                waiting.remove(pull)
            except ValueError:
                pass
            if not waiting:
                del self._parked[(pull.topic, pull.queue_id)]
        self._run(pull, expired=True)

    def _run(self, pull: ParkedPull, expired: bool) -> None:
        assert self._execute is not None
        try:
            response = self._execute(pull, False, expired)
        except Exception:
            log.exception("parked pull of %s on %s/%d failed", pull.group, pull.topic, pull.queue_id)
            response = None
            expired = True
        if response is None and not expired:
            return  # parked again
        pull.done = True
        if pull.timer is not None:
            pull.timer.cancel()
        if response is not None:
            pull.channel.send_response(response)

    def on_channel_closed(self, channel: Any) -> None:
        """Forget the pulls of a closed connection (nobody is left to answer)."""
        for key in list(self._parked):
            kept = [p for p in self._parked[key] if p.channel is not channel]
            for pull in self._parked[key]:
                if pull.channel is channel:
                    pull.done = True
                    if pull.timer is not None:
                        pull.timer.cancel()
            if kept:
                self._parked[key] = kept
            else:
                del self._parked[key]

    def shutdown(self) -> None:
        """Drop every parked pull (the server is closing its connections)."""
        for pulls in self._parked.values():
            for pull in pulls:
                pull.done = True
                if pull.timer is not None:
                    pull.timer.cancel()
        self._parked.clear()
