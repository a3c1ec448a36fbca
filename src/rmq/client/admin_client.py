"""Admin operations over name servers and brokers (RocketMQ's DefaultMQAdminExt), for rmq-admin,
tests and scripts. Results are plain data (dicts, lists, dataclasses); presentation is the CLI's.

    with AdminClient("127.0.0.1:9876") as admin:
        admin.create_topic("TopicA", queue_nums=4)
        for row in admin.consume_progress("GroupA"): ...

Name servers are tried in order until one answers. Brokers are reached at the master address of
each brokerName the name server knows. Failures raise: ResponseError (a peer answered with another
code than SUCCESS, e.g. TOPIC_NOT_EXIST), RemotingError (nobody answered), AdminError (nothing to
send to: an unknown cluster, a topic on no broker).
"""

from __future__ import annotations

import dataclasses
import json
import os
import ssl
import time
from collections.abc import Iterable
from typing import Any

from rmq.client.message import Message
from rmq.client.producer import Producer
from rmq.client.results import SendResult
from rmq.errors import AdminError, ClientError, NotFound, RecordError, RemotingError, ResponseError
from rmq.net.client import RemotingClient
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol import running_info
from rmq.protocol.acl import SessionCredentials
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.compression import UndecodableBody, decompress_body
from rmq.protocol.controller import (
    BROKER_ID,
    BROKER_NAME,
    CLUSTER_NAME,
    DESIGNATE_ELECT,
    ControllerMetadata,
    ReplicaInfo,
    ReplicasInfo,
    decode_replicas_infos,
    encode_broker_names,
)
from rmq.protocol.java_json import loads_java_json, loads_mq_tables
from rmq.protocol.message import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    TOOLS_CONSUMER_GROUP,
    MessageProperty,
    dlq_topic,
    retry_topic,
)
from rmq.protocol.message_queue import MessageQueue
from rmq.protocol.perm import PERM_READ, PERM_WRITE
from rmq.protocol.pop import original_topic
from rmq.protocol.record import StoredMessage, decode_msg_id, decode_records
from rmq.protocol.replica import (
    PROMOTE_ROLE,
    PROMOTED_EPOCH,
    PROMOTED_START_OFFSET,
    RUNTIME_CONTROLLER_ADDR,
    CommitLogDigests,
    EpochTable,
    HAStatus,
    RangeDigest,
)
from rmq.protocol.request_flags import PullSysFlag
from rmq.protocol.route import MASTER_ID
from rmq.protocol.running_info import group_stats_key
from rmq.protocol.topic_attributes import MESSAGE_TYPE_ATTRIBUTE, format_attribute_changes
from rmq.settings import DEFAULT_CONTROLLER_PORT, DEFAULT_NAMESRV_ADDR, parse_properties

DEFAULT_NAMESRV = DEFAULT_NAMESRV_ADDR
#: where rmq-admin's controller commands look when given no address
DEFAULT_CONTROLLER = f"127.0.0.1:{DEFAULT_CONTROLLER_PORT}"
DEFAULT_TIMEOUT = 5.0
DEFAULT_QUEUE_NUMS = 8
INT64_MAX = 2**63 - 1
# INVOKE_BROKER_TO_RESET_OFFSET's timestamp for "the end of every queue"
RESET_TO_LATEST = -1
# How often an election asked of the controllers is checked for on the elected broker
ELECTED_POLL_INTERVAL = 0.1
# mqadmin's groups: the pulls of queryMsgByOffset and printMsg are TOOLS_CONSUMER_GROUP's; the
# producers of queryMsgById -s (resend) and of clusterRT these
RESEND_PRODUCER_GROUP = "ReSendMsgById"
CLUSTER_RT_PRODUCER_GROUP = "ClusterRTProducer"
# messages per pull of printMsg
PRINT_BATCH = 32
# what statsAll leaves out: the topics of groups (retries, dead letters)
SYSTEM_GROUP_TOPIC_PREFIXES = (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)
# properties a broker or consumer set on a stored message (a resent one gets its own), and those of
# a transaction: a resent message is a plain one (with TRAN_MSG, one resent from the half topic
# would be stored as a half message again, that no producer ever commits)
BROKER_SET_PROPERTIES = frozenset(
    {
        MessageProperty.MIN_OFFSET,
        MessageProperty.MAX_OFFSET,
        MessageProperty.CONSUME_START_TIMESTAMP,
        MessageProperty.REAL_TOPIC,
        MessageProperty.REAL_QUEUE_ID,
        MessageProperty.TRANSACTION_PREPARED,
        MessageProperty.TRANSACTION_PREPARED_QUEUE_OFFSET,
        MessageProperty.PRODUCER_GROUP,
    }
)


@dataclasses.dataclass
class QueueStats:
    """One queue of GET_TOPIC_STATS_INFO."""

    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int


@dataclasses.dataclass
class QueueProgress:
    """One queue of a consumer group's progress (GET_CONSUME_STATS)."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - self.consumer_offset)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "brokerName": self.broker_name,
            "queueId": self.queue_id,
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lag": self.lag,
            "lastTimestamp": self.last_timestamp,
        }


@dataclasses.dataclass
class PopQueueProgress:
    """One queue of a POP group (GET_POP_CONSUME_STATS, rmq's own): ``invisible`` popped and not
    acked yet, ``acked`` popped and no longer invisible; a row of the group's POP retry topic
    (``retry``) holds what came back unacked."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    invisible: int
    acked: int
    retry: bool

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - self.consumer_offset)


@dataclasses.dataclass
class ReplicaCheck:
    """A slave's CommitLog against its master's (``verify_replicas``): identical up to ``verified_to``,
    or the first range ``[first_difference, first_difference + difference_length)`` that differs."""

    broker_name: str
    slave_id: int
    slave_addr: str
    master_addr: str
    master_max_offset: int
    slave_max_offset: int
    verified_from: int
    verified_to: int
    first_difference: int | None = None
    difference_length: int = 0

    @property
    def identical(self) -> bool:
        return self.first_difference is None


@dataclasses.dataclass
class Promotion:
    """A slave made master (``promote``): its address, and the epoch it opened at ``start_offset``."""

    broker_name: str
    addr: str
    epoch: int
    start_offset: int


