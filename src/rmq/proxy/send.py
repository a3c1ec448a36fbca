"""SendMessage (RocketMQ 5.x's SendMessageActivity and ProducerProcessor, local mode): the messages of
a request as one SEND_MESSAGE (or, for several, one SEND_BATCH_MESSAGE) to this broker's send
processor, through the client's channel.

The endpoint picks the queue, as the proxy's SendMessageQueueSelector does: a single message with a
message group goes to the write queue Guava's consistentHash of the group's Java hash picks (one
group, one queue: FIFO), any other to the next write queue in turn. Before that, with
enableTopicMessageTypeCheck, each message's type must be its topic's (retry and dead-letter topics
aside): MESSAGE_PROPERTY_CONFLICT_WITH_TYPE. The broker's answer becomes one entry per message: the
client's message id, the queue offset, and for a half message its transaction id (the message id,
as RocketMQ's broker answers it), which EndTransaction names later (rmq.proxy.transaction).
"""

from __future__ import annotations

import itertools

from rmq.net.codec import RemotingCommand
from rmq.protocol.batch import encode_batch
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.grpc.v2 import service_pb2 as pb
from rmq.protocol.grpc.v2.definition_pb2 import Code, MessageType
from rmq.protocol.message import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    MessageProperty,
    MessageSysFlag,
    encode_properties,
    java_string_hash,
)
from rmq.protocol.perm import PERM_WRITE
from rmq.protocol.record import decode_msg_id
from rmq.protocol.topic_attributes import message_type_of, type_conflict
from rmq.proxy.calls import BrokerCalls, TopicInfo
from rmq.proxy.context import CallContext
from rmq.proxy.convert import body_of, properties_of
from rmq.proxy.route import check_topic
from rmq.proxy.status import OK, ProxyError, from_response, status
from rmq.proxy.transaction import TransactionTable

# what the proxy puts in a send header's defaultTopic fields
DEFAULT_TOPIC_QUEUE_NUMS = 4


def consistent_hash(value: int, buckets: int) -> int:
    """Guava's Hashing.consistentHash(long, int): the bucket ``value`` keeps as buckets are added."""
    state = value & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        shifted = state >> 33
        as_int = shifted - (1 << 31) if shifted >= 1 << 31 else shifted  # Java's (int) cast
        next_candidate = int((candidate + 1) / ((as_int + 1) / 2**31))
        if 0 <= next_candidate < buckets:
            candidate = next_candidate
        else:
            return candidate


def _checked_type(info: TopicInfo, properties: dict[str, str]) -> None:
    if info.name.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
        return
    if MessageProperty.TRANSFER_FLAG in properties:
        return
    conflict = type_conflict(info.message_type, message_type_of(properties))
    if conflict is not None:
        raise ProxyError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, conflict)


class SendService:
    def __init__(self, calls: BrokerCalls, transactions: TransactionTable, max_body_size: int, check_types: bool):
        self.calls = calls
        self.transactions = transactions
        self.max_body_size = max_body_size
        self.check_types = check_types
        self._next_queue: dict[str, itertools.count[int]] = {}

    def _queue(self, info: TopicInfo, request: pb.SendMessageRequest) -> int:
        queues = info.write_queue_nums
        if queues <= 0 or not info.perm & PERM_WRITE:
            raise ProxyError(Code.FORBIDDEN, f"no writable queue of topic {info.name} on this broker")
        group = request.messages[0].system_properties.message_group if len(request.messages) == 1 else ""
        if group:
            return consistent_hash(java_string_hash(group), queues)
        counter = self._next_queue.setdefault(info.name, itertools.count())
        return next(counter) % queues

    async def send_message(self, ctx: CallContext, request: pb.SendMessageRequest) -> pb.SendMessageResponse:
        if not request.messages:
            raise ProxyError(Code.MESSAGE_CORRUPTED, "no message to send")
        first = request.messages[0]
        topic = check_topic(first.topic)
        # the proxy's producer group is the topic: the broker's transaction checks look it up
        producer_group = topic
        built = []
        for message in request.messages:
            if message.topic.name != topic:
                raise ProxyError(Code.MESSAGE_CORRUPTED, "topic in message is not same")
            body = body_of(message, self.max_body_size)
            built.append((body, properties_of(message, producer_group, ctx.remote_address)))
        info = await self.calls.topic(topic)
        if info is None:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic {topic!r} not found on this broker")
        if self.check_types:
            for _body, properties in built:
                _checked_type(info, properties)
        queue_id = self._queue(info, request)
        transactional = first.system_properties.message_type == MessageType.TRANSACTION
        sys_flag = MessageSysFlag.TRANSACTION_PREPARED_TYPE if transactional else 0
        ext = {
            "producerGroup": producer_group,
            "topic": topic,
            "defaultTopic": AUTO_CREATE_TOPIC_KEY_TOPIC,
            "defaultTopicQueueNums": str(DEFAULT_TOPIC_QUEUE_NUMS),
            "queueId": str(queue_id),
            "sysFlag": str(sys_flag),
            "bornTimestamp": built[0][1].get(MessageProperty.BORN_TIMESTAMP, "0"),
            "flag": "0",
            "reconsumeTimes": built[0][1].get(MessageProperty.RECONSUME_TIME, "0"),
            "unitMode": "false",
        }
        if len(built) == 1:
            body, properties = built[0]
            ext["properties"] = encode_properties(properties).decode()
            remoting = RemotingCommand.request(RequestCode.SEND_MESSAGE, ext, body)
        else:
            ext["properties"] = ""
            ext["batch"] = "true"
            batch = encode_batch((body, encode_properties(properties), 0) for body, properties in built)
            remoting = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, batch)
        response = await self.calls.for_client(ctx, remoting)
        return self._response(topic, queue_id, built, response, transactional)

    def _response(
        self,
        topic: str,
        queue_id: int,
        built: list[tuple[bytes, dict[str, str]]],
        response: RemotingCommand,
        transactional: bool,
    ) -> pb.SendMessageResponse:
        # FLUSH_DISK_TIMEOUT and the like were stored: the proxy answers their codes, per message
        stored = response.code == ResponseCode.SUCCESS or "queueOffset" in response.ext_fields
        if not stored:
            entry_status = from_response(response)
            entries = [pb.SendResultEntry(status=entry_status) for _ in built]
            return pb.SendMessageResponse(status=entry_status, entries=entries)
        entry_status = OK if response.code == ResponseCode.SUCCESS else from_response(response)
        first_offset = int(response.ext_fields.get("queueOffset", "0"))
        offset_msg_ids = response.ext_fields.get("msgId", "").split(",")
        entries = []
        for i, (_body, properties) in enumerate(built):
            message_id = properties[MessageProperty.UNIQ_KEY]
            transaction_id = ""
            if transactional and entry_status.code == Code.OK:
                transaction_id = message_id
                commit_log_offset = decode_msg_id(offset_msg_ids[min(i, len(offset_msg_ids) - 1)])[2]
                self.transactions.add(topic, transaction_id, first_offset + i, commit_log_offset, message_id)
            entries.append(
                pb.SendResultEntry(
                    status=entry_status, message_id=message_id, transaction_id=transaction_id, offset=first_offset + i
                )
            )
        return pb.SendMessageResponse(status=status(entry_status.code, entry_status.message), entries=entries)
