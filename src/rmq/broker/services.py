"""What each request processor may use of the broker: one Protocol per processor, naming only the
services it touches (issue 26, item 4).

The controller satisfies every one of them and hands itself over, so that a service replaced while
the broker runs (the role after a promotion, ``flush_rounds`` once the loop runs, ``acl`` after a
reload) is the one the processor reads; mypy holds each processor to its own Protocol, so that a
processor reaching for something new has to say so here. This module sits below the controller and
the processors: it imports neither, and that keeps the broker free of import cycles
(tests/test_imports.py).
"""

from __future__ import annotations

import concurrent.futures
from typing import TYPE_CHECKING, Protocol

# POP's state names the services it uses itself (it sits below this module: it imports nothing of
# the broker's at run time)
from rmq.broker.pop import PopStateServices

if TYPE_CHECKING:
    from rmq._service import Scheduler
    from rmq.broker.acl import PlainAccessValidator
    from rmq.broker.broker_stats import BrokerStats
    from rmq.broker.client_manager import ClientManager
    from rmq.broker.config import BrokerConfig, BrokerRole
    from rmq.broker.consumer_offset import ConsumerOffsetManager
    from rmq.broker.delay import DelayOffsetManager
    from rmq.broker.long_polling import PullRequestHoldService
    from rmq.broker.pop import PopService
    from rmq.broker.rebalance_lock import RebalanceLockManager
    from rmq.broker.runtime_stats import RuntimeStats
    from rmq.broker.stats_log import GetCounts
    from rmq.broker.subscription_filter import SubscriptionFilters
    from rmq.broker.subscription_group import SubscriptionGroupManager
    from rmq.broker.timer import TimerMessageStore
    from rmq.broker.topic_config import TopicConfigManager
    from rmq.broker.transaction import TransactionalMessageService
    from rmq.net.channel import Channel
    from rmq.net.codec import RemotingCommand
    from rmq.net.server import RemotingServer
    from rmq.protocol.controller import ReplicaInfo, SyncStateSet
    from rmq.protocol.record import StoredMessage
    from rmq.store import MessageStore, MessageStoreConfig, PutMessageResult
    from rmq.store.epoch import EpochEntry


class FlushRounds(Protocol):
    """The loop's end-of-iteration flush request (the controller's FlushRoundKicker)."""

    def request(self) -> None: ...


class LaneCounts(Protocol):
    """A compiled lane's counters, for brokerStatus (rmq.broker._send_lane, _pull_lane)."""

    @property
    def served(self) -> int: ...
    @property
    def left(self) -> int: ...


