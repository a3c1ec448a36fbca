"""UPDATE_AND_CREATE_TOPIC through a live broker: routed before it is answered; bad names and settings
refused."""

from __future__ import annotations

from rmq.net import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers.requests import call


def test_update_and_create_topic(broker, client):
    fields = {
        "topic": "Created",
        "readQueueNums": 2,
        "writeQueueNums": 2,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
    }
    r = call(client, broker.broker_addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields))
    assert r.code == ResponseCode.SUCCESS
    route = call(
        client,
        broker.namesrv_addrs[0],
        RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Created"}),
    )
    assert route.code == ResponseCode.SUCCESS  # registered before the creation was answered
    r = call(
        client,
        broker.broker_addr,
        RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {**fields, "topic": "no good"}),
    )
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and r.remark
    r = call(
        client,
        broker.broker_addr,
        RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {**fields, "topic": "Trail\n"}),
    )
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "'Trail\\n'" in r.remark
    assert broker.topic_config_manager.select_topic_config("Trail\n") is None
    r = call(
        client,
        broker.broker_addr,
        RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {**fields, "readQueueNums": "many"}),
    )
    assert r.code == ResponseCode.SYSTEM_ERROR and "readQueueNums" in r.remark
