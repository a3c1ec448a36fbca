"""What the producers and consumers of a process share (RocketMQ's MQClientInstance).

One instance per client id (``ip@instance_name``): one remoting client (one connection per broker
and name server), the route cache, the timer thread, the groups registered on it. It

- asks a name server for routes: one chosen at random, the next one in turn when it fails;
- refreshes the routes of every topic in use every 30 s and hands them to its producers/consumers,
  and a topic's at once (at most every ROUTE_REFRESH_AFTER_FAILURE) when a send to it failed: a
  broker set's new master (a failover) is found in a second, not at the next 30 s poll;
- heartbeats every broker it knows every 30 s (and at once when a group registers);
- runs the consumers' rebalance every 20 s, and at once on NOTIFY_CONSUMER_IDS_CHANGED;
- persists consumer offsets every 5 s.

Producers and consumers get an instance with ``acquire_instance(config)`` and give it back with
``release()``; the last release shuts it down. Its threads (the remoting loop and the timer
``Scheduler``) are in docs/threads.md.
"""

from __future__ import annotations

import json
import logging
import os
import random
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

from rmq._service import Scheduler
from rmq.client.api import ClientAPI
from rmq.client.message import decode_messages
from rmq.client.msg_id import local_ipv4
from rmq.client.route import TopicRouteData
from rmq.errors import ClientError, RemotingConnectError, RemotingError, RequestRefused, ResponseError
from rmq.net import RemotingClient, RemotingCommand
from rmq.net.codec import body_bytes
from rmq.protocol import running_info
from rmq.protocol.acl import SessionCredentials
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.message import MAX_MESSAGE_SIZE, MessageProperty, group_error
from rmq.protocol.message_queue import MessageQueue
from rmq.protocol.route import MASTER_ID
from rmq.protocol.transaction import CheckTransactionStateHeader
from rmq.settings import DEFAULT_NAMESRV_ADDR

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

    from rmq.net.channel import Channel

log = logging.getLogger("rmq.client")

# How long a broker address that refused a connection is passed over for another address of the
# same broker name (a master killed before the name servers and the routes forget it).
UNREACHABLE_SECONDS = 5.0
# The least seconds between two route refreshes of a topic that sends to it failed: a dead master is
# looked past within a second of its failover, and a burst of failures asks a name server once.
ROUTE_REFRESH_AFTER_FAILURE = 1.0

R = TypeVar("R")


@dataclass
class ClientConfig:
    """Settings every producer and consumer has (RocketMQ's ClientConfig); seconds, not ms."""

    namesrv_addr: str = DEFAULT_NAMESRV_ADDR
    # Processes (or clients of one process meant to be distinct group members) differ by this.
    instance_name: str = field(default_factory=lambda: str(os.getpid()))
    client_ip: str = field(default_factory=lambda: ".".join(str(b) for b in local_ipv4()))
    poll_name_server_interval: float = 30.0
    heartbeat_broker_interval: float = 30.0
    persist_consumer_offset_interval: float = 5.0
    # How long a request to a name server or broker may take (sends have their own timeout).
    request_timeout: float = 3.0
    # The largest body a producer sends and a consumer inflates a compressed body to (the broker's
    # maxMessageSize by default): past it a send is refused, a pulled message reported and skipped.
    max_message_size: int = MAX_MESSAGE_SIZE
    # (access_key, secret_key[, security_token]): every request is signed for brokers with aclEnable
    # (RocketMQ's AclClientRPCHook). The members of one instance share its credentials.
    credentials: SessionCredentials | tuple[str, ...] | None = field(default=None, repr=False)
    # Connect to name servers and brokers with TLS: True verifies them against the system's CAs; an
    # ssl.SSLContext of your own for a CA of your own (rmq.net.tls).
    tls: bool | ssl.SSLContext = False

    def __post_init__(self) -> None:
        try:
            self.credentials = SessionCredentials.of(self.credentials)
        except (TypeError, ValueError) as exc:
            raise ClientError(str(exc)) from None

    @property
    def client_id(self) -> str:
        return f"{self.client_ip}@{self.instance_name}"

    def namesrv_addrs(self) -> list[str]:
        addrs = [a.strip() for a in self.namesrv_addr.replace(",", ";").split(";") if a.strip()]
        if not addrs:
            raise ClientError(f"no name server address in {self.namesrv_addr!r}, expected 'host:port[;host:port]'")
        return addrs


