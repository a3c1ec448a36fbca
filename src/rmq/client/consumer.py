"""What push and lite-pull consumers share: subscriptions, rebalance, long-polling pulls, offsets
(RocketMQ's RebalanceImpl, PullAPIWrapper and the pull half of DefaultMQPushConsumerImpl).

Each owned queue has a ``ProcessQueue`` and one pull in flight at a time. Pulls are asynchronous
and long-polling: the broker parks one for up to ``broker_suspend_max_time`` (15 s) until a
message arrives; the answer is handled on the remoting loop thread, which hands the messages on
(``_deliver``) and issues the next pull at once, or later when the queue is over its flow-control
limits (1000 messages, 100 MiB, span 2000) or the pull failed. Nothing on that path blocks.

Rebalance (every 20 s, at start, and when a broker says the group changed) runs on the
instance's timer thread: it may block on brokers (consumer list, offsets, locks).

Masters and slaves (RocketMQ's PullAPIWrapper): each pull answer's suggestWhichBrokerId says which
broker of the queue's broker name to pull that queue from next (a slave while the group reads far
behind, the master otherwise); the instance picks that address, or another one of the same broker
name when it is missing from the route or refused a connection (a dead master: its slave serves
what it holds). A pull from a slave never carries the commit flag: offsets go to the master, else a
slave, through the offset store.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from rmq._clock import now_ms
from rmq._service import PeriodicHandle
from rmq.client import allocate
from rmq.client.instance import ClientConfig, InstanceMember, check_group, option_fields
from rmq.client.message import MessageExt
from rmq.client.offset_store import LocalFileOffsetStore, OffsetStore, RemoteOffsetStore
from rmq.client.process_queue import ProcessQueue
from rmq.client.results import PullResult, PullStatus
from rmq.client.route import TopicRouteData, subscribe_queues
from rmq.client.running_info import consumer_properties, running_info_body
from rmq.errors import ClientError, RemotingConnectError, RemotingError, RequestRefused, ResponseError
from rmq.protocol.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel
from rmq.protocol.message import RETRY_GROUP_TOPIC_PREFIX, topic_error
from rmq.protocol.message_queue import MessageQueue
from rmq.protocol.request_flags import PullSysFlag
from rmq.protocol.route import MASTER_ID
from rmq.protocol.subscription import SUB_ALL, ExpressionType, SubscriptionData, build_subscription_data
from rmq.settings import DEFAULT_NAMESRV_ADDR

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

log = logging.getLogger("rmq.client")

# A topic a producer has just created (autoCreateTopicEnable) reaches the name servers with its
# broker's registration, which goes out as the send is answered, on another thread: a consumer
# started right after the send may ask first. A topic not routed is asked again this long, this
# often, before the consumer starts without it and says so.
NEW_TOPIC_ROUTE_GRACE = 1.0
NEW_TOPIC_ROUTE_POLL = 0.05
# Delays of the pull loop (RocketMQ's PULL_TIME_DELAY_MILLS_*), seconds.
PULL_DELAY_WHEN_FLOW_CONTROL = 0.05
PULL_DELAY_WHEN_EXCEPTION = 3.0
PULL_DELAY_WHEN_NOT_LOCKED = 3.0
# A retry answer that did not move the offset (a slave asked beyond what it holds) waits this long.
PULL_DELAY_WHEN_NO_PROGRESS = 1.0


@dataclass
class ConsumerConfig(ClientConfig):
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    # For CONSUME_FROM_TIMESTAMP: epoch ms; default half an hour before start.
    consume_timestamp: int | None = None
    allocate_strategy: Any = "average"
    rebalance_interval: float = 20.0
    pull_batch_size: int = 32
    pull_interval: float = 0.0
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue: int = 100 * 1024 * 1024
    consume_concurrently_max_span: int = 2000
    broker_suspend_max_time: float = 15.0
    consumer_timeout_when_suspend: float = 30.0
    # Broadcasting offsets live under this directory.
    offset_store_dir: str = "~/.rmq_offsets"


@dataclass(frozen=True)
class MessageSelector:
    """What a subscription selects (RocketMQ's MessageSelector): by tag or by an SQL92 expression
    over message properties, which the broker evaluates (it needs enablePropertyFilter=true).

        consumer.subscribe("Orders", MessageSelector.by_sql("amount > 100 AND region = 'eu'"))
        consumer.subscribe("Orders", MessageSelector.by_tag("created || paid"))
    """

    expression_type: str
    expression: str

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        return cls(ExpressionType.SQL92, sql)

    @classmethod
    def by_tag(cls, tag: str | None = None) -> MessageSelector:
        return cls(ExpressionType.TAG, tag or SUB_ALL)


E = TypeVar("E", bound=enum.IntEnum)


def parse_enum_option(kind: type[E], value: Any, prefix: str = "") -> E:
    """An enum member from itself, its name, or its name without ``prefix`` ("FIRST_OFFSET")."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        name = value.strip().upper()
        for candidate in (name, prefix + name):
            if candidate in kind.__members__:
                return kind[candidate]
    raise ClientError(f"{value!r} is not a {kind.__name__}; expected one of {', '.join(kind.__members__)}")


class ConsumerBase(InstanceMember):
    """Push and lite-pull consumers are this plus what they do with pulled messages (``_deliver``)."""

    kind = "consumer"
    consume_type = ConsumeType.CONSUME_PASSIVELY
    config_class: type[ConsumerConfig] = ConsumerConfig
    config: ConsumerConfig

    def __init__(self, group: str, namesrv_addr: str = DEFAULT_NAMESRV_ADDR, **options: Any):
        check_group(group)
        self.group = group
        self.config = option_fields(self.config_class, dict(options, namesrv_addr=namesrv_addr))
        self.config.message_model = parse_enum_option(MessageModel, self.config.message_model)
        self.config.consume_from_where = parse_enum_option(
            ConsumeFromWhere, self.config.consume_from_where, "CONSUME_FROM_"
        )
        if self.config.consume_timestamp is None:
            self.config.consume_timestamp = now_ms() - 30 * 60 * 1000
        self.allocate = allocate.strategy(self.config.allocate_strategy)
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.topic_queues: dict[str, list[MessageQueue]] = {}
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.next_offsets: dict[MessageQueue, int] = {}
        # queue -> the broker id its last pull answer suggested (RocketMQ's pullFromWhichNodeTable)
        self.pull_from_which_node: dict[MessageQueue, int] = {}
        self._offset_store: OffsetStore | None = None
        self._running = False
        self._rebalance_lock = threading.Lock()
        self._rebalance_timer: PeriodicHandle | None = None
        self.start_timestamp = 0  # ms, for an admin's running info
        # An empty pull moves the stored offset of a queue with nothing cached (RocketMQ's
        # correctTagsOffset), so a filtered-out tail is not re-read after a restart.
        self.correct_tags_offset = True

    # -- set up ---------------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector = SUB_ALL) -> None:
        """Consume ``topic``'s messages that ``expression`` selects: a tag expression (``"*"`` or
        ``"TagA || TagB"``) or a ``MessageSelector``. An SQL92 expression that does not parse is
        refused here (ClientError naming the position)."""
        error = topic_error(topic)
        if error:
            raise ClientError(f"cannot subscribe: {error}")
        if isinstance(expression, MessageSelector):
            expression_type, text = expression.expression_type, expression.expression
        else:
            expression_type, text = ExpressionType.TAG, expression
        try:
            self.subscriptions[topic] = build_subscription_data(topic, text, expression_type)
        except RequestRefused as exc:
            raise ClientError(exc.remark) from None
        if self._running:
            instance = self.instance
            instance.update_route(topic)
            instance.scheduler.run_soon(instance.send_heartbeat_to_all)
            instance.scheduler.run_soon(self.rebalance)

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)

    @property
    def clustering(self) -> bool:
        return self.config.message_model is MessageModel.CLUSTERING

    @property
    def offset_store(self) -> OffsetStore:
        """Where the group's offsets are kept: the brokers (clustering) or a local file (broadcasting)."""
        if self._offset_store is None:
            raise self._not_started()
        return self._offset_store

    def start(self) -> Self:
        if self._instance is not None:
            return self
        instance = self._join()
        self.start_timestamp = now_ms()
        if self.clustering:
            self._offset_store = RemoteOffsetStore(self.group, instance)
        else:
            self._offset_store = LocalFileOffsetStore(self.group, self.config.offset_store_dir, instance.client_id)
        self._on_start()
        self._running = True
        # %RETRY%<group> is created by the brokers on this consumer's first heartbeat (as RocketMQ's
        # heartbeat does), so a new group's has no route before it: the user's topics are routed
        # first, the heartbeat goes to their brokers, and the retry topic is left to the rebalance.
        unrouted = [topic for topic in self.subscriptions if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX)]
        deadline = time.monotonic() + NEW_TOPIC_ROUTE_GRACE
        while True:
            unrouted = [topic for topic in unrouted if not self._route_at_start(topic)]
            if not unrouted or time.monotonic() >= deadline:
                break
            time.sleep(NEW_TOPIC_ROUTE_POLL)
        for topic in unrouted:
            log.warning("consumer %s: topic %s has no route yet", self.group, topic)
        try:
            self._check_client_in_brokers()
        except ClientError:
            self.shutdown()
            raise
        instance.send_heartbeat_to_all()
        self._rebalance_timer = instance.scheduler.schedule_periodic(
            self.config.rebalance_interval, self.rebalance, initial_delay=0
        )
        log.info(
            "consumer %s (%s) started in client %s", self.group, self.config.message_model.name, instance.client_id
        )
        return self

    def _route_at_start(self, topic: str) -> bool:
        """Whether ``topic`` is routed (or its route cannot be asked: that is said and not asked again)."""
        try:
            return self.instance.update_route(topic) is not None
        except RemotingError as exc:
            log.warning("consumer %s: route of %s: %s", self.group, topic, exc)
            return True

    def _on_start(self) -> None:
        """Subclass hook, before the first rebalance."""

    def _check_client_in_brokers(self) -> None:
        """Ask every broker of a topic subscribed by something other than tags whether it can filter
        by it (CHECK_CLIENT_CONFIG, as Java's checkClientInBroker): ClientError with the broker's
        answer when one cannot (enablePropertyFilter off, an expression it does not parse)."""
        instance = self.instance
        for topic, sub in self.subscriptions.items():
            if sub.expression_type == ExpressionType.TAG:
                continue
            route = instance.routes.get(topic)
            for broker in route.broker_datas if route is not None else ():
                found = instance.find_broker_addr_in_subscribe(broker.broker_name, MASTER_ID)
                if found is None:
                    continue
                try:
                    instance.api.check_client_config(
                        found[0], instance.client_id, self.group, sub.to_json(), self.config.request_timeout
                    )
                except ResponseError as exc:
                    raise ClientError(
                        f"consumer {self.group}: broker {found[0]} cannot filter {topic} by "
                        f"{sub.expression_type} {sub.sub_string!r}: {exc.remark}"
                    ) from None
                except RemotingError as exc:
                    log.warning("consumer %s: CHECK_CLIENT_CONFIG to %s failed: %s", self.group, found[0], exc)

    def shutdown(self) -> None:
        """Stop pulling, let running listeners finish, commit every offset, leave the group."""
        instance = self._instance
        if instance is None:
            return
        self._running = False
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None
        with self._rebalance_lock:
            for pq in self.process_queues.values():
                pq.dropped = True
            self._on_shutdown()
            self.persist_offsets()
            self._release_queues(list(self.process_queues))
            self.process_queues.clear()
        self._leave()
        log.info("consumer %s shut down", self.group)

    def _on_shutdown(self) -> None:
        """Subclass hook: wait for consumption in progress (queues are already dropped)."""

    def _release_queues(self, mqs: list[MessageQueue]) -> None:
        """Subclass hook: queues given up (orderly consumers unlock them)."""

    # -- what the instance asks -----------------------------------------------------------------

    def topics_in_use(self) -> set[str]:
        return set(self.subscriptions)

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
        self.topic_queues[topic] = subscribe_queues(topic, route)

    def consumer_data(self) -> dict[str, Any]:
        return {
            "groupName": self.group,
            "consumeType": self.consume_type.name,
            "messageModel": self.config.message_model.name,
            "consumeFromWhere": self.config.consume_from_where.name,
            "subscriptionDataSet": [s.to_json() for s in self.subscriptions.values()],
            "unitMode": False,
        }

    def running_info(self, jstack: bool = False) -> bytes:
        """ConsumerRunningInfo's body, for GET_CONSUMER_RUNNING_INFO (rmq.client.running_info)."""
        offsets = self.offset_store
        return running_info_body(
            consumer_properties(
                self.config,
                self.group,
                self.consume_type.name,
                bool(getattr(self, "orderly", False)),
                self.start_timestamp,
            ),
            [s.to_json() for _, s in sorted(self.subscriptions.items())],
            {mq: pq.info(offsets.read_memory(mq)) for mq, pq in sorted(list(self.process_queues.items()))},
            jstack,
        )

    def persist_offsets(self) -> None:
        store = self._offset_store
        if store is not None:
            store.persist(list(self.process_queues))

    # -- rebalance ------------------------------------------------------------------------------

    def rebalance(self) -> None:
        """Take this consumer's share of every subscribed topic's queues, drop the rest."""
        if not self._running:
            return
        with self._rebalance_lock:
            if not self._running:
                return
            for topic in list(self.subscriptions):
                try:
                    self._rebalance_topic(topic)
                except (RemotingError, ResponseError, ClientError) as exc:
                    log.warning("consumer %s: rebalance of %s failed: %s", self.group, topic, exc)

    def _rebalance_topic(self, topic: str) -> None:
        mq_all = self.topic_queues.get(topic)
        if mq_all is None:
            if self.instance.update_route(topic) is None:
                return
            mq_all = self.topic_queues.get(topic, [])
        if self.clustering:
            addr = self.instance.any_broker_addr_of(topic)
            if addr is None:
                return
            cid_all = sorted(
                self.instance.api.get_consumer_id_list(addr, self.group, self.instance.config.request_timeout)
            )
            if self.instance.client_id not in cid_all:
                log.info("consumer %s: broker %s does not list this client yet", self.group, addr)
                return
            mine = set(self.allocate(self.instance.client_id, sorted(mq_all), cid_all))
        else:
            mine = set(mq_all)
        self._update_process_queues(topic, mine)

    def _update_process_queues(self, topic: str, mine: set[MessageQueue]) -> None:
        gone = [mq for mq in self.process_queues if mq.topic == topic and mq not in mine]
        for mq in gone:
            pq = self.process_queues[mq]
            pq.dropped = True
            if self._remove_queue(mq, pq):
                del self.process_queues[mq]
                self.next_offsets.pop(mq, None)
                self.pull_from_which_node.pop(mq, None)
                log.info("consumer %s: gave up %s", self.group, mq)
        for mq in sorted(mine - set(self.process_queues)):
            new_pq = self._new_process_queue(mq)
            if new_pq is None:
                continue
            self.offset_store.remove(mq)
            offset = self.compute_pull_from_where(mq)
            if offset < 0:
                log.warning("consumer %s: no start offset for %s; will retry at the next rebalance", self.group, mq)
                continue
            self.process_queues[mq] = new_pq
            self.next_offsets[mq] = offset
            log.info("consumer %s: took %s from offset %d", self.group, mq, offset)
            self._pull(mq, new_pq)

    def _new_process_queue(self, mq: MessageQueue) -> ProcessQueue | None:
        """Subclass hook: orderly consumers take a queue only once its broker lock is theirs (None)."""
        return ProcessQueue()

    def _remove_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Commit the offset of a queue given up; False keeps it for the next rebalance."""
        self.offset_store.persist([mq])
        self.offset_store.remove(mq)
        self._release_queues([mq])
        return True

    def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Where a newly owned queue starts: the stored offset, else per consume_from_where."""
        stored = self.offset_store.read_store(mq)
        if stored >= 0:
            return stored
        where = self.config.consume_from_where
        retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return 0
        if retry and where is not ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            # LAST_OFFSET of a retry topic: from its start, so nothing sent back before this
            # consumer started is skipped
            return 0
        api, timeout = self.instance.api, self.instance.config.request_timeout

        def ask(addr: str) -> int:
            if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP and not retry:
                timestamp = self.config.consume_timestamp
                assert timestamp is not None, "__init__ gave consume_timestamp its default"
                return api.search_offset(addr, mq, timestamp, timeout)
            # LAST_OFFSET (and the deprecated variants RocketMQ treats alike)
            return api.get_max_offset(addr, mq, timeout)

        return self.instance.call_in_admin(mq.broker_name, mq.topic, ask)

    # -- pulling (on the loop thread once started) -----------------------------------------------

    def _later(self, delay: float, fn: Callable[..., None], *args: Any) -> None:
        loop = self.instance.remoting.loop
        if loop.in_loop_thread():
            loop.call_later(delay, fn, *args)
        else:
            loop.call_soon_threadsafe(loop.call_later, delay, fn, *args)

    def _pull_delay(self, mq: MessageQueue, pq: ProcessQueue) -> float | None:
        """How long the queue must wait before its next pull (flow control), or None."""
        if pq.count > self.config.pull_threshold_for_queue or pq.bytes > self.config.pull_threshold_size_for_queue:
            log.debug(
                "consumer %s: flow control on %s: %d messages, %d bytes cached", self.group, mq, pq.count, pq.bytes
            )
            return PULL_DELAY_WHEN_FLOW_CONTROL
        return None

    def _pull(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        if pq.dropped or not self._running:
            return
        delay = self._pull_delay(mq, pq)
        if delay is not None:
            self._later(delay, self._pull, mq, pq)
            return
        sub = self.subscriptions.get(self._subscribed_topic(mq))
        instance = self._instance
        if sub is None or instance is None:
            return
        found = instance.find_broker_addr_in_subscribe(mq.broker_name, self.pull_from_which_node.get(mq, MASTER_ID))
        if found is None:
            instance.scheduler.run_soon(instance.update_all_routes)
            self._later(PULL_DELAY_WHEN_EXCEPTION, self._pull, mq, pq)
            return
        addr, slave = found
        offset = self.next_offsets[mq]
        commit_offset = self.offset_store.read_memory(mq) if self.clustering else -1
        sys_flag = PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION
        if commit_offset > 0 and not slave:  # a slave does not take commits with pulls
            sys_flag |= PullSysFlag.COMMIT_OFFSET
        ext = {
            "consumerGroup": self.group,
            "topic": mq.topic,
            "queueId": mq.queue_id,
            "queueOffset": offset,
            "maxMsgNums": self.config.pull_batch_size,
            "sysFlag": sys_flag,
            "commitOffset": max(commit_offset, 0),
            "suspendTimeoutMillis": int(self.config.broker_suspend_max_time * 1000),
            "subscription": sub.sub_string,
            "subVersion": sub.sub_version,
            "expressionType": sub.expression_type,
        }
        pq.last_pull_time = time.monotonic()
        try:
            instance.api.pull_async(
                addr,
                ext,
                self.config.consumer_timeout_when_suspend,
                mq,
                lambda result, error: self._on_pulled(mq, pq, sub, result, error, addr, offset),
                self.config.max_message_size,
            )
        except RemotingError as exc:  # shut down meanwhile
            log.debug("consumer %s: pull of %s not sent: %s", self.group, mq, exc)

    def _subscribed_topic(self, mq: MessageQueue) -> str:
        return mq.topic

    def _on_pulled(
        self,
        mq: MessageQueue,
        pq: ProcessQueue,
        sub: SubscriptionData,
        result: PullResult | None,
        error: BaseException | None,
        addr: str = "",
        requested: int = -1,
    ) -> None:
        if pq.dropped or not self._running:
            return
        if result is None:
            log.warning("consumer %s: pull of %s from %s failed: %s", self.group, mq, addr, error)
            instance = self.instance
            if isinstance(error, RemotingConnectError):
                instance.mark_unreachable(addr)
                # another address of the broker name (a slave) takes over at once, if there is one
                found = instance.find_broker_addr_in_subscribe(
                    mq.broker_name, self.pull_from_which_node.get(mq, MASTER_ID)
                )
                if found is not None and found[0] != addr:
                    self._pull(mq, pq)
                    return
            self._later(PULL_DELAY_WHEN_EXCEPTION, self._pull, mq, pq)
            return
        self.pull_from_which_node[mq] = result.suggest_which_broker_id
        self.next_offsets[mq] = result.next_begin_offset
        if result.status is PullStatus.FOUND:
            msgs = [m for m in result.messages if sub.is_matched_by_tag(m.tags)]
            if msgs:
                self._deliver(mq, pq, msgs)
        elif result.status is PullStatus.OFFSET_ILLEGAL:
            log.warning(
                "consumer %s: offset of %s out of range; continuing from %d", self.group, mq, result.next_begin_offset
            )
            self.offset_store.update(mq, result.next_begin_offset)
        elif pq.count == 0 and self.correct_tags_offset:
            self.offset_store.update(mq, result.next_begin_offset, increase_only=True)
        if result.status is PullStatus.NO_MATCHED_MSG and result.next_begin_offset == requested:
            # a retry that went nowhere (a slave asked beyond what it holds): not in a tight loop
            self._later(PULL_DELAY_WHEN_NO_PROGRESS, self._pull, mq, pq)
        elif self.config.pull_interval > 0:
            self._later(self.config.pull_interval, self._pull, mq, pq)
        else:
            self._pull(mq, pq)

    def _deliver(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        raise NotImplementedError
