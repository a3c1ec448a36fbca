"""Send and pull through a live broker, as RocketMQ clients do (SPEC.md section 4)."""

from __future__ import annotations

import pytest

from rmq.net import RequestCode, ResponseCode
from tests.broker.broker_helpers import batch_body, call, pull_request, records, send_request


@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2])
def test_send_then_pull_round_trip(broker, client, code):
    addr = broker.broker_addr
    sent = []
    for i in range(5):
        r = call(client, addr, send_request("RoundTrip", b"body-%d" % i, code=code, queue_id=1, tags="tagA"))
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.ext_fields["queueId"] == "1" and r.ext_fields["queueOffset"] == str(i)
        sent.append(r.ext_fields["msgId"])
    r = call(client, addr, pull_request("RoundTrip", 1, 0))
    assert r.code == ResponseCode.SUCCESS
    assert r.ext_fields == {"nextBeginOffset": "5", "minOffset": "0", "maxOffset": "5", "suggestWhichBrokerId": "0"}
    got = records(r.body)
    assert [m.body for m in got] == [b"body-%d" % i for i in range(5)]
    assert [m.msg_id for m in got] == sent
    assert all(m.tags == "tagA" for m in got)


def test_batch_send_gets_consecutive_offsets_and_joined_msg_ids(broker, client):
    addr = broker.broker_addr
    body = batch_body([(b"m%d" % i, {"TAGS": "b", "UNIQ_KEY": "K%d" % i}) for i in range(32)])
    request = send_request("Batched", body, code=RequestCode.SEND_BATCH_MESSAGE, queue_id=2)
    r = call(client, addr, request)
    assert r.code == ResponseCode.SUCCESS, r.remark
    msg_ids = r.ext_fields["msgId"].split(",")
    assert len(msg_ids) == 32 and r.ext_fields["queueOffset"] == "0"
    r = call(client, addr, pull_request("Batched", 2, 0))
    got = records(r.body)
    assert [m.body for m in got] == [b"m%d" % i for i in range(32)]
    assert [m.msg_id for m in got] == msg_ids
    assert got[5].properties["UNIQ_KEY"] == "K5"
