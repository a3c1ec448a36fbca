"""Topic attributes (RocketMQ 5.x's TopicAttributes) and the message types they allow on a topic.

UPDATE_AND_CREATE_TOPIC carries them in its ``attributes`` field, as 5.x's mqadmin sends them:

    attributes = "+message.type=FIFO"        "+key=value" sets, "-key" removes; comma-separated

and a topic config keeps them as ``"attributes": {"message.type": "FIFO"}``. One attribute exists so
far: ``message.type`` (TOPIC_MESSAGE_TYPE_ATTRIBUTE), NORMAL when unset. A send's type is read from
its properties (TopicMessageType.parseFromMessageProperty): TRAN_MSG=true is TRANSACTION, a DELAY
level or a TIMER_* property DELAY, a __SHARDINGKEY (a 5.x message group) FIFO, anything else NORMAL.
A topic of type MIXED takes every type.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from rmq.protocol.message import MessageProperty

MESSAGE_TYPE_ATTRIBUTE = "message.type"
_ADD = "+"
_DELETE = "-"


class TopicMessageType(str, enum.Enum):
    UNSPECIFIED = "UNSPECIFIED"
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"


# the values ``message.type`` may be set to (TopicAttributes' enum attribute)
SETTABLE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")


def message_type_of(properties: Mapping[str, str]) -> TopicMessageType:
    """A message's type by its properties (RocketMQ 5.x's TopicMessageType.parseFromMessageProperty)."""
    if properties.get(MessageProperty.TRANSACTION_PREPARED) == "true":
        return TopicMessageType.TRANSACTION
    if (
        MessageProperty.DELAY_TIME_LEVEL in properties
        or MessageProperty.TIMER_DELIVER_MS in properties
        or MessageProperty.TIMER_DELAY_SEC in properties
        or MessageProperty.TIMER_DELAY_MS in properties
    ):
        return TopicMessageType.DELAY
    if MessageProperty.SHARDING_KEY in properties:
        return TopicMessageType.FIFO
    return TopicMessageType.NORMAL


def topic_message_type(attributes: Mapping[str, str] | None) -> TopicMessageType:
    """A topic's type by its attributes: NORMAL when unset (TopicConfig.getTopicMessageType)."""
    value = (attributes or {}).get(MESSAGE_TYPE_ATTRIBUTE)
    return TopicMessageType(value) if value in SETTABLE_TYPES else TopicMessageType.NORMAL


def type_conflict(topic_type: TopicMessageType, message_type: TopicMessageType) -> str | None:
    """Why a message of ``message_type`` may not go to a topic of ``topic_type``, or None when it may
    (DefaultTopicMessageTypeValidator)."""
    if message_type is TopicMessageType.UNSPECIFIED or (
        message_type is not topic_type and topic_type is not TopicMessageType.MIXED
    ):
        return (
            f"TopicMessageType validate failed, the expected type is {topic_type.value}, "
            f"but actual type is {message_type.value}"
        )
    return None


def parse_attribute_changes(text: str) -> tuple[dict[str, str], set[str]]:
    """``"+message.type=FIFO,-other"`` -> ({"message.type": "FIFO"}, {"other"}); ValueError saying
    what is wrong (an unknown key, a value not allowed, an entry without + or -)."""
    added: dict[str, str] = {}
    deleted: set[str] = set()
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        sign, body = entry[0], entry[1:]
        if sign == _ADD:
            key, sep, text = body.partition("=")
            if not sep:
                raise ValueError(f"attribute {entry!r} has no value: expected +key=value")
            added[key] = text
        elif sign == _DELETE:
            key = body
            deleted.add(key)
        else:
            raise ValueError(f"attribute {entry!r} must start with + (set) or - (remove)")
        if key != MESSAGE_TYPE_ATTRIBUTE:
            raise ValueError(f"unknown topic attribute {key!r}: the only one is {MESSAGE_TYPE_ATTRIBUTE}")
    value = added.get(MESSAGE_TYPE_ATTRIBUTE)
    if value is not None and value not in SETTABLE_TYPES:
        raise ValueError(f"{MESSAGE_TYPE_ATTRIBUTE}={value} is not one of {', '.join(SETTABLE_TYPES)}")
    return added, deleted


def format_attribute_changes(attributes: Mapping[str, str]) -> str:
    """The ``attributes`` field that sets ``attributes`` (rmq-admin topic create --type)."""
    return ",".join(f"{_ADD}{key}={value}" for key, value in attributes.items())
