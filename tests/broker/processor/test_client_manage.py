"""HEART_BEAT and UNREGISTER_CLIENT through a live broker: consumers registered (both enum spellings),
retry topics created, membership changes told to the group, malformed heartbeats refused."""

from __future__ import annotations

import threading

import orjson

from rmq.net import RemotingClient, RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers.broker import assert_still_serving, create_topic
from tests.helpers.requests import call, heartbeat_request, pull_request, records, send_request


def test_heartbeat_registers_consumers_and_creates_the_retry_topic(broker, client):
    addr = broker.broker_addr
    create_topic(broker, "Members")
    r = call(client, addr, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"}))
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert call(client, addr, heartbeat_request("client-1", "CG", "Members")).code == ResponseCode.SUCCESS
    r = call(client, addr, heartbeat_request("client-2", "CG", "Members", ordinals=True))
    assert r.code == ResponseCode.SUCCESS
    r = call(client, addr, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"}))
    assert r.code == ResponseCode.SUCCESS
    assert sorted(orjson.loads(r.body)["consumerIdList"]) == ["client-1", "client-2"]
    retry = broker.topic_config_manager.select_topic_config("%RETRY%CG")
    assert retry is not None and retry.write_queue_nums == 1
    # the heartbeat's subscription serves pulls that do not carry one
    call(client, addr, send_request("Members", b"x"))
    pull = pull_request("Members", 0, 0, group="CG")
    pull.ext_fields["sysFlag"] = "0"
    r = call(client, addr, pull)
    assert r.code == ResponseCode.SUCCESS and [m.body for m in records(r.body)] == [b"x"]
    pull = pull_request("Members", 0, 0, group="Stranger")
    pull.ext_fields["sysFlag"] = "0"
    assert call(client, addr, pull).code == ResponseCode.SUBSCRIPTION_NOT_EXIST


def test_a_consumer_leaving_is_told_to_the_others(broker):
    addr = broker.broker_addr
    create_topic(broker, "Rebalance")
    notified = []
    changed = threading.Event()

    def on_notify(channel, request):
        notified.append(request.ext_fields.get("consumerGroup"))
        changed.set()

    with RemotingClient() as stays, RemotingClient() as leaves, RemotingClient() as unregisters:
        stays.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
        call(stays, addr, heartbeat_request("stays", "RG", "Rebalance"))
        call(leaves, addr, heartbeat_request("leaves", "RG", "Rebalance"))
        assert changed.wait(2.0), "no notification when a consumer joined"
        changed.clear()
        leaves.shutdown()  # the connection closes
        assert changed.wait(2.0), "no notification when a consumer's connection closed"
        assert notified[-1] == "RG"
        changed.clear()
        call(unregisters, addr, heartbeat_request("unregisters", "RG", "Rebalance"))
        assert changed.wait(2.0)
        changed.clear()
        r = call(
            unregisters,
            addr,
            RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, {"clientID": "unregisters", "consumerGroup": "RG"}),
        )
        assert r.code == ResponseCode.SUCCESS
        assert changed.wait(2.0), "no notification when a consumer unregistered"
        assert broker.client_manager.consumers.consumer_ids("RG") == ["stays"]
        # a consumer silent for 120 s is dropped by the 10 s scan, and the others are told
        call(unregisters, addr, heartbeat_request("silent", "RG", "Rebalance"))
        assert changed.wait(2.0)
        changed.clear()
        info = broker.client_manager.consumers.find_channel("RG", "silent")
        info.last_update_ms -= 121_000
        broker.scan_not_active_clients()
        assert changed.wait(2.0), "no notification when a silent consumer expired"
        assert broker.client_manager.consumers.consumer_ids("RG") == ["stays"]


def test_malformed_heartbeat_is_refused(broker, client):
    for body in (b"{not json", b"[]", b'{"consumerDataSet": []}', b""):
        r = call(client, broker.broker_addr, RemotingCommand.request(RequestCode.HEART_BEAT, {}, body))
        assert r.code == ResponseCode.SYSTEM_ERROR and "heartbeat" in r.remark
    assert_still_serving(broker, client)


def check_client_config(expression_type: str, sub_string: str) -> RemotingCommand:
    """CHECK_CLIENT_CONFIG as a Java consumer sends it before it starts."""
    body = {
        "clientId": "java-client",
        "group": "SqlGroup",
        "subscriptionData": {"topic": "T", "subString": sub_string, "expressionType": expression_type},
    }
    return RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, orjson.dumps(body))


def test_check_client_config_answers_as_rocketmq(start_broker, client, tmp_path):
    plain = start_broker(storePathRootDir=str(tmp_path / "plain"))
    r = call(client, plain.broker_addr, check_client_config("TAG", "TagA || TagB"))
    assert r.code == ResponseCode.SUCCESS
    r = call(client, plain.broker_addr, check_client_config("SQL92", "a > 1"))
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert r.remark.startswith("The broker does not support consumer to filter message by SQL92")
    filtering = start_broker(enablePropertyFilter="true", storePathRootDir=str(tmp_path / "filtering"))
    assert call(client, filtering.broker_addr, check_client_config("SQL92", "a > 1")).code == ResponseCode.SUCCESS
    r = call(client, filtering.broker_addr, check_client_config("SQL92", "a >"))
    assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "line 1 column 4" in r.remark
    r = call(client, filtering.broker_addr, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, b"{oops"))
    assert r.code == ResponseCode.SYSTEM_ERROR and "not JSON" in r.remark
    assert_still_serving(filtering, client)
