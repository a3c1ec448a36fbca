"""Requests a RocketMQ client (or a broker, to a name server) sends, built by hand from docs/protocol.md
section 4 rather than with the SDK under test, and the stored records a pull answers with."""

from __future__ import annotations

import json
import struct
import zlib

from rmq.net import RemotingCommand
from rmq.protocol.codes import RequestCode
from rmq.protocol.message import encode_properties
from tests.helpers import harness

TIMEOUT = harness.TIMEOUT
send_request = harness.send_request
pull_request = harness.pull_request
offset_request = harness.offset_request
update_topic_request = harness.update_topic_request
records = harness.records
call = harness.call
pull_all = harness.pull_all


def batch_body(messages: list[tuple[bytes, dict]]) -> bytes:
    """A SEND_BATCH_MESSAGE body: each message as [total][magic 0][crc 0][flag 0][bodyLen] body
    [propsLen] properties."""
    out = bytearray()
    for body, props in messages:
        p = encode_properties(props)
        total = 20 + len(body) + 2 + len(p)
        out += struct.pack(">iiiii", total, 0, 0, 0, len(body)) + body + struct.pack(">h", len(p)) + p
    return bytes(out)


def heartbeat_request(
    client_id: str, group: str, topic: str, *, ordinals: bool = False, sub: str = "*"
) -> RemotingCommand:
    """A consumer's HEART_BEAT, with Java's enum names or (``ordinals``) the C++ client's numbers."""
    consumer = {
        "groupName": group,
        "consumeType": "CONSUME_PASSIVELY",
        "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
        "subscriptionDataSet": [{"topic": topic, "subString": sub, "subVersion": 1}],
    }
    if ordinals:
        consumer.update(consumeType=1, messageModel=1, consumeFromWhere=4)
    body = {"clientID": client_id, "consumerDataSet": [consumer], "producerDataSet": [{"groupName": "P"}]}
    return RemotingCommand.request(RequestCode.HEART_BEAT, {}, json.dumps(body).encode())


def topic_config_wrapper(topics: dict[str, int], counter: int = 1) -> dict:
    """A REGISTER_BROKER body's topicConfigSerializeWrapper for ``topics`` ({name: queue count})."""
    return {
        "topicConfigTable": {
            t: {
                "topicName": t,
                "readQueueNums": n,
                "writeQueueNums": n,
                "perm": 6,
                "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": 0,
                "order": False,
            }
            for t, n in topics.items()
        },
        "dataVersion": {"timestamp": 1700000000000, "counter": counter},
    }


def register_broker_request(
    broker_addr: str, topics: dict[str, int], broker_name: str = "broker-a", broker_id: int = 0, counter: int = 1
) -> RemotingCommand:
    """REGISTER_BROKER of a broker serving ``topics`` ({name: queue count}), with its body's CRC."""
    body = json.dumps(
        {"topicConfigSerializeWrapper": topic_config_wrapper(topics, counter), "filterServerList": []}
    ).encode()
    return RemotingCommand.request(
        RequestCode.REGISTER_BROKER,
        ext_fields={
            "brokerName": broker_name,
            "brokerAddr": broker_addr,
            "clusterName": "DefaultCluster",
            "haServerAddr": broker_addr.rsplit(":", 1)[0] + ":10912",
            "brokerId": str(broker_id),
            "compressed": "false",
            "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
        },
        body=body,
    )


def route_request(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
