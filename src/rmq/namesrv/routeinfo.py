"""The name server's routing tables (docs/nameserver.md#tables), as RocketMQ's RouteInfoManager keeps them.

    topic_queue_table   topic -> {brokerName: QueueData}
    broker_addr_table   brokerName -> BrokerData{cluster, brokerName, brokerAddrs{id: "ip:port"}}
    cluster_addr_table  cluster -> {brokerName}
    broker_live_table   "ip:port" -> BrokerLiveInfo{last_update, data_version, channel, ha_server_addr}
    filter_server_table "ip:port" -> [filter server addresses]

Pure logic: no sockets. The server's loop thread is the only writer; the lock lets other threads
(an embedding broker, tests, admin tooling) read a consistent view.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from dataclasses import dataclass
from typing import Any

import orjson

from rmq import _clock
from rmq._log import RateLimitedLog
from rmq.namesrv.auth import REFUSAL_LOG_INTERVAL
from rmq.protocol.perm import PERM_READ, PERM_WRITE
from rmq.protocol.route import MASTER_ID, BrokerData, QueueData
from rmq.settings import NAMESRV_SETTINGS

log = logging.getLogger("rmq.namesrv")

DEFAULT_BROKER_CHANNEL_EXPIRED_MS: int = NAMESRV_SETTINGS["brokerChannelExpiredTime"].default


@dataclass
class BrokerLiveInfo:
    last_update_ms: int
    data_version: dict[str, Any] | None
    channel: Any
    ha_server_addr: str
    # a master's term (rmq brokers send it; None from Apache brokers and from slaves)
    epoch: int | None = None
    # its claim to that term (rmq.protocol.acl.master_claim), passed on to a master refused for it
    claim: str | None = None
    # registered in controller mode (its epochs are the controllers')
    controller_mode: bool = False


@dataclass
class RegisterBrokerResult:
    ha_server_addr: str | None = None
    master_addr: str | None = None
    # why a master was refused (another live master of its name holds the route); nothing recorded
    refused: str | None = None
    # refused for a routed master of the same or a newer epoch (CONTROLLER_FENCED_MASTER_EPOCH), and
    # that master as it registered: the refused one fences itself only if the claim checks out
    fenced: bool = False
    routed_addr: str | None = None
    routed_epoch: int | None = None
    routed_claim: str | None = None


def _host(address: str) -> str:
    """The host of ``host:port``."""
    host, sep, _port = address.rpartition(":")
    return host.strip("[]") if sep else address


def _same_data_version(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    if a is None or b is None:
        return False
    return a.get("timestamp") == b.get("timestamp") and a.get("counter") == b.get("counter")


class RouteInfoManager:
    """Routing tables with RocketMQ's registration, expiry and route-assembly rules."""

    def __init__(self, broker_channel_expired_ms: int = DEFAULT_BROKER_CHANNEL_EXPIRED_MS):
        self.broker_channel_expired_ms = broker_channel_expired_ms
        self._lock = threading.RLock()
        # a forger repeating a refused registration must not flood the log
        self._refusals = RateLimitedLog(log, REFUSAL_LOG_INTERVAL)
        # Encoded GET_ROUTEINFO_BY_TOPIC bodies. Clients ask every 30 s per topic while the tables
        # change only when brokers come, go or change configs, so every change clears this.
        self._route_cache: dict[str, bytes] = {}
        # brokerName -> the topics whose write permission WIPE_WRITE_PERM_OF_BROKER took (and ADD gives back)
        self._wiped_write_perm: dict[str, set[str]] = {}
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}

    # -- registration ---------------------------------------------------------------------------

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_wrapper: dict[str, Any] | None,
        filter_server_list: list[str] | None = None,
        channel: Any = None,
        now_ms: int | None = None,
        epoch: int | None = None,
        signed: bool = False,
        claim: str | None = None,
        controller_mode: bool = False,
        epochs_trusted: bool = False,
    ) -> RegisterBrokerResult:
        """Record a broker's (re-)registration; a master's topic configs update the queue table.

        While a live master of its name (registered within the expiry, its connection open) holds
        the route, a master at another address is refused (``result.refused``, nothing recorded):
        two masters of one name would fork the log, and one unauthenticated frame must not move a
        route. Only a ``signed`` registration (checked with the cluster's credentials) of a newer
        ``epoch`` replaces it (a promoted slave); one of the same or an older epoch is answered
        with the routed master's claim (``result.fenced``).

        In controller mode (``controller_mode``, the routed master's too) epochs are the
        controllers' (their Raft group elected it): where nothing can be signed (``epochs_trusted``:
        the name server has no cluster account) a newer epoch replaces the routed master unsigned,
        as RocketMQ 5.x's name servers take the master the controllers elected; a paused old master
        would otherwise keep the route until its registration expires."""
        now_ms = _clock.now_ms() if now_ms is None else now_ms
        wrapper = topic_config_wrapper or {}
        data_version = wrapper.get("dataVersion") or {"timestamp": 0, "counter": 0}
        result = RegisterBrokerResult()
        with self._lock:
            elected = epochs_trusted and controller_mode
            if self._refuse_displacement(result, broker_name, broker_id, broker_addr, epoch, signed, now_ms, elected):
                return result
            self._route_cache.clear()
            self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)
            broker_data = self.broker_addr_table.get(broker_name)
            register_first = broker_data is None
            if broker_data is None:
                broker_data = BrokerData(cluster_name, broker_name)
                self.broker_addr_table[broker_name] = broker_data
            # One address holds one id: a slave promoted to master first drops its old id.
            for old_id, addr in list(broker_data.broker_addrs.items()):
                if addr == broker_addr and old_id != broker_id:
                    del broker_data.broker_addrs[old_id]
            old_addr = broker_data.broker_addrs.get(broker_id)
            broker_data.broker_addrs[broker_id] = broker_addr
            register_first = register_first or old_addr is None

            if broker_id == MASTER_ID:
                changed = register_first or self.is_broker_topic_config_changed(broker_addr, data_version)
                for topic_config in (wrapper.get("topicConfigTable") or {}).values():
                    # a topic deleted here (DELETE_TOPIC_IN_NAMESRV) that its master still serves
                    # comes back, though the master's data version did not change (RocketMQ 5.x)
                    queues = self.topic_queue_table.get(topic_config["topicName"])
                    if changed or queues is None or broker_name not in queues:
                        self._create_and_update_queue_data(broker_name, topic_config)

            previous = self.broker_live_table.get(broker_addr)
            self.broker_live_table[broker_addr] = BrokerLiveInfo(
                now_ms, data_version, channel, ha_server_addr, epoch, claim, controller_mode
            )
            if previous is None:
                log.info(
                    "new broker registered: %s (%s, cluster %s, id %d) HA %s",
                    broker_addr,
                    broker_name,
                    cluster_name,
                    broker_id,
                    ha_server_addr,
                )
            if filter_server_list is not None:
                if filter_server_list:
                    self.filter_server_table[broker_addr] = list(filter_server_list)
                else:
                    self.filter_server_table.pop(broker_addr, None)

            if broker_id != MASTER_ID:
                master_addr = broker_data.broker_addrs.get(MASTER_ID)
                master_live = self.broker_live_table.get(master_addr) if master_addr else None
                if master_live is not None:
                    result.ha_server_addr = master_live.ha_server_addr
                    result.master_addr = master_addr
        return result

    def _refuse_displacement(
        self,
        result: RegisterBrokerResult,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        epoch: int | None,
        signed: bool,
        now_ms: int,
        elected: bool = False,
    ) -> bool:
        """Whether broker ``broker_id`` of ``broker_name`` at ``broker_addr`` may not take its
        route from another live address; if so, ``result`` says why (and, for a master whose epoch
        is not newer, which master holds the route). ``elected``: a master in controller mode on a
        name server that cannot check signatures, which a newer epoch lets replace one of
        controller mode."""
        broker_data = self.broker_addr_table.get(broker_name)
        routed = broker_data.broker_addrs.get(broker_id) if broker_data is not None else None
        if routed is None or routed == broker_addr:
            return False
        live = self.broker_live_table.get(routed)
        if live is None or live.last_update_ms + self.broker_channel_expired_ms < now_ms:
            return False
        if broker_id != MASTER_ID:
            if signed:
                return False
            result.refused = (
                f"{broker_name} already has live broker {routed} with id {broker_id}: {broker_addr} is refused "
                "that id until it is gone (unregistered, its connection closed or silent past the expiry)"
            )
        elif epoch is not None and live.epoch is not None and live.epoch >= epoch:
            result.refused = (
                f"{broker_name} already has master {routed} in epoch {live.epoch}, and this one is in epoch "
                f"{epoch}: a second master of one broker name is refused (restart it as a slave)"
            )
            result.fenced = True
            result.routed_addr, result.routed_epoch, result.routed_claim = routed, live.epoch, live.claim
        elif epoch is not None and (signed or (elected and live.controller_mode)):
            # a promoted slave vouched for by the cluster's credentials, or the controllers' newer master
            return False
        else:
            result.refused = (
                f"{broker_name} already has live master {routed}"
                + (f" in epoch {live.epoch}" if live.epoch is not None else "")
                + f": master {broker_addr} (epoch {epoch}) is refused until it is gone (unregistered, its "
                "connection closed or silent past the expiry); only a registration signed by the cluster "
                "account (clusterAccessKey) with a newer epoch replaces a live master"
            )
        self._refusals.warning(
            (broker_name, broker_addr), "refused broker %s of %s: %s", broker_addr, broker_name, result.refused
        )
        return True

    def _create_and_update_queue_data(self, broker_name: str, topic_config: dict[str, Any]) -> None:
        topic = topic_config["topicName"]
        queue_data = QueueData(
            broker_name=broker_name,
            read_queue_nums=int(topic_config.get("readQueueNums", 0)),
            write_queue_nums=int(topic_config.get("writeQueueNums", 0)),
            perm=int(topic_config.get("perm", PERM_READ | PERM_WRITE)),
            topic_sys_flag=int(topic_config.get("topicSysFlag", 0)),
        )
        queues = self.topic_queue_table.setdefault(topic, {})
        old = queues.get(broker_name)
        queues[broker_name] = queue_data
        self._wiped_write_perm.get(broker_name, set()).discard(topic)  # the broker's config decides now
        if old is None:
            log.info("new topic registered: %s on %s", topic, broker_name)
        elif old != queue_data:
            log.info("topic changed: %s on %s: %s -> %s", topic, broker_name, old, queue_data)

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: dict[str, Any] | None) -> bool:
        with self._lock:
            live = self.broker_live_table.get(broker_addr)
            return live is None or not _same_data_version(live.data_version, data_version)

    def query_broker_data_version(self, broker_addr: str) -> dict[str, Any] | None:
        with self._lock:
            live = self.broker_live_table.get(broker_addr)
            return live.data_version if live else None

    def touch_broker(self, broker_addr: str, now_ms: int | None = None) -> None:
        """A QUERY_DATA_VERSION that found nothing changed still proves the broker alive."""
        with self._lock:
            live = self.broker_live_table.get(broker_addr)
            if live is not None:
                live.last_update_ms = _clock.now_ms() if now_ms is None else now_ms

    def unregister_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        channel: Any = None,
        signed: bool = False,
    ) -> str | None:
        """Forget a broker; why not (nothing changed), or None. Over the wire (``channel`` given),
        a live broker is forgotten only on a ``signed`` request or one from its own connection or
        host: anyone else could take a master's routes away until its next registration."""
        with self._lock:
            live = self.broker_live_table.get(broker_addr)
            if live is not None and channel is not None and not signed and live.channel is not channel:
                source = _host(getattr(channel, "remote_address", ""))
                if source != _host(broker_addr):
                    return (
                        f"broker {broker_addr} is registered and live, and this request comes from {source} "
                        "on another connection: a broker unregisters itself (from its own connection or host)"
                    )
            self._route_cache.clear()
            removed = self.broker_live_table.pop(broker_addr, None)
            log.info(
                "unregister broker %s (%s id %d): %s",
                broker_addr,
                broker_name,
                broker_id,
                "was live" if removed else "was not live",
            )
            self.filter_server_table.pop(broker_addr, None)
            broker_data = self.broker_addr_table.get(broker_name)
            # the id is another broker's now (a promoted slave's): it stays routed
            if broker_data is None or broker_data.broker_addrs.get(broker_id) != broker_addr:
                return None
            del broker_data.broker_addrs[broker_id]
            if not broker_data.broker_addrs:
                del self.broker_addr_table[broker_name]
                names = self.cluster_addr_table.get(cluster_name)
                if names is not None:
                    names.discard(broker_name)
                    if not names:
                        del self.cluster_addr_table[cluster_name]
                self._remove_topics_of(broker_name)
        return None

    # -- expiry ---------------------------------------------------------------------------------

    def scan_not_active_broker(self, now_ms: int | None = None) -> list[str]:
        """Drop brokers silent for longer than the expiry; returns their addresses."""
        now_ms = _clock.now_ms() if now_ms is None else now_ms
        with self._lock:
            expired = [
                addr
                for addr, live in self.broker_live_table.items()
                if live.last_update_ms + self.broker_channel_expired_ms < now_ms
            ]
            for addr in expired:
                log.warning("broker %s silent for more than %d ms: removed", addr, self.broker_channel_expired_ms)
                self._remove_broker_addr(addr)
        return expired

    def on_channel_destroy(self, channel: Any) -> str | None:
        """A broker's connection closed: forget it at once (as RocketMQ's housekeeping does)."""
        with self._lock:
            for addr, live in self.broker_live_table.items():
                if live.channel is not None and live.channel is channel:
                    log.info("connection of broker %s closed: removed", addr)
                    self._remove_broker_addr(addr)
                    return addr
        return None

    def _remove_broker_addr(self, broker_addr: str) -> None:
        self._route_cache.clear()
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        for broker_name, broker_data in list(self.broker_addr_table.items()):
            ids = [i for i, a in broker_data.broker_addrs.items() if a == broker_addr]
            if not ids:
                continue
            for i in ids:
                del broker_data.broker_addrs[i]
            if not broker_data.broker_addrs:
                del self.broker_addr_table[broker_name]
                for cluster, names in list(self.cluster_addr_table.items()):
                    if broker_name in names:
                        names.discard(broker_name)
                        if not names:
                            del self.cluster_addr_table[cluster]
                self._remove_topics_of(broker_name)
            return

    def _remove_topics_of(self, broker_name: str) -> None:
        for topic, queues in list(self.topic_queue_table.items()):
            queues.pop(broker_name, None)
            if not queues:
                del self.topic_queue_table[topic]

    # -- reads ----------------------------------------------------------------------------------

    def pickup_topic_route(self, topic: str) -> dict[str, Any] | None:
        """The route JSON object of docs/nameserver.md#routes, or None when the topic has no live broker."""
        with self._lock:
            queues = self.topic_queue_table.get(topic)
            if not queues:
                return None
            broker_datas = []
            filter_servers: dict[str, list[str]] = {}
            for broker_name in sorted(queues):
                broker_data = self.broker_addr_table.get(broker_name)
                if broker_data is None:
                    continue
                broker_datas.append(broker_data.to_json())
                for addr in broker_data.broker_addrs.values():
                    if addr in self.filter_server_table:
                        filter_servers[addr] = list(self.filter_server_table[addr])
            if not broker_datas:
                return None
            return {
                "brokerDatas": broker_datas,
                "filterServerTable": filter_servers,
                "queueDatas": [queues[name].to_json() for name in sorted(queues)],
            }

    def topic_route_json(self, topic: str) -> bytes | None:
        """pickup_topic_route encoded as the response body, cached until the tables change."""
        with self._lock:
            encoded = self._route_cache.get(topic)
            if encoded is None:
                route = self.pickup_topic_route(topic)
                if route is None:
                    return None
                encoded = self._route_cache[topic] = orjson.dumps(route)
            return encoded

    def get_all_cluster_info(self) -> dict[str, Any]:
        with self._lock:
            return {
                "brokerAddrTable": {name: bd.to_json() for name, bd in sorted(self.broker_addr_table.items())},
                "clusterAddrTable": {c: sorted(names) for c, names in sorted(self.cluster_addr_table.items())},
            }

    def get_all_topic_list(self) -> list[str]:
        with self._lock:
            return sorted(self.topic_queue_table)

    def get_topics_by_cluster(self, cluster_name: str) -> list[str]:
        with self._lock:
            names = self.cluster_addr_table.get(cluster_name, set())
            return sorted(t for t, queues in self.topic_queue_table.items() if names & queues.keys())

    def set_write_perm_of_broker(self, broker_name: str, writeable: bool) -> int:
        """Take the write permission off every topic route of ``broker_name`` (WIPE_WRITE_PERM_OF_BROKER:
        producers stop choosing it at their next route refresh, consumers still read it), or give it
        back (ADD_WRITE_PERM_OF_BROKER); the number of topics changed. It lasts until the broker's
        topic configs change (its registrations carry the same data version until then), as in 4.x.
        Giving back restores the write bit of the topics that had it before the wipe (4.x sets read
        and write on every topic, making a read-only topic writable)."""
        with self._lock:
            self._route_cache.clear()
            count = 0
            wiped = self._wiped_write_perm.setdefault(broker_name, set())
            for topic, queues in self.topic_queue_table.items():
                queue_data = queues.get(broker_name)
                if queue_data is None:
                    continue
                if writeable:
                    if topic in wiped or queue_data.perm & PERM_WRITE:
                        perm = queue_data.perm | PERM_WRITE
                    else:
                        perm = queue_data.perm  # read-only before the wipe (or never wiped)
                else:
                    if queue_data.perm & PERM_WRITE:
                        wiped.add(topic)
                    perm = queue_data.perm & ~PERM_WRITE
                queues[broker_name] = dataclasses.replace(queue_data, perm=perm)
                count += 1
            if writeable:
                del self._wiped_write_perm[broker_name]
        log.info("%s write permission of broker %s on %d topics", "added" if writeable else "wiped", broker_name, count)
        return count

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """Forget ``topic``'s queues (of one cluster's brokers). A master still serving it puts it
        back at its next registration; an Apache broker, which registers only when QUERY_DATA_VERSION
        says its data version changed, is told so."""
        with self._lock:
            self._route_cache.clear()
            queues = self.topic_queue_table.get(topic)
            if queues is None:
                return
            names = set(queues) if not cluster_name else set(queues) & self.cluster_addr_table.get(cluster_name, set())
            for broker_name in names:
                del queues[broker_name]
                broker_data = self.broker_addr_table.get(broker_name)
                master = broker_data.broker_addrs.get(MASTER_ID) if broker_data is not None else None
                live = self.broker_live_table.get(master) if master is not None else None
                if live is not None:
                    live.data_version = None
            if not queues:
                del self.topic_queue_table[topic]
