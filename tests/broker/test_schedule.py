"""The schedule service: delayed messages arrive no earlier than their level's delay, promptly after,
exactly once across a clean restart; progress is published only once the re-puts are durable."""

from __future__ import annotations

import json
import time

from rmq.message import SCHEDULE_TOPIC, MessageProperty, java_string_hash
from tests.broker.mini_broker import MiniBroker
from tests.broker.test_send_back import messages_in, wait_for_message

# How late a delivery may be: the service wakes for the head entry's deliver time; 2 cores are shared.
LATENESS_BOUND_MS = 300


def test_levels_one_to_three_arrive_after_their_delay_and_promptly(broker):
    sent = {level: broker.send("TopicD", f"level{level}".encode(), level, TAGS="t", DELAY=str(level))
            for level in (1, 2, 3)}
    for level, delay_ms in ((1, 1000), (2, 5000), (3, 10_000)):
        deadline = time.monotonic() + delay_ms / 1000 + 2
        while not (got := messages_in(broker, "TopicD", level)) and time.monotonic() < deadline:
            time.sleep(0.01)
        (message,) = got
        waited = message.store_timestamp - sent[level].store_timestamp
        assert delay_ms <= waited <= delay_ms + LATENESS_BOUND_MS, (level, waited)
        assert message.body == f"level{level}".encode() and message.queue_id == level
        assert MessageProperty.DELAY_TIME_LEVEL not in message.properties
        entry = broker.store.find_consume_queue("TopicD", level).get_entry(0)
        assert entry[2] == java_string_hash("t")    # tag filtering works on the delivered copy
    assert broker.schedule.offset_table()[1] == 1


def test_progress_survives_a_restart_without_loss_or_duplicates(store_dir):
    broker = MiniBroker(store_dir).start()
    try:
        for i in range(3):
            broker.send("TopicR", f"early{i}".encode(), DELAY="1")
        wait_for_message(broker, "TopicR", 3)
        for i in range(2):
            broker.send("TopicR", f"late{i}".encode(), DELAY="1")
    finally:
        broker.shutdown()       # before the late ones are due
    saved = json.loads((store_dir / "config" / "delayOffset.json").read_text())
    assert saved["offsetTable"]["1"] == 3

    broker = MiniBroker(store_dir).start()
    try:
        wait_for_message(broker, "TopicR", 5)
        time.sleep(0.2)
        bodies = [m.body for m in messages_in(broker, "TopicR")]
        assert bodies == [b"early0", b"early1", b"early2", b"late0", b"late1"]
        assert broker.schedule.offset_table()[1] == 5
    finally:
        broker.shutdown()


def test_offsets_are_published_only_once_the_commit_log_is_flushed(broker):
    # ASYNC_FLUSH flushes a few small records only on its 10 s thorough round: the delivered
    # offset stays unpublished until the re-put is on disk.
    for i in range(3):
        broker.send("TopicF", b"x", DELAY="1")
    wait_for_message(broker, "TopicF", 3)
    time.sleep(0.2)
    assert broker.schedule.offset_table()[1] == 3
    assert broker.delay_offset_manager.offset(1) == 0
    broker.store.flush_commit_log(0)
    deadline = time.monotonic() + 2
    while broker.delay_offset_manager.offset(1) != 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert broker.delay_offset_manager.offset(1) == 3


def test_a_message_without_a_real_topic_is_skipped(broker):
    broker.store.put_message(SCHEDULE_TOPIC, 0, b"orphan", {MessageProperty.DELAY_TIME_LEVEL: "1"})
    broker.send("TopicS", b"after", DELAY="1")
    wait_for_message(broker, "TopicS", 1)
    assert broker.schedule.offset_table()[1] == 2
