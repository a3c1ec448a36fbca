"""The name server's config: ``NamesrvConfig`` is what a ``NameServer`` runs with (embedded by a broker,
or made by a test); ``NamesrvSettings`` is what ``rmq-namesrv -c namesrv.conf --set key=value`` reads,
strictly, from ``rmq.settings.NAMESRV_SETTINGS`` (RocketMQ's NamesrvConfig and NettyServerConfig keys),
and turns into one.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any, ClassVar

from rmq.namesrv.auth import ClusterAuth
from rmq.net.server import ConnectionLimits
from rmq.net.server_config import ServerConfig
from rmq.net.tls import TlsServerOptions
from rmq.settings import (
    NAMESRV_SETTINGS,
    ControllerRaftSettings,
    LoadedSettings,
    ServerSettings,
    SettingsTable,
    SettingsView,
    load_settings,
    setting,
)


def _setting(key: str) -> Any:
    return setting(key, NAMESRV_SETTINGS)


@dataclasses.dataclass
class NamesrvConfig:
    """What a name server runs with; the defaults are NAMESRV_SETTINGS'."""

    listen_host: str = NAMESRV_SETTINGS["bindAddress"].default
    listen_port: int = NAMESRV_SETTINGS["listenPort"].default
    # seconds here, as the loop schedules them; the setting is RocketMQ's, in ms
    scan_not_active_broker_interval: float = NAMESRV_SETTINGS["scanNotActiveBrokerInterval"].default / 1000
    broker_channel_expired_ms: int = NAMESRV_SETTINGS["brokerChannelExpiredTime"].default
    # TLS on the listening port (rmq.net.tls), permissive or enforcing; None: plain only
    tls: TlsServerOptions | None = None
    # idle and frame timeouts, maximum connections (an embedded one takes its broker's settings)
    limits: ConnectionLimits = ConnectionLimits()
    # the cluster account that signs writes (rmq.namesrv.auth); None: writes are taken unsigned
    cluster_auth: ClusterAuth | None = None
    # the KV config's file (rmq.namesrv.kv_config); None: in memory only
    kv_config_path: str | None = None


@dataclasses.dataclass
class NamesrvSettings(SettingsView, ServerSettings, ControllerRaftSettings, ServerConfig):
    """The name server's settings, as ``rmq-namesrv`` reads them."""

    settings_table: ClassVar[SettingsTable] = NAMESRV_SETTINGS

    listen_port: int = _setting("listenPort")
    bind_address: str = _setting("bindAddress")
    scan_not_active_broker_interval: int = _setting("scanNotActiveBrokerInterval")
    broker_channel_expired_time: int = _setting("brokerChannelExpiredTime")
    enable_controller_in_namesrv: bool = _setting("enableControllerInNamesrv")
    kv_config_path: str = _setting("kvConfigPath")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_server_config()

    def namesrv_config(self) -> NamesrvConfig:
        """What the name server runs with; ConfigError when the TLS files cannot be loaded."""
        return NamesrvConfig(
            listen_host=self.bind_address,
            listen_port=self.listen_port,
            scan_not_active_broker_interval=self.scan_not_active_broker_interval / 1000,
            broker_channel_expired_ms=self.broker_channel_expired_time,
            tls=self.server_tls(),
            limits=self.connection_limits(),
            cluster_auth=cluster_auth(self),
            kv_config_path=self.kv_config_path or None,
        )


def cluster_auth(config: ServerConfig) -> ClusterAuth | None:
    """What a name server checks writes with: the cluster account of ``config`` (a name server's
    settings, or the broker's that embeds it), if it has one."""
    return config.cluster_auth()


def load_namesrv_settings(
    config_file: str | os.PathLike[str] | None = None, layers: list[tuple[str, Mapping[str, Any]]] | None = None
) -> LoadedSettings:
    """namesrv.conf (if given), then each ``(source, settings)`` layer (``--set``, the options)."""
    return load_settings(config_file, layers or [], table=NAMESRV_SETTINGS)
