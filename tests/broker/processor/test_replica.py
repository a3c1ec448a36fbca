"""GET_COMMIT_LOG_DIGESTS (rmq's own): a broker hashes its CommitLog off the event loop and answers
the same digests the store computes, in bounded pieces the admin client joins; unusable ranges are
refused and the broker goes on; a flood of them leaves registration on time (under ACL only an admin
account gets them: tests/broker/acl)."""

from __future__ import annotations

import time

import pytest

from rmq.client.admin_client import AdminClient
from rmq.net import RemotingCommand
from rmq.net.channel import Channel
from rmq.net.codec_py import encode
from rmq.net.server import RemotingServer
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.replica import MAX_DIGESTS_PER_ANSWER, MAX_RANGES, CommitLogDigests
from rmq.store.digest import commit_log_digests
from tests.helpers import LOOPBACK
from tests.helpers.broker import assert_still_serving, broker_settings, create_topic, put
from tests.helpers.frames import RawConnection
from tests.helpers.processes import start_broker_process, start_namesrv
from tests.helpers.requests import call, send_request, update_topic_request

RANGE = 64 * 1024


def digests_request(start: int, end: int, range_size: int) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.GET_COMMIT_LOG_DIGESTS, {"startOffset": start, "endOffset": end, "rangeSize": range_size}
    )


def test_the_broker_answers_its_stores_digests(broker, client):
    create_topic(broker, "Digests")
    for i in range(200):
        put(broker, "Digests", b"%d" % i * 300)
    end = broker.store.get_max_phy_offset()
    r = call(client, broker.broker_addr, digests_request(0, end, RANGE))
    assert r.code == ResponseCode.SUCCESS, r.remark
    answer = CommitLogDigests.decode(r.body)
    assert (answer.min_offset, answer.max_offset, answer.range_size) == (0, end, RANGE)
    assert answer.digests == commit_log_digests(broker.store, 0, end, RANGE)
    assert len(answer.digests) == -(-end // RANGE)

    # an empty range asks only what the log holds
    r = call(client, broker.broker_addr, digests_request(0, 0, RANGE))
    assert CommitLogDigests.decode(r.body).digests == [] and CommitLogDigests.decode(r.body).max_offset == end


@pytest.mark.parametrize(
    "start, end, size, remark",
    [
        (0, 100, 0, "header field 'rangeSize' is '0', expected a positive number of bytes"),
        (100, 50, RANGE, "header field 'endOffset' is '50', expected an offset at or after startOffset 100"),
        (0, 2**40, 1, "header field 'rangeSize' is '1', expected ranges few enough"),
    ],
)
def test_unusable_ranges_are_refused(broker, client, start, end, size, remark):
    r = call(client, broker.broker_addr, digests_request(start, end, size))
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark.startswith(remark)
    assert_still_serving(broker, client)


def test_a_long_range_is_answered_in_bounded_pieces_that_the_admin_client_joins(broker, client):
    create_topic(broker, "Digests")
    for i in range(100):
        put(broker, "Digests", b"%d" % i * 300)
    end = broker.store.get_max_phy_offset()
    size = 16  # some 2,000 ranges: more than one answer holds
    assert end // size > MAX_DIGESTS_PER_ANSWER
    r = call(client, broker.broker_addr, digests_request(0, end, size))
    assert r.code == ResponseCode.SUCCESS, r.remark
    first = CommitLogDigests.decode(r.body)
    assert len(first.digests) == MAX_DIGESTS_PER_ANSWER and first.next_offset == MAX_DIGESTS_PER_ANSWER * size
    with AdminClient(broker.namesrv_addrs[0]) as admin:
        joined = admin.commit_log_digests(broker.broker_addr, 0, end, size)
    assert joined.digests == commit_log_digests(broker.store, 0, end, size) and joined.next_offset is None


def _answer_as_name_server(registrations: list[float]):
    def answer(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        if request.code == RequestCode.REGISTER_BROKER:
            registrations.append(time.monotonic())
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    return answer


# Digest requests pipelined at once: each asked for MAX_RANGES - 1 ranges, more than half a second of
# hashing and encoding each, when they were all hashed on the thread that registers the broker.
FLOOD = 20


def test_pipelined_digest_requests_leave_registration_on_time(spawn, store_dir, client):
    """A broker registering every second with a name server process and with a second name server
    that counts its registrations: twenty digest requests of 65,535 ranges pipelined at once are
    each answered (bounded, or SYSTEM_BUSY past the few that may wait), and the registrations go on
    meanwhile, once a second."""
    registrations: list[float] = []
    with RemotingServer(LOOPBACK, 0, name="rmq-test-namesrv-spy") as spy:
        spy.register_default_processor(_answer_as_name_server(registrations))
        _, namesrv = start_namesrv(spawn)
        settings = broker_settings(store_dir, registerNameServerPeriod="1000")
        _, addr = start_broker_process(spawn, settings, namesrv=f"{namesrv};{spy.address}")
        assert call(client, addr, update_topic_request("Digests", 1)).code == ResponseCode.SUCCESS
        for i in range(4):
            assert call(client, addr, send_request("Digests", b"%d" % i * 100_000)).code == ResponseCode.SUCCESS
        end = CommitLogDigests.decode(call(client, addr, digests_request(0, 0, 1)).body).max_offset
        size = -(-end // (MAX_RANGES - 1))
        frames = []
        for opaque in range(FLOOD):
            request = digests_request(0, end, size)
            request.opaque = opaque
            frames.append(encode(request))
        with RawConnection(int(settings["listenPort"])) as flood:
            wait_until_registered = time.monotonic() + 5
            while not registrations and time.monotonic() < wait_until_registered:
                time.sleep(0.05)
            flood.send(b"".join(frames))
            sent_at = time.monotonic()
            time.sleep(2.5)
            during = [t for t in registrations if t > sent_at]
            answers = flood.read_commands(FLOOD, timeout=30)
    assert len(during) >= 2, f"{len(during)} registrations in the 2.5 s after the digest requests"
    codes = sorted(a.code for a in answers)
    assert set(codes) <= {ResponseCode.SUCCESS, ResponseCode.SYSTEM_BUSY}, [(a.code, a.remark) for a in answers]
    for a in answers:
        if a.code == ResponseCode.SUCCESS:
            piece = CommitLogDigests.decode(a.body)
            assert len(piece.digests) == MAX_DIGESTS_PER_ANSWER and piece.next_offset == MAX_DIGESTS_PER_ANSWER * size
