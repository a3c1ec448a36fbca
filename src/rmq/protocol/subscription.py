"""What a consumer subscribed to, and whether a message matches it (RocketMQ's SubscriptionData,
FilterAPI and ExpressionMessageFilter, tag flavour).

A TAG expression is ``*`` (or empty: everything) or tags joined by ``||`` with optional whitespace
(``"TagA || TagB"``). Matching is two-step, as in RocketMQ: the pull first compares the 8-byte
tagsCode of each ConsumeQueue entry (``java_string_hash(tag)``, written by the store) against the
codes of the subscribed tags, which costs no CommitLog read; since two tags can share a hash, the
tag of a message that passed is then compared exactly (RocketMQ leaves that step to the client;
``is_matched_by_tag`` lets the broker do it).

An SQL92 expression (``rmq.protocol.sql92``) is checked when the subscription is built, so a client
learns of a bad one at ``subscribe`` and a broker answers SUBSCRIPTION_PARSE_FAILED naming where it
is wrong; the broker filters by it only with enablePropertyFilter.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from rmq.errors import RequestRefused
from rmq.protocol.codes import ResponseCode
from rmq.protocol.message import java_string_hash
from rmq.protocol.sql92 import SqlFilter, SqlFilterError, compile_sql92

SUB_ALL = "*"
TAG_SEPARATOR = "||"


class ExpressionType:
    TAG = "TAG"
    SQL92 = "SQL92"


@dataclasses.dataclass
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: frozenset[str] = frozenset()
    code_set: frozenset[int] = frozenset()
    # The client's subscription timestamp: a newer version replaces an older one in a group.
    sub_version: int = 0
    expression_type: str = ExpressionType.TAG
    class_filter_mode: bool = False

    @property
    def sub_all(self) -> bool:
        return self.expression_type == ExpressionType.TAG and self.sub_string == SUB_ALL

    def is_matched_by_tags_code(self, tags_code: int | None) -> bool:
        """First-pass filter on a ConsumeQueue entry's tagsCode (None: the entry has none)."""
        if tags_code is None or self.class_filter_mode or self.sub_all:
            return True
        if self.expression_type != ExpressionType.TAG:
            return True  # not filtered here (SQL92 is refused when the subscription is built)
        return tags_code in self.code_set

    def is_matched_by_tag(self, tag: str | None) -> bool:
        """Exact check of a message's TAGS property (None: the message has no tag)."""
        if self.sub_all or self.expression_type != ExpressionType.TAG:
            return True
        return tag is not None and tag in self.tags_set

    def to_json(self) -> dict[str, Any]:
        """The heartbeat/admin JSON shape of RocketMQ's SubscriptionData."""
        return {
            "classFilterMode": self.class_filter_mode,
            "topic": self.topic,
            "subString": self.sub_string,
            "tagsSet": sorted(self.tags_set),
            "codeSet": sorted(self.code_set),
            "subVersion": self.sub_version,
            "expressionType": self.expression_type,
        }


def build_subscription_data(
    topic: str,
    sub_string: str | None,
    expression_type: str | None = ExpressionType.TAG,
    sub_version: int | None = None,
) -> SubscriptionData:
    """Parse a subscription expression; raises RequestRefused (SUBSCRIPTION_PARSE_FAILED) for
    an expression that does not parse (an SQL92 one, with its position; a TAG list with no tag) or
    of an unknown type."""
    version = int(time.time() * 1000) if sub_version is None else sub_version
    expression_type = (expression_type or ExpressionType.TAG).strip().upper()
    if expression_type == ExpressionType.SQL92:
        text = (sub_string or "").strip()
        sql92_filter(topic, text)
        return SubscriptionData(topic, text, sub_version=version, expression_type=ExpressionType.SQL92)
    if expression_type != ExpressionType.TAG:
        raise RequestRefused(
            ResponseCode.SUBSCRIPTION_PARSE_FAILED,
            f"subscription to {topic!r}: unknown expression type {expression_type!r}, expected TAG or SQL92",
        )
    text = (sub_string or "").strip()
    if not text or text == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL, sub_version=version)
    tags = [tag.strip() for tag in text.split(TAG_SEPARATOR)]
    tags = [tag for tag in tags if tag]
    if not tags:
        raise RequestRefused(
            ResponseCode.SUBSCRIPTION_PARSE_FAILED,
            f"subscription to {topic!r}: {sub_string!r} names no tag; expected '*' or 'TagA || TagB'",
        )
    return SubscriptionData(
        topic,
        text,
        frozenset(tags),
        frozenset(java_string_hash(tag) for tag in tags),
        sub_version=version,
    )


def sql92_filter(topic: str, expression: str) -> SqlFilter:
    """The compiled filter of an SQL92 subscription; raises RequestRefused
    (SUBSCRIPTION_PARSE_FAILED) naming the position when the expression does not parse."""
    try:
        return compile_sql92(expression)
    except SqlFilterError as exc:
        raise RequestRefused(ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"subscription to {topic!r}: {exc}") from None
