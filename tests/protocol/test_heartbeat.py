"""HEART_BEAT bodies: both enum spellings, clear errors for malformed ones."""

import json

import pytest

from rmq.errors import RequestRefused
from rmq.protocol.codes import ResponseCode
from rmq.protocol.heartbeat import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    parse_heartbeat,
)
from rmq.protocol.message import java_string_hash


def body(consume_type, message_model, consume_from_where, sub_string="TagA || TagB", **extra):
    return json.dumps(
        {
            "clientID": "127.0.0.1@1234",
            "consumerDataSet": [
                {
                    "groupName": "G",
                    "consumeType": consume_type,
                    "messageModel": message_model,
                    "consumeFromWhere": consume_from_where,
                    "unitMode": False,
                    "subscriptionDataSet": [
                        {
                            "topic": "T",
                            "subString": sub_string,
                            "subVersion": 1700000000000,
                            "tagsSet": ["TagA", "TagB"],
                            "codeSet": [1, 2],
                            **extra,
                        }
                    ],
                }
            ],
            "producerDataSet": [{"groupName": "P"}, {"groupName": "CLIENT_INNER_PRODUCER"}],
        }
    ).encode()


def test_ordinals_and_names_give_the_same_heartbeat():
    by_ordinal = parse_heartbeat(body(1, 1, 4))  # the C++ client
    by_name = parse_heartbeat(body("CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET"))  # Java, Node
    assert by_ordinal == by_name
    consumer = by_name.consumer_data_set[0]
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model is MessageModel.CLUSTERING
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert by_name.client_id == "127.0.0.1@1234"
    assert by_name.producer_groups == ["P", "CLIENT_INNER_PRODUCER"]
    sub = consumer.subscriptions[0]
    # codes come from Java's hash of the tags, not from what the client sent
    assert sub.code_set == {java_string_hash("TagA"), java_string_hash("TagB")}
    assert sub.sub_version == 1700000000000


def test_other_spellings():
    hb = parse_heartbeat(body("0", "BROADCASTING", "consume_from_timestamp", sub_string="*"))
    consumer = hb.consumer_data_set[0]
    assert consumer.consume_type is ConsumeType.CONSUME_ACTIVELY
    assert consumer.message_model is MessageModel.BROADCASTING
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
    assert consumer.subscriptions[0].sub_all
    assert parse_heartbeat(body("PUSH", 1, 0)).consumer_data_set[0].consume_type is ConsumeType.CONSUME_PASSIVELY


def test_producer_only_heartbeat():
    hb = parse_heartbeat(b'{"clientID":"c1","consumerDataSet":[],"producerDataSet":[{"groupName":"P"}]}\n')
    assert hb.consumer_data_set == [] and hb.producer_groups == ["P"]


def test_sql92_subscription_is_registered_not_filtered():
    hb = parse_heartbeat(body(1, 1, 0, sub_string="a > 1", expressionType="SQL92"))
    sub = hb.consumer_data_set[0].subscriptions[0]
    assert sub.expression_type == "SQL92" and sub.sub_string == "a > 1"


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"", "the body is empty"),
        (b"{not json", "the body is not JSON"),
        (b"[1]", "expected a JSON object, got list"),
        (b'{"consumerDataSet":[]}', "clientID is missing"),
        (body(7, 1, 0), "consumeType must be one of CONSUME_ACTIVELY, CONSUME_PASSIVELY or their ordinals 0-1, got 7"),
        (body(1, "CLUSTER", 0), "messageModel must be one of BROADCASTING, CLUSTERING"),
        (body(1, 1, 0, sub_string="||"), "names no tag"),
        # found by perf/fuzz_broker.py: a number for subString failed the processor
        (body(1, 1, 0, sub_string=5), "subString of a subscription to 'T' must be a string, got 5"),
        (b'{"clientID":"c","consumerDataSet":[{"consumeType":1}]}', "consumer data needs a groupName"),
        (b'{"clientID":"c","producerDataSet":[{}]}', "producer data needs a groupName"),
    ],
)
def test_malformed_heartbeats_are_refused_clearly(raw, message):
    with pytest.raises(RequestRefused) as e:
        parse_heartbeat(raw)
    assert e.value.code == ResponseCode.SYSTEM_ERROR
    assert e.value.remark.startswith("malformed heartbeat: ")
    assert message in e.value.remark
