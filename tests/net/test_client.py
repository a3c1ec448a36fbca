"""The remoting client against a live server: sync/async/oneway, timeouts, connection errors,
dropped connections, reconnects, and requests the server sends to the client."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from rmq.errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendError,
    RemotingTimeoutError,
)
from rmq.net.client import RemotingClient
from rmq.net.codec import RemotingCommand, encode
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers import LOOPBACK, wait_until
from tests.helpers.frames import route_body


@pytest.fixture
def client():
    with RemotingClient(connect_timeout=1.0) as c:
        yield c


def route_request() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})


def test_invoke_sync_and_async(server, client):
    addr = server.address
    answer = client.invoke_sync(addr, route_request(), timeout=3.0)
    assert (answer.code, answer.body) == (ResponseCode.SUCCESS, route_body())
    futures = [client.invoke_async(addr, route_request(), timeout=3.0) for _ in range(100)]
    assert all(f.result(5).code == ResponseCode.SUCCESS for f in futures)
    assert len(server.channels) == 1  # one pooled connection carried them all


def test_invoke_oneway(server, client):
    got = threading.Event()
    server.register_processor(RequestCode.UNREGISTER_CLIENT, lambda channel, request: got.set())
    client.invoke_oneway(server.address, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT))
    assert got.wait(2.0)


def test_timeout_names_the_address(server, client):
    server.register_processor(RequestCode.PULL_MESSAGE, lambda channel, request: None)  # never answers
    started = time.monotonic()
    with pytest.raises(RemotingTimeoutError, match=server.address):
        client.invoke_sync(server.address, RemotingCommand.request(RequestCode.PULL_MESSAGE), timeout=0.2)
    assert time.monotonic() - started < 5.0  # at its own timeout, not a later one
    future = client.invoke_async(server.address, RemotingCommand.request(RequestCode.PULL_MESSAGE), timeout=0.1)
    assert isinstance(future.exception(2.0), RemotingTimeoutError)
    # the connection survives a timeout
    assert client.invoke_sync(server.address, route_request(), timeout=3.0).code == 0


def invoke_encoded(client: RemotingClient, addr: str, request: RemotingCommand, timeout: float, waited: bool = True):
    """``invoke_frame`` of ``request`` encoded; the list its callback's (response, error) lands in."""
    outcome: list = []
    client.invoke_frame(
        addr, request.opaque, request.code, encode(request), timeout, lambda *args: outcome.append(args), waited=waited
    )
    return outcome


def test_a_waited_for_request_is_written_by_its_sender_while_the_loop_is_busy(server, client):
    # a sync send from a producer thread goes out at once, not when the loop thread gets to it
    arrived = threading.Event()
    server.register_processor(
        RequestCode.HEART_BEAT, lambda channel, request: arrived.set() or RemotingCommand.response_to(request, 0)
    )
    client.invoke_sync(server.address, route_request(), timeout=3.0)  # the connection is up
    busy, release = threading.Event(), threading.Event()
    client.loop.call_soon_threadsafe(lambda: (busy.set(), release.wait(5.0)))
    assert busy.wait(2.0)
    try:
        outcome = invoke_encoded(client, server.address, RemotingCommand.request(RequestCode.HEART_BEAT), 3.0)
        assert arrived.wait(2.0), "the request waited for the client's loop thread to be written"
    finally:
        release.set()
    wait_until(lambda: outcome, 5, "the answer reached the callback")
    response, error = outcome[0]
    assert error is None and response.code == ResponseCode.SUCCESS


def test_pre_encoded_requests_of_a_thread_reach_the_server_in_order(server, client):
    # one the loop thread has yet to write is not overtaken by a waited-for one written at once
    arrived = []
    server.register_processor(
        RequestCode.HEART_BEAT,
        lambda channel, request: arrived.append(request.opaque) or RemotingCommand.response_to(request, 0),
    )
    client.invoke_sync(server.address, route_request(), timeout=3.0)
    busy, release = threading.Event(), threading.Event()
    client.loop.call_soon_threadsafe(lambda: (busy.set(), release.wait(5.0)))
    assert busy.wait(2.0)
    requests = [RemotingCommand.request(RequestCode.HEART_BEAT) for _ in range(60)]
    try:
        outcomes = [
            invoke_encoded(client, server.address, request, 5.0, waited=i % 3 == 2)
            for i, request in enumerate(requests)
        ]
    finally:
        release.set()
    wait_until(lambda: all(outcomes), 10, "every request answered")
    assert arrived == [request.opaque for request in requests]
    for request, outcome in zip(requests, outcomes, strict=True):
        response, error = outcome[0]
        assert error is None and response.opaque == request.opaque


