"""Consumer offsets, queue offsets, heartbeats and group membership through a live broker."""

from __future__ import annotations

import json
import threading
import time

import orjson

from rmq.net import RemotingClient, RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.broker.broker_helpers import (
    call,
    create_topic,
    pull_request,
    records,
    send_request,
)


def offset_request(code, topic, queue_id, group="G", **extra):
    return RemotingCommand.request(code, {"consumerGroup": group, "topic": topic, "queueId": queue_id, **extra})


def heartbeat(client_id, group, topic, *, ordinals=False, sub="*"):
    consumer = {"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "subscriptionDataSet": [{"topic": topic, "subString": sub, "subVersion": 1}]}
    if ordinals:
        consumer.update(consumeType=1, messageModel=1, consumeFromWhere=4)
    body = {"clientID": client_id, "consumerDataSet": [consumer], "producerDataSet": [{"groupName": "P"}]}
    return RemotingCommand.request(RequestCode.HEART_BEAT, {}, json.dumps(body).encode())


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
    for _ in range(200):
        if broker.consumer_offset_manager.query_offset("G", "Offsets", 0) == 4:
            break
        time.sleep(0.005)
    assert call(client, addr, offset_request(RequestCode.QUERY_CONSUMER_OFFSET, "Offsets", 0)).ext_fields["offset"] == "4"
    # ali-ons commits -1 for queues it has not consumed yet: accepted, and the real offset stays
    r = call(client, addr, offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, "Offsets", 0, commitOffset=-1))
    assert r.code == ResponseCode.SUCCESS
    assert call(client, addr, offset_request(RequestCode.QUERY_CONSUMER_OFFSET, "Offsets", 0)).ext_fields["offset"] == "4"
    # a pull with the commit bit commits too
    call(client, addr, pull_request("Offsets", 0, 2, group="G", commit_offset=2))
    assert broker.consumer_offset_manager.query_offset("G", "Offsets", 0) == 2


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


def test_heartbeat_registers_consumers_and_creates_the_retry_topic(broker, client):
    addr = broker.broker_addr
    create_topic(broker, "Members")
    r = call(client, addr, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"}))
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert call(client, addr, heartbeat("client-1", "CG", "Members")).code == ResponseCode.SUCCESS
    assert call(client, addr, heartbeat("client-2", "CG", "Members", ordinals=True)).code == ResponseCode.SUCCESS
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
        call(stays, addr, heartbeat("stays", "RG", "Rebalance"))
        call(leaves, addr, heartbeat("leaves", "RG", "Rebalance"))
        assert changed.wait(2.0), "no notification when a consumer joined"
        changed.clear()
        leaves.shutdown()  # the connection closes
        assert changed.wait(2.0), "no notification when a consumer's connection closed"
        assert notified[-1] == "RG"
        changed.clear()
        call(unregisters, addr, heartbeat("unregisters", "RG", "Rebalance"))
        assert changed.wait(2.0)
        changed.clear()
        r = call(unregisters, addr, RemotingCommand.request(
            RequestCode.UNREGISTER_CLIENT, {"clientID": "unregisters", "consumerGroup": "RG"}))
        assert r.code == ResponseCode.SUCCESS
        assert changed.wait(2.0), "no notification when a consumer unregistered"
        assert broker.client_manager.consumers.consumer_ids("RG") == ["stays"]
        # a consumer silent for 120 s is dropped by the 10 s scan, and the others are told
        call(unregisters, addr, heartbeat("silent", "RG", "Rebalance"))
        assert changed.wait(2.0)
        changed.clear()
        info = broker.client_manager.consumers.find_channel("RG", "silent")
        info.last_update_ms -= 121_000
        broker.scan_not_active_clients()
        assert changed.wait(2.0), "no notification when a silent consumer expired"
        assert broker.client_manager.consumers.consumer_ids("RG") == ["stays"]