@dataclasses.dataclass
class BrokerRow:
    """One broker of ``cluster_brokers``: where it is, and what its GET_BROKER_RUNTIME_INFO said
    (``runtime`` is empty when it did not answer)."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    runtime: dict[str, str]
    # a slave's replication lag: its master's max CommitLog offset minus its own (None: a master,
    # or one of the two did not answer)
    lag_bytes: int | None = None

    @property
    def role(self) -> str | None:
        return self.runtime.get("brokerRole")

    @property
    def epoch(self) -> int | None:
        """The master term the broker is in, when it reports one (``epoch``)."""
        return _int_or_none(self.runtime.get("epoch"))

    @property
    def max_offset(self) -> int | None:
        return _int_or_none(self.runtime.get("commitLogMaxOffset"))


@dataclasses.dataclass
class QueueOffset:
    topic: str
    broker_name: str
    queue_id: int
    offset: int


def _records(body: bytes) -> list[StoredMessage]:
    """Stored records back to back (QUERY_MESSAGE, VIEW_MESSAGE_BY_ID bodies)."""
    try:
        return decode_records(body)
    except RecordError as exc:
        raise AdminError(f"the broker answered a body that is {exc}") from None


def progress_rows(offset_table: dict[MessageQueue, dict[str, Any]]) -> list[QueueProgress]:
    """ConsumeStats' offsetTable (OffsetWrapper per queue) as rows."""
    return [
        QueueProgress(
            mq.topic,
            mq.broker_name,
            mq.queue_id,
            int(o["brokerOffset"]),
            int(o["consumerOffset"]),
            int(o.get("lastTimestamp", 0)),
        )
        for mq, o in offset_table.items()
    ]


def message_body(message: StoredMessage) -> bytes:
    """The body as the producer gave it (inflated when the producer compressed it)."""
    try:
        return decompress_body(message.body, message.sys_flag)
    except UndecodableBody:
        return message.body


def parse_namesrv_addrs(namesrv: str) -> list[str]:
    addrs = [a.strip() for a in namesrv.replace(",", ";").split(";") if a.strip()]
    if not addrs:
        raise AdminError(f"no name server address in {namesrv!r}: expected host:port[;host:port]")
    return addrs


@dataclasses.dataclass
class TopicGroupStats:
    """One row of ``stats_all`` (mqadmin statsAll): a topic and a group consuming it (None: no group)."""

    topic: str
    group: str | None
    accumulation: int
    in_tps: float
    out_tps: float
    in_msg_24h: int
    out_msg_24h: int


@dataclasses.dataclass
class BrokerRT:
    """One row of ``cluster_rt`` (mqadmin clusterRT): a master's mean send time in ms."""

    cluster: str
    broker_name: str
    rt_ms: float
    success_count: int
    fail_count: int


@dataclasses.dataclass
class MessageTrack:
    """Where a message went for one group that consumes its topic (DefaultMQAdminExt's
    messageTrackDetail, with the group's retries and dead letter): ``consumed`` None when the group
    has no offset on the message's queue; ``retries`` the copies found in ``%RETRY%<group>``,
    ``dead`` those in ``%DLQ%<group>``, each in store-time order."""

    group: str
    consumer_offset: int | None
    consumed: bool | None
    retries: list[StoredMessage]
    dead: list[StoredMessage]


@dataclasses.dataclass(frozen=True)
class ControllerStatus:
    """One controller as it answered CONTROLLER_GET_METADATA_INFO (``metadata``), or why it did not
    (``error``)."""

    address: str
    metadata: ControllerMetadata | None
    error: str | None = None


