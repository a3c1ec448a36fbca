"""SendMessage against a real broker: what a 5.x producer is answered, and what a 4.x consumer then
pulls."""

from __future__ import annotations

import time

from rmq.broker.topic_config import TopicConfig
from rmq.perf.procs import wait_until
from rmq.protocol.codes import ResponseCode
from rmq.protocol.grpc.v2.definition_pb2 import Code, MessageType
from rmq.protocol.message import MessageProperty, java_string_hash
from rmq.proxy.send import consistent_hash
from tests.helpers.grpc import message, messaging_stub, send, service
from tests.helpers.requests import call, pull_all, send_request


def create(startup, topic: str, queues: int = 4, kind: str | None = None) -> None:
    attributes = {"message.type": kind} if kind else {}
    startup.controller.topic_config_manager.update_topic_config(
        TopicConfig(topic, queues, queues, attributes=attributes)
    )


def test_a_sent_message_is_what_a_4x_consumer_pulls(grpc_broker, stub, client):
    create(grpc_broker, "Plain")
    response = send(stub, message("Plain", b"hello", "ID-1", tag="TagA", keys=("k1", "k2"), color="red"))
    assert response.status.code == Code.OK
    (entry,) = response.entries
    assert entry.message_id == "ID-1" and entry.offset == 0 and entry.transaction_id == ""
    (pulled,) = pull_all(client, grpc_broker.controller.broker_addr, "Plain", 4)
    assert pulled.body == b"hello"
    assert pulled.properties[MessageProperty.UNIQ_KEY] == "ID-1"
    assert pulled.tags == "TagA" and pulled.keys == ["k1", "k2"]
    assert pulled.properties["color"] == "red"


def test_messages_of_one_group_go_to_one_queue_in_order(grpc_broker, stub, client):
    create(grpc_broker, "Fifo", queues=8, kind="FIFO")
    for i in range(4):
        assert send(stub, message("Fifo", b"a%d" % i, f"A-{i}", group="group-a")).status.code == Code.OK
    pulled = pull_all(client, grpc_broker.controller.broker_addr, "Fifo", 8)
    assert [m.body for m in pulled] == [b"a0", b"a1", b"a2", b"a3"]
    # the queue the proxy's SendMessageQueueSelector picks: Guava's consistentHash of the group's hash
    assert {m.queue_id for m in pulled} == {consistent_hash(java_string_hash("group-a"), 8)}
    assert all(m.properties[MessageProperty.SHARDING_KEY] == "group-a" for m in pulled)


def test_the_queue_selection_is_guavas_consistent_hash():
    # Guava's HashingTest golden values (consistentHash(i, 100) for i in 0..19): a Java proxy and this
    # endpoint put a message group on the same queue
    golden = [0, 55, 62, 8, 45, 59, 86, 97, 82, 59, 73, 37, 17, 56, 86, 21, 90, 37, 38, 83]
    assert [consistent_hash(i, 100) for i in range(20)] == golden


def test_a_delayed_message_waits_for_its_delivery_time(grpc_broker, stub, client):
    create(grpc_broker, "Later", kind="DELAY")
    deliver_at = int(time.time() * 1000) + 1500
    assert send(stub, message("Later", b"soon", "D-1", deliver_at_ms=deliver_at)).status.code == Code.OK
    addr = grpc_broker.controller.broker_addr
    assert pull_all(client, addr, "Later", 4) == []
    (pulled,) = wait_until(lambda: pull_all(client, addr, "Later", 4), 10, "the delayed message delivered")
    assert pulled.body == b"soon" and pulled.store_timestamp >= deliver_at - 1000


def test_a_gzip_body_is_stored_inflated(grpc_broker, stub, client):
    create(grpc_broker, "Zipped")
    assert send(stub, message("Zipped", b"x" * 10_000, "Z-1", gzip_body=True)).status.code == Code.OK
    (pulled,) = pull_all(client, grpc_broker.controller.broker_addr, "Zipped", 4)
    assert pulled.body == b"x" * 10_000 and not pulled.sys_flag & 1


def test_a_batch_is_answered_per_message(grpc_broker, stub, client):
    create(grpc_broker, "Batch", queues=1)
    response = send(stub, message("Batch", b"one", "B-1"), message("Batch", b"two", "B-2"))
    assert response.status.code == Code.OK
    assert [(e.message_id, e.offset) for e in response.entries] == [("B-1", 0), ("B-2", 1)]
    assert [m.body for m in pull_all(client, grpc_broker.controller.broker_addr, "Batch", 1)] == [b"one", b"two"]


def test_bad_sends_are_refused_with_their_code_and_store_nothing(start_grpc_broker, client):
    startup = start_grpc_broker(maxMessageSize="1024")
    create(startup, "Strict", kind="FIFO")
    create(startup, "Normal")
    cases = [
        (message("Strict", b"x", "E-1"), Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (message("Normal", b"x", "E-2", group="g"), Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (message("Normal", b"x" * 1025, "E-3"), Code.MESSAGE_BODY_TOO_LARGE),
        (message("Normal", b"x" * 5000, "E-4", gzip_body=True), Code.MESSAGE_BODY_TOO_LARGE),
        (message("Normal", b"", "E-5"), Code.MESSAGE_BODY_EMPTY),
        (message("bad topic", b"x", "E-6"), Code.ILLEGAL_TOPIC),
        (message("NoSuchTopic", b"x", "E-7"), Code.TOPIC_NOT_FOUND),
        (message("Normal", b"x", ""), Code.ILLEGAL_MESSAGE_ID),
        (message("Normal", b"x", "E-8", tag="a|b"), Code.ILLEGAL_MESSAGE_TAG),
        (message("Normal", b"x", "E-9", UNIQ_KEY="mine"), Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
    ]
    with messaging_stub(startup.proxy.port) as stub:
        for bad, code in cases:
            response = send(stub, bad)
            assert response.status.code == code, (bad.system_properties.message_id, response.status)
            assert response.status.message
    addr = startup.controller.broker_addr
    assert pull_all(client, addr, "Strict", 4) == [] and pull_all(client, addr, "Normal", 4) == []


def test_a_4x_send_of_the_wrong_type_is_refused_by_the_broker(grpc_broker, client):
    create(grpc_broker, "TxOnly", kind="TRANSACTION")
    refused = call(client, grpc_broker.controller.broker_addr, send_request("TxOnly", b"plain"))
    assert refused.code == ResponseCode.MESSAGE_ILLEGAL
    assert "expected type is TRANSACTION, but actual type is NORMAL" in refused.remark


def test_mixed_topics_take_every_type(grpc_broker, stub):
    create(grpc_broker, "Anything", kind="MIXED")
    assert send(stub, message("Anything", b"n", "M-1")).status.code == Code.OK
    assert send(stub, message("Anything", b"f", "M-2", group="g")).status.code == Code.OK
    tx = send(stub, message("Anything", b"t", "M-3", kind=MessageType.TRANSACTION))
    assert tx.status.code == Code.OK and tx.entries[0].transaction_id == "M-3"


def test_a_send_without_a_client_id_is_refused(grpc_broker, stub):
    create(grpc_broker, "Anonymous")
    request = service.SendMessageRequest(messages=[message("Anonymous", b"x", "N-1")])
    response = stub.SendMessage(request, timeout=5)  # no x-mq-client-id
    assert response.status.code == Code.CLIENT_ID_REQUIRED
