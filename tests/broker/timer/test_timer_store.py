"""Timed messages on an in-process broker: each arrives in its topic at its time (not before, and
within a second), once; what a timed message may not be is refused with a remark saying why; a
restart, clean or after a crash whose checkpoint lagged, delivers nothing twice."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from rmq._clock import now_ms
from rmq.client import Message, Producer
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.message import TIMER_TOPIC, MessageProperty
from tests.helpers import wait_until
from tests.helpers.broker import create_topic, messages_in
from tests.helpers.requests import batch_body, call, send_request

# How late a delivery may be: the acceptance is one second at the default tick.
LATENESS_BOUND_MS = 1000


def sent_at(client, broker, topic: str, **properties: str):
    return call(client, broker.broker_addr, send_request(topic, b"timed", properties=properties))


def delivered(broker, topic: str, count: int, timeout: float = 10.0):
    return wait_until(
        lambda: (found := messages_in(broker, topic))[count - 1 :] and found,
        timeout,
        lambda: f"{count} messages in {topic}, have {len(messages_in(broker, topic))}",
    )


def test_messages_due_at_several_times_arrive_on_time_once(broker):
    create_topic(broker, "TimedA", 1)
    # msgId -> (earliest, latest) due time: a delay counts from the broker's receipt, which falls
    # somewhere within the send's round trip; a deliver_at time is exact
    due: dict[str, tuple[int, int]] = {}
    with Producer("timed-producers", namesrv_addr=broker.namesrv_addrs[0]) as producer:
        start = now_ms()
        for i, delay_ms in enumerate([300, 1200, 700, 2500, 1900]):
            if i % 2:
                message = Message("TimedA", f"m{i}".encode(), delay=timedelta(milliseconds=delay_ms))
            else:
                at = datetime.fromtimestamp((start + delay_ms) / 1000, timezone.utc)
                message = Message("TimedA", f"m{i}".encode(), deliver_at=at)
            before = now_ms()
            result = producer.send(message)
            due[result.msg_id] = (before + delay_ms, now_ms() + delay_ms) if i % 2 else (start + delay_ms,) * 2
    # stored once, in the timer topic, until due
    assert broker.store.get_max_offset_in_queue(TIMER_TOPIC, 0) == len(due)
    delivered(broker, "TimedA", len(due))
    wait_until(lambda: now_ms() > max(latest for _, latest in due.values()) + 1000, 5, "a second past the last")
    got = messages_in(broker, "TimedA")
    assert sorted(m.uniq_key for m in got) == sorted(due)  # each once, with the producer's msgId
    for message in got:
        earliest, latest = due[message.uniq_key]
        assert message.store_timestamp >= earliest, (message.body, "early", earliest - message.store_timestamp)
        assert message.store_timestamp - latest <= LATENESS_BOUND_MS, (message.body, "late")
        assert int(message.properties[MessageProperty.TIMER_OUT_MS]) <= message.store_timestamp
        for key in (MessageProperty.REAL_TOPIC, MessageProperty.REAL_QUEUE_ID):
            assert key not in message.properties
    # in deliver order: 300 700 1200 1900 2500 ms
    assert [m.body for m in got] == [b"m0", b"m2", b"m1", b"m4", b"m3"]


def test_a_time_already_past_is_delivered_at_once(broker, client):
    create_topic(broker, "TimedB", 1)
    r = sent_at(client, broker, "TimedB", TIMER_DELIVER_MS=str(now_ms() - 10_000))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert messages_in(broker, "TimedB")[0].body == b"timed"
    r = sent_at(client, broker, "TimedB", TIMER_DELAY_SEC="0")
    assert r.code == ResponseCode.SUCCESS and len(messages_in(broker, "TimedB")) == 2


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("TIMER_DELAY_SEC", "abc", "TIMER_DELAY_SEC must be a whole number >= 0, got 'abc'"),
        ("TIMER_DELAY_MS", "-5", "TIMER_DELAY_MS must be a whole number >= 0, got '-5'"),
        ("TIMER_DELIVER_MS", "1.5e12", "TIMER_DELIVER_MS must be a whole number >= 0, got '1.5e12'"),
        ("TIMER_DELAY_SEC", str(3 * 24 * 3600 + 60), "should not be bigger than the max delay 259200000ms"),
        ("TIMER_DELIVER_MS", str(now_ms() + 4 * 24 * 3600 * 1000), "(timerMaxDelaySec 259200)"),
    ],
)
def test_illegal_timer_values_are_refused_with_a_remark(broker, client, key, value, says):
    create_topic(broker, "TimedC", 1)
    r = sent_at(client, broker, "TimedC", **{key: value})
    assert r.code == ResponseCode.MESSAGE_ILLEGAL
    assert r.remark.startswith("timer message illegal") and says in r.remark, r.remark
    assert messages_in(broker, "TimedC") == [] and broker.store.get_max_offset_in_queue(TIMER_TOPIC, 0) == 0
    assert sent_at(client, broker, "TimedC").code == ResponseCode.SUCCESS  # the connection goes on


def test_the_max_delay_is_a_setting_and_the_wheel_can_be_turned_off(start_broker, client, tmp_path):
    broker = start_broker(timerMaxDelaySec="10")
    create_topic(broker, "TimedD", 1)
    assert sent_at(client, broker, "TimedD", TIMER_DELAY_SEC="9").code == ResponseCode.SUCCESS
    r = sent_at(client, broker, "TimedD", TIMER_DELAY_SEC="11")
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "max delay 10000ms" in r.remark
    off = start_broker(timerWheelEnable="false", storePathRootDir=str(tmp_path / "off"))
    create_topic(off, "TimedD", 1)
    r = sent_at(client, off, "TimedD", TIMER_DELAY_SEC="1")
    assert r.code == ResponseCode.SYSTEM_ERROR and "timerWheelEnable is false" in r.remark


def test_a_delay_level_wins_and_batches_are_refused(broker, client):
    create_topic(broker, "TimedE", 1)
    r = sent_at(client, broker, "TimedE", DELAY="1", TIMER_DELAY_SEC="100")
    assert r.code == ResponseCode.SUCCESS
    message = delivered(broker, "TimedE", 1, timeout=5)[0]
    assert MessageProperty.TIMER_DELAY_SEC not in message.properties
    request = send_request(
        "TimedE", batch_body([(b"x", {"TIMER_DELAY_SEC": "5"})]), code=RequestCode.SEND_BATCH_MESSAGE
    )
    r = call(client, broker.broker_addr, request)
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "timer" in r.remark


def test_pending_messages_survive_a_clean_restart(start_broker, client):
    broker = start_broker()
    settings = {"listenPort": str(broker.config.listen_port)}
    create_topic(broker, "TimedF", 1)
    start = now_ms()
    for delay_ms in (400, 2500, 3000):
        assert sent_at(client, broker, "TimedF", TIMER_DELAY_MS=str(delay_ms)).code == ResponseCode.SUCCESS
    delivered(broker, "TimedF", 1)
    broker.shutdown()
    broker = start_broker(**settings)
    got = delivered(broker, "TimedF", 3)
    wait_until(lambda: now_ms() > start + 4000, 5, "past the last time")
    got = messages_in(broker, "TimedF")
    assert len(got) == 3 and len({m.uniq_key for m in got}) == 3
    assert got[2].store_timestamp >= start + 3000


def test_deliveries_after_the_last_checkpoint_are_not_repeated(start_broker, client, store_dir):
    """A crash before the checkpoint caught up: the checkpoint still names the tick and CommitLog
    offset of before the deliveries, and the restart finds them in the CommitLog."""
    broker = start_broker()
    settings = {"listenPort": str(broker.config.listen_port)}
    create_topic(broker, "TimedG", 1)
    for delay_ms in (200, 300, 4000):
        assert sent_at(client, broker, "TimedG", TIMER_DELAY_MS=str(delay_ms)).code == ResponseCode.SUCCESS
    before = {"readSlot": now_ms() // 1000 - 1, "precisionMs": 1000, "commitLogOffset": 0, "enqueueOffset": 0}
    delivered(broker, "TimedG", 2)
    broker.shutdown()
    checkpoint = store_dir / "config" / "timerCheckpoint.json"
    checkpoint.write_text(json.dumps(before))
    broker = start_broker(**settings)
    got = delivered(broker, "TimedG", 3)
    wait_until(lambda: broker.timer_message_store.duplicates_skipped == 2, 5, "both repeats skipped")
    assert len(messages_in(broker, "TimedG")) == 3 and len({m.uniq_key for m in got}) == 3
