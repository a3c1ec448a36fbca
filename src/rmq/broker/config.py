"""BrokerConfig: the broker's settings, typed, under RocketMQ's property names (declared in rmq.settings).

``load_broker_config`` reads ``broker.conf`` and ``--set`` overrides (strictly: an unknown key or a
bad value is a ConfigError naming it), and builds the broker's and the store's config from them:

    broker_config, store_config = load_broker_config("broker.conf", {"listenPort": "20911"})
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import ssl
from collections.abc import Iterable, Mapping
from typing import Any

from rmq.errors import ConfigError
from rmq.net.server_config import ServerConfig
from rmq.protocol.route import MASTER_ID
from rmq.settings import (
    BrokerRole,
    LoadedSettings,
    MetricsExporterType,
    ProxySettings,
    ServerSettings,
    SettingsView,
    load_settings,
    setting,
)
from rmq.store import MessageStoreConfig
from rmq.store.ha import HASecurity

log = logging.getLogger("rmq.broker")

LOOPBACK_IP = "127.0.0.1"

__all__ = ["BrokerConfig", "BrokerRole", "MetricsExporterType", "load_broker_config", "load_broker_settings"]


@dataclasses.dataclass
class BrokerConfig(SettingsView, ServerSettings, ProxySettings, ServerConfig):
    """The broker's settings (``rmq.settings`` declares each one's type, default and help). The
    server part (limits, TLS, cluster account) also serves the name server it may embed."""

    broker_cluster_name: str = setting("brokerClusterName")
    broker_name: str = setting("brokerName")
    broker_id: int = setting("brokerId")
    namesrv_addr: str | None = setting("namesrvAddr")
    listen_port: int = setting("listenPort")
    namesrv_listen_port: int = setting("namesrvListenPort")
    broker_ip1: str | None = setting("brokerIP1")
    broker_ip2: str | None = setting("brokerIP2")
    ha_listen_port: int = setting("haListenPort")
    ha_listen_address: str | None = setting("haListenAddress")
    broker_role: BrokerRole = setting("brokerRole")
    broker_permission: int = setting("brokerPermission")
    broker_config_path: str | None = setting("brokerConfigPath")
    default_topic_queue_nums: int = setting("defaultTopicQueueNums")
    auto_create_topic_enable: bool = setting("autoCreateTopicEnable")
    cluster_topic_enable: bool = setting("clusterTopicEnable")
    broker_topic_enable: bool = setting("brokerTopicEnable")
    auto_create_subscription_group: bool = setting("autoCreateSubscriptionGroup")
    trace_topic_enable: bool = setting("traceTopicEnable")
    msg_trace_topic_name: str = setting("msgTraceTopicName")
    register_broker_timeout_mills: int = setting("registerBrokerTimeoutMills")
    register_name_server_period: int = setting("registerNameServerPeriod")
    long_polling_enable: bool = setting("longPollingEnable")
    short_polling_time_mills: int = setting("shortPollingTimeMills")
    notify_consumer_ids_changed_enable: bool = setting("notifyConsumerIdsChangedEnable")
    slave_read_enable: bool = setting("slaveReadEnable")
    slave_sync_interval: int = setting("slaveSyncInterval")
    enable_property_filter: bool = setting("enablePropertyFilter")
    which_broker_when_consume_slowly: int = setting("whichBrokerWhenConsumeSlowly")
    wait_time_mills_in_send_queue: int = setting("waitTimeMillsInSendQueue")
    send_thread_pool_queue_capacity: int = setting("sendThreadPoolQueueCapacity")
    fast_lane_enable: bool = setting("fastLaneEnable")
    flush_consumer_offset_interval: int = setting("flushConsumerOffsetInterval")
    stats_log_interval: int = setting("statsLogInterval")
    rebalance_lock_max_live_time: int = setting("rebalanceLockMaxLiveTime")
    reject_transaction_message: bool = setting("rejectTransactionMessage")
    transaction_time_out: int = setting("transactionTimeOut")
    transaction_check_max: int = setting("transactionCheckMax")
    transaction_check_interval: int = setting("transactionCheckInterval")
    revive_queue_num: int = setting("reviveQueueNum")
    revive_interval: int = setting("reviveInterval")
    pop_from_retry_probability: int = setting("popFromRetryProbability")
    max_pop_polling_size: int = setting("maxPopPollingSize")
    acl_enable: bool = setting("aclEnable")
    acl_config_file: str = setting("aclConfigFile")
    tls_client_trust_cert_path: str | None = setting("tlsClientTrustCertPath")
    tls_test_mode_enable: bool = setting("tlsTestModeEnable")
    metrics_exporter_type: MetricsExporterType = setting("metricsExporterType")
    metrics_prom_exporter_host: str | None = setting("metricsPromExporterHost")
    metrics_prom_exporter_port: int = setting("metricsPromExporterPort")
    enable_controller_mode: bool = setting("enableControllerMode")
    controller_addr: str | None = setting("controllerAddr")
    sync_broker_metadata_period: int = setting("syncBrokerMetadataPeriod")
    check_sync_state_set_period: int = setting("checkSyncStateSetPeriod")
    sync_controller_metadata_period: int = setting("syncControllerMetadataPeriod")
    controller_heart_beat_timeout_mills: int = setting("controllerHeartBeatTimeoutMills")
    broker_election_priority: int = setting("brokerElectionPriority")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_server_config()
        # RocketMQ silently forces a master's id to 0; a slave id under a master role is almost
        # always a forgotten brokerRole=SLAVE, and silently turning it into a second master is worse.
        if self.enable_controller_mode and not self.controller_addr_list:
            raise ConfigError("enableControllerMode=true needs controllerAddr (the controllers, host:port;host:port)")
        if self.broker_role is BrokerRole.SLAVE and self.broker_id == MASTER_ID:
            raise ConfigError("brokerRole=SLAVE needs a brokerId greater than 0 (0 is the master's)")
        if self.broker_role is not BrokerRole.SLAVE and self.broker_id != MASTER_ID:
            raise ConfigError(
                f"brokerId={self.broker_id} with brokerRole={self.broker_role.value}: "
                "a master's brokerId is 0; set brokerRole=SLAVE for a slave"
            )

    def client_tls(self) -> ssl.SSLContext | None:
        """What a slave connects to its master's HA port with (tlsEnable), or None; ConfigError when
        tlsClientTrustCertPath cannot be loaded."""
        if not self.tls_enable:
            return None
        if self.tls_test_mode_enable:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            return context
        try:
            context = ssl.create_default_context(cafile=self.tls_client_trust_cert_path)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load tlsClientTrustCertPath={self.tls_client_trust_cert_path}: {exc}") from None
        context.check_hostname = False  # masters are addressed by IP (brokerIP2)
        return context

    def ha_security(self) -> HASecurity:
        """The cluster credentials and TLS of the HA port (a master) or of the connection to it (a slave)."""
        # both sides whatever the role: a promoted slave serves the HA port with these
        return HASecurity(self.cluster_credentials(), self.cluster_auth_mode, self.server_tls(), self.client_tls())

    @property
    def controller_addr_list(self) -> list[str]:
        return [a.strip() for a in (self.controller_addr or "").split(";") if a.strip()]

    @property
    def embedded_namesrv(self) -> bool:
        """True when no name server address is configured: the broker runs one itself."""
        return not self.namesrv_addr

    @property
    def namesrv_addr_list(self) -> list[str]:
        return [a.strip() for a in (self.namesrv_addr or "").split(";") if a.strip()]

    @property
    def broker_addr(self) -> str:
        """``ip:port`` as registered with name servers."""
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def ha_server_addr(self) -> str:
        return f"{self.broker_ip2 or self.broker_ip1}:{self.ha_listen_port}"

    def resolve(self) -> BrokerConfig:
        """Fill the defaults that depend on other settings or on the host (brokerIP1/2)."""
        if not self.broker_ip1:
            self.broker_ip1 = LOOPBACK_IP if self.embedded_namesrv else first_non_loopback_ipv4()
        if not self.broker_ip2:
            # an HA port bound to one address is reached there
            bound = self.ha_listen_address not in (None, "0.0.0.0")
            self.broker_ip2 = self.ha_listen_address if bound else self.broker_ip1
        if self.ha_listen_port is None:
            self.ha_listen_port = self.listen_port + 1  # RocketMQ's default
        return self

    def store_config(self, loaded: LoadedSettings) -> MessageStoreConfig:
        """The store's config from the same settings; the store writes brokerIP1:listenPort (this
        broker's, resolved) into every record, so msgIds carry it."""
        self.resolve()
        return MessageStoreConfig.from_settings(
            loaded, broker_ip1=self.broker_ip1, listen_port=self.listen_port, ha_listen_port=self.ha_listen_port
        )