def test_pre_encoded_requests_time_out_in_order_and_out_of_order(server, client):
    server.register_processor(RequestCode.PULL_MESSAGE, lambda channel, request: None)  # never answers
    client.invoke_sync(server.address, route_request(), timeout=3.0)
    # not waited for: a waited-for one would hold its sender, reading, until its own deadline
    pull = RequestCode.PULL_MESSAGE
    longer = invoke_encoded(client, server.address, RemotingCommand.request(pull), 0.4, waited=False)
    shorter = invoke_encoded(client, server.address, RemotingCommand.request(pull), 0.1, waited=False)
    wait_until(lambda: shorter, 3, "the shorter timeout reported")
    assert not longer  # the one sent first, with the longer timeout, still waits
    wait_until(lambda: longer, 3, "the longer timeout reported")
    for outcome in (shorter, longer):
        response, error = outcome[0]
        assert response is None and isinstance(error, RemotingTimeoutError)
        assert server.address in str(error)
    assert client.invoke_sync(server.address, route_request(), timeout=3.0).code == ResponseCode.SUCCESS


def test_connect_error_names_the_address(client):
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        addr = "{}:{}".format(*s.getsockname())  # bound, not listening: refused
        with pytest.raises(RemotingConnectError, match=addr):
            client.invoke_sync(addr, route_request(), timeout=3.0)
    with pytest.raises(RemotingConnectError, match="invalid address"):
        client.invoke_sync("no-port", route_request(), timeout=1.0)


def test_pending_requests_fail_when_the_connection_drops_and_next_use_reconnects(server, client):
    parked = []
    server.register_processor(RequestCode.PULL_MESSAGE, lambda channel, request: parked.append(channel))
    future = client.invoke_async(server.address, RemotingCommand.request(RequestCode.PULL_MESSAGE), timeout=30.0)
    wait_until(lambda: parked, 10, "the request reached the server")
    parked[0].close()
    # failed by the drop, far before its 30 s timeout
    assert isinstance(future.exception(10.0), RemotingSendError)
    assert client.invoke_sync(server.address, route_request(), timeout=3.0).code == 0


def test_server_to_client_request_reaches_the_client_processor(server, client):
    channels = []
    server.register_processor(
        RequestCode.HEART_BEAT,
        lambda channel, request: channels.append(channel) or RemotingCommand.response_to(request, 0),
    )
    client.register_processor(
        RequestCode.CHECK_TRANSACTION_STATE,
        lambda channel, request: RemotingCommand.response_to(
            request, 0, ext_fields={"seen": request.ext_fields["msgId"]}
        ),
    )
    notified = threading.Event()
    client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, lambda channel, request: notified.set())
    client.invoke_sync(server.address, RemotingCommand.request(RequestCode.HEART_BEAT), timeout=3.0)
    channel = channels[0]
    answers = []
    got = threading.Event()
    check = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {"msgId": "ABC"})
    channel.invoke_async(check, 2.0, lambda response, error: (answers.append((response, error)), got.set()))
    assert got.wait(3.0)
    response, error = answers[0]
    assert error is None and response.ext_fields == {"seen": "ABC"}
    channel.send_oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "g"}))
    assert notified.wait(2.0)


def test_shutdown_fails_pending_and_refuses_new_requests(server):
    client = RemotingClient()
    client.start()
    parked = []
    server.register_processor(RequestCode.PULL_MESSAGE, lambda channel, request: parked.append(request))
    future = client.invoke_async(server.address, RemotingCommand.request(RequestCode.PULL_MESSAGE), timeout=30.0)
    wait_until(lambda: parked, 10, "the request reached the server")
    client.shutdown()
    assert isinstance(future.exception(2.0), RemotingError)
    with pytest.raises(RemotingError, match="shut down"):
        client.invoke_sync(server.address, route_request(), timeout=1.0)
    assert not [t for t in threading.enumerate() if t.name == "rmq-client"]


