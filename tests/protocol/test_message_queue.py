"""Message queues on the wire: LOCK_BATCH_MQ request bodies and lock results."""

from __future__ import annotations

import json

import pytest

from rmq.errors import RequestRefused
from rmq.protocol.message_queue import MessageQueue, encode_lock_batch_result, parse_lock_batch_body

Q0, Q1 = (MessageQueue("T", "broker-a", i) for i in range(2))


def test_wire_bodies():
    request = parse_lock_batch_body(
        json.dumps(
            {
                "consumerGroup": "G",
                "clientId": "c1",
                "onlyThisBroker": False,
                "mqSet": [
                    {"topic": "T", "brokerName": "broker-a", "queueId": 1},
                    {"topic": "T", "brokerName": "broker-a", "queueId": 0},
                ],
            }
        ).encode()
    )
    assert (request.consumer_group, request.client_id, request.mqs) == ("G", "c1", {Q0, Q1})
    assert json.loads(encode_lock_batch_result({Q1, Q0})) == {
        "lockOKMQSet": [
            {"topic": "T", "brokerName": "broker-a", "queueId": 0},
            {"topic": "T", "brokerName": "broker-a", "queueId": 1},
        ]
    }
    with pytest.raises(RequestRefused, match="malformed lock request body"):
        parse_lock_batch_body(b'{"clientId": "c1"}')
