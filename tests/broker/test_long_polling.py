"""Long polling: a pull with nothing new waits at the broker and is answered when a message arrives."""

from __future__ import annotations

import statistics
import threading
import time

from rmq.protocol.codes import ResponseCode
from tests.broker.broker_helpers import (
    call,
    create_topic,
    pull_request,
    records,
    send_request,
)


def _parked_pull(client, addr, request):
    """Send a pull; returns (event set on answer, box holding [response, arrival time])."""
    done = threading.Event()
    box = []

    def on_answer(response, error):
        box.extend([response, time.perf_counter(), error])
        done.set()

    client.invoke_callback(addr, request, 10.0, on_answer)
    return done, box


def _wait_parked(broker, count=1, timeout=2.0):
    deadline = time.monotonic() + timeout
    while broker.pull_hold.parked_count < count:
        assert time.monotonic() < deadline, "the pull was not parked"
        time.sleep(0.001)


def test_parked_pull_is_answered_when_a_message_arrives(broker, client):
    addr = broker.broker_addr
    call(client, addr, send_request("Waiting", b"first"))
    done, box = _parked_pull(client, addr, pull_request("Waiting", 0, 1, suspend_ms=8000))
    _wait_parked(broker)
    assert not done.wait(0.2), "answered before anything arrived"
    call(client, addr, send_request("Waiting", b"second"))
    assert done.wait(2.0)
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
    assert 0.25 < box[1] - started < 1.5
    assert set(box[0].ext_fields) == {"nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId"}


def test_parked_tag_pull_ignores_other_tags(broker, client):
    addr = broker.broker_addr
    create_topic(broker, "TagWait")
    done, box = _parked_pull(client, addr, pull_request("TagWait", 0, 0, subscription="wanted", suspend_ms=8000))
    _wait_parked(broker)
    call(client, addr, send_request("TagWait", b"other", tags="other"))
    assert not done.wait(0.2), "woken for a tag it does not subscribe to"
    call(client, addr, send_request("TagWait", b"mine", tags="wanted"))
    assert done.wait(2.0)
    assert [m.body for m in records(box[0].body)] == [b"mine"]
    assert box[0].ext_fields["nextBeginOffset"] == "2"


def test_send_to_delivery_latency_with_an_idle_parked_pull(broker, client):
    """Acceptance 4: the median time from send to delivery to a parked consumer is under 5 ms."""
    addr = broker.broker_addr
    call(client, addr, send_request("Latency", b"warm-up"))
    latencies = []
    for offset in range(1, 51):
        done, box = _parked_pull(client, addr, pull_request("Latency", 0, offset, suspend_ms=8000))
        _wait_parked(broker)
        sent_at = time.perf_counter()
        client.invoke_callback(addr, send_request("Latency", b"m"), 5.0, lambda r, e: None)
        assert done.wait(2.0)
        assert box[0].code == ResponseCode.SUCCESS
        latencies.append(box[1] - sent_at)
    median_ms = statistics.median(latencies) * 1000
    assert median_ms < 5.0, f"median send-to-delivery {median_ms:.2f} ms"


def test_put_inner_from_another_thread_wakes_parked_pulls(broker, client):
    """The seam for the retry and delay services: a broker-made message wakes consumers too."""
    addr = broker.broker_addr
    create_topic(broker, "Inner")
    done, box = _parked_pull(client, addr, pull_request("Inner", 1, 0, suspend_ms=8000))
    _wait_parked(broker)
    worker = threading.Thread(target=broker.put_inner, args=("Inner", 1, b"re-put", {"TAGS": "t"}),
                              kwargs={"born_host": "127.0.0.1", "reconsume_times": 2})
    worker.start()
    worker.join()
    assert done.wait(2.0)
    (message,) = records(box[0].body)
    assert (message.body, message.tags, message.reconsume_times) == (b"re-put", "t", 2)
    # with a delay level it waits in SCHEDULE_TOPIC_XXXX instead
    result = broker.put_inner("Inner", 1, b"later", {"DELAY": "1"})
    assert result.ok and broker.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 0) == 1
