"""Putting and reading messages straight through an in-process broker's store, for the tests of the
services behind the requests (retry, delay, queries)."""

from __future__ import annotations

import time

from rmq.protocol.record import StoredMessage, decode_record
from rmq.store import PutMessageResult


def put(broker, topic: str, body: bytes, queue_id: int = 0, **properties: str) -> PutMessageResult:
    """Store a message as the send path does (a DELAY goes through SCHEDULE_TOPIC_XXXX first)."""
    result = broker.put_inner(topic, queue_id, body, properties)
    assert result.ok, result.status
    return result


def messages_in(broker, topic: str, queue_id: int = 0) -> list[StoredMessage]:
    got = broker.store.get_message("test", topic, queue_id, 0, 32)
    return [decode_record(m) for m in got.messages]


def wait_for_message(broker, topic: str, count: int, timeout: float = 3.0, queue_id: int = 0) -> StoredMessage:
    """The ``count``-th message of the queue, once it is there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = messages_in(broker, topic, queue_id)
        if len(found) >= count:
            return found[count - 1]
        time.sleep(0.01)
    raise AssertionError(f"message {count} of {topic} queue {queue_id} did not arrive within {timeout}s")
