"""END_TRANSACTION (37) built by hand against a real broker process: a transaction ends once, and an
END that names no half message (or the wrong one) is refused as RocketMQ refuses it."""

from __future__ import annotations

import pytest

from rmq.net import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.message import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, MessageProperty
from rmq.protocol.record import decode_msg_id
from rmq.protocol.transaction import EndTransactionHeader, TransactionState
from tests.helpers.requests import send_request

GROUP = "pg-raw"


def send_half(cluster, topic: str, body: bytes) -> EndTransactionHeader:
    """A prepared message as Java's producer sends it; the commit header its answer allows."""
    props = {MessageProperty.TRANSACTION_PREPARED: "true", MessageProperty.PRODUCER_GROUP: GROUP}
    answer = cluster.call(send_request(topic, body, group=GROUP, properties=props, queue_id=1))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert answer.ext_fields["queueId"] == "1"  # the queue the producer chose, as RocketMQ answers
    _, _, commit_log_offset = decode_msg_id(answer.ext_fields["msgId"])
    return EndTransactionHeader(
        GROUP, int(answer.ext_fields["queueOffset"]), commit_log_offset, TransactionState.COMMIT, msg_id="m"
    )


def end(cluster, header: EndTransactionHeader, **changes) -> RemotingCommand:
    fields = {**header.to_ext_fields(), **changes}
    return cluster.call(RemotingCommand.request(RequestCode.END_TRANSACTION, fields))


def test_a_half_message_is_invisible_until_committed_and_committed_once(cluster):
    topic = cluster.create_topic("RawTx", queues=2)
    header = send_half(cluster, topic, b"once")
    assert cluster.messages(topic) == []
    assert [m.body for m in cluster.messages(TRANS_HALF_TOPIC)] == [b"once"]
    assert end(cluster, header).code == ResponseCode.SUCCESS
    # the same END again, a rollback after the commit, the END of a check: nothing changes
    assert end(cluster, header).code == ResponseCode.SUCCESS
    assert end(cluster, header, commitOrRollback=str(TransactionState.ROLLBACK)).code == ResponseCode.SUCCESS
    assert end(cluster, header, fromTransactionCheck="true").code == ResponseCode.SUCCESS
    [committed] = cluster.messages(topic)
    assert committed.body == b"once" and committed.queue_id == 1
    assert len(cluster.messages(TRANS_OP_HALF_TOPIC)) == 1


def test_a_rolled_back_message_never_appears(cluster):
    topic = cluster.create_topic("RawTxRollback", queues=2)
    header = send_half(cluster, topic, b"never")
    assert end(cluster, header, commitOrRollback=str(TransactionState.ROLLBACK)).code == ResponseCode.SUCCESS
    assert end(cluster, header).code == ResponseCode.SUCCESS  # a commit after the rollback: ignored
    assert cluster.messages(topic) == []
    [op] = cluster.messages(TRANS_OP_HALF_TOPIC)
    assert op.tags == "d" and int(op.body) == header.tran_state_table_offset


@pytest.mark.parametrize(
    "changes, remark",
    [
        ({"commitLogOffset": "123456789"}, "Find prepared transaction message failed"),
        ({"commitLogOffset": "-1"}, "Find prepared transaction message failed"),
        ({"producerGroup": "someone-else"}, "The producer group wrong"),
        ({"tranStateTableOffset": "99"}, "The transaction state table offset wrong"),
        ({"commitLogOffset": "x"}, "header field 'commitLogOffset' is 'x', expected an integer"),
        ({"commitOrRollback": None}, "header field 'commitOrRollback' is missing"),
    ],
)
def test_an_end_that_names_no_half_message_is_refused(cluster, changes, remark):
    topic = cluster.create_topic("RawTxBad", queues=2)
    header = send_half(cluster, topic, b"kept")
    fields = {k: v for k, v in {**header.to_ext_fields(), **changes}.items() if v is not None}
    answer = cluster.call(RemotingCommand.request(RequestCode.END_TRANSACTION, fields))
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert remark in answer.remark
    # nothing was ended: the real END still commits, and the broker serves on
    assert end(cluster, header).code == ResponseCode.SUCCESS
    assert [m.body for m in cluster.messages(topic)] == [b"kept"]


def test_an_end_pointing_at_an_ordinary_message_is_refused(cluster):
    topic = cluster.create_topic("RawTxPlain", queues=1)
    answer = cluster.call(send_request(topic, b"plain"))
    _, _, plain_offset = decode_msg_id(answer.ext_fields["msgId"])
    header = EndTransactionHeader(GROUP, 0, plain_offset, TransactionState.COMMIT, msg_id="m")
    refused = end(cluster, header)
    assert refused.code == ResponseCode.SYSTEM_ERROR and "no half message" in refused.remark
    assert [m.body for m in cluster.messages(topic)] == [b"plain"]
