"""Acceptance (issue 24, item 2): 4.x and 5.x clients on one topic of one ``rmq-broker``. What our SDK
(4.x remoting) or npm ali-ons@3.12.0 sends, Apache's 5.x Python client receives over gRPC, a
compressed body inflated; what the 5.x client sends, they consume; a 4.x push consumer group and a
5.x simple consumer group on one topic each get every message.
"""

from __future__ import annotations

from collections import Counter

import pytest

from rmq.client import Message, Producer
from tests.helpers.compat import sdk_push_consumer
from tests.helpers.grpc_clients import acked_bodies, delivered

pytestmark = [pytest.mark.compat, pytest.mark.slow]

# over the 4 KiB from which 4.x clients deflate a body (sysFlag COMPRESSED)
BIG_BODY_BYTES = 6000


def sdk_push_consume(namesrv: str, topic: str, group: str, count: int) -> list:
    """What our SDK's push consumer of a new ``group`` gets of ``topic`` until ``count`` came."""
    with sdk_push_consumer(namesrv, topic, group, count) as received:
        return received


def test_what_the_sdk_sends_a_5x_consumer_receives_and_the_other_way_round(grpc_clients, grpc_cluster):
    cluster = grpc_cluster
    topic = cluster.create_typed_topic("MixedSdk", "NORMAL")
    big = "".join(f"{i:05d}," for i in range(BIG_BODY_BYTES // 6))
    with Producer("mixed-sdk-p", cluster.namesrv_addr, instance_name="mixed-sdk-p") as producer:
        results = [
            producer.send(Message(topic, b"sdk-small", tags="TagA", keys="sdk-k", properties={"color": "blue"})),
            producer.send(Message(topic, big.encode(), tags="TagB", keys="sdk-big")),
        ]

    got = delivered(grpc_clients.simple_consume(cluster.endpoint, topic, "mixed-5x-c", 2, idle=8))
    by_body = {line["body"]: line for line in got}
    assert set(by_body) == {"sdk-small", big}, "the compressed body did not reach the 5.x client inflated"
    small = by_body["sdk-small"]
    assert (small["tag"], small["keys"], small["properties"].get("color")) == ("TagA", ["sdk-k"], "blue")
    # a 5.x message id is the UNIQ_KEY a 4.x producer set
    assert {line["msgId"] for line in got} == {r.msg_id for r in results}

    sent = grpc_clients.produce(cluster.endpoint, topic, 5, prefix="py5", tags=["TagC"])
    received = sdk_push_consume(cluster.namesrv_addr, topic, "mixed-sdk-c", 2 + len(sent))
    by_body_4x = {m.body.decode(): m for m in received}
    assert {s["body"] for s in sent} <= set(by_body_4x)
    for s in sent:
        msg = by_body_4x[s["body"]]
        assert (msg.tags, msg.keys, msg.msg_id) == ("TagC", [f"py5-key-{s['i']}"], s["msgId"])


def test_ali_ons_and_the_5x_client_read_each_others_messages(grpc_clients, ons_clients, grpc_cluster):
    cluster, count = grpc_cluster, 6
    topic = cluster.create_typed_topic("MixedOns", "NORMAL")
    ons_sent = ons_clients.run("ons_produce.js", cluster.namesrv_addr, topic, "mixed-ons-p", count, "TagA", "ons")
    assert [s["status"] for s in ons_sent] == ["SEND_OK"] * count

    got = delivered(grpc_clients.simple_consume(cluster.endpoint, topic, "mixed-5x-ons", count, idle=8))
    assert Counter(line["body"] for line in got) == Counter(f"ons-body-{i}" for i in range(count))
    # ali-ons sets no UNIQ_KEY: the 5.x id is then the broker's (what ali-ons calls msgId)
    assert {line["msgId"] for line in got} == {s["msgId"] for s in ons_sent}

    py5_sent = grpc_clients.produce(cluster.endpoint, topic, count, prefix="py5")
    consumed = ons_clients.run("ons_consume.js", cluster.namesrv_addr, topic, "mixed-ons-c", "*", 2 * count, 8000)
    assert Counter(line["body"] for line in consumed) == Counter(
        [f"ons-body-{i}" for i in range(count)] + [s["body"] for s in py5_sent]
    )


def test_a_4x_push_group_and_a_5x_simple_group_on_one_topic_each_get_every_message(grpc_clients, grpc_cluster):
    cluster, count = grpc_cluster, 40
    topic = cluster.create_typed_topic("MixedGroups", "NORMAL")
    half = count // 2
    with Producer("mixed-groups-p", cluster.namesrv_addr, instance_name="mixed-groups-p") as producer:
        for i in range(half):
            producer.send(Message(topic, f"sdk-body-{i}".encode(), tags="TagA"))
    sent_5x = grpc_clients.produce(cluster.endpoint, topic, half, prefix="py5")
    expected = Counter([f"sdk-body-{i}" for i in range(half)] + [s["body"] for s in sent_5x])

    got_5x = grpc_clients.simple_consume(cluster.endpoint, topic, "mixed-groups-5x", count, idle=8)
    got_4x = sdk_push_consume(cluster.namesrv_addr, topic, "mixed-groups-4x", count)

    assert Counter(acked_bodies(got_5x)) == expected
    assert Counter(m.body.decode() for m in got_4x) == expected
    cluster.wait_caught_up("mixed-groups-4x", topic)
