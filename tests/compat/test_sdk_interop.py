"""Our SDK and npm ali-ons@3.12.0 read each other's messages through one ``rmq-broker``: bodies (a
compressed one too), tags, keys, user properties and ids intact.

Ids differ by client: ours set UNIQ_KEY and call it ``msg_id``; ali-ons sets none, and calls the
broker's id (store host + commit-log offset) ``msgId``, on sending and on consuming alike.
"""

from __future__ import annotations

import json

import pytest

from rmq.client import Message, Producer
from rmq.protocol.message import MessageProperty, MessageSysFlag
from tests.helpers.compat import sdk_push_consumer

pytestmark = [pytest.mark.compat, pytest.mark.slow]

# Over the 4 KiB from which both clients deflate a body (sysFlag COMPRESSED).
BIG_BODY_BYTES = 6000
USER_PROPERTIES = {"color": "blue", "order-id": "o-42"}


def test_sdk_producer_to_ali_ons_consumer(ons_clients, cluster):
    namesrv = cluster.namesrv_addr
    topic = cluster.create_topic("InteropSdkToOns")
    big = "".join(f"{i:05d}," for i in range(BIG_BODY_BYTES // 6)).encode()
    messages = {
        "small": Message(topic, b"sdk-small", tags="TagA", keys=["sdk-k1", "sdk-k2"], properties=USER_PROPERTIES),
        "big": Message(topic, big, tags="TagB", keys="sdk-big", properties=USER_PROPERTIES),
        "async": Message(topic, b"sdk-async", tags="TagA", keys="sdk-async", properties={"n": "3"}),
    }
    batch = [
        Message(topic, f"sdk-batch-{i}".encode(), tags="TagC", keys=f"sdk-b{i}", properties={"i": str(i)})
        for i in range(2)
    ]
    with Producer("interop-sdk-p", namesrv, instance_name="interop-p") as producer:
        results = {name: producer.send(msg) for name, msg in messages.items() if name != "async"}
        results["async"] = producer.send_async(messages["async"]).result(10)
        batch_result = producer.send_batch(batch)
    sent = list(messages.values()) + batch

    got = ons_clients.run("ons_consume.js", namesrv, topic, "interop-ons-c", "*", len(sent), 10000, timeout=60)

    by_uniq = {line["properties"].get(MessageProperty.UNIQ_KEY): line for line in got}
    assert len(got) == len(sent) and set(by_uniq) == {m.uniq_key for m in sent}
    for msg in sent:
        line = by_uniq[msg.uniq_key]
        assert line["body"] == msg.body.decode()
        assert bool(line["sysFlag"] & MessageSysFlag.COMPRESSED) == (len(msg.body) >= BIG_BODY_BYTES)
        assert (line["tags"], line["keys"]) == (msg.tags, " ".join(msg.keys))
        user = {k: v for k, v in msg.properties.items() if k not in (MessageProperty.TAGS, MessageProperty.KEYS)}
        assert {k: line["properties"].get(k) for k in user} == user
    for name, result in results.items():
        line = by_uniq[result.msg_id]
        # ali-ons names a message by the broker's id, which our SendResult reports as offset_msg_id
        assert line["msgId"] == result.offset_msg_id, name
        assert (line["queueId"], line["queueOffset"]) == (result.message_queue.queue_id, result.queue_offset)
    assert batch_result.msg_id.split(",") == [m.uniq_key for m in batch]


def test_ali_ons_producer_to_sdk_push_consumer(ons_clients, cluster):
    namesrv = cluster.namesrv_addr
    topic = cluster.create_topic("InteropOnsToSdk")
    count = 6
    sent = ons_clients.run(
        "ons_produce.js",
        namesrv,
        topic,
        "interop-ons-p",
        count,
        "TagA,TagB",
        "ons",
        json.dumps(USER_PROPERTIES),
        BIG_BODY_BYTES,
        timeout=60,
    )
    assert [s["status"] for s in sent] == ["SEND_OK"] * count

    with sdk_push_consumer(
        namesrv, topic, "interop-sdk-c", count, instance_name="interop-c", persist_consumer_offset_interval=0.5
    ) as received:
        # once the group committed the end of every queue, nothing (no duplicate) is left to deliver
        cluster.wait_caught_up("interop-sdk-c", topic)
    assert len(received) == count
    by_id = {m.msg_id: m for m in received}
    for s in sent:
        i = s["i"]
        msg = by_id[s["msgId"]]
        expected_body = f"ons-body-{i}"
        if i % 2:
            expected_body = expected_body.ljust(BIG_BODY_BYTES, ".")
        assert msg.body == expected_body.encode() and len(msg.body) == s["bodyLength"]
        assert bool(msg.sys_flag & MessageSysFlag.COMPRESSED) == bool(i % 2)
        assert (msg.tags, msg.keys) == (["TagA", "TagB"][i % 2], [f"ons-key-{i}"])
        assert {k: msg.get_property(k) for k in USER_PROPERTIES} == USER_PROPERTIES
        assert msg.offset_msg_id == s["msgId"] and msg.uniq_key is None
        assert (msg.queue_id, msg.queue_offset) == (s["queueId"], s["queueOffset"])
