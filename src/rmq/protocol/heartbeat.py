"""HEART_BEAT (34) bodies (docs/protocol.md#clients-and-groups) parsed into typed data.

    {"clientID": "...",
     "consumerDataSet": [{"groupName", "consumeType", "messageModel", "consumeFromWhere",
                          "unitMode", "subscriptionDataSet": [{"topic", "subString", "subVersion",
                                                               "tagsSet", "codeSet", "expressionType"}]}],
     "producerDataSet": [{"groupName"}]}

Real clients disagree on enum spelling: the C++ core sends ordinals (``"consumeType": 1``), Java and
Node send names (``"CONSUME_PASSIVELY"``). Both are accepted, and give the same enum members.
Tag codes are recomputed from ``subString`` with Java's String.hashCode, the hash the store writes
into ConsumeQueue entries, rather than trusted from the client.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any, TypeVar

from rmq.errors import RequestRefused
from rmq.protocol.codes import ResponseCode
from rmq.protocol.subscription import (
    ExpressionType,
    SubscriptionData,
    build_subscription_data,
)


class ConsumeType(enum.IntEnum):
    CONSUME_ACTIVELY = 0  # pull consumer ("PULL")
    CONSUME_PASSIVELY = 1  # push consumer ("PUSH")


class MessageModel(enum.IntEnum):
    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(enum.IntEnum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


# ConsumeType's display names in RocketMQ (ConsumeType.getTypeCN).
_ALIASES: dict[type[enum.IntEnum], dict[str, enum.IntEnum]] = {
    ConsumeType: {"PULL": ConsumeType.CONSUME_ACTIVELY, "PUSH": ConsumeType.CONSUME_PASSIVELY},
}


@dataclasses.dataclass
class ConsumerData:
    group_name: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    subscriptions: list[SubscriptionData]
    unit_mode: bool = False


@dataclasses.dataclass
class HeartbeatData:
    client_id: str
    consumer_data_set: list[ConsumerData]
    producer_groups: list[str]


def _refuse(reason: str) -> RequestRefused:
    return RequestRefused(ResponseCode.SYSTEM_ERROR, f"malformed heartbeat: {reason}")


E = TypeVar("E", bound=enum.IntEnum)


def parse_enum(kind: type[E], value: Any, field: str) -> E:
    """An enum member from its ordinal (int or digit string) or its name."""
    try:
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, int):
            return kind(value)
        text = str(value).strip()
        if text.lstrip("-").isdigit():
            return kind(int(text))
        alias = _ALIASES.get(kind, {}).get(text.upper())
        return kind(alias) if alias is not None else kind[text.upper()]
    except (ValueError, KeyError):
        names = ", ".join(m.name for m in kind)
        raise _refuse(f"{field} must be one of {names} or their ordinals 0-{len(kind) - 1}, got {value!r}") from None


def _subscription(obj: Any) -> SubscriptionData:
    if not isinstance(obj, dict) or not isinstance(obj.get("topic"), str):
        raise _refuse(f"a subscription needs a topic, got {obj!r}")
    expression_type = str(obj.get("expressionType") or ExpressionType.TAG).upper()
    sub_version = int(obj.get("subVersion") or 0)
    if expression_type != ExpressionType.TAG:
        # Registered as it is, so the group is known; a pull with it is refused.
        return SubscriptionData(
            obj["topic"], str(obj.get("subString") or ""), sub_version=sub_version, expression_type=expression_type
        )
    sub_string = obj.get("subString")
    if sub_string is not None and not isinstance(sub_string, str):
        raise _refuse(f"subString of a subscription to {obj['topic']!r} must be a string, got {sub_string!r}")
    if sub_string is None and obj.get("tagsSet"):
        sub_string = " || ".join(obj["tagsSet"])
    return build_subscription_data(obj["topic"], sub_string, ExpressionType.TAG, sub_version)


def _consumer(obj: Any) -> ConsumerData:
    if not isinstance(obj, dict) or not isinstance(obj.get("groupName"), str):
        raise _refuse(f"consumer data needs a groupName, got {obj!r}")
    return ConsumerData(
        group_name=obj["groupName"],
        consume_type=parse_enum(ConsumeType, obj.get("consumeType", 1), "consumeType"),
        message_model=parse_enum(MessageModel, obj.get("messageModel", 1), "messageModel"),
        consume_from_where=parse_enum(ConsumeFromWhere, obj.get("consumeFromWhere", 0), "consumeFromWhere"),
        subscriptions=[_subscription(s) for s in obj.get("subscriptionDataSet") or []],
        unit_mode=bool(obj.get("unitMode", False)),
    )


def parse_heartbeat(body: bytes | str | None) -> HeartbeatData:
    """The heartbeat in ``body``; raises RequestRefused (SYSTEM_ERROR) saying what is wrong."""
    if not body:
        raise _refuse("the body is empty")
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise _refuse(f"the body is not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise _refuse(f"expected a JSON object, got {type(obj).__name__}")
    client_id = obj.get("clientID")
    if not isinstance(client_id, str) or not client_id:
        raise _refuse("clientID is missing")
    consumers = obj.get("consumerDataSet") or []
    producers = obj.get("producerDataSet") or []
    if not isinstance(consumers, list) or not isinstance(producers, list):
        raise _refuse("consumerDataSet and producerDataSet must be lists")
    try:
        consumer_data = [_consumer(c) for c in consumers]
    except RequestRefused as e:
        if e.code != ResponseCode.SUBSCRIPTION_PARSE_FAILED:
            raise
        raise _refuse(e.remark) from None
    except (TypeError, ValueError) as e:  # e.g. a subVersion that is not a number
        raise _refuse(f"consumerDataSet: {e}") from None
    producer_groups = []
    for p in producers:
        if not isinstance(p, dict) or not isinstance(p.get("groupName"), str):
            raise _refuse(f"producer data needs a groupName, got {p!r}")
        producer_groups.append(p["groupName"])
    return HeartbeatData(client_id, consumer_data, producer_groups)
