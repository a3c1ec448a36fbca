"""QUERY_CONSUMER_OFFSET and UPDATE_CONSUMER_OFFSET through a live broker: a new group's start, commits
(oneway ones, ali-ons' -1, a pull's commit bit)."""

from __future__ import annotations

from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers import wait_until
from tests.helpers.broker import create_topic
from tests.helpers.requests import call, offset_request, pull_request, send_request


def test_new_group_starts_at_zero_then_reads_what_it_committed(broker, client):
    addr = broker.broker_addr
    create_topic(broker, "Offsets")
    r = call(client, addr, offset_request(RequestCode.QUERY_CONSUMER_OFFSET, "Offsets", 0))
    assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
    for i in range(4):
        call(client, addr, send_request("Offsets", b"%d" % i))
    # a group that never committed still gets 0 while the queue holds offset 0
    r = call(client, addr, offset_request(RequestCode.QUERY_CONSUMER_OFFSET, "Offsets", 0))
    assert r.ext_fields["offset"] == "0"
    r = call(client, addr, offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, "Offsets", 0, commitOffset=3))
    assert r.code == ResponseCode.SUCCESS
    r = call(client, addr, offset_request(RequestCode.QUERY_CONSUMER_OFFSET, "Offsets", 0))
    assert r.ext_fields["offset"] == "3"
    # oneway commits (one client's habit) are taken too, without an answer
    client.invoke_oneway(addr, offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, "Offsets", 0, commitOffset=4))
    wait_until(
        lambda: broker.consumer_offset_manager.query_offset("G", "Offsets", 0) == 4, 5, "the oneway commit taken"
    )
    r = call(client, addr, offset_request(RequestCode.QUERY_CONSUMER_OFFSET, "Offsets", 0))
    assert r.ext_fields["offset"] == "4"
    # ali-ons commits -1 for queues it has not consumed yet: accepted, and the real offset stays
    r = call(client, addr, offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, "Offsets", 0, commitOffset=-1))
    assert r.code == ResponseCode.SUCCESS
    r = call(client, addr, offset_request(RequestCode.QUERY_CONSUMER_OFFSET, "Offsets", 0))
    assert r.ext_fields["offset"] == "4"
    # a pull with the commit bit commits too
    call(client, addr, pull_request("Offsets", 0, 2, group="G", commit_offset=2))
    assert broker.consumer_offset_manager.query_offset("G", "Offsets", 0) == 2
