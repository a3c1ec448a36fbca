"""Reading a request's header fields (extFields, always strings on arrival) and JSON bodies, with one
rule for brokers and name servers: a field that cannot be used is refused with SYSTEM_ERROR and a
remark naming the field, what it was and what was expected, as RocketMQ's header decoding does.
The refusal (``BadRequest``) becomes the response; the connection goes on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar, overload

from rmq.errors import RequestRefused
from rmq.protocol.codes import ResponseCode
from rmq.protocol.send_header import V2

T = TypeVar("T")
Buffer = bytes | bytearray | memoryview


class BadRequest(RequestRefused):
    """A request whose header or body is unusable: answered with SYSTEM_ERROR and the reason."""

    def __init__(self, remark: str):
        super().__init__(ResponseCode.SYSTEM_ERROR, remark)


# The number fields RocketMQ's request header classes declare Integer (32-bit, with their
# SEND_MESSAGE_V2 letters); every other number field is a Long (64-bit). A value out of its range is
# refused as Java's parseInt / parseLong refuse it: further in, these land in C ints and longs.
INT32_FIELDS = frozenset(
    {
        "queueId",
        "sysFlag",
        "flag",
        "reconsumeTimes",
        "maxReconsumeTimes",
        "defaultTopicQueueNums",
        "maxMsgNums",
        "maxNum",
        "delayLevel",
        "readQueueNums",
        "writeQueueNums",
        "perm",
        "topicSysFlag",
        "commitOrRollback",
    }
)
INT32_FIELDS |= {V2[name] for name in INT32_FIELDS if name in V2}
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_INT_RANGES = {32: (INT32_MIN, INT32_MAX), 64: (INT64_MIN, INT64_MAX)}


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


def malformed(name: str, value: object, expected: str) -> BadRequest:
    """The refusal for a header field that is missing (``value`` None) or cannot be used."""
    if value is None:
        return BadRequest(f"header field {name!r} is missing, expected {expected}")
    return BadRequest(f"header field {name!r} is {value!r}, expected {expected}")


@overload
def str_field(ext: Mapping[str, str], name: str) -> str: ...
@overload
def str_field(ext: Mapping[str, str], name: str, default: T) -> str | T: ...
def str_field(ext: Mapping[str, str], name: str, default: Any = REQUIRED) -> Any:
    """A non-empty string field; ``default`` when absent or empty, BadRequest when required."""
    value = ext.get(name)
    if value is None or value == "":
        if default is REQUIRED:
            raise malformed(name, None, "a value")
        return default
    return value


@overload
def int_field(ext: Mapping[str, str], name: str) -> int: ...
@overload
def int_field(ext: Mapping[str, str], name: str, default: T) -> int | T: ...
def int_field(ext: Mapping[str, str], name: str, default: Any = REQUIRED) -> Any:
    """An integer field; ``default`` when absent, BadRequest naming the field when malformed or out
    of the range of its Java type (``INT32_FIELDS``: 32-bit, any other: 64-bit)."""
    value = ext.get(name)
    if value is None or value == "":
        if default is REQUIRED:
            raise malformed(name, None, "an integer")
        return default
    bits = 32 if name in INT32_FIELDS else 64
    try:
        number = int(value)
    except ValueError:
        raise malformed(name, value, f"an integer of {bits} bits") from None
    low, high = _INT_RANGES[bits]
    if not low <= number <= high:
        raise malformed(name, value, f"an integer of {bits} bits")
    return number


def bool_field(ext: Mapping[str, str], name: str, default: bool = False) -> bool:
    """``true`` / ``false`` (any case); ``default`` when absent, BadRequest for anything else."""
    value = ext.get(name)
    if value is None or value == "":
        return default
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise malformed(name, value, "true or false")
    return text == "true"


def json_body(body: Buffer | None) -> Any:
    """The parsed JSON body (None when there is none); BadRequest when it is not JSON."""
    if not body:
        return None
    try:
        return json.loads(bytes(body))
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(f"body is not valid JSON: {e}") from None
