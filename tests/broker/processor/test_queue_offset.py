"""GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP and GET_EARLIEST_MSG_STORETIME through a
live broker."""

from __future__ import annotations

import time

from rmq.net import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers.broker import create_topic
from tests.helpers.requests import call, send_request


def test_queue_offset_lookups(broker, client):
    addr = broker.broker_addr
    create_topic(broker, "Lookups")
    before = int(time.time() * 1000)
    for i in range(5):
        call(client, addr, send_request("Lookups", b"%d" % i, queue_id=1))

    def ask(code, **extra):
        r = call(client, addr, RemotingCommand.request(code, {"topic": "Lookups", "queueId": 1, **extra}))
        assert r.code == ResponseCode.SUCCESS, r.remark
        return r.ext_fields

    assert ask(RequestCode.GET_MAX_OFFSET)["offset"] == "5"
    assert ask(RequestCode.GET_MIN_OFFSET)["offset"] == "0"
    assert ask(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp=before - 1000)["offset"] == "0"
    assert before <= int(ask(RequestCode.GET_EARLIEST_MSG_STORETIME)["timestamp"]) <= int(time.time() * 1000)
    r = call(client, addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "Lookups", "queueId": 3}))
    assert r.ext_fields["offset"] == "0"
