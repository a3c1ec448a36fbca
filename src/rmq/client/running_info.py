"""What a consumer tells an admin about itself through a broker (Java's ClientRemotingProcessor):
GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309), with 4.x's bodies
(``rmq.protocol.running_info``).

The running info is Java's: ``properties`` (the consumer's settings in camelCase, and the PROP_
keys mqadmin consumerStatus reads), ``subscriptionSet``, ``mqTable`` (each queue this consumer
holds: its committed offset and what is cached, ProcessQueueInfo) and, with jstackEnable, every
thread's stack (Python's, in jstack's place). ``statusTable`` (per topic pull and consume rates)
is left empty: the SDK keeps no such rates.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import threading
import traceback
from typing import Any

from rmq.net.frame import VERSION
from rmq.protocol.admin_body import encode_with_mq_tables
from rmq.protocol.message_queue import MessageQueue
from rmq.protocol.running_info import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
    PROP_THREADPOOL_CORE_SIZE,
)

# settings never shown to an admin
SECRET_FIELDS = frozenset({"credentials", "tls"})


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _text(value: Any) -> str:
    return value.name if isinstance(value, enum.Enum) else str(value)


def consumer_properties(
    config: Any, group: str, consume_type: str, orderly: bool, start_timestamp: int
) -> dict[str, str]:
    """Java's object2Properties of the consumer (its settings, camelCase, secrets left out) and
    the PROP_ keys."""
    properties = {
        camel(f.name): _text(getattr(config, f.name)) for f in dataclasses.fields(config) if f.name not in SECRET_FIELDS
    }
    properties.update(
        {
            "consumerGroup": group,
            PROP_NAMESERVER_ADDR: config.namesrv_addr,
            PROP_CONSUME_TYPE: consume_type,
            PROP_CONSUME_ORDERLY: str(orderly).lower(),
            PROP_THREADPOOL_CORE_SIZE: str(getattr(config, "consume_thread_max", 0)),
            PROP_CLIENT_VERSION: str(VERSION),
            PROP_CONSUMER_START_TIMESTAMP: str(start_timestamp),
        }
    )
    return properties


def thread_dump() -> str:
    """Every thread's stack, jstack's place in the running info."""
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        stack = "".join(traceback.format_stack(frame))
        parts.append(f'"{names.get(ident, ident)}"\n{stack}')
    return "\n".join(parts)


def running_info_body(
    properties: dict[str, str],
    subscriptions: list[dict[str, Any]],
    mq_table: dict[MessageQueue, dict[str, Any]],
    jstack: bool = False,
) -> bytes:
    """ConsumerRunningInfo's JSON, its mqTable keyed by queues as fastjson writes them."""
    fields: dict[str, Any] = {"properties": properties, "subscriptionSet": subscriptions, "statusTable": {}}
    if jstack:
        fields["jstack"] = thread_dump()
    return encode_with_mq_tables(fields, {"mqTable": mq_table})