def held_answers(server) -> list:
    """(channel, request) of each PULL_MESSAGE the server got, answered only when the test says."""
    held: list = []
    server.register_processor(RequestCode.PULL_MESSAGE, lambda channel, request: held.append((channel, request)))
    return held


def answer(held_entry, code: int = ResponseCode.SUCCESS) -> None:
    channel, request = held_entry
    channel.send_response(RemotingCommand.response_to(request, code))


def test_a_waited_for_request_is_answered_to_its_sender_before_the_call_returns(server, client):
    client.invoke_sync(server.address, route_request(), timeout=3.0)  # the connection is up
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
    callers = []
    outcome: list = []
    client.invoke_frame(
        server.address,
        request.opaque,
        request.code,
        encode(request),
        3.0,
        lambda *args: (outcome.append(args), callers.append(threading.get_ident())),
        waited=True,
    )
    # the sender read its answer itself: no hop to the loop thread and back
    assert callers == [threading.get_ident()]
    response, error = outcome[0]
    assert error is None and response.opaque == request.opaque and response.body == route_body()


def test_a_sender_reading_its_answer_passes_others_answers_and_server_requests_to_the_loop(server, client):
    held = held_answers(server)
    notified = threading.Event()
    client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, lambda channel, request: notified.set())
    client.invoke_sync(server.address, route_request(), timeout=3.0)
    mine = RemotingCommand.request(RequestCode.PULL_MESSAGE)
    sender_outcome: list = []
    sender = threading.Thread(
        target=lambda: sender_outcome.extend(invoke_encoded(client, server.address, mine, 10.0)), name="sender"
    )
    sender.start()
    try:
        wait_until(lambda: held, 5, "the sender's request reached the server")
        # meanwhile: another thread's request, answered first, and a request of the server's
        other = client.invoke_async(server.address, RemotingCommand.request(RequestCode.PULL_MESSAGE), timeout=10.0)
        wait_until(lambda: len(held) == 2, 5, "the other request reached the server")
        answer(held[1])
        assert other.result(5.0).opaque == held[1][1].opaque
        held[0][0].send_oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "g"}))
        assert notified.wait(5.0)
        assert sender.is_alive() and not sender_outcome  # still reading, for its own
        answer(held[0])
    finally:
        sender.join(10.0)
    response, error = sender_outcome[0]
    assert error is None and response.opaque == mine.opaque
    # the loop reads the connection again
    assert client.invoke_sync(server.address, route_request(), timeout=3.0).code == ResponseCode.SUCCESS


def test_a_sender_reading_its_answer_gets_the_timeout_and_the_connection_serves_on(server, client):
    held = held_answers(server)
    client.invoke_sync(server.address, route_request(), timeout=3.0)
    outcome = invoke_encoded(client, server.address, RemotingCommand.request(RequestCode.PULL_MESSAGE), 0.2)
    wait_until(lambda: outcome, 3, "the timeout reported")
    response, error = outcome[0]
    assert response is None and isinstance(error, RemotingTimeoutError) and server.address in str(error)
    answer(held[0])  # too late: dropped
    # read by the loop again, the late answer and the next request's
    assert client.invoke_sync(server.address, route_request(), timeout=3.0).code == ResponseCode.SUCCESS
    outcome = invoke_encoded(client, server.address, route_request(), 3.0)
    assert outcome and outcome[0][1] is None


@pytest.mark.parametrize("closer", ["server", "client"])
def test_a_sender_reading_its_answer_learns_of_a_closed_connection_at_once(server, client, closer):
    held = held_answers(server)
    client.invoke_sync(server.address, route_request(), timeout=3.0)
    outcomes: list = []
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE)
    sender = threading.Thread(
        target=lambda: outcomes.append(invoke_encoded(client, server.address, request, 30.0)), name="sender"
    )
    sender.start()
    try:
        wait_until(lambda: held, 5, "the sender's request reached the server")
        if closer == "server":
            held[0][0].close()
        else:
            client.close_channel(server.address)
        sender.join(10.0)  # far before its 30 s deadline
        assert not sender.is_alive()
    finally:
        if sender.is_alive():
            answer(held[0])
            sender.join(10.0)
    wait_until(lambda: outcomes[0], 5, "the failure reported")  # by the loop, which closed it
    response, error = outcomes[0][0]
    assert response is None and isinstance(error, RemotingSendError)
    assert client.invoke_sync(server.address, route_request(), timeout=3.0).code == ResponseCode.SUCCESS