def load_broker_settings(
    config_file: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    more: Iterable[tuple[str, Mapping[str, Any]]] = (),
) -> LoadedSettings:
    """broker.conf (if given), ``--set`` overrides, then further ``(source, settings)`` layers."""
    return load_settings(config_file, [("--set", overrides or {}), *more])


def load_broker_config(
    config_file: str | os.PathLike[str] | None = None, overrides: Mapping[str, Any] | None = None
) -> tuple[BrokerConfig, MessageStoreConfig]:
    """The broker's and the store's config from broker.conf (if given) and ``--set`` overrides,
    host-dependent defaults resolved."""
    loaded = load_broker_settings(config_file, overrides)
    broker_config = BrokerConfig.from_settings(loaded).resolve()
    return broker_config, broker_config.store_config(loaded)


def first_non_loopback_ipv4() -> str:
    """The host's first non-loopback IPv4 address (RocketMQ's brokerIP1 default), else 127.0.0.1."""
    candidates: list[str] = []
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET, socket.SOCK_STREAM)
        candidates.extend(str(info[4][0]) for info in infos)
    except OSError:
        pass
    try:
        # Connecting a UDP socket sends nothing; it only asks the kernel which source address it
        # would route from.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            candidates.append(s.getsockname()[0])
    except OSError:
        pass
    for ip in candidates:
        if not ip.startswith("127.") and ip != "0.0.0.0":
            return ip
    return LOOPBACK_IP
