"""A slave's metadata follows its master (RocketMQ's SlaveSynchronize).

Every slaveSyncInterval (10 s, as RocketMQ's fixed period; and at once when it learns a new master
address) a SLAVE broker asks its master

    GET_ALL_TOPIC_CONFIG (21)              {"topicConfigTable": {...}, "dataVersion": {...}}
    GET_ALL_CONSUMER_OFFSET (43)           {"offsetTable": {"<topic>@<group>": {"<queueId>": offset}}}
    GET_ALL_DELAY_OFFSET (45)              {"offsetTable": {"<level>": offset}}
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) {"subscriptionGroupTable": {...}, "dataVersion": {...}}

and takes what it answers: topics and groups when their DataVersion differs from the slave's, the
delay offsets as they are, the consumer offsets with the rule of ``rmq.broker.consumer_offset``
(commits taken on the slave while the master was away are handed to the master, never dropped).

The master's address comes from the name servers' REGISTER_BROKER answers (``masterAddr``, and
``haServerAddr`` for replication), as in RocketMQ: re-learned at every registration, gone when the
master is no longer registered. A slave that knows no master (one started before or with its
master, or whose master went) registers again every MASTER_LOOKUP_INTERVAL rather than at the
registerNameServerPeriod cycle (30 s), so it replicates within a second or two of its master being
routed, and logs what it waits for (``look_for_master``). The work
runs on the broker's Scheduler thread (it waits on the network); requests go out on the broker's
name-server client, whose loop is idle between registrations.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rmq.broker.consumer_offset import split_topic_at_group
from rmq.errors import RemotingError, ResponseError
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.java_json import loads_java_json

if TYPE_CHECKING:
    from rmq.broker.services import SlaveSyncServices
    from rmq.net.client import RemotingClient

log = logging.getLogger("rmq.broker")

SLAVE_SYNC_TIMEOUT = 3.0
# A registration is one small request per name server: once a second costs them nothing, and a
# master started with its slave is replicated to about a second after it is routed.
MASTER_LOOKUP_INTERVAL = 1.0
# How often a slave still without a master says so again.
MASTER_WAIT_LOG_INTERVAL = 30.0


class SlaveSynchronize:
    """What a slave copies from its master; ``sync_all`` does one round (Scheduler thread)."""

    def __init__(
        self,
        controller: SlaveSyncServices,
        client: RemotingClient,
        run_soon: Callable[[Callable[[], None]], object],
        timeout: float = SLAVE_SYNC_TIMEOUT,
    ):
        self.controller = controller
        self.client = client
        self.timeout = timeout
        self._run_soon = run_soon
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        # name server -> the master address its last REGISTER_BROKER answer named (None: none)
        self._answers: dict[str, str | None] = {}
        self._master_addr: str | None = None
        # controller mode: the master the controllers named (``follow``); None: the name servers'
        self._followed: str | None = None
        self._failing = False
        # since when this slave knows no master (monotonic), and when it last said so
        self._waiting_since: float | None = None
        self._waiting_logged = 0.0

    @property
    def master_addr(self) -> str | None:
        return self._master_addr

    def on_register_answer(self, namesrv_addr: str, response: RemotingCommand) -> None:
        """A name server answered this slave's registration (its client's loop thread)."""
        if response.code != ResponseCode.SUCCESS:
            return
        with self._lock:
            self._answers[namesrv_addr] = response.ext_fields.get("masterAddr") or None
            order = self.controller.namesrv_addrs
            known = [self._answers.get(addr) for addr in order if addr in self._answers]
            master = next((addr for addr in known if addr), None)
            if self._followed is not None and master != self._followed:
                return  # the controllers' word wins over a route not yet (or no longer) updated
            old, self._master_addr = self._master_addr, master
        if master == old:
            return
        if master is None:
            log.warning("master %s is no longer registered: slave metadata sync paused", old)
            return
        log.info("master of %s is %s: syncing metadata from it", self.controller.config.broker_name, master)
        self._failing = False
        self._run_soon(self.sync_all)

    def follow(self, master_addr: str) -> None:
        """Controller mode: the controllers named this slave's master: copy from it at once (any
        thread), whatever master the name servers' answers name (they route it a moment later)."""
        with self._lock:
            self._followed = master_addr
            old, self._master_addr = self._master_addr, master_addr
        if master_addr != old:
            log.info(
                "master of %s is %s (the controllers'): syncing metadata from it",
                self.controller.config.broker_name,
                master_addr,
            )
            self._failing = False
            self._run_soon(self.sync_all)

    def master_known(self) -> bool:
        """A name server named this slave's master, and its HA address unless haMasterAddress says it."""
        ha_client = self.controller.store.ha_client
        return self._master_addr is not None and (ha_client is None or bool(ha_client.master_address))

    def look_for_master(self) -> None:
        """While no name server names this slave's master: say so, and register again (Scheduler
        thread, every MASTER_LOOKUP_INTERVAL); the answers carry the master's addresses."""
        controller = self.controller
        if not controller.is_slave or self.master_known():
            self._waiting_since = None
            return
        now = time.monotonic()
        if self._waiting_since is None:
            self._waiting_since = self._waiting_logged = now
            log.info(
                "slave %s (brokerId %d): waiting for a master of %s: name servers %s route none yet; "
                "asking them every %g s",
                controller.config.broker_name,
                controller.config.broker_id,
                controller.config.broker_name,
                ";".join(controller.namesrv_addrs),
                MASTER_LOOKUP_INTERVAL,
            )
        elif now - self._waiting_logged >= MASTER_WAIT_LOG_INTERVAL:
            self._waiting_logged = now
            log.warning(
                "slave %s (brokerId %d): still no master of %s routed by name servers %s after %.0f s",
                controller.config.broker_name,
                controller.config.broker_id,
                controller.config.broker_name,
                ";".join(controller.namesrv_addrs),
                now - self._waiting_since,
            )
        controller.register_broker_all()

    # -- one round ------------------------------------------------------------------------------

    def sync_all(self) -> None:
        master = self._master_addr
        if master is None or master == self.controller.broker_addr or not self.controller.is_slave:
            return  # no master known, or this broker was promoted
        with self._sync_lock:
            try:
                self.sync_topic_config(master)
                self.sync_consumer_offset(master)
                self.sync_delay_offset(master)
                self.controller.timer_message_store.checkpoint.copy_from(
                    self._get(master, RequestCode.GET_TIMER_CHECKPOINT)
                )
                self.sync_subscription_group_config(master)
            except (RemotingError, ResponseError, ValueError, KeyError, TypeError, AttributeError) as e:
                # RemotingError: the master is away (its registration may outlive it a while)
                if not self._failing:
                    log.warning("cannot sync metadata from master %s: %s", master, e)
                self._failing = True
                return
        if self._failing:
            log.info("metadata sync from master %s works again", master)
        self._failing = False

    def _get(self, master: str, code: int) -> Any:
        response = self.client.invoke_sync(master, RemotingCommand.request(code, {}), self.timeout)
        if response.code != ResponseCode.SUCCESS:
            raise ResponseError(response.code, response.remark, master)
        return loads_java_json(body_bytes(response.body).decode())

    def sync_topic_config(self, master: str) -> None:
        if self.controller.topic_config_manager.copy_from(self._get(master, RequestCode.GET_ALL_TOPIC_CONFIG)):
            log.info("topic configs copied from master %s", master)

    def sync_subscription_group_config(self, master: str) -> None:
        wrapper = self._get(master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        if self.controller.subscription_group_manager.copy_from(wrapper):
            log.info("subscription groups copied from master %s", master)

    def sync_delay_offset(self, master: str) -> None:
        self.controller.delay_offset_manager.copy_from(self._get(master, RequestCode.GET_ALL_DELAY_OFFSET))

    def sync_consumer_offset(self, master: str) -> None:
        manager = self.controller.consumer_offset_manager
        table = self._get(master, RequestCode.GET_ALL_CONSUMER_OFFSET)["offsetTable"]
        ahead = manager.copy_from_master(table)
        for key, queues in ahead.items():
            pair = split_topic_at_group(key)
            if pair is None:
                continue
            topic, group = pair
            for queue_id, offset in queues.items():
                # The master takes the slave's commit; the mark goes only once it answered.
                ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "commitOffset": str(offset)}
                request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext)
                response = self.client.invoke_sync(master, request, self.timeout)
                if response.code != ResponseCode.SUCCESS:
                    raise ResponseError(response.code, response.remark, master)
                manager.master_has(key, queue_id, offset)
                log.info(
                    "offset %d of %s queue %d, committed on this slave, handed to master %s",
                    offset,
                    key,
                    queue_id,
                    master,
                )
        manager.persist()
