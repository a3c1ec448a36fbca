"""Requests a RocketMQ client sends, built by hand for the broker tests."""

from __future__ import annotations

import struct
import time

from rmq.net import RemotingClient, RemotingCommand
from rmq.protocol.codes import RequestCode
from rmq.protocol.message import encode_properties
from rmq.protocol.record import decode_record
from tests.conftest import wait_for_port

TIMEOUT = 5.0


def send_request(topic: str, body: bytes, *, code: int = RequestCode.SEND_MESSAGE_V2, queue_id: int = 0,
                 tags: str | None = None, keys: str | None = None, properties: dict | None = None,
                 default_topic: str = "TBW102", group: str = "test-producer") -> RemotingCommand:
    props = dict(properties or {})
    if tags is not None:
        props["TAGS"] = tags
    if keys is not None:
        props["KEYS"] = keys
    fields = {"producerGroup": group, "topic": topic, "defaultTopic": default_topic, "defaultTopicQueueNums": 4,
              "queueId": queue_id, "sysFlag": 0, "bornTimestamp": 1700000000000, "flag": 0,
              "properties": encode_properties(props).decode(), "reconsumeTimes": 0, "unitMode": False}
    if code != RequestCode.SEND_MESSAGE:
        short = dict(zip(("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
                          "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode"), "abcdefghijk"))
        fields = {short[k]: v for k, v in fields.items()}
    return RemotingCommand.request(code, fields, body)


def batch_body(messages: list[tuple[bytes, dict]]) -> bytes:
    out = bytearray()
    for body, props in messages:
        p = encode_properties(props)
        total = 20 + len(body) + 2 + len(p)
        out += struct.pack(">iiiii", total, 0, 0, 0, len(body)) + body + struct.pack(">h", len(p)) + p
    return bytes(out)


def pull_request(topic: str, queue_id: int, offset: int, *, group: str = "test-consumer", subscription: str = "*",
                 suspend_ms: int = 0, max_msgs: int = 32, commit_offset: int | None = None,
                 expression_type: str = "TAG") -> RemotingCommand:
    sys_flag = 4
    if suspend_ms:
        sys_flag |= 2
    if commit_offset is not None:
        sys_flag |= 1
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset,
        "maxMsgNums": max_msgs, "sysFlag": sys_flag, "commitOffset": commit_offset or 0,
        "suspendTimeoutMillis": suspend_ms, "subscription": subscription, "subVersion": 0,
        "expressionType": expression_type})


def records(body) -> list:
    """The stored records of a pull response body, decoded."""
    data = bytes(body)
    out = []
    pos = 0
    while pos < len(data):
        size = struct.unpack_from(">i", data, pos)[0]
        out.append(decode_record(data[pos:pos + size]))
        pos += size
    return out


def call(client: RemotingClient, addr: str, request: RemotingCommand, timeout: float = TIMEOUT) -> RemotingCommand:
    return client.invoke_sync(addr, request, timeout)


def create_topic(broker, topic: str, queues: int = 4) -> None:
    """Create ``topic`` on an in-process broker, as UPDATE_AND_CREATE_TOPIC would."""
    from rmq.broker.topic_config import TopicConfig
    broker.topic_config_manager.update_topic_config(TopicConfig(topic, queues, queues))


def start_process(spawn, settings: dict[str, str]):
    """Run ``rmq-broker`` (python -m rmq.cli.broker) with ``--set`` settings; returns (process, address)
    once it accepts connections."""
    args = ["-m", "rmq.cli.broker"]
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    proc = spawn(*args)
    wait_for_port(int(settings["listenPort"]), timeout=20, proc=proc)
    addr = f"127.0.0.1:{settings['listenPort']}"
    # the port opens before the first registration ends: wait until the name server routes to it
    namesrv = settings.get("namesrvAddr", "").split(";")[0] or f"127.0.0.1:{settings['namesrvListenPort']}"
    wait_registered(namesrv, addr, proc)
    return proc, addr


def wait_registered(namesrv: str, broker_addr: str, proc, timeout: float = 20.0) -> None:
    """Until ``namesrv`` lists ``broker_addr`` in its cluster table (or the process exits)."""
    from rmq.client.admin_client import AdminClient

    deadline = time.monotonic() + timeout
    with AdminClient(namesrv, timeout=2.0) as admin:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"broker exited with {proc.returncode} before registering")
            try:
                tables = admin.cluster_info().get("brokerAddrTable") or {}
            except Exception:
                tables = {}
            if any(broker_addr in (data.get("brokerAddrs") or {}).values() for data in tables.values()):
                return
            time.sleep(0.02)
    raise TimeoutError(f"{broker_addr} did not register with {namesrv} within {timeout} s")
