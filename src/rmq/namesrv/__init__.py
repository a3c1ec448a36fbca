"""The name server: in-memory routing that brokers register with and clients ask for routes.

Embeddable: ``NameServer(NamesrvConfig(port=0)).start()`` runs it on a background loop thread,
``rmq-namesrv-loop``, of the calling process (docs/threads.md); ``rmq-broker`` embeds one when no
name server address is configured.
"""

from __future__ import annotations

import logging

from rmq.namesrv.auth import ClusterAuth
from rmq.namesrv.config import NamesrvConfig, NamesrvSettings
from rmq.namesrv.kv_config import KVConfigManager
from rmq.namesrv.processor import NamesrvProcessor
from rmq.namesrv.routeinfo import RouteInfoManager
from rmq.net.server import RemotingServer

log = logging.getLogger("rmq.namesrv")

__all__ = ["ClusterAuth", "NameServer", "NamesrvConfig", "NamesrvSettings", "RouteInfoManager"]


class NameServer:
    """A running name server: routing tables behind a remoting server."""

    def __init__(self, config: NamesrvConfig | None = None):
        self.config = config or NamesrvConfig()
        self.route_info = RouteInfoManager(self.config.broker_channel_expired_ms)
        self.kv_config = KVConfigManager(self.config.kv_config_path)
        self.processor = NamesrvProcessor(self.route_info, self.config.cluster_auth, self.kv_config)
        self.server = RemotingServer(
            self.config.listen_host,
            self.config.listen_port,
            name="rmq-namesrv-loop",
            tls=self.config.tls,
            limits=self.config.limits,
        )
        for code, handler in self.processor.handlers.items():
            self.server.register_processor(code, handler)
        self.server.on_channel_closed(self.route_info.on_channel_destroy)
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The port listened on (known once started; it stays readable after shutdown)."""
        if self._port is None:
            raise RuntimeError("the name server is not started: call start() first")
        return self._port

    @property
    def address(self) -> str:
        host = "127.0.0.1" if self.config.listen_host in ("0.0.0.0", "") else self.config.listen_host
        return f"{host}:{self.port}"

    def start(self) -> NameServer:
        """Listen and serve on a background thread; returns once the port accepts connections."""
        self.server.schedule_periodic(
            self.config.scan_not_active_broker_interval, self.route_info.scan_not_active_broker
        )
        self.server.start()
        self._port = self.server.port
        log.info("name server listening on %s:%d", self.config.listen_host, self.port)
        return self

    def shutdown(self) -> None:
        self.server.shutdown()
        log.info("name server on port %d stopped", self.port)

    def __enter__(self) -> NameServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.shutdown()
