"""Requests a RocketMQ client (or a broker, to a name server) sends, built by hand from SPEC.md
section 4 rather than with the SDK under test, and the stored records a pull answers with."""

from __future__ import annotations

import json
import struct
import zlib

from rmq.net import RemotingClient, RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.message import encode_properties
from rmq.protocol.record import StoredMessage, decode_records
from rmq.protocol.send_header import V2

TIMEOUT = 5.0


def send_request(
    topic: str,
    body: bytes,
    *,
    code: int = RequestCode.SEND_MESSAGE_V2,
    queue_id: int = 0,
    tags: str | None = None,
    keys: str | None = None,
    properties: dict | None = None,
    default_topic: str = "TBW102",
    group: str = "test-producer",
) -> RemotingCommand:
    props = dict(properties or {})
    if tags is not None:
        props["TAGS"] = tags
    if keys is not None:
        props["KEYS"] = keys
    fields = {
        "producerGroup": group,
        "topic": topic,
        "defaultTopic": default_topic,
        "defaultTopicQueueNums": 4,
        "queueId": queue_id,
        "sysFlag": 0,
        "bornTimestamp": 1700000000000,
        "flag": 0,
        "properties": encode_properties(props).decode(),
        "reconsumeTimes": 0,
        "unitMode": False,
    }
    if code != RequestCode.SEND_MESSAGE:
        fields = {V2[k]: v for k, v in fields.items()}
    return RemotingCommand.request(code, fields, body)


def batch_body(messages: list[tuple[bytes, dict]]) -> bytes:
    """A SEND_BATCH_MESSAGE body: each message as [total][magic 0][crc 0][flag 0][bodyLen] body
    [propsLen] properties."""
    out = bytearray()
    for body, props in messages:
        p = encode_properties(props)
        total = 20 + len(body) + 2 + len(p)
        out += struct.pack(">iiiii", total, 0, 0, 0, len(body)) + body + struct.pack(">h", len(p)) + p
    return bytes(out)


def pull_request(
    topic: str,
    queue_id: int,
    offset: int,
    *,
    group: str = "test-consumer",
    subscription: str = "*",
    suspend_ms: int = 0,
    max_msgs: int = 32,
    commit_offset: int | None = None,
    expression_type: str = "TAG",
) -> RemotingCommand:
    sys_flag = 4  # the subscription is in the request
    if suspend_ms:
        sys_flag |= 2  # long poll
    if commit_offset is not None:
        sys_flag |= 1  # commit this offset too
    return RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": group,
            "topic": topic,
            "queueId": queue_id,
            "queueOffset": offset,
            "maxMsgNums": max_msgs,
            "sysFlag": sys_flag,
            "commitOffset": commit_offset or 0,
            "suspendTimeoutMillis": suspend_ms,
            "subscription": subscription,
            "subVersion": 0,
            "expressionType": expression_type,
        },
    )


def offset_request(code: int, topic: str, queue_id: int, group: str = "G", **extra) -> RemotingCommand:
    """QUERY_CONSUMER_OFFSET / UPDATE_CONSUMER_OFFSET (with ``commitOffset=...``) of a group's queue."""
    return RemotingCommand.request(code, {"consumerGroup": group, "topic": topic, "queueId": queue_id, **extra})


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


def update_topic_request(topic: str, queues: int = 4, order: bool = False) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC, as ``rmq-admin topic create`` sends it."""
    return RemotingCommand.request(
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        {
            "topic": topic,
            "readQueueNums": queues,
            "writeQueueNums": queues,
            "perm": 6,
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": 0,
            "order": order,
        },
    )


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


def records(body) -> list[StoredMessage]:
    """The stored records of a pull response body, decoded (CRC checked)."""
    return decode_records(bytes(body), check_crc=True)


def call(client: RemotingClient, addr: str, request: RemotingCommand, timeout: float = TIMEOUT) -> RemotingCommand:
    return client.invoke_sync(addr, request, timeout)


def pull_all(client: RemotingClient, addr: str, topic: str, queues: int) -> list[StoredMessage]:
    """Every message of queues ``0..queues-1`` of ``topic`` on ``addr``, pulled from offset 0."""
    found: list[StoredMessage] = []
    for queue_id in range(queues):
        offset = 0
        while True:
            answer = call(client, addr, pull_request(topic, queue_id, offset, max_msgs=1000))
            if answer.code != ResponseCode.SUCCESS:
                break
            found += records(answer.body)
            offset = int(answer.ext_fields["nextBeginOffset"])
    return found
