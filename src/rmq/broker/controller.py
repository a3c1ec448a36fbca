"""BrokerController: the store, the managers and the request processors of one broker, put together
and run (RocketMQ's BrokerController).

    controller = BrokerController(broker_config, store_config)
    controller.start()        # store, server, registration with namesrvAddr's name servers, timers
    ...
    controller.shutdown()     # unregister, close connections, save offsets and configs, close the store

Threads (docs/threads.md has the table): requests are served on the remoting server's event loop
thread, ``rmq-broker-loop`` (sends store there without waiting for the disk; SYNC_FLUSH answers go
out when the store's flush thread, which never takes the GIL, signals the end of a flush round on an
eventfd the loop polls). Name server requests go out on a remoting client's own loop. Periodic work
(registration every 30 s, consumer offsets every 5 s, the client scan every 10 s, the disk check)
runs on one ``Scheduler`` thread, ``rmq-broker-scheduler``.

The seam for the broker's other services (retry, delay scheduler, transactions):

    controller.put_inner(topic, queue_id, body, properties, ...) -> PutMessageResult
    controller.put_again(stored_message, topic, queue_id, properties)   # the same, from a record
    controller.notify_message_arriving(topic, queue_id)     # any thread; put_inner calls it
    controller.schedule_message_service                     # delayed messages (master only)
    controller.timer_message_store                          # timed messages (master only)
    controller.transactions, controller.transaction_check_service   # half messages, check-backs
    controller.register_broker_all(force=True)
    rmq.broker.processor.PROCESSORS                         # the request processor classes
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import select
import threading
from collections.abc import Callable

from rmq._service import Scheduler
from rmq.broker import broker_stats, services
from rmq.broker._pull_lane import PullLane
from rmq.broker._send_lane import SendLane
from rmq.broker.acl import AclWatcher, PlainAccessValidator, load_plain_acl
from rmq.broker.client_manager import ClientManager
from rmq.broker.config import BrokerConfig, BrokerRole, MetricsExporterType
from rmq.broker.consumer_offset import ConsumerOffsetManager
from rmq.broker.consumer_order_info import ConsumerOrderInfoManager
from rmq.broker.delay import DelayOffsetManager, delay_level_to_queue_id
from rmq.broker.long_polling import PullRequestHoldService
from rmq.broker.metrics import MetricsExporter
from rmq.broker.namesrv_api import NamesrvApi
from rmq.broker.pop import PopService
from rmq.broker.processor import PROCESSORS
from rmq.broker.processor.pull import PullProcessor
from rmq.broker.processor.send import SendProcessor
from rmq.broker.rebalance_lock import RebalanceLockManager
from rmq.broker.replicas import ReplicasManager, ReplicasServices
from rmq.broker.role import RoleServices, RoleSwitch
from rmq.broker.runtime_stats import SAMPLE_INTERVAL, RuntimeStats
from rmq.broker.schedule import ScheduleMessageService
from rmq.broker.slave_sync import MASTER_LOOKUP_INTERVAL, SlaveSynchronize
from rmq.broker.stats_log import GetCounts, StatsLog
from rmq.broker.subscription_filter import SubscriptionFilters
from rmq.broker.subscription_group import SubscriptionGroupManager
from rmq.broker.timer import TimerMessageStore
from rmq.broker.topic_config import TopicConfigManager
from rmq.broker.transaction import TransactionalMessageCheckService, TransactionalMessageService, TransactionServices
from rmq.errors import ConfigError
from rmq.net import _codec, codec
from rmq.net.client import RemotingClient
from rmq.net.codec import RemotingCommand
from rmq.net.server import RemotingServer
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.message import (
    SCHEDULE_TOPIC,
    MessageProperty,
    decode_properties,
    encode_properties,
)
from rmq.protocol.record import StoredMessage, ipv4_to_int
from rmq.store import (
    MessageStore,
    MessageStoreConfig,
    PutMessageResult,
    PutMessageStatus,
)

log = logging.getLogger("rmq.broker")

# How often the disk is checked against diskSpaceWarningLevelRatio (sends are refused above it);
# RocketMQ checks every 10 s, which lets a filling disk run out between two checks.
DISK_CHECK_INTERVAL = 1.0
# RocketMQ's ClientHousekeepingService scans every 10 s.
CLIENT_SCAN_INTERVAL = 10.0
# How often SYNC_FLUSH sends still waiting for the disk are checked against their deadline.
COMMIT_DEADLINE_SCAN = 0.1
# How often a slave looks for parked pulls whose queue grew (replication brings its messages, not
# sends that would wake them).
SLAVE_PARKED_PULL_SCAN = 1.0
BIND_ADDRESS = "0.0.0.0"
# RMQ_NO_FAST_LANE=1: every send takes the Python processor whatever fastLaneEnable says (the suite
# runs both ways)
NO_FAST_LANE_ENV = "RMQ_NO_FAST_LANE"


class FlushRoundKicker:
    """After the event-loop iteration's last put: SYNC_FLUSH asks for one flush round, so that a
    pipelined burst of sends shares one msync (the store's own rounds would start at the burst's
    first put and split it); SYNC_MASTER tells its HA service that new bytes are there to replicate.

    With syncFlushInlineMaxMicros, a round asked for when nothing else is ready at the iteration's
    very end is made by the loop itself and answered at once: the hand-off to the flush thread and
    back is two cross-CPU wake-ups, which dominate a round where the flush itself is cheap
    (docs/sync-flush.md, its last sections). The store keeps the msync on the flush thread while
    recent ones were slow, so that a slow disk cannot stall a pull or a heartbeat arriving meanwhile."""

    def __init__(self, store, loop):
        self.store = store
        self.loop = loop
        self.scheduled = False
        self.sync_flush = store.sync_flush
        self.inline = False
        if self.sync_flush:
            inline_max_micros = store.config.sync_flush_inline_max_micros
            self.inline = inline_max_micros > 0
            store.kick_rounds_myself(inline_max_micros / 1e6)

    def request(self) -> None:
        """After a put (loop thread only)."""
        if not self.scheduled:
            self.scheduled = True
            self.loop.mark_dirty(self)

    def _flush(self) -> None:  # the loop's end-of-iteration hook
        self.scheduled = False
        if self.inline:
            self.loop.call_last(self._round_here_or_kick)
        elif self.sync_flush:
            self.store.kick_group_commit()
        ha_service = self.store.ha_service
        if ha_service is not None:
            ha_service.notify_new_data()

    def _round_here_or_kick(self) -> None:
        # after every other flush of the iteration, so that no answer waits behind the msync
        if not (self.loop.nothing_ready() and self.store.complete_round_here()):
            self.store.kick_group_commit()


class BrokerController:
    """One broker: store, metadata managers, client registries, processors, server, timers."""

    def __init__(self, broker_config: BrokerConfig, store_config: MessageStoreConfig):
        self.config = broker_config.resolve()
        self.store_config = store_config
        root = store_config.store_path_root_dir
        if self.config.enable_controller_mode:
            # brokerRole is the controllers' to decide: until they do, a slave with no master, which
            # takes no send (rmq.broker.replicas)
            self.config.broker_role = store_config.broker_role = BrokerRole.SLAVE
        self.replicas = ReplicasManager(self, root) if self.config.enable_controller_mode else None
        self.store = MessageStore(store_config)
        self.topic_config_manager = TopicConfigManager(self.config, root, on_change=self._topics_changed)
        self.consumer_offset_manager = ConsumerOffsetManager(root, slave=self.is_slave)
        self.consumer_order_info_manager = ConsumerOrderInfoManager(root)  # FIFO POP's queue locks
        self.subscription_group_manager = SubscriptionGroupManager(self.config, root)
        self.delay_offset_manager = DelayOffsetManager(root)
        self.client_manager = ClientManager()
        self.rebalance_lock_manager = RebalanceLockManager(self.config.rebalance_lock_max_live_time)
        self.server = RemotingServer(
            BIND_ADDRESS,
            self.config.listen_port,
            name="rmq-broker-loop",
            tls=self.config.server_tls(),
            limits=self.config.connection_limits(),
        )
        self.pull_hold = PullRequestHoldService(self.server.loop)
        # subscription expressions compiled off the loop, for PULL_MESSAGE and CHECK_CLIENT_CONFIG
        self.subscription_filters = SubscriptionFilters(self.server.call_soon_threadsafe)
        self.flush_rounds: FlushRoundKicker | None = None
        self._complete_commits_on_loop()
        self.namesrv_client = RemotingClient(name="rmq-broker-namesrv-client")
        self.namesrv_api = NamesrvApi(
            self.namesrv_client, self.config.register_broker_timeout_mills, self.config.cluster_credentials()
        )
        self.scheduler = Scheduler("rmq-broker-scheduler")
        # CommitLog digests (ha-verify) hash for a while: not on the thread registration and offset
        # persistence run on (rmq.broker.processor.replica)
        self.digest_worker = Scheduler("rmq-broker-digest")
        # a slave copies its master's metadata (the master's address comes with registrations)
        self.slave_sync = SlaveSynchronize(self, self.namesrv_client, self.scheduler.run_soon)
        self.schedule_message_service = ScheduleMessageService(self)
        self.timer_message_store = TimerMessageStore(self)
        self.transactions = TransactionalMessageService(self)
        self.transaction_check_service = TransactionalMessageCheckService(
            self.transactions, self.config.transaction_check_interval
        )
        # The answers to the registration that followed the last topic change.
        self.last_registration: list[concurrent.futures.Future] = []
        self._namesrv_addrs: list[str] = self.config.namesrv_addr_list
        self._started = False
        self._stopped = threading.Event()
        self._shutdown_lock = threading.Lock()
        broker_ip = self.config.broker_ip1
        assert broker_ip is not None, "BrokerConfig.resolve() sets brokerIP1"
        self._store_ip = ipv4_to_int(broker_ip)
        self.get_counts = GetCounts()  # what pulls handed out, for the stats log
        self.runtime_stats = RuntimeStats(self.store, self.get_counts)  # brokerStatus's counters and rates
        # VIEW_BROKER_STATS_DATA's per topic and group figures (mqadmin statsAll)
        self.broker_stats = broker_stats.BrokerStats(self.store, self.get_counts)
        # POP's checkpoints, revive and long polls (rmq.broker.pop), woken by every stored message
        self.pop_service = PopService(self)
        self.pull_hold.add_arrival_listener(self.pop_service)
        self.processors = [cls(self) for cls in PROCESSORS]
        # its SYSTEM_BUSY counts, for the metrics
        self.send_processor = next(p for p in self.processors if isinstance(p, SendProcessor))
        for processor in self.processors:
            for code, handler in processor.handlers().items():
                self.server.register_processor(code, handler)
        self.server.on_channel_closed(self._on_channel_closed)
        self.pull_lane: PullLane | None = None  # set by _send_lane, which hands it the pulls
        self.send_lane = self._send_lane()
        # aclEnable: every request is checked before its processor (rmq.broker.acl), from start()
        self.acl_config_path = os.path.join(root, os.path.expanduser(self.config.acl_config_file))
        self.acl: PlainAccessValidator | None = None
        self.acl_watcher: AclWatcher | None = None
        # start() schedules a slave's periodic work; a master demoted later schedules it then
        self._slave_work_scheduled = False
        self.role = RoleSwitch(self)
        # metricsExporterType=PROM: a Prometheus endpoint on its own thread; the loop times requests
        self.metrics: MetricsExporter | None = None
        if self.config.metrics_exporter_type is MetricsExporterType.PROM:
            self.metrics = MetricsExporter(self)
            self.server.set_request_timer(self.metrics.collector.rpc_latency.observe)

    def _send_lane(self) -> SendLane | None:
        """The compiled send lane, offered every request before the processors (fastLaneEnable, unless
        RMQ_NO_FAST_LANE=1; it needs the compiled codec); the server leaves it aside while an ACL
        check or the metrics' request timer must see every request."""
        if not self.config.fast_lane_enable or os.environ.get(NO_FAST_LANE_ENV) == "1":
            return None
        if codec.implementation is not _codec:
            return None
        lane = SendLane(self.store, self.send_processor, self.topic_config_manager, self.pull_hold)
        self.send_processor.lane = lane
        # pulls too: the send lane, the one lane the decoder offers frames, hands them over
        pull_processor = next(p for p in self.processors if isinstance(p, PullProcessor))
        self.pull_lane = lane.pull_lane = pull_processor.lane = PullLane(self.store, pull_processor)
        self.server.set_fast_lane(lane)
        return lane

    def _complete_commits_on_loop(self) -> None:
        """SYNC_FLUSH / SYNC_MASTER sends are answered on the event loop as soon as their flush
        round ends or a slave acks them; the loop asks for the rounds (puts still waiting after 10 ms
        get one anyway) and tells the HA service of new bytes (an ASYNC_MASTER's HA service polls:
        its loop does nothing more per send). At construction, and again on the loop when a slave
        is promoted to SYNC_MASTER."""
        if self.flush_rounds is not None or not (self.store.sync_flush or self.store.sync_master):
            return
        self.flush_rounds = FlushRoundKicker(self.store, self.server.loop)
        self.store.hand_over_commit_completion()
        self.server.loop.add_handler(
            self.store.commit_event_fd, select.EPOLLIN, lambda _events: self.store.complete_commits()
        )
        self.server.loop.schedule_periodic(COMMIT_DEADLINE_SCAN, self.store.complete_commits)

    def _wake_pulls_where_replicated(self) -> None:
        if self.is_slave:
            self.pull_hold.wake_where_grown(self.store.get_max_offset_in_queue)

    def serve_as_master(self) -> None:
        """On the loop, once the store is promoted (``rmq.broker.role``): sends complete here, every
        processor reads the new role, and only then does the store take puts (a SYNC_MASTER send
        answered before would not have waited for a slave)."""
        self._complete_commits_on_loop()
        for processor in self.processors:
            processor.role_changed()
        self.store.set_running(True)

    def serve_as_slave(self) -> None:
        """On the loop, once a demoted master's store refuses puts and its other putting services
        stopped (``rmq.broker.role``): the store turns slave here, where no put can be half done,
        every processor reads the new role, and the slave's periodic work starts."""
        self.store.become_slave()
        for processor in self.processors:
            processor.role_changed()
        self.store.set_running(True)  # still refusing puts: a slave's store only appends replicas
        if not self._slave_work_scheduled:
            self._schedule_slave_work()

    def _schedule_slave_work(self) -> None:
        """A slave's periodic work, once (a broker started as a slave has it from the start; the
        jobs themselves do nothing while the broker is a master)."""
        self._slave_work_scheduled = True
        self.server.loop.schedule_periodic(SLAVE_PARKED_PULL_SCAN, self._wake_pulls_where_replicated)
        self.scheduler.schedule_periodic(self.config.slave_sync_interval / 1000, self.slave_sync.sync_all)
        self.scheduler.schedule_periodic(MASTER_LOOKUP_INTERVAL, self.slave_sync.look_for_master, initial_delay=0)

    # -- identity -------------------------------------------------------------------------------

    @property
    def broker_addr(self) -> str:
        """``brokerIP1:listenPort``, as registered with name servers."""
        return self.config.broker_addr

    @property
    def is_slave(self) -> bool:
        return self.config.broker_role is BrokerRole.SLAVE

    @property
    def namesrv_addrs(self) -> list[str]:
        """The name servers registered with."""
        return list(self._namesrv_addrs)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> BrokerController:
        for manager in (
            self.topic_config_manager,
            self.consumer_offset_manager,
            self.consumer_order_info_manager,
            self.subscription_group_manager,
            self.delay_offset_manager,
        ):
            if not manager.load():
                raise ConfigError(f"cannot load {manager.path} nor its backup: fix or remove it to start")
        if self.config.acl_enable:
            # a file that cannot be used stops the start: there are no earlier rules to keep
            self.acl = PlainAccessValidator(load_plain_acl(self.acl_config_path), self.config.msg_trace_topic_name)
            self.server.set_request_check(self.acl.check)
            self.acl_watcher = AclWatcher(self.acl_config_path, self.acl)
        self.store.start()
        try:
            self.store.start_ha(self.role.fetch_master_epochs if self.is_slave else None, self.config.ha_security())
            self.check_disk()
            if self.metrics is not None:
                self.metrics.start()
            self.subscription_filters.start()
            self.digest_worker.start()
            # before the server: a restarted master reads its pops back first (docs/pop.md)
            self.pop_service.start()
            self.server.start()
            if self.acl_watcher is not None:
                self.acl_watcher.start()
            if not self.is_slave:
                # a slave's schedule queues are copies: only the master delivers, as in RocketMQ
                self.schedule_message_service.start()
                self.timer_message_store.start()
                self.transaction_check_service.start()  # and only a master checks transactions
            self.namesrv_client.start()
            self._started = True
            self.register_broker_all(wait=True)
        except BaseException:
            self._stop_parts()
            raise
        config = self.config
        self.scheduler.schedule_periodic(config.register_name_server_period / 1000, self.register_broker_all)
        self.scheduler.schedule_periodic(config.flush_consumer_offset_interval / 1000, self.persist_offsets)
        self.scheduler.schedule_periodic(CLIENT_SCAN_INTERVAL, self.scan_not_active_clients)
        self.scheduler.schedule_periodic(DISK_CHECK_INTERVAL, self.check_disk)
        self.scheduler.schedule_periodic(SAMPLE_INTERVAL, self.runtime_stats.sample)
        self.scheduler.schedule_periodic(broker_stats.SAMPLE_INTERVAL, self.broker_stats.sample)
        if config.stats_log_interval:
            self.stats_log = StatsLog(
                self.store, self.get_counts, config.broker_name, self.store_config.store_path_root_dir
            )
            self.scheduler.schedule_periodic(config.stats_log_interval / 1000, self.stats_log.log_once)
        if self.is_slave:
            self._schedule_slave_work()
        self.scheduler.start()
        if self.replicas is not None:
            self.replicas.start()
        log.info(
            "broker %s (%s, cluster %s) started: serving on %s, store %s, name servers %s",
            config.broker_name,
            config.broker_role.value,
            config.broker_cluster_name,
            self.broker_addr,
            self.store.store_path,
            ";".join(self._namesrv_addrs),
        )
        return self

    def shutdown(self) -> None:
        """Unregister, stop serving, save offsets and configs, shut the store down (abort file goes)."""
        with self._shutdown_lock:
            if not self._started:
                return
            self._started = False
            if self.replicas is not None:
                self.replicas.shutdown()
            self.scheduler.shutdown()
            try:
                self.namesrv_api.unregister_all(
                    self._namesrv_addrs,
                    self.config.broker_cluster_name,
                    self.broker_addr,
                    self.config.broker_name,
                    self.config.broker_id,
                )
            except Exception:
                log.exception("unregistering from the name servers failed")
            self._stop_parts()
            log.info("broker %s at %s stopped", self.config.broker_name, self.broker_addr)
            self._stopped.set()

    def _stop_parts(self) -> None:
        if self.metrics is not None:
            self.metrics.shutdown()
        if self.acl_watcher is not None:
            self.acl_watcher.shutdown()
        self.server.loop.run_and_wait(self.pull_hold.shutdown)
        self.server.loop.run_and_wait(self.pop_service.shutdown)
        # before the loop stops: a compile finishing hands its result to the loop
        self.subscription_filters.shutdown()
        self.server.shutdown()
        self.digest_worker.shutdown()  # after the server: no request can queue a digest any more
        self.namesrv_client.shutdown()
        # before the store: the last delivered offsets are published, then the store flushes them
        self.schedule_message_service.shutdown()
        self.timer_message_store.shutdown()
        self.transaction_check_service.shutdown()
        self.store.shutdown()
        self.persist_all()

    def wait_stopped(self, timeout: float | None = None) -> bool:
        return self._stopped.wait(timeout)

    def __enter__(self) -> BrokerController:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # -- persistence ----------------------------------------------------------------------------

    def persist_offsets(self) -> None:
        self.consumer_offset_manager.persist()
        self.consumer_order_info_manager.persist()

    def persist_all(self) -> None:
        for manager in (
            self.consumer_offset_manager,
            self.consumer_order_info_manager,
            self.topic_config_manager,
            self.subscription_group_manager,
            self.delay_offset_manager,
        ):
            manager.persist()

    # -- name servers ---------------------------------------------------------------------------

    def register_broker_all(self, force: bool = True, wait: bool = False) -> list[concurrent.futures.Future]:
        """REGISTER_BROKER with every name server now, with the current topic configs; the futures
        of the answers. Never blocks the event loop unless ``wait`` (start-up)."""
        if not self._started:
            return []
        if self.replicas is not None and not self.replicas.role_decided.is_set():
            return []  # neither master nor slave until the controllers say which
        config = self.config
        futures = self.namesrv_api.register_all(
            self._namesrv_addrs,
            config.broker_cluster_name,
            self.broker_addr,
            config.broker_name,
            config.broker_id,
            config.ha_server_addr,
            self.topic_config_manager.build_serialize_wrapper(config.broker_permission),
            wait=wait,
            on_answer=self.slave_sync.on_register_answer if self.is_slave else self.role.on_register_answer,
            epoch=None if self.is_slave else self.store.epoch,
            controller_mode=self.replicas is not None,
        )
        if self.store.ha_client is not None:
            for future in futures:
                future.add_done_callback(self._learn_master_ha_address)
        return futures

    def _learn_master_ha_address(self, future: concurrent.futures.Future) -> None:
        """A slave replicates from the HA address the name server answers (unless haMasterAddress
        says where), as RocketMQ's slaves do."""
        ha_client = self.store.ha_client
        if ha_client is None or self.store_config.ha_master_address or future.exception() is not None:
            return
        response = future.result()
        if self.replicas is not None and not self.replicas.follows(response.ext_fields.get("masterAddr")):
            return
        if response.code == ResponseCode.SUCCESS:
            ha_client.update_master_address(response.ext_fields.get("haServerAddr") or None)

    def _topics_changed(self) -> None:
        # A created or changed topic is routed at once, not at the next 30 s tick.
        self.last_registration = self.register_broker_all(force=True)

    # -- putting messages (the seam for retry, delay and transaction services) -----------------

    def schedule_redirect(self, topic: str, queue_id: int, properties: str | bytes | dict) -> tuple[str, int, bytes]:
        """Where a message with a DELAY property > 0 is really stored, as RocketMQ's CommitLog does:
        SCHEDULE_TOPIC_XXXX queue level-1 (level capped at the highest), with REAL_TOPIC / REAL_QID
        saved in its properties. Messages without a delay come back unchanged."""
        props = properties if isinstance(properties, dict) else decode_properties(properties)
        level_text = props.get(MessageProperty.DELAY_TIME_LEVEL, "")
        try:
            level = int(level_text)
        except ValueError:
            level = 0
        if level <= 0 or topic == SCHEDULE_TOPIC:
            encoded = properties if isinstance(properties, bytes) else encode_properties(props)
            return topic, queue_id, encoded
        props = dict(props)
        level = min(level, len(self.store_config.delay_level_ms))
        props[MessageProperty.DELAY_TIME_LEVEL] = str(level)
        props[MessageProperty.REAL_TOPIC] = topic
        props[MessageProperty.REAL_QUEUE_ID] = str(queue_id)
        return SCHEDULE_TOPIC, delay_level_to_queue_id(level), encode_properties(props)

    def put_inner(
        self,
        topic: str,
        queue_id: int,
        body,
        properties: dict[str, str] | bytes | str = b"",
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str | int = 0,
        flag: int = 0,
        reconsume_times: int = 0,
        *,
        born_port: int = 0,
        callback: Callable[[PutMessageResult], None] | None = None,
        prepared_tx_offset: int = 0,
    ) -> PutMessageResult:
        """Store a message the broker makes itself (retry, dead letter, a delayed message come due).

        A DELAY property > 0 sends it to SCHEDULE_TOPIC_XXXX first (``schedule_redirect``); clear
        it to store in ``topic`` now. ``born_host`` is "ip" or an int; ``prepared_tx_offset`` is a
        committed transactional message's half message offset. Under SYNC_FLUSH with a
        ``callback`` the result is pending and ``callback(result)`` runs on the event loop. Pulls
        parked on the queue are woken. Any thread.
        """
        if isinstance(properties, str):
            properties = properties.encode()
        topic, queue_id, props = self.schedule_redirect(topic, queue_id, properties)
        host = ipv4_to_int(born_host) if isinstance(born_host, str) else born_host
        result = self.store.put_message(
            topic,
            queue_id,
            body,
            props,
            sys_flag=sys_flag,
            born_timestamp=born_timestamp,
            flag=flag,
            reconsume_times=reconsume_times,
            born_host=host or self._store_ip,
            born_port=born_port,
            prepared_tx_offset=prepared_tx_offset,
            callback=callback,
        )
        if result.status_code == PutMessageStatus.PUT_OK:
            self.notify_message_arriving(topic, queue_id)
        self._request_flush_round()
        return result

    def _request_flush_round(self) -> None:
        # what a send does after its put: a SYNC_FLUSH round asked for and, SYNC_MASTER, the HA
        # service told of the new bytes; without it a put waiting for a slave (POP's checkpoints
        # and acks) waited for the HA stream's next timed look, haSendHeartbeatInterval / 2
        kicker = self.flush_rounds
        if kicker is None:
            return
        if self.server.loop.in_loop_thread():
            kicker.request()
        else:
            self.server.loop.call_soon_threadsafe(kicker.request)

    def put_again(
        self,
        message: StoredMessage,
        topic: str,
        queue_id: int,
        properties: dict[str, str],
        reconsume_times: int | None = None,
    ) -> PutMessageResult:
        """``put_inner`` of a stored message's body, flags and born host under ``topic`` and new
        ``properties`` (a delayed, timed or retried message put where it goes next)."""
        return self.put_inner(
            topic,
            queue_id,
            message.body,
            properties,
            sys_flag=message.sys_flag,
            born_timestamp=message.born_timestamp,
            born_host=message.born_host[0],
            born_port=message.born_host[1],
            flag=message.flag,
            reconsume_times=message.reconsume_times if reconsume_times is None else reconsume_times,
        )

    def notify_message_arriving(self, topic: str, queue_id: int) -> None:
        """Answer the pulls parked on (topic, queue_id): a message was just stored there. Any thread."""
        self.pull_hold.notify_message_arriving(topic, queue_id)

    # -- clients --------------------------------------------------------------------------------

    def notify_consumer_ids_changed(self, group: str) -> None:
        """Tell the group's consumers to rebalance now (NOTIFY_CONSUMER_IDS_CHANGED, oneway)."""
        if not self.config.notify_consumer_ids_changed_enable:
            return
        group_config = self.subscription_group_manager.find_subscription_group_config(group)
        if group_config is not None and not group_config.notify_consumer_ids_changed_enable:
            return
        for channel in self.client_manager.consumers.channels(group):
            channel.send_oneway(
                RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group})
            )

    def _on_channel_closed(self, channel) -> None:
        self.pull_hold.on_channel_closed(channel)
        self.pop_service.on_channel_closed(channel)
        for group in self.client_manager.on_channel_closed(channel):
            self.notify_consumer_ids_changed(group)

    def scan_not_active_clients(self) -> None:
        """Drop clients silent for 120 s, tell their groups, close their connections."""
        scan = self.client_manager.scan_not_active_channels()
        for group in scan.changed_groups:
            self.notify_consumer_ids_changed(group)
        for channel in scan.expired_channels:
            channel.close()

    # -- disk -----------------------------------------------------------------------------------

    def check_disk(self) -> None:
        """Mark the store full (sends refused) while its disk is fuller than
        diskSpaceWarningLevelRatio, writeable again below it (``MessageStore.check_disk_space``)."""
        try:
            self.store.check_disk_space()
        except OSError as e:
            log.error("cannot read the disk usage of %s: %s", self.store.store_path, e)


def _serves_every_processor(c: BrokerController) -> None:
    """Never called: mypy checks here that the controller is each service Protocol it is handed
    as (rmq.broker.services, role, transaction), which ``cls(self) for cls in PROCESSORS`` and the
    untyped hand-overs cannot show it."""
    _: list[object] = [c]
    a: services.AdminBrokerServices = c
    b: services.ClientManageServices = c
    d: services.ConsumerManageServices = c
    e: services.EndTransactionServices = c
    f: services.LockServices = c
    g: services.PullServices = c
    h: services.QueryServices = c
    i: services.QueueOffsetServices = c
    j: services.ReplicaServices = c
    k: services.SendServices = c
    m: services.SendBackServices = c
    n: services.TopicServices = c
    o: services.SlaveSyncServices = c
    p: services.MetricsServices = c
    t: services.PopServices = c
    q: RoleServices = c
    r: TransactionServices = c
    s: ReplicasServices = c
    u: services.ClientAdminServices = c
    _.extend((a, b, d, e, f, g, h, i, j, k, m, n, o, p, q, r, s, t, u))
