"""Long polling: a pull with nothing new waits at the broker and is answered when a message arrives."""

from __future__ import annotations

import statistics
import threading
import time

from rmq.protocol.codes import ResponseCode
from tests.helpers import wait_until
from tests.helpers.broker import create_topic
from tests.helpers.requests import call, pull_request, records, send_request


def _parked_pull(client, addr, request, answers=None):
    """Send a pull; returns (event set on answer, box holding [response, arrival time]). ``answers``,
    if given, gets "pull" appended when the answer arrives."""
    done = threading.Event()
    box = []

    def on_answer(response, error):
        box.extend([response, time.perf_counter(), error])
        if answers is not None:
            answers.append("pull")
        done.set()

    client.invoke_callback(addr, request, 10.0, on_answer)
    return done, box


def _wait_parked(broker, count=1):
    wait_until(lambda: broker.pull_hold.parked_count >= count, 10, f"{count} pull(s) parked at the broker", 0.001)


def _still_parked(broker, done, count=1):
    """The broker still holds the pull, unanswered (checked right after a send's reply: the send
    path re-reads the queue's parked pulls before it replies, so a wrong wake-up would be seen)."""
    return broker.pull_hold.parked_count == count and not done.is_set()


def test_parked_pull_is_answered_when_a_message_arrives(broker, client):
    addr = broker.broker_addr
    call(client, addr, send_request("Waiting", b"first"))
    done, box = _parked_pull(client, addr, pull_request("Waiting", 0, 1, suspend_ms=8000))
    _wait_parked(broker)
    assert _still_parked(broker, done), "answered before anything arrived"
    call(client, addr, send_request("Waiting", b"second"))
    assert done.wait(10.0)
    response = box[0]
    assert response.code == ResponseCode.SUCCESS
    assert [m.body for m in records(response.body)] == [b"second"]
    assert response.ext_fields["nextBeginOffset"] == "2"


def test_parked_pull_times_out_with_pull_not_found(broker, client):
    addr = broker.broker_addr
    create_topic(broker, "Quiet")
    started = time.perf_counter()
    done, box = _parked_pull(client, addr, pull_request("Quiet", 0, 0, suspend_ms=300))
    assert done.wait(3.0)
    assert box[0].code == ResponseCode.PULL_NOT_FOUND
    assert 0.25 < box[1] - started  # not before its suspend time
    assert set(box[0].ext_fields) == {"nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId"}


def test_parked_tag_pull_ignores_other_tags(broker, client):
    addr = broker.broker_addr
    create_topic(broker, "TagWait")
    done, box = _parked_pull(client, addr, pull_request("TagWait", 0, 0, subscription="wanted", suspend_ms=8000))
    _wait_parked(broker)
    call(client, addr, send_request("TagWait", b"other", tags="other"))
    assert _still_parked(broker, done), "woken for a tag it does not subscribe to"
    call(client, addr, send_request("TagWait", b"mine", tags="wanted"))
    assert done.wait(10.0)
    assert [m.body for m in records(box[0].body)] == [b"mine"]
    assert box[0].ext_fields["nextBeginOffset"] == "2"


def test_a_send_answers_the_parked_pull_before_its_own_reply(broker, client):
    """The arrival wakes the parked pull in the send's own loop iteration, with no polling tick in
    between: on the one connection, the pull's answer comes before the send's reply, every time."""
    addr = broker.broker_addr
    call(client, addr, send_request("Latency", b"warm-up"))
    latencies = []
    for offset in range(1, 51):
        answers: list[str] = []
        done, box = _parked_pull(client, addr, pull_request("Latency", 0, offset, suspend_ms=8000), answers)
        _wait_parked(broker)
        sent_at = time.perf_counter()
        replied = threading.Event()
        client.invoke_callback(
            addr,
            send_request("Latency", b"m"),
            5.0,
            lambda r, e, answers=answers, replied=replied: (answers.append("send"), replied.set()),
        )
        assert done.wait(10.0) and replied.wait(10.0)
        assert box[0].code == ResponseCode.SUCCESS
        assert answers == ["pull", "send"], f"message {offset}: {answers}"
        latencies.append(box[1] - sent_at)
    print(f"\nmedian send-to-delivery {statistics.median(latencies) * 1000:.2f} ms")


def test_put_inner_from_another_thread_wakes_parked_pulls(broker, client):
    """The seam for the retry and delay services: a broker-made message wakes consumers too."""
    addr = broker.broker_addr
    create_topic(broker, "Inner")
    done, box = _parked_pull(client, addr, pull_request("Inner", 1, 0, suspend_ms=8000))
    _wait_parked(broker)
    worker = threading.Thread(
        target=broker.put_inner,
        args=("Inner", 1, b"re-put", {"TAGS": "t"}),
        kwargs={"born_host": "127.0.0.1", "reconsume_times": 2},
    )
    worker.start()
    worker.join()
    assert done.wait(10.0)
    (message,) = records(box[0].body)
    assert (message.body, message.tags, message.reconsume_times) == (b"re-put", "t", 2)
    # with a delay level it waits in SCHEDULE_TOPIC_XXXX instead
    result = broker.put_inner("Inner", 1, b"later", {"DELAY": "1"})
    assert result.ok and broker.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 0) == 1
