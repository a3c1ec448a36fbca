"""The transaction formats producers and brokers share: END_TRANSACTION / CHECK_TRANSACTION_STATE
headers under Java's field names, the check's body as Java's MessageDecoder.encode lays it out, the
op record's body, and what makes a send a half message."""

from __future__ import annotations

import pytest

from rmq.protocol.fields import BadRequest
from rmq.protocol.message import MessageProperty, MessageSysFlag, encode_properties
from rmq.protocol.record import decode_record, encode_record
from rmq.protocol.transaction import (
    CheckTransactionStateHeader,
    EndTransactionHeader,
    TransactionState,
    decode_op_body,
    encode_op_body,
    is_prepared,
    reset_transaction_value,
)
from tests.helpers.golden import spec_record


def test_the_check_body_is_the_record_java_encodes():
    props = encode_properties({"UNIQ_KEY": "AC1", "PGROUP": "pg", "TRANSACTION_CHECK_TIMES": "2"})
    golden = spec_record(
        topic="RealTopic",
        body=b"payload",
        props=props,
        queue_id=3,
        flag=7,
        queue_offset=41,
        phy_offset=123456,
        sys_flag=MessageSysFlag.COMPRESSED,
        reconsume=1,
    )
    message = decode_record(golden)
    assert encode_record(message) == golden
    # what the broker changes before sending it: the real topic and queue, the check count
    message.topic, message.queue_id = "Other", 0
    message.properties["TRANSACTION_CHECK_TIMES"] = "3"
    again = decode_record(encode_record(message))
    assert (again.topic, again.queue_id, again.properties["TRANSACTION_CHECK_TIMES"]) == ("Other", 0, "3")
    assert again.body == b"payload" and again.physical_offset == 123456


def test_end_transaction_header_has_javas_field_names():
    header = EndTransactionHeader("pg", 5, 1024, TransactionState.ROLLBACK, True, "MSGID", "TXID")
    fields = header.to_ext_fields()
    assert fields == {
        "producerGroup": "pg",
        "tranStateTableOffset": "5",
        "commitLogOffset": "1024",
        "commitOrRollback": "12",
        "fromTransactionCheck": "true",
        "msgId": "MSGID",
        "transactionId": "TXID",
    }
    assert EndTransactionHeader.from_ext_fields(fields) == header
    # Java leaves fromTransactionCheck and transactionId out when unset
    del fields["fromTransactionCheck"], fields["transactionId"]
    plain = EndTransactionHeader.from_ext_fields(fields)
    assert plain.from_transaction_check is False and plain.transaction_id is None
    # Java's broker reads Boolean.parseBoolean; the C++ client streams its bool as 1 or 0
    assert EndTransactionHeader.from_ext_fields({**fields, "fromTransactionCheck": "1"}).from_transaction_check
    for other in ("0", "false", "yes"):
        assert not EndTransactionHeader.from_ext_fields(
            {**fields, "fromTransactionCheck": other}
        ).from_transaction_check
    with pytest.raises(BadRequest, match="'tranStateTableOffset' is 'x', expected an integer"):
        EndTransactionHeader.from_ext_fields({**fields, "tranStateTableOffset": "x"})


def test_check_transaction_state_header_round_trip():
    header = CheckTransactionStateHeader(9, 2048, "UNIQ", "UNIQ", "0A00000100002A9F0000000000000800")
    assert header.to_ext_fields()["offsetMsgId"] == "0A00000100002A9F0000000000000800"
    assert CheckTransactionStateHeader.from_ext_fields(header.to_ext_fields()) == header
    assert "msgId" not in CheckTransactionStateHeader(1, 2).to_ext_fields()


def test_op_body_is_the_half_offset_in_ascii():
    assert encode_op_body(1234) == b"1234"
    assert decode_op_body(b"1234") == 1234
    assert decode_op_body(b"12,13") is None and decode_op_body(b"\xff") is None


@pytest.mark.parametrize(
    "properties, prepared",
    [
        ({"TRAN_MSG": "true", "PGROUP": "g"}, True),
        ({"PGROUP": "g", "TRAN_MSG": "true"}, True),
        ({"TRAN_MSG": "false"}, False),
        ({"TRAN_MSG": "trueish"}, False),
        ({"MY_TRAN_MSG": "true"}, False),
        ({"KEYS": "TRAN_MSG\x01true"[:-1]}, False),
        ({}, False),
    ],
)
def test_what_makes_a_half_message(properties, prepared):
    assert is_prepared(encode_properties(properties).decode()) is prepared


def test_transaction_bits_of_sys_flag():
    flag = MessageSysFlag.COMPRESSED | MessageSysFlag.TRANSACTION_PREPARED_TYPE
    assert reset_transaction_value(flag, MessageSysFlag.TRANSACTION_COMMIT_TYPE) == MessageSysFlag.COMPRESSED | 0x8
    assert reset_transaction_value(flag, MessageSysFlag.TRANSACTION_NOT_TYPE) == MessageSysFlag.COMPRESSED
    assert MessageProperty.TRANSACTION_PREPARED == "TRAN_MSG"