class InstanceMember:
    """What producers and consumers share: joining the instance of their config, and leaving it.

    Subclasses set ``kind`` ("producer" or "consumer") and implement start/shutdown with
    ``_join``/``_leave``, ``topics_in_use`` and ``on_route_changed``.
    """

    kind = ""
    group: str
    config: ClientConfig
    _instance: ClientInstance | None = None

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None:
            raise self._not_started()
        return self._instance

    def _not_started(self) -> ClientError:
        return ClientError(f"{self.kind} {self.group} is not started: call start() or use it in a with block")

    def _join(self) -> ClientInstance:
        instance = acquire_instance(self.config)
        try:
            instance.register(self, self.kind)
        except ClientError:
            instance.release()
            raise
        self._instance = instance
        return instance

    def _leave(self) -> None:
        instance, self._instance = self._instance, None
        if instance is not None:
            instance.unregister(self, self.kind)
            instance.release()

    def start(self) -> Self:
        raise NotImplementedError

    def shutdown(self) -> None:
        raise NotImplementedError

    def topics_in_use(self) -> set[str]:
        raise NotImplementedError

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.shutdown()


C = TypeVar("C", bound=ClientConfig)


def option_fields(config_cls: type[C], options: dict[str, Any]) -> C:
    """``config_cls(**options)`` with a clear error naming an unknown option."""
    known = {f.name for f in fields(config_cls)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ClientError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return config_cls(**options)


def check_group(group: str) -> None:
    error = group_error(group)
    if error:
        raise ClientError(error)


class ClientInstance:
    def __init__(self, config: ClientConfig):
        self.config = config
        self.client_id = config.client_id
        self.remoting = RemotingClient(
            connect_timeout=config.request_timeout,
            name=f"rmq-client-{config.instance_name}",
            credentials=config.credentials,
            tls=config.tls,
        )
        self.api = ClientAPI(self.remoting)
        self.scheduler = Scheduler(f"rmq-client-timer-{config.instance_name}")
        self._namesrv_addrs = config.namesrv_addrs()
        self._namesrv_index = random.randrange(len(self._namesrv_addrs))
        self._lock = threading.RLock()
        self.routes: dict[str, TopicRouteData] = {}
        # brokerName -> {brokerId: address}, from every route seen
        self.broker_addrs: dict[str, dict[int, str]] = {}
        # address -> time.monotonic() until which it is passed over (it refused a connection)
        self._unreachable: dict[str, float] = {}
        # topic -> time.monotonic() of its last refresh asked for by a failed send
        self._refreshed_after_failure: dict[str, float] = {}
        self.producers: dict[str, InstanceMember] = {}
        self.consumers: dict[str, Any] = {}
        self._users = 0
        self._started = False

    # -- life cycle -----------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        self.remoting.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_consumer_ids_changed)
        self.remoting.register_processor(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction_state)
        self.remoting.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_get_consumer_running_info)
        self.remoting.register_processor(RequestCode.CONSUME_MESSAGE_DIRECTLY, self._on_consume_message_directly)
        self.remoting.start()
        self.scheduler.schedule_periodic(self.config.poll_name_server_interval, self.update_all_routes)
        self.scheduler.schedule_periodic(self.config.heartbeat_broker_interval, self.send_heartbeat_to_all)
        self.scheduler.schedule_periodic(self.config.persist_consumer_offset_interval, self.persist_all_offsets)
        self.scheduler.start()

    def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        self.scheduler.shutdown()
        self.remoting.shutdown()
        with _instances_lock:
            if _instances.get(self.client_id) is self:
                del _instances[self.client_id]

    def release(self) -> None:
        """A producer or consumer no longer uses the instance; the last one shuts it down."""
        with _instances_lock:
            self._users -= 1
            last = self._users <= 0
        if last:
            self.shutdown()

    # -- members --------------------------------------------------------------------------------

    def register(self, member: InstanceMember, kind: str) -> None:
        """Add a producer or consumer (``kind``); one per group per instance, as in RocketMQ."""
        with self._lock:
            table = self.producers if kind == "producer" else self.consumers
            if member.group in table:
                raise ClientError(
                    f"{kind} group {member.group!r} already has a {kind} in client "
                    f"{self.client_id}; give the second one another instance_name"
                )
            table[member.group] = member

    def unregister(self, member: InstanceMember, kind: str) -> None:
        """Forget ``member`` and tell every broker (UNREGISTER_CLIENT), so its group rebalances now."""
        with self._lock:
            table = self.producers if kind == "producer" else self.consumers
            if table.get(member.group) is member:
                del table[member.group]
            addrs = self.all_broker_addrs()
        producer_group = member.group if kind == "producer" else None
        consumer_group = member.group if kind == "consumer" else None
        for addr in addrs:
            try:
                self.api.unregister_client(
                    addr, self.client_id, producer_group, consumer_group, self.config.request_timeout
                )
            except (RemotingError, ResponseError) as exc:
                log.warning("unregistering %s %s from %s failed: %s", kind, member.group, addr, exc)

    # -- name servers and routes ----------------------------------------------------------------

    def fetch_route(self, topic: str) -> TopicRouteData | None:
        """The topic's route from a name server; None when it does not know the topic.

        Tries the current name server, then each other in turn; raises the last RemotingError
        (naming every address tried) when none answers.
        """
        errors = []
        last_error: RemotingError | None = None
        count = len(self._namesrv_addrs)
        for attempt in range(count):
            index = (self._namesrv_index + attempt) % count
            addr = self._namesrv_addrs[index]
            try:
                body = self.api.get_route(addr, topic, self.config.request_timeout)
            except RemotingError as exc:
                errors.append(f"{addr}: {exc}")
                last_error = exc
                continue
            if attempt:
                self._namesrv_index = index
                log.info("name server %s answers; now using it", addr)
            return None if body is None else TopicRouteData.from_json(body)
        assert last_error is not None, "config.namesrv_addrs() has at least one address"
        raise type(last_error)(f"no name server answered the route of {topic!r}: {'; '.join(errors)}") from last_error

    def update_route(self, topic: str) -> TopicRouteData | None:
        """Fetch ``topic``'s route, cache it and hand it to the members; None for an unknown topic."""
        route = self.fetch_route(topic)
        if route is None:
            return None
        with self._lock:
            changed = self.routes.get(topic) != route
            self.routes[topic] = route
            for broker in route.broker_datas:
                self.broker_addrs[broker.broker_name] = dict(broker.broker_addrs)
            members = list(self.producers.values()) + list(self.consumers.values())
        if changed:
            log.info("route of %s: %s", topic, route)
        for member in members:
            if topic in member.topics_in_use():
                member.on_route_changed(topic, route)
        return route

    def send_failed(self, topic: str) -> None:
        """A send to ``topic`` failed at a broker (any thread, never blocks): refresh its route
        soon, at most every ROUTE_REFRESH_AFTER_FAILURE (the broker set's master may have moved)."""
        now = time.monotonic()
        with self._lock:
            if (
                now - self._refreshed_after_failure.get(topic, -ROUTE_REFRESH_AFTER_FAILURE)
                < ROUTE_REFRESH_AFTER_FAILURE
            ):
                return
            self._refreshed_after_failure[topic] = now
        self.scheduler.run_soon(self._refresh_after_failure, topic)

    def _refresh_after_failure(self, topic: str) -> None:
        try:
            self.update_route(topic)
        except (RemotingError, ClientError) as exc:
            log.warning("route refresh of %s after a failed send failed: %s", topic, exc)

    def update_all_routes(self) -> None:
        with self._lock:
            topics = set()
            for member in list(self.producers.values()) + list(self.consumers.values()):
                topics |= member.topics_in_use()
        for topic in sorted(topics):
            try:
                self.update_route(topic)
            except (RemotingError, ClientError) as exc:
                log.warning("route refresh of %s failed: %s", topic, exc)

    def find_broker_addr(self, broker_name: str) -> str | None:
        """The master's address of ``broker_name`` (sends, send-backs, queue locks)."""
        return (self.broker_addrs.get(broker_name) or {}).get(MASTER_ID)

    def broker_addr_or_raise(self, broker_name: str, topic: str) -> str:
        addr = self.find_broker_addr(broker_name)
        if addr is None:
            self.update_route(topic)
            addr = self.find_broker_addr(broker_name)
        if addr is None:
            raise ClientError(
                f"broker {broker_name!r} of topic {topic!r} has no master address in the name server's route"
            )
        return addr

    # -- masters and slaves (RocketMQ's findBrokerAddressInSubscribe / InAdmin) ----------------

    def mark_unreachable(self, addr: str) -> None:
        """``addr`` refused a connection: prefer the other addresses of its broker name for a while."""
        with self._lock:
            first = addr not in self._unreachable
            self._unreachable[addr] = time.monotonic() + UNREACHABLE_SECONDS
        if first:
            log.warning("broker %s refuses connections: using another address of its broker name", addr)

    def reachable(self, addr: str) -> bool:
        until = self._unreachable.get(addr)
        if until is None:
            return True
        if until > time.monotonic():
            return False
        with self._lock:
            if self._unreachable.get(addr) == until:
                del self._unreachable[addr]
        return True

    def find_broker_addr_in_subscribe(self, broker_name: str, broker_id: int) -> tuple[str, bool] | None:
        """Where to pull a queue of ``broker_name`` from: (address, is a slave). The broker id the
        last pull answer suggested (a slave id not in the route: the next id up), else the master,
        else a slave; an address that refused a connection lately only when nothing else is left."""
        addrs = dict(self.broker_addrs.get(broker_name) or {})
        if not addrs:
            return None
        candidates = [broker_id] + ([broker_id + 1] if broker_id != MASTER_ID else []) + sorted(addrs)
        chosen = [i for i in candidates if i in addrs]
        for i in chosen:
            if self.reachable(addrs[i]):
                return addrs[i], i != MASTER_ID
        return addrs[chosen[0]], chosen[0] != MASTER_ID

    def find_broker_addr_in_admin(self, broker_name: str, skip: set[str] | frozenset[str] = frozenset()) -> str | None:
        """Where a group's offsets of ``broker_name`` are committed and read: its master, else (the
        master missing from the route or refusing connections) a slave. None when nothing is left
        but ``skip``."""
        addrs = self.broker_addrs.get(broker_name) or {}
        ordered = [addrs[i] for i in sorted(addrs) if addrs[i] not in skip]
        if not ordered:
            return None
        return next((addr for addr in ordered if self.reachable(addr)), ordered[0])

    def call_in_admin(self, broker_name: str, topic: str, request: Callable[[str], R]) -> R:
        """``request(addr)`` at ``find_broker_addr_in_admin``'s address; when that refuses the
        connection, at the next one of the broker name."""
        if not self.broker_addrs.get(broker_name):
            self.update_route(topic)
        tried: set[str] = set()
        while True:
            addr = self.find_broker_addr_in_admin(broker_name, tried)
            if addr is None:
                raise ClientError(f"broker {broker_name!r} of topic {topic!r} has no address in the route")
            try:
                return request(addr)
            except RemotingConnectError:
                self.mark_unreachable(addr)
                tried.add(addr)
                if self.find_broker_addr_in_admin(broker_name, tried) is None:
                    raise

    def any_broker_addr_of(self, topic: str) -> str | None:
        """A broker of ``topic`` to ask about the group (its master, else a slave), at random."""
        route = self.routes.get(topic)
        if route is None:
            return None
        addrs = [addr for addr in (self.find_broker_addr_in_admin(b.broker_name) for b in route.broker_datas) if addr]
        return random.choice(addrs) if addrs else None

    def all_broker_addrs(self) -> list[str]:
        with self._lock:
            return sorted({addr for addrs in self.broker_addrs.values() for addr in addrs.values()})

    # -- heartbeats -----------------------------------------------------------------------------

    def heartbeat_body(self) -> bytes:
        with self._lock:
            producers = [{"groupName": g} for g in self.producers]
            consumers = [c.consumer_data() for c in self.consumers.values()]
        return json.dumps(
            {"clientID": self.client_id, "producerDataSet": producers, "consumerDataSet": consumers}
        ).encode()

    def send_heartbeat_to_all(self) -> None:
        body = self.heartbeat_body()
        for addr in self.all_broker_addrs():
            try:
                self.api.heartbeat(addr, body, self.config.request_timeout)
            except (RemotingError, ResponseError) as exc:
                log.warning("heartbeat to %s failed: %s", addr, exc)

    # -- consumers ------------------------------------------------------------------------------

    def persist_all_offsets(self) -> None:
        for consumer in list(self.consumers.values()):
            consumer.persist_offsets()

    def rebalance_now(self) -> None:
        for consumer in list(self.consumers.values()):
            self.scheduler.run_soon(consumer.rebalance)

    def _on_consumer_ids_changed(self, channel: Channel, request: RemotingCommand) -> None:
        group = request.ext_fields.get("consumerGroup", "")
        log.info("broker %s: consumers of group %s changed; rebalancing", channel.remote_address, group)
        consumer = self.consumers.get(group)
        if consumer is not None:
            self.scheduler.run_soon(consumer.rebalance)
        return None

    # -- asked by an admin through a broker (Java's ClientRemotingProcessor) -----------------------

    def _consumer_asked(self, request: RemotingCommand) -> Any:
        group = request.ext_fields.get(running_info.CONSUMER_GROUP, "")
        consumer = self.consumers.get(group)
        if consumer is None:
            raise RequestRefused(ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer")
        return consumer

    def _on_get_consumer_running_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        consumer = self._consumer_asked(request)
        jstack = request.ext_fields.get(running_info.JSTACK_ENABLE, "false").lower() == "true"
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=consumer.running_info(jstack))

    def _on_consume_message_directly(self, channel: Channel, request: RemotingCommand) -> None:
        """The broker's stored record, handed to the push consumer's listener on its pool; answered
        once the listener returns."""
        consumer = self._consumer_asked(request)
        consume = getattr(consumer, "consume_message_directly", None)
        if consume is None:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR, f"{self.client_id} of group {consumer.group} is not a push consumer"
            )
        broker_name = request.ext_fields.get(running_info.BROKER_NAME, "")
        try:
            messages = decode_messages(
                body_bytes(request.body), broker_name, max_body_size=self.config.max_message_size
            )
        except ClientError as exc:
            raise RequestRefused(ResponseCode.SYSTEM_ERROR, f"the message to consume does not decode: {exc}") from None
        if len(messages) != 1:
            raise RequestRefused(ResponseCode.SYSTEM_ERROR, f"expected one message to consume, got {len(messages)}")

        def done(result: dict[str, Any]) -> None:
            body = json.dumps(result, separators=(",", ":")).encode()
            channel.send_response(RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body))

        try:
            consume(messages[0], broker_name, done)
        except ClientError as exc:
            raise RequestRefused(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        return None

    # -- transactional producers ----------------------------------------------------------------

    def _on_check_transaction_state(self, channel: Channel, request: RemotingCommand) -> None:
        """A broker asks about a transaction (Java's ClientRemotingProcessor.checkTransactionState):
        handed to the transactional producer of the message's group (PGROUP), if this client has one."""
        try:
            header = CheckTransactionStateHeader.from_ext_fields(request.ext_fields)
            messages = decode_messages(body_bytes(request.body), max_body_size=self.config.max_message_size)
        except (RequestRefused, ClientError) as exc:
            log.warning("unusable CHECK_TRANSACTION_STATE from %s: %s", channel.remote_address, exc)
            return None
        if not messages:
            log.warning("CHECK_TRANSACTION_STATE from %s without a message", channel.remote_address)
            return None
        msg = messages[0]
        group = msg.get_property(MessageProperty.PRODUCER_GROUP)
        check = getattr(self.producers.get(group or ""), "check_transaction_state", None)
        if check is None:
            log.debug("CHECK_TRANSACTION_STATE for group %s: no transactional producer of it here", group)
            return None
        check(channel.remote_address, msg, header)
        return None


_instances: dict[str, ClientInstance] = {}
_instances_lock = threading.Lock()


def acquire_instance(config: ClientConfig) -> ClientInstance:
    """The started instance of ``config.client_id`` (made on first use); pair with ``release()``."""
    with _instances_lock:
        instance = _instances.get(config.client_id)
        if instance is None:
            instance = _instances[config.client_id] = ClientInstance(config)
        elif instance.config.credentials != config.credentials:
            # one connection per broker signs with one account: a second would be signed as the first
            raise ClientError(
                f"client {config.client_id} already signs with other credentials: "
                "give this producer or consumer another instance_name"
            )
        instance._users += 1
    instance.start()
    return instance


def group_by_broker(mqs: list[MessageQueue]) -> dict[str, list[MessageQueue]]:
    by_broker: dict[str, list[MessageQueue]] = {}
    for mq in mqs:
        by_broker.setdefault(mq.broker_name, []).append(mq)
    return by_broker
