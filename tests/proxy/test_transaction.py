"""Transactional messages from a 5.x producer: EndTransaction, and the broker's check of an open
transaction arriving on the producer's Telemetry stream."""

from __future__ import annotations

from rmq.broker.topic_config import TopicConfig
from rmq.perf.procs import wait_until
from rmq.protocol.grpc.v2.definition_pb2 import ClientType, Code, MessageType, TransactionResolution, TransactionSource
from tests.helpers.grpc import Telemetry, message, messaging_stub, metadata, producer_settings, resource, send, service
from tests.helpers.requests import pull_all


def create(startup, topic: str) -> None:
    config = TopicConfig(topic, 1, 1, attributes={"message.type": "TRANSACTION"})
    startup.controller.topic_config_manager.update_topic_config(config)


def end(stub, topic: str, sent, resolution, source=TransactionSource.SOURCE_CLIENT, client_id="test-client"):
    request = service.EndTransactionRequest(
        topic=resource(topic),
        message_id=sent.message_id,
        transaction_id=sent.transaction_id,
        resolution=resolution,
        source=source,
    )
    return stub.EndTransaction(request, metadata=metadata(client_id), timeout=5)


def test_a_committed_half_message_is_delivered_and_a_rolled_back_one_never(grpc_broker, stub, client):
    create(grpc_broker, "Payments")
    addr = grpc_broker.controller.broker_addr
    commit = send(stub, message("Payments", b"commit me", "T-1", kind=MessageType.TRANSACTION)).entries[0]
    rollback = send(stub, message("Payments", b"roll me back", "T-2", kind=MessageType.TRANSACTION)).entries[0]
    assert commit.transaction_id == "T-1" and rollback.transaction_id == "T-2"
    assert pull_all(client, addr, "Payments", 1) == []  # half messages are nobody's to consume yet
    assert end(stub, "Payments", commit, TransactionResolution.COMMIT).status.code == Code.OK
    assert end(stub, "Payments", rollback, TransactionResolution.ROLLBACK).status.code == Code.OK
    (delivered,) = wait_until(lambda: pull_all(client, addr, "Payments", 1), 5, "the committed message")
    assert delivered.body == b"commit me"
    # ending it again, or a transaction nobody opened, is refused
    again = end(stub, "Payments", commit, TransactionResolution.COMMIT)
    assert again.status.code == Code.INVALID_TRANSACTION_ID
    made_up = service.SendResultEntry(message_id="X", transaction_id="nope")
    assert end(stub, "Payments", made_up, TransactionResolution.COMMIT).status.code == Code.INVALID_TRANSACTION_ID


def test_an_open_transaction_is_checked_on_the_producers_stream_and_ended_from_there(start_grpc_broker, client):
    startup = start_grpc_broker(transactionTimeOut="100", transactionCheckInterval="200")
    create(startup, "Orphans")
    with messaging_stub(startup.proxy.port) as stub, Telemetry(stub, "tx-producer") as telemetry:
        telemetry.send(producer_settings("Orphans"))
        assert telemetry.receive().settings.publishing.max_body_size > 0
        sent = send(stub, message("Orphans", b"orphan", "O-1", kind=MessageType.TRANSACTION), client_id="tx-producer")
        assert sent.status.code == Code.OK
        # the producer "crashed" before ending it: the broker asks, down the stream
        check = telemetry.receive(timeout=10).recover_orphaned_transaction_command
        assert check.transaction_id == "O-1"
        assert check.message.body == b"orphan" and check.message.topic.name == "Orphans"
        assert check.message.system_properties.message_id == "O-1"
        assert check.message.system_properties.message_type == MessageType.TRANSACTION
        answer = service.SendResultEntry(message_id="O-1", transaction_id=check.transaction_id)
        ended = end(
            stub, "Orphans", answer, TransactionResolution.COMMIT, TransactionSource.SOURCE_SERVER_CHECK, "tx-producer"
        )
        assert ended.status.code == Code.OK
    addr = startup.controller.broker_addr
    (delivered,) = wait_until(lambda: pull_all(client, addr, "Orphans", 1), 5, "the checked message committed")
    assert delivered.body == b"orphan"


def test_checks_still_reach_a_producer_the_broker_dropped_for_silence_once_it_heartbeats(start_grpc_broker):
    startup = start_grpc_broker(transactionTimeOut="100", transactionCheckInterval="200")
    create(startup, "Silent")
    with messaging_stub(startup.proxy.port) as stub, Telemetry(stub, "quiet-producer") as telemetry:
        telemetry.send(producer_settings("Silent"))
        telemetry.receive()
        # what the broker's scan does to a client silent for 120 s: its channel closed, it forgotten
        startup.proxy.bridge.find("quiet-producer").close()
        wait_until(
            lambda: startup.controller.client_manager.producers.client_ids("Silent") == [], 5, "the producer dropped"
        )
        heartbeat = service.HeartbeatRequest(client_type=ClientType.PRODUCER)
        assert stub.Heartbeat(heartbeat, metadata=metadata("quiet-producer"), timeout=5).status.code == Code.OK
        sent = send(stub, message("Silent", b"late", "S-1", kind=MessageType.TRANSACTION), client_id="quiet-producer")
        assert sent.status.code == Code.OK
        check = telemetry.receive(timeout=10).recover_orphaned_transaction_command
        assert check.transaction_id == "S-1"
