"""POP consumption's requests (docs/pop.md): RocketMQ 5.x's codes, header fields, the extraInfo a popped
message carries back, and the checkpoint / ack records the broker keeps in its revive topic. Shared by
the broker (rmq.broker.pop) and the gRPC proxy (rmq.proxy), which pops through the same requests.

    consumer -> broker
    POP_MESSAGE (200050) {consumerGroup, topic, queueId (-1: every queue of the topic on this broker,
        and the group's POP retry topic), maxMsgNums (<= 32), invisibleTime ms, pollTime ms, bornTime
        ms, initMode (0 MIN, 1 MAX), expType?, exp?, order?, attemptId?}
        -> {popTime, invisibleTime, reviveQid, restNum, startOffsetInfo?, msgOffsetInfo?,
        orderCountInfo?} + the messages as PULL_MESSAGE's body; each carries POP_CK = its extraInfo.
        Nothing to pop (at once, or when a long poll ends): POLLING_TIMEOUT; too many parked
        polls: POLLING_FULL. A message from the POP retry topic comes with the request's topic.
    ACK_MESSAGE (200051) {consumerGroup, topic, queueId, extraInfo, offset} -> {}
    CHANGE_MESSAGE_INVISIBLETIME (200053) {consumerGroup, topic, queueId, extraInfo, offset,
        invisibleTime} -> {popTime, invisibleTime, reviveQid}: the message's new extraInfo is built
        from these and the old one (``ExtraInfo.changed``)

extraInfo (ExtraInfoUtil, KEY_SEPARATOR " " between the fields)::

    ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId msgQueueOffset
    0             1       2             3         4     5          6       7

``retry``: "0" the topic itself, "1" its POP retry topic ``%RETRY%<group>_<topic>``, "2" the V2 form
``%RETRY%<group>+<topic>``. reviveQid POP_ORDER_REVIVE_QUEUE (999) marks a FIFO pop.

The response's startOffsetInfo / msgOffsetInfo / orderCountInfo are ``;``-joined entries of
``retry queueId value`` (msgOffsetInfo's value: the popped queue offsets, ``,``-joined).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from rmq.protocol.fields import BadRequest, bool_field, int_field, json_body, malformed, str_field
from rmq.protocol.java_json import COMPACT
from rmq.protocol.message import KEY_SEPARATOR, RETRY_GROUP_TOPIC_PREFIX

# -- header field names (RocketMQ 5.x's) --------------------------------------------------------
CONSUMER_GROUP = "consumerGroup"
TOPIC = "topic"
QUEUE_ID = "queueId"
MAX_MSG_NUMS = "maxMsgNums"
INVISIBLE_TIME = "invisibleTime"
POLL_TIME = "pollTime"
BORN_TIME = "bornTime"
INIT_MODE = "initMode"
EXP_TYPE = "expType"
EXP = "exp"
ORDER = "order"
ATTEMPT_ID = "attemptId"
# the answer's
POP_TIME = "popTime"
REVIVE_QID = "reviveQid"
REST_NUM = "restNum"
START_OFFSET_INFO = "startOffsetInfo"
MSG_OFFSET_INFO = "msgOffsetInfo"
ORDER_COUNT_INFO = "orderCountInfo"
# ACK_MESSAGE's and CHANGE_MESSAGE_INVISIBLETIME's
EXTRA_INFO = "extraInfo"
OFFSET = "offset"

# -- properties a popped message carries (RocketMQ's MessageConst) --------------------------------
PROPERTY_POP_CK = "POP_CK"
PROPERTY_POP_CK_OFFSET = "POP_CK_OFFSET"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"

# -- limits and names -------------------------------------------------------------------------------
# The most messages one POP_MESSAGE may ask for (PopMessageProcessor refuses more: INVALID_PARAMETER).
MAX_POP_NUMS = 32
# initMode: where a group with no offset in a queue starts (ConsumeInitMode)
INIT_MODE_MIN = 0
INIT_MODE_MAX = 1
# A poll that reaches the broker this much later than bornTime + pollTime is answered POLLING_TIMEOUT
# at once (PopMessageRequestHeader.isTimeoutTooMuch).
POLL_LATE_MILLIS = 500
# The reviveQid of a FIFO pop: no checkpoint is written, the queue is locked instead (KeyBuilder).
POP_ORDER_REVIVE_QUEUE = 999
# The revive topic of a cluster: rmq_sys_REVIVE_LOG_<clusterName> (PopAckConstants.REVIVE_TOPIC)
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
# The group whose offsets in the revive queues are the revive service's progress.
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
# Tags of the revive topic's records.
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"

RETRY_NONE = "0"
RETRY_V1 = "1"
RETRY_V2 = "2"
_RETRY_SEPARATOR_V1 = "_"
_RETRY_SEPARATOR_V2 = "+"


def revive_topic(cluster_name: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster_name


def pop_retry_topic(topic: str, group: str) -> str:
    """The topic a POP group's unacked messages of ``topic`` come back from: ``%RETRY%<group>_<topic>``
    (KeyBuilder.buildPopRetryTopicV1; RocketMQ's default, enableRetryTopicV2 off)."""
    return RETRY_GROUP_TOPIC_PREFIX + group + _RETRY_SEPARATOR_V1 + topic


def pop_retry_topic_v2(topic: str, group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group + _RETRY_SEPARATOR_V2 + topic


def original_topic(topic: str, group: str) -> str:
    """The topic a POP retry topic of ``group`` is the retry topic of (KeyBuilder.parseNormalTopic);
    any other topic as it is."""
    for separator in (_RETRY_SEPARATOR_V2, _RETRY_SEPARATOR_V1):
        prefix = RETRY_GROUP_TOPIC_PREFIX + group + separator
        if topic.startswith(prefix):
            return topic[len(prefix) :]
    return topic


def retry_kind(topic: str) -> str:
    """extraInfo's ``retry`` field for a popped topic (ExtraInfoUtil.getRetry)."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_V2 if _RETRY_SEPARATOR_V2 in topic else RETRY_V1
    return RETRY_NONE


def real_topic(topic: str, group: str, retry: str) -> str:
    """The topic an extraInfo's message was popped from, given the request's topic and group."""
    if retry == RETRY_NONE:
        return topic
    if retry == RETRY_V1:
        return pop_retry_topic(topic, group)
    if retry == RETRY_V2:
        return pop_retry_topic_v2(topic, group)
    raise malformed(EXTRA_INFO, retry, 'a retry field of "0", "1" or "2"')


# -- extraInfo ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ExtraInfo:
    """What a popped message's POP_CK says: which checkpoint holds it (``ck_queue_offset``, the first
    offset of its pop in its queue, with ``pop_time``), until when it is invisible, and where it lives."""

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    msg_queue_offset: int = -1

    @property
    def order(self) -> bool:
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE

    def encode(self) -> str:
        parts = [
            self.ck_queue_offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            self.retry,
            self.broker_name,
            self.queue_id,
        ]
        if self.msg_queue_offset >= 0:
            parts.append(self.msg_queue_offset)
        return KEY_SEPARATOR.join(map(str, parts))

    @classmethod
    def decode(cls, text: str) -> ExtraInfo:
        """BadRequest naming the field when ``text`` is not an extraInfo a broker handed out."""
        parts = text.split(KEY_SEPARATOR)
        if not 7 <= len(parts) <= 8:
            raise malformed(
                EXTRA_INFO, text, "ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId [queueOffset]"
            )
        try:
            numbers = [int(parts[i]) for i in (0, 1, 2, 3, 6)]
            msg_offset = int(parts[7]) if len(parts) == 8 else -1
        except ValueError:
            raise malformed(EXTRA_INFO, text, "integers in its offset, time, reviveQid and queueId fields") from None
        if parts[4] not in (RETRY_NONE, RETRY_V1, RETRY_V2):
            raise malformed(EXTRA_INFO, text, 'a retry field of "0", "1" or "2"')
        ck_offset, pop_time, invisible_time, revive_qid, queue_id = numbers
        return cls(ck_offset, pop_time, invisible_time, revive_qid, parts[4], parts[5], queue_id, msg_offset)

    def changed(self, ck_queue_offset: int, pop_time: int, invisible_time: int, revive_qid: int) -> ExtraInfo:
        """The extraInfo after CHANGE_MESSAGE_INVISIBLETIME answered these."""
        return dataclasses.replace(
            self,
            ck_queue_offset=ck_queue_offset,
            pop_time=pop_time,
            invisible_time=invisible_time,
            revive_qid=revive_qid,
        )


# -- the response's offset infos ------------------------------------------------------------------


def offset_info_entry(topic: str, queue_id: int, value: int | Sequence[int]) -> str:
    """One ``retry queueId value`` entry of startOffsetInfo / orderCountInfo / msgOffsetInfo."""
    text = ",".join(map(str, value)) if not isinstance(value, int) else str(value)
    return KEY_SEPARATOR.join((retry_kind(topic), str(queue_id), text))


def offset_info_key(retry: str, queue_id: int) -> str:
    return f"{retry}@{queue_id}"


def parse_offset_info(info: str | None) -> dict[str, list[int]]:
    """startOffsetInfo, msgOffsetInfo or orderCountInfo as ``{"retry@queueId": [values]}``."""
    out: dict[str, list[int]] = {}
    for entry in filter(None, (info or "").split(";")):
        parts = entry.split(KEY_SEPARATOR)
        if len(parts) != 3:
            raise ValueError(f"offset info entry {entry!r} is not 'retry queueId values'")
        key = offset_info_key(parts[0], int(parts[1]))
        if key in out:
            raise ValueError(f"offset info {info!r} names {key} twice")
        out[key] = [int(v) for v in parts[2].split(",")]
    return out


# -- headers ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PopRequest:
    """PopMessageRequestHeader. ``queue_id`` -1: every readable queue of the topic (and its retry)."""

    consumer_group: str
    topic: str
    queue_id: int
    max_msg_nums: int
    invisible_time: int
    poll_time: int
    born_time: int
    init_mode: int = INIT_MODE_MIN
    exp_type: str | None = None
    exp: str | None = None
    order: bool = False
    attempt_id: str | None = None

    def fields(self) -> dict[str, str]:
        out = {
            CONSUMER_GROUP: self.consumer_group,
            TOPIC: self.topic,
            QUEUE_ID: str(self.queue_id),
            MAX_MSG_NUMS: str(self.max_msg_nums),
            INVISIBLE_TIME: str(self.invisible_time),
            POLL_TIME: str(self.poll_time),
            BORN_TIME: str(self.born_time),
            INIT_MODE: str(self.init_mode),
            ORDER: "true" if self.order else "false",
        }
        for name, value in ((EXP_TYPE, self.exp_type), (EXP, self.exp), (ATTEMPT_ID, self.attempt_id)):
            if value is not None:
                out[name] = value
        return out

    @classmethod
    def from_fields(cls, ext: Mapping[str, str]) -> PopRequest:
        queue_id = int_field(ext, QUEUE_ID)
        return cls(
            str_field(ext, CONSUMER_GROUP),
            str_field(ext, TOPIC),
            -1 if queue_id < 0 else queue_id,
            int_field(ext, MAX_MSG_NUMS),
            int_field(ext, INVISIBLE_TIME),
            int_field(ext, POLL_TIME),
            int_field(ext, BORN_TIME),
            int_field(ext, INIT_MODE, INIT_MODE_MIN),
            ext.get(EXP_TYPE) or None,
            ext.get(EXP) or None,
            bool_field(ext, ORDER),
            ext.get(ATTEMPT_ID) or None,
        )


@dataclasses.dataclass(frozen=True)
class PopResponse:
    """PopMessageResponseHeader."""

    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int
    start_offset_info: str = ""
    msg_offset_info: str = ""
    order_count_info: str = ""

    def fields(self) -> dict[str, str]:
        out = {
            POP_TIME: str(self.pop_time),
            INVISIBLE_TIME: str(self.invisible_time),
            REVIVE_QID: str(self.revive_qid),
            REST_NUM: str(self.rest_num),
        }
        for name, value in (
            (START_OFFSET_INFO, self.start_offset_info),
            (MSG_OFFSET_INFO, self.msg_offset_info),
            (ORDER_COUNT_INFO, self.order_count_info),
        ):
            if value:
                out[name] = value
        return out

    @classmethod
    def from_fields(cls, ext: Mapping[str, str]) -> PopResponse:
        return cls(
            int_field(ext, POP_TIME, 0),
            int_field(ext, INVISIBLE_TIME, 0),
            int_field(ext, REVIVE_QID, 0),
            int_field(ext, REST_NUM, 0),
            ext.get(START_OFFSET_INFO) or "",
            ext.get(MSG_OFFSET_INFO) or "",
            ext.get(ORDER_COUNT_INFO) or "",
        )


@dataclasses.dataclass(frozen=True)
class AckRequest:
    """AckMessageRequestHeader; with ``invisible_time`` ChangeInvisibleTimeRequestHeader."""

    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: int
    invisible_time: int | None = None

    def fields(self) -> dict[str, str]:
        out = {
            CONSUMER_GROUP: self.consumer_group,
            TOPIC: self.topic,
            QUEUE_ID: str(self.queue_id),
            EXTRA_INFO: self.extra_info,
            OFFSET: str(self.offset),
        }
        if self.invisible_time is not None:
            out[INVISIBLE_TIME] = str(self.invisible_time)
        return out

    @classmethod
    def from_fields(cls, ext: Mapping[str, str], change: bool = False) -> AckRequest:
        return cls(
            str_field(ext, CONSUMER_GROUP),
            str_field(ext, TOPIC),
            int_field(ext, QUEUE_ID),
            str_field(ext, EXTRA_INFO),
            int_field(ext, OFFSET),
            int_field(ext, INVISIBLE_TIME) if change else None,
        )


@dataclasses.dataclass(frozen=True)
class ChangeInvisibleTimeResponse:
    """ChangeInvisibleTimeResponseHeader: the new checkpoint's pop time, invisible time and revive queue."""

    pop_time: int
    invisible_time: int
    revive_qid: int

    def fields(self) -> dict[str, str]:
        return {
            POP_TIME: str(self.pop_time),
            INVISIBLE_TIME: str(self.invisible_time),
            REVIVE_QID: str(self.revive_qid),
        }

    @classmethod
    def from_fields(cls, ext: Mapping[str, str]) -> ChangeInvisibleTimeResponse:
        return cls(int_field(ext, POP_TIME), int_field(ext, INVISIBLE_TIME), int_field(ext, REVIVE_QID))


# -- the revive topic's records (JSON bodies, RocketMQ's PopCheckPoint / AckMsg field names) -----------


@dataclasses.dataclass
class PopCheckPoint:
    """One pop of ``num`` messages from one queue: tag ``ck``, body JSON. ``queue_offset_diff[i]`` is
    message i's offset minus ``start_offset`` (a filter may skip offsets); ``bit_map`` bit i: acked.
    ``revive_offset``: where in its revive queue the checkpoint itself was stored."""

    start_offset: int
    pop_time: int
    invisible_time: int
    bit_map: int
    num: int
    queue_id: int
    topic: str
    cid: str
    revive_offset: int = 0
    queue_offset_diff: list[int] = dataclasses.field(default_factory=list)
    broker_name: str = ""
    re_put_times: str | None = None

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    def index_of_ack(self, ack_offset: int) -> int:
        diff = ack_offset - self.start_offset
        if diff < 0:
            return -1
        if not self.queue_offset_diff:
            return diff if diff < self.num else -1
        try:
            return self.queue_offset_diff.index(diff)
        except ValueError:
            return -1

    def ack_offset_by_index(self, index: int) -> int:
        return self.start_offset + (self.queue_offset_diff[index] if self.queue_offset_diff else index)

    def encode(self) -> bytes:
        data: dict[str, Any] = {
            "so": self.start_offset,
            "pt": self.pop_time,
            "it": self.invisible_time,
            "bm": self.bit_map,
            "n": self.num,
            "q": self.queue_id,
            "t": self.topic,
            "c": self.cid,
            "ro": self.revive_offset,
            "d": self.queue_offset_diff,
            "bn": self.broker_name,
        }
        if self.re_put_times is not None:
            data["rp"] = self.re_put_times
        return json.dumps(data, separators=COMPACT).encode()

    @classmethod
    def decode(cls, body: Any) -> PopCheckPoint:
        data = json_body(body)
        try:
            return cls(
                int(data["so"]),
                int(data["pt"]),
                int(data["it"]),
                int(data.get("bm", 0)),
                int(data["n"]),
                int(data["q"]),
                str(data["t"]),
                str(data["c"]),
                int(data.get("ro", 0)),
                [int(d) for d in data.get("d") or ()],
                str(data.get("bn") or ""),
                data.get("rp"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise BadRequest(f"a PopCheckPoint body must have so, pt, it, n, q, t, c: {e!r}") from None


@dataclasses.dataclass(frozen=True)
class AckMsg:
    """An ack of the message at ``ack_offset`` of the checkpoint (``start_offset``, ``pop_time``) of
    (``consumer_group``, ``topic``, ``queue_id``): tag ``ack``, body JSON (RocketMQ's AckMsg)."""

    ack_offset: int
    start_offset: int
    consumer_group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str = ""

    def encode(self) -> bytes:
        return json.dumps(
            {
                "ao": self.ack_offset,
                "so": self.start_offset,
                "c": self.consumer_group,
                "t": self.topic,
                "q": self.queue_id,
                "pt": self.pop_time,
                "bn": self.broker_name,
            },
            separators=COMPACT,
        ).encode()

    @classmethod
    def decode(cls, body: Any) -> AckMsg:
        data = json_body(body)

        def get(short: str, long: str) -> Any:
            return data[short] if short in data else data[long]

        try:
            return cls(
                int(get("ao", "ackOffset")),
                int(get("so", "startOffset")),
                str(get("c", "consumerGroup")),
                str(get("t", "topic")),
                int(get("q", "queueId")),
                int(get("pt", "popTime")),
                str(data.get("bn") or data.get("brokerName") or ""),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise BadRequest(f"an AckMsg body must have ao, so, c, t, q, pt: {e!r}") from None
