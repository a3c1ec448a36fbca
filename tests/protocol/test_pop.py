"""rmq.protocol.pop against RocketMQ 5.x's formats (ExtraInfoUtil, PopCheckPoint, AckMsg)."""

import json

import pytest

from rmq.protocol import pop
from rmq.protocol.codes import ResponseCode
from rmq.protocol.fields import BadRequest


def test_extra_info_is_exactly_extra_info_utils_form():
    # ExtraInfoUtil.buildExtraInfo(10, 1700000000000, 30000, 3, "%RETRY%g_t", "broker-a", 1, 12)
    text = "10 1700000000000 30000 3 1 broker-a 1 12"
    info = pop.ExtraInfo.decode(text)
    assert info == pop.ExtraInfo(10, 1700000000000, 30000, 3, pop.RETRY_V1, "broker-a", 1, 12)
    assert info.encode() == text
    assert pop.real_topic("t", "g", info.retry) == "%RETRY%g_t"
    assert pop.ExtraInfo.decode("10 1 2 999 0 b 0").order


@pytest.mark.parametrize("bad", ["", "1 2 3", "x 1 2 3 0 b 0 5", "1 2 3 4 7 b 0 5", "1 2 3 4 0 b 0 5 6"])
def test_a_bad_extra_info_is_refused_naming_the_field(bad):
    with pytest.raises(BadRequest) as refused:
        pop.ExtraInfo.decode(bad)
    assert refused.value.code == ResponseCode.SYSTEM_ERROR
    assert "extraInfo" in str(refused.value)


def test_offset_infos_parse_as_extra_info_util_builds_them():
    info = ";".join((pop.offset_info_entry("t", 0, [5, 7]), pop.offset_info_entry("%RETRY%g_t", 0, [1])))
    assert info == "0 0 5,7;1 0 1"
    assert pop.parse_offset_info(info) == {"0@0": [5, 7], "1@0": [1]}


def test_checkpoint_and_ack_records_use_rocketmqs_json_names():
    ck = pop.PopCheckPoint(5, 1000, 30000, 0, 2, 1, "t", "g", 0, [0, 2], "broker-a")
    assert json.loads(ck.encode()) == {
        "so": 5, "pt": 1000, "it": 30000, "bm": 0, "n": 2, "q": 1, "t": "t", "c": "g", "ro": 0, "d": [0, 2],
        "bn": "broker-a",
    }  # fmt: skip
    assert pop.PopCheckPoint.decode(ck.encode()) == ck
    assert ck.index_of_ack(7) == 1 and ck.index_of_ack(6) == -1 and ck.ack_offset_by_index(1) == 7
    ack = pop.AckMsg(7, 5, "g", "t", 1, 1000, "broker-a")
    assert pop.AckMsg.decode(ack.encode()) == ack
    # RocketMQ reads the long names too (alternateNames)
    long_form = b'{"ackOffset":7,"startOffset":5,"consumerGroup":"g","topic":"t","queueId":1,"popTime":1000}'
    assert pop.AckMsg.decode(long_form) == pop.AckMsg(7, 5, "g", "t", 1, 1000)


def test_headers_round_trip_through_their_fields():
    request = pop.PopRequest("g", "t", -1, 4, 30000, 0, 1, exp_type="TAG", exp="a||b", order=True)
    assert pop.PopRequest.from_fields(request.fields()) == request
    assert pop.PopRequest.from_fields({**request.fields(), "queueId": "-7"}).queue_id == -1
    ack = pop.AckRequest("g", "t", 0, "1 2 3 4 0 b 0 9", 9, 5000)
    assert pop.AckRequest.from_fields(ack.fields(), change=True) == ack
    response = pop.PopResponse(1, 2, 3, 4, "0 0 5")
    assert pop.PopResponse.from_fields(response.fields()) == response
