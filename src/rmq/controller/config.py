"""A controller's config: ``ControllerConfig`` is what a ``Controller`` runs with (standalone, inside a
name server, or made by a test); ``ControllerSettings`` is what ``rmq-controller -c controller.conf
--set key=value`` reads, strictly, from ``rmq.settings.CONTROLLER_SETTINGS`` (RocketMQ 5.x's
ControllerConfig keys), and turns into one.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any, ClassVar

from rmq.errors import ConfigError
from rmq.net.cluster_auth import ClusterAuth
from rmq.net.server import ConnectionLimits
from rmq.net.server_config import ServerConfig
from rmq.net.tls import TlsServerOptions
from rmq.protocol.acl import SessionCredentials
from rmq.protocol.controller import parse_peers
from rmq.settings import (
    CONTROLLER_SETTINGS,
    ControllerRaftSettings,
    LoadedSettings,
    ServerSettings,
    SettingsTable,
    SettingsView,
    load_settings,
    setting,
)

_DEFAULTS = CONTROLLER_SETTINGS


@dataclasses.dataclass
class ControllerConfig:
    """What a controller runs with; the defaults are CONTROLLER_SETTINGS'."""

    listen_host: str = _DEFAULTS["bindAddress"].default
    listen_port: int = _DEFAULTS["listenPort"].default
    group: str = _DEFAULTS["controllerDLegerGroup"].default
    #: controllerDLegerPeers, ``n0-host:port;n1-host:port``: every member's Raft address
    peers: str = _DEFAULTS["controllerDLegerPeers"].default
    self_id: str = _DEFAULTS["controllerDLegerSelfId"].default
    store_path: str = _DEFAULTS["controllerStorePath"].default
    # seconds here, as the loop schedules them; the setting is RocketMQ's, in ms
    scan_not_active_broker_interval: float = _DEFAULTS["scanNotActiveBrokerInterval"].default / 1000
    elect_master_max_retry_count: int = _DEFAULTS["electMasterMaxRetryCount"].default
    enable_elect_unclean_master: bool = _DEFAULTS["enableElectUncleanMaster"].default
    notify_broker_role_changed: bool = _DEFAULTS["notifyBrokerRoleChanged"].default
    tls: TlsServerOptions | None = None
    limits: ConnectionLimits = ConnectionLimits()
    #: the cluster account brokers' writes must be signed by; None: taken unsigned
    cluster_auth: ClusterAuth | None = None
    #: what the controller signs its NOTIFY_BROKER_ROLE_CHANGED with (the same account), or None
    cluster_credentials: SessionCredentials | None = None

    def peer_addresses(self) -> dict[str, str]:
        """member id -> Raft address; ConfigError when the peers or this member's id are wrong."""
        try:
            peers = parse_peers(self.peers)
        except ValueError as e:
            raise ConfigError(f"controllerDLegerPeers: {e}") from None
        if self.self_id not in peers:
            raise ConfigError(
                f"controllerDLegerSelfId {self.self_id!r} is not one of controllerDLegerPeers' ids {sorted(peers)}"
            )
        return peers


def controller_config(
    raft: ControllerRaftSettings,
    server: ServerConfig,
    listen_host: str,
    listen_port: int,
    scan_interval_ms: int,
) -> ControllerConfig:
    """A ControllerConfig from a controller's or a name server's settings (``raft`` and ``server``
    are one config object, of either); ConfigError when they cannot be used."""
    config = ControllerConfig(
        listen_host=listen_host,
        listen_port=listen_port,
        group=raft.controller_d_leger_group,
        peers=raft.controller_d_leger_peers,
        self_id=raft.controller_d_leger_self_id,
        store_path=raft.controller_store_path,
        scan_not_active_broker_interval=scan_interval_ms / 1000,
        elect_master_max_retry_count=raft.elect_master_max_retry_count,
        enable_elect_unclean_master=raft.enable_elect_unclean_master,
        notify_broker_role_changed=raft.notify_broker_role_changed,
        tls=server.server_tls(),
        limits=server.connection_limits(),
        cluster_auth=server.cluster_auth("controller", "rmq.controller"),
        cluster_credentials=server.cluster_credentials(),
    )
    config.peer_addresses()
    return config


@dataclasses.dataclass
class ControllerSettings(SettingsView, ServerSettings, ControllerRaftSettings, ServerConfig):
    """A controller's settings, as ``rmq-controller`` reads them."""

    settings_table: ClassVar[SettingsTable] = CONTROLLER_SETTINGS

    listen_port: int = setting("listenPort", CONTROLLER_SETTINGS)
    bind_address: str = setting("bindAddress", CONTROLLER_SETTINGS)
    scan_not_active_broker_interval: int = setting("scanNotActiveBrokerInterval", CONTROLLER_SETTINGS)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_server_config()

    def controller_config(self) -> ControllerConfig:
        """What the controller runs with; ConfigError when the peers or the TLS files cannot be used."""
        return controller_config(self, self, self.bind_address, self.listen_port, self.scan_not_active_broker_interval)


def load_controller_settings(
    config_file: str | os.PathLike[str] | None = None, layers: list[tuple[str, Mapping[str, Any]]] | None = None
) -> LoadedSettings:
    """controller.conf (if given), then each ``(source, settings)`` layer (``--set``, the options)."""
    return load_settings(config_file, layers or [], table=CONTROLLER_SETTINGS)