class BusyGate(Protocol):
    """The send processor's fast failure of a request its queue would hold too long."""

    def busy_answer(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None: ...


class Promoter(Protocol):
    """The broker's role switch (rmq.broker.role), as the replica processor sees it."""

    def promote(self, role: BrokerRole) -> EpochEntry: ...


class RoleNotices(Protocol):
    """Controller mode's follower of the controllers (rmq.broker.replicas), as the replica
    processor sees it."""

    def notice_refused(self, channel: Channel, request: RemotingCommand) -> str | None: ...
    def on_role_changed(self, info: ReplicaInfo, sync_state_set: SyncStateSet) -> None: ...


class SendCounters(Protocol):
    """The send processor's SYSTEM_BUSY refusals by reason, for the metrics."""

    @property
    def busy_refusals(self) -> dict[str, int]: ...


class Identity(Protocol):
    """Who the broker is: enough to refuse a write with the broker's own address."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def broker_addr(self) -> str: ...


class Store(Protocol):
    @property
    def store(self) -> MessageStore: ...


class Topics(Protocol):
    @property
    def topic_config_manager(self) -> TopicConfigManager: ...


class Groups(Protocol):
    @property
    def subscription_group_manager(self) -> SubscriptionGroupManager: ...


class Clients(Protocol):
    @property
    def client_manager(self) -> ClientManager: ...


class Offsets(Protocol):
    @property
    def consumer_offset_manager(self) -> ConsumerOffsetManager: ...


class Timers(Protocol):
    @property
    def timer_message_store(self) -> TimerMessageStore: ...


class Transactions(Protocol):
    @property
    def transactions(self) -> TransactionalMessageService: ...


class AdminBrokerServices(Identity, Store, Topics, Groups, Clients, Offsets, Timers, Protocol):
    @property
    def delay_offset_manager(self) -> DelayOffsetManager: ...
    @property
    def is_slave(self) -> bool: ...
    @property
    def runtime_stats(self) -> RuntimeStats: ...
    @property
    def send_lane(self) -> LaneCounts | None: ...
    @property
    def pull_lane(self) -> LaneCounts | None: ...


class ClientManageServices(Identity, Topics, Groups, Clients, Protocol):
    @property
    def server(self) -> RemotingServer: ...
    @property
    def subscription_filters(self) -> SubscriptionFilters: ...
    def notify_consumer_ids_changed(self, group: str) -> None: ...


class ConsumerManageServices(Store, Clients, Offsets, Protocol):
    pass


class EndTransactionServices(Identity, Transactions, Protocol):
    @property
    def is_slave(self) -> bool: ...


class LockServices(Protocol):
    @property
    def rebalance_lock_manager(self) -> RebalanceLockManager: ...


class PullServices(Identity, Store, Topics, Groups, Clients, Offsets, Protocol):
    @property
    def store_config(self) -> MessageStoreConfig: ...
    @property
    def server(self) -> RemotingServer: ...
    @property
    def pull_hold(self) -> PullRequestHoldService: ...
    @property
    def subscription_filters(self) -> SubscriptionFilters: ...
    @property
    def get_counts(self) -> GetCounts: ...


class QueryServices(Identity, Store, Protocol):
    @property
    def acl(self) -> PlainAccessValidator | None: ...


class QueueOffsetServices(Store, Protocol):
    pass


class ReplicaServices(Identity, Store, Protocol):
    @property
    def role(self) -> Promoter: ...
    @property
    def replicas(self) -> RoleNotices | None: ...
    @property
    def scheduler(self) -> Scheduler: ...
    @property
    def digest_worker(self) -> Scheduler: ...


class SendServices(Identity, Store, Topics, Groups, Timers, Transactions, Protocol):
    @property
    def server(self) -> RemotingServer: ...
    @property
    def pull_hold(self) -> PullRequestHoldService: ...
    @property
    def flush_rounds(self) -> FlushRounds | None: ...
    def schedule_redirect(
        self, topic: str, queue_id: int, properties: str | bytes | dict
    ) -> tuple[str, int, bytes]: ...


class SendBackServices(Identity, Store, Topics, Groups, Protocol):
    @property
    def acl(self) -> PlainAccessValidator | None: ...
    @property
    def send_processor(self) -> BusyGate: ...
    def put_again(
        self,
        message: StoredMessage,
        topic: str,
        queue_id: int,
        properties: dict[str, str],
        reconsume_times: int | None = None,
    ) -> PutMessageResult: ...


class PopServices(PopStateServices, Protocol):
    """POP's processor (rmq.broker.processor.pop): the POP state's services, and these."""

    @property
    def subscription_filters(self) -> SubscriptionFilters: ...
    @property
    def get_counts(self) -> GetCounts: ...
    @property
    def pop_service(self) -> PopService: ...


class PopAdminServices(Identity, Store, Topics, Offsets, Protocol):
    """rmq-admin's view of POP groups (rmq.broker.processor.pop_admin)."""

    @property
    def pop_service(self) -> PopService: ...


class BrokerConfigServices(Identity, Topics, Protocol):
    @property
    def store_config(self) -> MessageStoreConfig: ...
    def register_broker_all(self, force: bool = True, wait: bool = False) -> list[concurrent.futures.Future]: ...


class SubscriptionGroupServices(Identity, Groups, Offsets, Protocol):
    pass


class TopicServices(Topics, Protocol):
    @property
    def last_registration(self) -> list[concurrent.futures.Future]: ...


class SlaveSyncServices(Identity, Store, Topics, Groups, Offsets, Timers, Protocol):
    @property
    def is_slave(self) -> bool: ...
    @property
    def namesrv_addrs(self) -> list[str]: ...
    @property
    def delay_offset_manager(self) -> DelayOffsetManager: ...
    def register_broker_all(self, force: bool = True, wait: bool = False) -> list[concurrent.futures.Future]: ...


class MetricsServices(Identity, Store, Topics, Clients, Offsets, Protocol):
    @property
    def server(self) -> RemotingServer: ...
    @property
    def get_counts(self) -> GetCounts: ...
    @property
    def send_processor(self) -> SendCounters: ...


class ClientAdminServices(Identity, Store, Topics, Groups, Clients, Offsets, Protocol):
    """Who is connected and the broker's figures, for admins (rmq.broker.processor.admin_clients)."""

    @property
    def broker_stats(self) -> BrokerStats: ...