class AdminClient:
    def __init__(
        self,
        namesrv: str = DEFAULT_NAMESRV,
        timeout: float = DEFAULT_TIMEOUT,
        credentials: SessionCredentials | tuple[str, ...] | None = None,
        tls: bool | ssl.SSLContext = False,
    ):
        """``credentials``: ``(access_key, secret_key[, security_token])`` to sign every request
        for brokers with aclEnable (admin requests need an account with ``admin: true``); ``tls``: connect
        with TLS (True: verify against the system's CAs, or an ``ssl.SSLContext``)."""
        self.namesrv_addrs = parse_namesrv_addrs(namesrv)
        self.timeout = timeout
        self.credentials, self.tls = credentials, tls  # for the producer of resend_message and cluster_rt
        self.client = RemotingClient(
            connect_timeout=min(timeout, 3.0), name="rmq-admin-client", credentials=credentials, tls=tls
        )

    def __enter__(self) -> AdminClient:
        self.client.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.client.shutdown()

    # -- transport ------------------------------------------------------------------------------

    def invoke(
        self,
        addr: str,
        code: int,
        ext: dict[str, Any] | None = None,
        body: bytes = b"",
        accept: Iterable[int] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """One request; ResponseError unless the answer's code is in ``accept``."""
        response = self.client.invoke_sync(addr, RemotingCommand.request(code, ext or {}, body), self.timeout)
        if response.code not in accept:
            raise ResponseError(response.code, response.remark, addr)
        return response

    def invoke_namesrv(
        self, code: int, ext: dict[str, Any] | None = None, accept: Iterable[int] = (ResponseCode.SUCCESS,)
    ) -> RemotingCommand:
        """Ask the name servers in order; the first that answers decides."""
        errors = []
        for addr in self.namesrv_addrs:
            try:
                return self.invoke(addr, code, ext, accept=accept)
            except RemotingError as e:
                errors.append(str(e))
        raise RemotingError("no name server answered: " + "; ".join(errors))

    @staticmethod
    def _json(response: RemotingCommand) -> dict[str, Any]:
        """The answer's JSON object body."""
        data: dict[str, Any] = loads_java_json((body_bytes(response.body) or b"{}").decode())
        return data

    def _mq_tables(self, addr: str, code: int, ext: dict[str, Any]) -> dict[str, Any]:
        """The answer's JSON body, its maps keyed by queues read as ``{MessageQueue: value}``."""
        return loads_mq_tables(body_bytes(self.invoke(addr, code, ext).body))

    # -- name server ----------------------------------------------------------------------------

    def cluster_info(self) -> dict[str, Any]:
        """``{"brokerAddrTable": {name: {cluster, brokerName, brokerAddrs}}, "clusterAddrTable": {...}}``"""
        return self._json(self.invoke_namesrv(RequestCode.GET_BROKER_CLUSTER_INFO))

    def topic_list(self) -> list[str]:
        return sorted(self._json(self.invoke_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))["topicList"])

    def topic_route(self, topic: str) -> dict[str, Any]:
        """The route; ResponseError TOPIC_NOT_EXIST when no name server knows the topic."""
        return self._json(self.invoke_namesrv(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))

    def master_addrs(self, cluster: str | None = None) -> dict[str, str]:
        """brokerName -> master address, of one cluster or of all."""
        info = self.cluster_info()
        clusters = info.get("clusterAddrTable") or {}
        if cluster is not None and cluster not in clusters:
            known = ", ".join(sorted(clusters)) or "none"
            raise AdminError(f"cluster {cluster!r} is not known to the name server (clusters: {known})")
        names = set(clusters[cluster]) if cluster is not None else None
        return {
            name: addr
            for name, data in sorted((info.get("brokerAddrTable") or {}).items())
            if (names is None or name in names) and (addr := _master_of(data)) is not None
        }

    def topic_masters(self, topic: str) -> dict[str, str]:
        """brokerName -> master address, of the brokers that hold ``topic``."""
        route = self.topic_route(topic)
        masters = {
            data["brokerName"]: addr
            for data in route.get("brokerDatas") or []
            if (addr := _master_of(data)) is not None
        }
        if not masters:
            raise AdminError(f"topic {topic!r} has a route but no master broker is serving it")
        return masters

    # -- topics ---------------------------------------------------------------------------------

    def update_topic(
        self,
        topic: str,
        read_queue_nums: int = DEFAULT_QUEUE_NUMS,
        write_queue_nums: int = DEFAULT_QUEUE_NUMS,
        perm: int = PERM_READ | PERM_WRITE,
        order: bool = False,
        cluster: str | None = None,
        broker_addr: str | None = None,
        message_type: str | None = None,
    ) -> list[str]:
        """UPDATE_AND_CREATE_TOPIC on one broker, or on every master (of a cluster); the addresses.
        ``message_type`` sets RocketMQ 5.x's ``message.type`` attribute (NORMAL, FIFO, DELAY,
        TRANSACTION, MIXED); None leaves the topic's as it is."""
        addrs = self.target_brokers(cluster, broker_addr)
        ext = {
            "topic": topic,
            "defaultTopic": AUTO_CREATE_TOPIC_KEY_TOPIC,
            "readQueueNums": read_queue_nums,
            "writeQueueNums": write_queue_nums,
            "perm": perm,
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": 0,
            "order": order,
        }
        if message_type is not None:
            ext["attributes"] = format_attribute_changes({MESSAGE_TYPE_ATTRIBUTE: message_type})
        for addr in addrs:
            self.invoke(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
        return addrs

    def topic_settings_on(self, topic: str, addrs: Iterable[str]) -> dict[str, dict[str, Any]]:
        """broker address -> the topic's config there (GET_TOPIC_CONFIG: readQueueNums, writeQueueNums,
        perm, order, ...); a 4.x broker, which does not serve it, by its route's queue data (no order);
        a broker without the topic is left out."""
        route = self.topic_route(topic)
        routed = {q["brokerName"]: q for q in route.get("queueDatas") or []}
        names = {addr: data["brokerName"] for data in route.get("brokerDatas") or [] if (addr := _master_of(data))}
        out = {}
        for addr in addrs:
            answer = self.invoke(
                addr,
                RequestCode.GET_TOPIC_CONFIG,
                {"topic": topic},
                accept=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST, ResponseCode.REQUEST_CODE_NOT_SUPPORTED),
            )
            if answer.code == ResponseCode.SUCCESS:
                out[addr] = self._json(answer)
            elif answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and names.get(addr) in routed:
                out[addr] = routed[names[addr]]
        return out

    def topic_exists(self, topic: str) -> bool:
        response = self.invoke_namesrv(
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            {"topic": topic},
            accept=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST),
        )
        return response.code == ResponseCode.SUCCESS

    def delete_topic(self, topic: str, cluster: str | None = None) -> list[str]:
        """Delete on every master holding it (of a cluster), then on every name server."""
        masters = self.topic_masters(topic)
        if cluster is not None:
            in_cluster = self.master_addrs(cluster)
            masters = {name: addr for name, addr in masters.items() if name in in_cluster}
        for addr in masters.values():
            self.invoke(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
        ext = {"topic": topic} if cluster is None else {"topic": topic, "clusterName": cluster}
        for addr in self.namesrv_addrs:
            self.invoke(addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, ext)
        return list(masters.values())

    def topic_stats(self, topic: str) -> list[QueueStats]:
        rows = []
        for addr in self.topic_masters(topic).values():
            body = self._mq_tables(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
            for mq, o in body["offsetTable"].items():
                rows.append(
                    QueueStats(
                        mq.broker_name,
                        mq.queue_id,
                        int(o["minOffset"]),
                        int(o["maxOffset"]),
                        int(o.get("lastUpdateTimestamp", 0)),
                    )
                )
        return sorted(rows, key=lambda r: (r.broker_name, r.queue_id))

    # -- consumers ------------------------------------------------------------------------------

    def _group_masters(self, group: str) -> dict[str, str]:
        """The brokers a group consumes from: those of its %RETRY% topic (created by its consumers'
        heartbeats), else every master."""
        try:
            return self.topic_masters(retry_topic(group))
        except ResponseError as e:
            if e.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
        return self.master_addrs()

    def consume_progress(self, group: str, topic: str | None = None) -> list[QueueProgress]:
        rows = []
        ext = {"consumerGroup": group, "topic": topic or ""}
        masters = self.topic_masters(topic) if topic else self._group_masters(group)
        for addr in masters.values():
            rows += progress_rows(self._mq_tables(addr, RequestCode.GET_CONSUME_STATS, ext)["offsetTable"])
        return sorted(rows, key=lambda r: (r.topic, r.broker_name, r.queue_id))

    def pop_progress(self, group: str, topic: str | None = None) -> list[PopQueueProgress]:
        """A POP group's queues (its POP retry topics' among them) on each broker it pops from; a
        broker that does not know the request (an Apache RocketMQ one) has none."""
        rows = []
        ext = {"consumerGroup": group, "topic": topic or ""}
        masters = self.topic_masters(topic) if topic else self._group_masters(group)
        for addr in masters.values():
            try:
                body = self._mq_tables(addr, RequestCode.GET_POP_CONSUME_STATS, ext)
            except ResponseError as e:
                if e.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                    raise
                continue
            for mq, o in body["offsetTable"].items():
                rows.append(
                    PopQueueProgress(
                        mq.topic,
                        mq.broker_name,
                        mq.queue_id,
                        int(o["brokerOffset"]),
                        int(o["consumerOffset"]),
                        int(o["invisible"]),
                        int(o["acked"]),
                        original_topic(mq.topic, group) != mq.topic,
                    )
                )
        return sorted(rows, key=lambda r: (r.retry, r.topic, r.broker_name, r.queue_id))

    def consumer_connections(self, group: str) -> dict[str, Any]:
        """The group's online consumers (GET_CONSUMER_CONNECTION_LIST) merged over its brokers:
        ``{"connectionSet": [...], "subscriptionTable": {...}, "consumeType", "messageModel", ...}``;
        ResponseError CONSUMER_NOT_ONLINE when no broker knows one."""
        merged: dict[str, Any] = {}
        refusal: ResponseError | None = None
        for addr in self._group_masters(group).values():
            try:
                body = self._json(self.invoke(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}))
            except ResponseError as e:
                if e.code != ResponseCode.CONSUMER_NOT_ONLINE:
                    raise
                refusal = e
                continue
            connections = merged.get("connectionSet", []) + body.get("connectionSet", [])
            merged.update(body)
            merged["connectionSet"] = list({c["clientId"]: c for c in connections}.values())
        if not merged:
            raise refusal or AdminError(f"no broker serves consumer group {group!r}")
        return merged

    def reset_offset(self, group: str, topic: str, timestamp: int, force: bool = True) -> list[QueueOffset]:
        """Move the group's offsets on ``topic`` to the first message stored at or after
        ``timestamp`` (ms; RESET_TO_LATEST for the end) on every broker of the topic."""
        rows = []
        ext = {"topic": topic, "group": group, "timestamp": timestamp, "isForce": force}
        for addr in self.topic_masters(topic).values():
            body = self._mq_tables(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
            rows += [
                QueueOffset(mq.topic, mq.broker_name, mq.queue_id, int(offset))
                for mq, offset in body["offsetTable"].items()
            ]
        return sorted(rows, key=lambda r: (r.broker_name, r.queue_id))

    # -- messages -------------------------------------------------------------------------------

    def view_message(self, msg_id: str) -> StoredMessage:
        """The message a broker msgId (offsetMsgId) points at: store address + CommitLog offset."""
        try:
            ip, port, offset = decode_msg_id(msg_id)
        except (ValueError, TypeError) as e:
            raise AdminError(
                f"{msg_id!r} is not a broker message id (32 hex digits: store ip, port, CommitLog offset): {e}"
            ) from None
        response = self.invoke(f"{ip}:{port}", RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})
        messages = _records(body_bytes(response.body))
        if len(messages) != 1:
            raise AdminError(f"the broker at {ip}:{port} answered {len(messages)} records for one id")
        return messages[0]

    def find_message(self, msg_id: str, topic: str | None = None) -> StoredMessage:
        """The message with ``msg_id``: with a ``topic``, first as the client message id producers
        get back (UNIQ_KEY, through the brokers' index, as RocketMQ's queryMsgByUniqueKey); then as
        a broker message id, asked of its store address only if that is one of the topic's brokers
        (a client id decodes to an address nobody listens on)."""
        if topic is None:
            return self.view_message(msg_id)
        found = [m for m in self.query_by_key(topic, msg_id) if m.properties.get(MessageProperty.UNIQ_KEY) == msg_id]
        if found:
            return found[0]
        missing = AdminError(f"no message of topic {topic} has client message id {msg_id}")
        try:
            ip, port, _ = decode_msg_id(msg_id)
        except (ValueError, TypeError):
            raise missing from None
        if f"{ip}:{port}" not in self.topic_masters(topic).values():
            raise missing
        return self.view_message(msg_id)

    def query_by_key(
        self, topic: str, key: str, max_num: int = 32, begin: int = 0, end: int = INT64_MAX
    ) -> list[StoredMessage]:
        """Messages of ``topic`` with this key (KEYS or client msgId) on every broker of the topic."""
        found = []
        ext = {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": begin, "endTimestamp": end}
        for addr in self.topic_masters(topic).values():
            response = self.invoke(
                addr, RequestCode.QUERY_MESSAGE, ext, accept=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND)
            )
            if response.code == ResponseCode.SUCCESS:
                found += _records(body_bytes(response.body))
        return sorted(found, key=lambda m: m.store_timestamp)[:max_num]

    def message_track(self, message: StoredMessage) -> list[MessageTrack]:
        """For each group consuming the message's topic (its original topic when ``message`` is
        itself a retry or a dead letter: RETRY_TOPIC), whether the group's offset on its queue has
        passed it, and its copies in the group's retry and dead-letter topics, found by its client
        message id (UNIQ_KEY, which a retried copy keeps); none are found for a message without one."""
        topic = message.properties.get(MessageProperty.RETRY_TOPIC) or message.topic
        uniq_key = message.properties.get(MessageProperty.UNIQ_KEY)
        masters = self.topic_masters(topic)
        store = f"{message.store_host[0]}:{message.store_host[1]}"
        broker_name = next((name for name, addr in masters.items() if addr == store), None)
        tracks = []
        for group in self._consumer_groups_on(masters.values(), topic):
            consumer_offset = None
            if topic == message.topic:
                for row in self.consume_progress(group, topic):
                    if row.queue_id == message.queue_id and broker_name in (None, row.broker_name):
                        consumer_offset = row.consumer_offset
            consumed = None
            if consumer_offset is not None and consumer_offset >= 0:  # -1: no offset committed
                consumed = consumer_offset > message.queue_offset
            tracks.append(
                MessageTrack(
                    group,
                    consumer_offset,
                    consumed,
                    self._copies(retry_topic(group), uniq_key),
                    self._copies(dlq_topic(group), uniq_key),
                )
            )
        return tracks

    def _copies(self, topic: str, uniq_key: str | None) -> list[StoredMessage]:
        """The messages of ``topic`` whose client message id is ``uniq_key`` ([] when the topic does not exist)."""
        if uniq_key is None or not self.topic_exists(topic):
            return []
        return [m for m in self.query_by_key(topic, uniq_key) if m.properties.get(MessageProperty.UNIQ_KEY) == uniq_key]

    # -- who is connected, and figures (mqadmin's connection, consumerStatus, statsAll, clusterRT,
    #    queryMsgByOffset, printMsg; bodies in rmq.protocol.running_info) --------------------------

    def producer_connections(self, group: str, topic: str | None = None) -> list[dict[str, Any]]:
        """The online producers of ``group`` (GET_PRODUCER_CONNECTION_LIST) on the brokers of
        ``topic`` (else every master), one row per client; NotFound when no broker knows one."""
        masters = self.topic_masters(topic) if topic else self.master_addrs()
        connections: dict[str, dict[str, Any]] = {}
        for addr in masters.values():
            answer = self.invoke(
                addr,
                RequestCode.GET_PRODUCER_CONNECTION_LIST,
                {running_info.PRODUCER_GROUP: group},
                accept=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR),
            )
            if answer.code == ResponseCode.SUCCESS:  # SYSTEM_ERROR: 4.x's "the producer group not exist"
                for c in self._json(answer).get("connectionSet") or []:
                    connections[c["clientId"]] = c
        if not connections:
            raise NotFound(f"producer group {group!r} has no producer online")
        return [connections[k] for k in sorted(connections)]

    def _client_call(self, group: str, code: int, ext: dict[str, Any], addrs: Iterable[str]) -> RemotingCommand:
        """A request the broker forwards to client ``ext[clientId]`` of ``group``: asked of each of
        ``addrs`` until one holds the client's connection."""
        refusals = []
        for addr in addrs:
            answer = self.invoke(addr, code, ext, accept=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR))
            if answer.code == ResponseCode.SUCCESS:
                return answer
            refusals.append(ResponseError(answer.code, answer.remark, addr))
        if refusals and all("not online" in (r.remark or "") for r in refusals):
            raise NotFound(f"client {ext[running_info.CLIENT_ID]} of consumer group {group!r} is not online")
        if refusals:
            raise refusals[-1]
        raise AdminError(f"no broker serves consumer group {group!r}")

    def consumer_running_info(self, group: str, client_id: str, jstack: bool = False) -> dict[str, Any]:
        """What consumer ``client_id`` of ``group`` says of itself (GET_CONSUMER_RUNNING_INFO,
        through a broker it is connected to): ConsumerRunningInfo, ``mqTable`` keyed by MessageQueue."""
        ext = {
            running_info.CONSUMER_GROUP: group,
            running_info.CLIENT_ID: client_id,
            running_info.JSTACK_ENABLE: str(jstack).lower(),
        }
        addrs = self._group_masters(group).values()
        answer = self._client_call(group, RequestCode.GET_CONSUMER_RUNNING_INFO, ext, addrs)
        return loads_mq_tables(body_bytes(answer.body))

    def consume_message_directly(self, group: str, client_id: str, topic: str, msg_id: str) -> dict[str, Any]:
        """Hand message ``msg_id`` of ``topic`` (a broker or client message id) to consumer
        ``client_id`` of ``group`` (CONSUME_MESSAGE_DIRECTLY, asked of the broker storing it):
        ConsumeMessageDirectlyResult, ``consumeResult`` one of CMResult."""
        found = self.find_message(msg_id, topic)
        store = f"{found.store_host[0]}:{found.store_host[1]}"
        ext = {
            running_info.CONSUMER_GROUP: group,
            running_info.CLIENT_ID: client_id,
            running_info.MSG_ID: found.msg_id,
            running_info.TOPIC: topic,
        }
        answer = self._client_call(group, RequestCode.CONSUME_MESSAGE_DIRECTLY, ext, [store])
        return self._json(answer)

    def resend_message(self, topic: str, msg_id: str) -> SendResult:
        """Send message ``msg_id`` of ``topic`` again, as mqadmin queryMsgById -s true does: a new
        message of the same topic with its body, tags, keys and properties (its client message id
        too, so consumers that deduplicate by it see the same id), from producer group
        RESEND_PRODUCER_GROUP."""
        found = self.find_message(msg_id, topic)
        properties = {k: v for k, v in found.properties.items() if k not in BROKER_SET_PROPERTIES}
        message = Message(found.topic, message_body(found), properties=properties)
        with Producer(RESEND_PRODUCER_GROUP, ";".join(self.namesrv_addrs), **self._client_options()) as producer:
            return producer.send(message)

    def _client_options(self) -> dict[str, Any]:
        return {
            "instance_name": f"rmq-admin-{os.getpid()}-{time.monotonic_ns()}",
            "credentials": self.credentials,
            "tls": self.tls,
            "request_timeout": self.timeout,
            "send_msg_timeout": self.timeout,
        }

    def broker_stats(self, addr: str, stats_name: str, stats_key: str) -> dict[str, Any] | None:
        """VIEW_BROKER_STATS_DATA: {"statsMinute"|"statsHour"|"statsDay": {"sum", "tps", "avgpt"}};
        None when the broker has no such figure (it never saw the topic or group)."""
        answer = self.invoke(
            addr,
            RequestCode.VIEW_BROKER_STATS_DATA,
            {running_info.STATS_NAME: stats_name, running_info.STATS_KEY: stats_key},
            accept=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR),
        )
        if answer.code != ResponseCode.SUCCESS:
            if "not exist" in (answer.remark or ""):
                return None
            raise ResponseError(answer.code, answer.remark, addr)
        return self._json(answer)

    def stats_all(self, topic: str | None = None, active_only: bool = False) -> list[TopicGroupStats]:
        """mqadmin statsAll: per topic (retry and DLQ topics left out) and consuming group, the
        group's lag, the minute's in/out TPS and the messages in/out over the last day (24 h sums,
        the hour's or minute's while the broker has run less), summed over the topic's masters."""
        topics = [topic] if topic else [t for t in self.topic_list() if not t.startswith(SYSTEM_GROUP_TOPIC_PREFIXES)]
        rows = []
        for name in topics:
            masters = list(self.topic_masters(name).values())
            in_tps, in_day = self._stats_sum(masters, running_info.TOPIC_PUT_NUMS, name)
            groups = self._consumer_groups_on(masters, name)
            if not groups:
                if not active_only or in_day > 0:
                    rows.append(TopicGroupStats(name, None, 0, in_tps, 0.0, in_day, 0))
                continue
            for group in sorted(groups):
                out_tps, out_day = self._stats_sum(masters, running_info.GROUP_GET_NUMS, group_stats_key(name, group))
                try:
                    lag = sum(r.lag for r in self.consume_progress(group, name))
                except (ResponseError, AdminError):
                    lag = 0
                if not active_only or in_day > 0 or out_day > 0:
                    rows.append(TopicGroupStats(name, group, lag, in_tps, out_tps, in_day, out_day))
        return rows

    def _consumer_groups_on(self, addrs: Iterable[str], topic: str) -> list[str]:
        groups: set[str] = set()
        for addr in addrs:
            answer = self.invoke(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
            groups |= set(self._json(answer).get("groupList") or [])
        return sorted(groups)

    def topic_consumer_groups(self, topic: str) -> list[str]:
        """The groups that consume ``topic`` (QUERY_TOPIC_CONSUME_BY_WHO: online subscribers and
        groups with offsets on it), over its masters, sorted."""
        return self._consumer_groups_on(self.topic_masters(topic).values(), topic)

    def topic_tps(self, topic: str) -> tuple[float, int]:
        """(messages put per second over the last minute, messages put over the last day) of
        ``topic``, summed over its masters (TOPIC_PUT_NUMS)."""
        return self._stats_sum(self.topic_masters(topic).values(), running_info.TOPIC_PUT_NUMS, topic)

    def group_tps(self, group: str, topic: str) -> tuple[float, int]:
        """(messages ``group`` got of ``topic`` per second over the last minute, over the last day),
        summed over the topic's masters (GROUP_GET_NUMS)."""
        masters = self.topic_masters(topic).values()
        return self._stats_sum(masters, running_info.GROUP_GET_NUMS, group_stats_key(topic, group))

    def _stats_sum(self, addrs: Iterable[str], stats_name: str, stats_key: str) -> tuple[float, int]:
        tps, day = 0.0, 0
        for addr in addrs:
            data = self.broker_stats(addr, stats_name, stats_key)
            if data is not None:
                tps += float(data["statsMinute"]["tps"])
                day += next(
                    (int(data[w]["sum"]) for w in ("statsDay", "statsHour", "statsMinute") if data[w]["sum"]), 0
                )
        return round(tps, 2), day

    def broker_consume_stats(
        self, addr: str, only_ordered: bool = False
    ) -> tuple[int, list[tuple[str, QueueProgress]]]:
        """mqadmin brokerConsumeStats (GET_BROKER_CONSUME_STATS): (the broker's total lag, (group, a
        queue's progress) per queue of every group on it)."""
        answer = self.invoke(
            addr, RequestCode.GET_BROKER_CONSUME_STATS, {running_info.IS_ORDER: str(only_ordered).lower()}
        )
        body = loads_mq_tables(body_bytes(answer.body))
        rows = []
        for entry in body.get("consumeStatsList") or []:
            for group, stats_list in entry.items():
                for stats in stats_list:
                    rows += [(group, progress) for progress in progress_rows(stats["offsetTable"])]
        return int(body.get("totalDiff", 0)), rows

    def cluster_rt(self, amount: int = 100, size: int = 128, cluster: str | None = None) -> list[BrokerRT]:
        """mqadmin clusterRT: ``amount`` messages of ``size`` bytes sent to each master's own topic
        (named after the broker, brokerTopicEnable), one after another; the mean send time in ms of
        all but the first (which pays for the connection and the route)."""
        if cluster is not None:
            self.master_addrs(cluster)  # refuses a cluster the name server does not know
        clusters = self.cluster_info().get("clusterAddrTable") or {}
        body = b"x" * size
        rows = []
        with Producer(CLUSTER_RT_PRODUCER_GROUP, ";".join(self.namesrv_addrs), **self._client_options()) as producer:
            for cluster_name in sorted(clusters if cluster is None else [cluster]):
                for broker_name in sorted(clusters[cluster_name]):
                    ok = failed = 0
                    elapsed = 0.0
                    for i in range(amount):
                        began = time.perf_counter()
                        try:
                            producer.send(Message(broker_name, body))
                            ok += 1
                        except (ClientError, RemotingError, ResponseError):
                            failed += 1
                        if i:
                            elapsed += time.perf_counter() - began
                    rt = elapsed * 1000 / (amount - 1) if amount > 1 else 0.0
                    rows.append(BrokerRT(cluster_name, broker_name, round(rt, 3), ok, failed))
        return rows

    def pull_messages(
        self, topic: str, broker_name: str, queue_id: int, offset: int, max_num: int = 32
    ) -> list[StoredMessage]:
        """Up to ``max_num`` messages of one queue from ``offset`` (PULL_MESSAGE to its master, as
        group TOOLS_CONSUMER_GROUP, all tags, no commit); [] past the end."""
        ext = {
            "consumerGroup": TOOLS_CONSUMER_GROUP,
            "topic": topic,
            "queueId": queue_id,
            "queueOffset": offset,
            "maxMsgNums": max_num,
            "sysFlag": PullSysFlag.SUBSCRIPTION,
            "commitOffset": 0,
            "suspendTimeoutMillis": 0,
            "subscription": "*",
            "subVersion": 0,
        }
        answer = self.invoke(
            self.master_addr(broker_name),
            RequestCode.PULL_MESSAGE,
            ext,
            accept=(
                ResponseCode.SUCCESS,
                ResponseCode.PULL_NOT_FOUND,
                ResponseCode.PULL_OFFSET_MOVED,
                ResponseCode.PULL_RETRY_IMMEDIATELY,
            ),
        )
        return _records(body_bytes(answer.body)) if answer.code == ResponseCode.SUCCESS else []

    def message_by_offset(self, topic: str, broker_name: str, queue_id: int, offset: int) -> StoredMessage:
        """mqadmin queryMsgByOffset: the message at ``offset`` of queue ``queue_id`` of ``topic`` on
        ``broker_name``; NotFound when there is none."""
        found = [m for m in self.pull_messages(topic, broker_name, queue_id, offset, 1) if m.queue_offset == offset]
        if not found:
            raise NotFound(f"no message at offset {offset} of queue {queue_id} of {topic} on {broker_name}")
        return found[0]

    def queue_offset_range(
        self, topic: str, broker_name: str, queue_id: int, begin: int | None, end: int | None
    ) -> tuple[int, int]:
        """[first, last) offsets of one queue between store times ``begin`` and ``end`` (ms; None:
        the queue's start / end), as mqadmin printMsg finds them (SEARCH_OFFSET_BY_TIMESTAMP)."""
        addr = self.master_addr(broker_name)
        ext = {"topic": topic, "queueId": queue_id}

        def ask(code: int, extra: dict[str, Any] | None = None) -> int:
            return int(self.invoke(addr, code, {**ext, **(extra or {})}).ext_fields["offset"])

        first = (
            ask(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"timestamp": begin})
            if begin is not None
            else ask(RequestCode.GET_MIN_OFFSET)
        )
        last = (
            ask(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"timestamp": end})
            if end is not None
            else ask(RequestCode.GET_MAX_OFFSET)
        )
        return first, last

    def print_messages(
        self,
        topic: str,
        begin: int | None = None,
        end: int | None = None,
        queue: tuple[str, int] | None = None,
        offsets: tuple[int, int | None] | None = None,
        limit: int | None = None,
    ) -> list[StoredMessage]:
        """mqadmin printMsg: the messages of every queue of ``topic`` (or of ``queue``, (broker
        name, queue id)) stored between ``begin`` and ``end`` (ms), or within ``offsets``
        [first, last) of that one queue; at most ``limit``, queue by queue in offset order."""
        if queue is None:
            route = self.topic_route(topic)
            queues = [
                (q["brokerName"], i) for q in route.get("queueDatas") or [] for i in range(int(q["readQueueNums"]))
            ]
        else:
            queues = [queue]
        out: list[StoredMessage] = []
        for broker_name, queue_id in sorted(queues):
            first, last = self.queue_offset_range(topic, broker_name, queue_id, begin, end)
            if offsets is not None:
                first = max(first, offsets[0])
                last = last if offsets[1] is None else min(last, offsets[1])
            offset = first
            while offset < last and (limit is None or len(out) < limit):
                batch = self.pull_messages(topic, broker_name, queue_id, offset, min(PRINT_BATCH, last - offset))
                if not batch:
                    break
                for m in batch:
                    in_time = (begin is None or m.store_timestamp >= begin) and (end is None or m.store_timestamp < end)
                    if m.queue_offset < last and in_time and (limit is None or len(out) < limit):
                        out.append(m)
                offset = batch[-1].queue_offset + 1
        return out

    # -- replication ----------------------------------------------------------------------------

    def broker_addrs(self, broker_name: str) -> dict[int, str]:
        """brokerId -> address of every broker (master and slaves) named ``broker_name``."""
        data = (self.cluster_info().get("brokerAddrTable") or {}).get(broker_name)
        if data is None:
            raise AdminError(f"broker {broker_name!r} is not known to the name server")
        return {int(broker_id): addr for broker_id, addr in sorted((data.get("brokerAddrs") or {}).items())}

    def commit_log_digests(self, addr: str, start: int, end: int, range_size: int) -> CommitLogDigests:
        """The broker's CommitLog digests of ``[start, end)`` in ``range_size``-aligned ranges, asked
        for in as many requests as the broker's bounded answers take (their nextOffset)."""
        digests: list[RangeDigest] = []
        first: CommitLogDigests | None = None
        offset = start
        while True:
            ext = {"startOffset": offset, "endOffset": end, "rangeSize": range_size}
            response = self.invoke(addr, RequestCode.GET_COMMIT_LOG_DIGESTS, ext)
            answer = CommitLogDigests.decode(body_bytes(response.body))
            first = first or answer
            digests += answer.digests
            if answer.next_offset is None:
                return dataclasses.replace(first, digests=digests, next_offset=None)
            if answer.next_offset <= offset:
                raise AdminError(f"{addr} answered digests from {offset} with nextOffset {answer.next_offset}")
            offset = answer.next_offset

    def verify_replicas(self, broker_name: str, range_size: int) -> list[ReplicaCheck]:
        """Each slave of ``broker_name`` against its master: both hash their CommitLog over what both
        hold, range by range, and the first range whose digests differ is named."""
        addrs = self.broker_addrs(broker_name)
        master = addrs.get(MASTER_ID)
        if master is None:
            raise AdminError(f"broker {broker_name!r} has no master registered")
        slaves = {i: a for i, a in addrs.items() if i != MASTER_ID}
        if not slaves:
            raise AdminError(f"broker {broker_name!r} has no slave registered")
        checks = []
        for slave_id, slave in slaves.items():
            # what each holds first (an empty range asks for no hashing), then the digests of the overlap
            master_span = self.commit_log_digests(master, 0, 0, range_size)
            slave_span = self.commit_log_digests(slave, 0, 0, range_size)
            start = max(master_span.min_offset, slave_span.min_offset)
            end = min(master_span.max_offset, slave_span.max_offset)
            check = ReplicaCheck(
                broker_name, slave_id, slave, master, master_span.max_offset, slave_span.max_offset, start, end
            )
            if end > start:
                ours = self.commit_log_digests(master, start, end, range_size).digests
                theirs = self.commit_log_digests(slave, start, end, range_size).digests
                for a, b in zip(ours, theirs, strict=False):
                    if a != b:
                        check.first_difference, check.difference_length = a.offset, max(a.length, b.length)
                        break
                else:
                    if len(ours) != len(theirs):
                        shorter = ours if len(ours) < len(theirs) else theirs
                        check.first_difference = shorter[-1].offset + shorter[-1].length if shorter else start
            checks.append(check)
        return checks

    def promote(
        self, broker_name: str, broker_id: int, role: str | None = None, controller: str | None = None
    ) -> Promotion:
        """Make slave ``broker_id`` of ``broker_name`` its master (PROMOTE_TO_MASTER), in ``role``
        (ASYNC_MASTER unless SYNC_MASTER is asked); answered once it registered as master. A broker
        set in controller mode (``controller``, the controllers' addresses, or the broker says so)
        is asked of its controllers instead (``elect_master``: the role is theirs to decide)."""
        addr = self.broker_addrs(broker_name).get(broker_id)
        if addr is None:
            raise AdminError(f"broker {broker_name!r} has no broker with id {broker_id} registered")
        if broker_id == MASTER_ID:
            raise AdminError(f"broker {broker_id} of {broker_name!r} is its master already: promote a slave (id > 0)")
        controllers = controller or self.broker_runtime_info(addr).get(RUNTIME_CONTROLLER_ADDR)
        if controllers:
            return self.elect_master(controllers, broker_name, broker_id)
        ext = {PROMOTE_ROLE: role} if role else {}
        response = self.invoke(addr, RequestCode.PROMOTE_TO_MASTER, ext)
        return Promotion(
            broker_name,
            addr,
            int(response.ext_fields[PROMOTED_EPOCH]),
            int(response.ext_fields[PROMOTED_START_OFFSET]),
        )

    def broker_address(self, broker: str) -> str:
        """``broker`` itself when it is host:port, else the address of broker name ``broker``'s master."""
        return broker if ":" in broker else self.master_addr(broker)

    def master_addr(self, broker_name: str) -> str:
        """The address of ``broker_name``'s master."""
        master = self.broker_addrs(broker_name).get(MASTER_ID)
        if master is None:
            raise AdminError(f"broker {broker_name!r} has no master registered")
        return master

    def ha_status(self, broker_name: str) -> tuple[str, HAStatus]:
        """(master address, what it knows of each slave connection) of ``broker_name``."""
        master = self.master_addr(broker_name)
        return master, HAStatus.decode(body_bytes(self.invoke(master, RequestCode.GET_HA_STATUS).body))

    # -- controllers (docs/controller.md) ---------------------------------------------------------

    def controller_status(self, controllers: str) -> list[ControllerStatus]:
        """Each of ``controllers`` (host:port[;host:port]): the group, its members, the leader it
        knows of and its Raft term, or why it did not answer."""
        out = []
        for addr in parse_namesrv_addrs(controllers):
            try:
                answer = self.invoke(addr, RequestCode.CONTROLLER_GET_METADATA_INFO)
            except (RemotingError, ResponseError) as e:
                out.append(ControllerStatus(addr, None, str(e)))
                continue
            out.append(ControllerStatus(addr, ControllerMetadata.from_fields(answer.ext_fields)))
        return out

    def controller_leader(self, controllers: str) -> str:
        """The remoting address of the controllers' leader, as the first of ``controllers`` that knows it says."""
        errors = []
        for status in self.controller_status(controllers):
            if status.metadata is not None and status.metadata.leader_address:
                return status.metadata.leader_address
            errors.append(f"{status.address}: {status.error or 'knows no leader'}")
        raise AdminError("no controller leader found: " + "; ".join(errors))

    def sync_state(self, controllers: str, broker_name: str) -> tuple[str, ReplicasInfo]:
        """(the leader's address, ``broker_name``'s master, epochs and replicas, in the sync state set or
        not, alive or not), from the controllers' leader; NotFound for a set it does not know."""
        leader = self.controller_leader(controllers)
        answer = self.invoke(
            leader, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=encode_broker_names([broker_name])
        )
        infos = decode_replicas_infos(body_bytes(answer.body))
        if broker_name not in infos:
            raise NotFound(f"the controllers at {leader} know no broker set {broker_name!r}")
        return leader, infos[broker_name]

    def elect_master(self, controllers: str, broker_name: str, broker_id: int) -> Promotion:
        """Have the controllers elect broker ``broker_id`` of ``broker_name`` (CONTROLLER_ELECT_MASTER
        with designateElect, an operator's override: it must be alive, and in the sync state set
        unless the controllers allow an unclean election); returned once that broker serves as
        master in the new epoch and the name server routes it, with the CommitLog offset where the
        epoch began."""
        clusters = self.cluster_info().get("clusterAddrTable") or {}
        cluster = next((c for c, names in clusters.items() if broker_name in names), None)
        if cluster is None:
            raise AdminError(f"no cluster of the name server holds broker {broker_name!r}")
        ext = {
            CLUSTER_NAME: cluster,
            BROKER_NAME: broker_name,
            BROKER_ID: str(broker_id),
            DESIGNATE_ELECT: "true",
        }
        response = self.invoke(self.controller_leader(controllers), RequestCode.CONTROLLER_ELECT_MASTER, ext)
        info = ReplicaInfo.from_fields(response.ext_fields)
        if info.master_broker_id != broker_id:
            raise AdminError(
                f"the controllers elected broker {info.master_broker_id} ({info.master_address or 'none'}) of "
                f"{broker_name!r}, not {broker_id}"
            )
        deadline = time.monotonic() + self.timeout
        while True:
            table = EpochTable.decode(body_bytes(self.invoke(info.master_address, RequestCode.GET_EPOCH_TABLE).body))
            begun = [start for epoch, start in table.epochs if epoch == info.master_epoch]
            if begun and self.broker_addrs(broker_name).get(MASTER_ID) == info.master_address:
                return Promotion(broker_name, info.master_address, info.master_epoch, begun[0])
            if time.monotonic() > deadline:
                raise AdminError(
                    f"the controllers elected {info.master_address} master of {broker_name!r} in epoch "
                    f"{info.master_epoch}, but it has not "
                    + ("registered as master" if begun else "begun that epoch")
                    + f" within {self.timeout} s"
                )
            time.sleep(ELECTED_POLL_INTERVAL)

    def cluster_brokers(self) -> list[BrokerRow]:
        """Every broker of every cluster, masters and slaves, with its runtime info (an empty one
        when it does not answer) and, for a slave, how many bytes it is behind its master."""
        info = self.cluster_info()
        brokers = info.get("brokerAddrTable") or {}
        rows = []
        for cluster_name, names in sorted((info.get("clusterAddrTable") or {}).items()):
            for name in sorted(names):
                addrs = brokers.get(name, {}).get("brokerAddrs") or {}
                for broker_id, addr in sorted(addrs.items(), key=lambda item: int(item[0])):
                    try:
                        runtime = self.broker_runtime_info(addr)
                    except (RemotingError, ResponseError):
                        runtime = {}
                    rows.append(BrokerRow(cluster_name, name, int(broker_id), addr, runtime))
        masters = {(r.cluster, r.broker_name): r for r in rows if r.broker_id == MASTER_ID}
        for row in rows:
            master = masters.get((row.cluster, row.broker_name))
            if row.broker_id != MASTER_ID and master is not None:
                if master.max_offset is not None and row.max_offset is not None:
                    row.lag_bytes = max(0, master.max_offset - row.max_offset)
        return rows

    def broker_runtime_info(self, addr: str) -> dict[str, str]:
        response = self.invoke(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        table: dict[str, str] = json.loads(body_bytes(response.body))["table"]
        return table

    # -- consumer groups, broker settings, maintenance (mqadmin's updateSubGroup, deleteSubGroup,
    # -- getBrokerConfig, updateBrokerConfig, wipeWritePerm, addWritePerm, *KvConfig) --------------

    def target_brokers(self, cluster: str | None, broker_addr: str | None) -> list[str]:
        """``broker_addr`` alone, else every master (of ``cluster``)."""
        addrs = [broker_addr] if broker_addr else list(self.master_addrs(cluster).values())
        if not addrs:
            raise AdminError("no master broker is registered with the name server")
        return addrs

    def subscription_groups(self, addr: str) -> dict[str, dict[str, Any]]:
        """group -> its SubscriptionGroupConfig JSON, of the broker at ``addr`` (201)."""
        response = self.invoke(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        table: dict[str, dict[str, Any]] = self._json(response).get("subscriptionGroupTable") or {}
        return table

    def all_subscription_groups(self) -> dict[str, dict[str, Any]]:
        """group -> its SubscriptionGroupConfig JSON, over every master (the first master's
        config of a group held by several), sorted by group."""
        merged: dict[str, dict[str, Any]] = {}
        for addr in self.target_brokers(None, None):
            for group, config in self.subscription_groups(addr).items():
                merged.setdefault(group, config)
        return dict(sorted(merged.items()))

    def update_subscription_group(
        self, config: dict[str, Any], cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with ``config`` (a whole SubscriptionGroupConfig JSON:
        what it leaves out the broker sets to the default) on one broker or every master; the addresses."""
        addrs = self.target_brokers(cluster, broker_addr)
        body = json.dumps(config).encode()
        for addr in addrs:
            self.invoke(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        return addrs

    def delete_subscription_group(
        self, group: str, remove_offset: bool = False, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """DELETE_SUBSCRIPTIONGROUP on one broker or every master (``remove_offset``: its offsets too)."""
        addrs = self.target_brokers(cluster, broker_addr)
        flag = "true" if remove_offset else "false"
        # 4.x reads removeOffset, 5.x cleanOffset
        ext = {"groupName": group, "removeOffset": flag, "cleanOffset": flag}
        for addr in addrs:
            self.invoke(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, ext)
        return addrs

    def broker_config(self, addr: str) -> dict[str, str]:
        """The settings of the broker at ``addr`` (GET_BROKER_CONFIG: Properties text)."""
        response = self.invoke(addr, RequestCode.GET_BROKER_CONFIG)
        return parse_properties((body_bytes(response.body) or b"").decode())

    def update_broker_config(self, addr: str, changes: dict[str, str]) -> None:
        """UPDATE_BROKER_CONFIG: ``changes`` as Properties text; refused (NO_PERMISSION, the remark
        says why) when a key is unknown, its value is wrong or it cannot change while the broker runs."""
        text = "".join(f"{key}={value}\n" for key, value in changes.items())
        self.invoke(addr, RequestCode.UPDATE_BROKER_CONFIG, body=text.encode())

    def _each_namesrv(self, code: int, ext: dict[str, Any]) -> dict[str, RemotingCommand]:
        """The request to every name server (each keeps its own routes and KV config), as mqadmin sends it."""
        return {addr: self.invoke(addr, code, ext) for addr in self.namesrv_addrs}

    def set_write_perm_of_broker(self, broker_name: str, writeable: bool) -> dict[str, int]:
        """Take the write permission off ``broker_name``'s routes on every name server, or give it
        back; name server -> topics changed."""
        if writeable:
            code, count_field = RequestCode.ADD_WRITE_PERM_OF_BROKER, "addTopicCount"
        else:
            code, count_field = RequestCode.WIPE_WRITE_PERM_OF_BROKER, "wipeTopicCount"
        answers = self._each_namesrv(code, {"brokerName": broker_name})
        return {addr: int(answer.ext_fields.get(count_field) or 0) for addr, answer in answers.items()}

    def put_kv_config(self, namespace: str, key: str, value: str) -> list[str]:
        return list(self._each_namesrv(RequestCode.PUT_KV_CONFIG, {"namespace": namespace, "key": key, "value": value}))

    def delete_kv_config(self, namespace: str, key: str) -> list[str]:
        return list(self._each_namesrv(RequestCode.DELETE_KV_CONFIG, {"namespace": namespace, "key": key}))

    def get_kv_config(self, namespace: str, key: str) -> str:
        """The value, from the first name server that answers; NotFound when it has none."""
        response = self.invoke_namesrv(
            RequestCode.GET_KV_CONFIG,
            {"namespace": namespace, "key": key},
            accept=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code != ResponseCode.SUCCESS:
            raise NotFound(f"no KV config {namespace} {key}: {response.remark}")
        return response.ext_fields.get("value", "")


def _int_or_none(value: str | None) -> int | None:
    """A runtime info value as a number; None when it is missing or not a number."""
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _master_of(broker_data: dict[str, Any]) -> str | None:
    addrs = broker_data.get("brokerAddrs") or {}
    return addrs.get(str(MASTER_ID), addrs.get(MASTER_ID))
