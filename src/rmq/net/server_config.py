"""What a role's config says about the remoting server it runs: the part of ``BrokerConfig`` and of the
name server's ``NamesrvSettings`` that is the same keys with the same meaning (serverChannelMaxIdleTimeSeconds
and the other server* limits, tlsEnable and its files, the cluster account).

The fields themselves are declared by each config with ``rmq.settings.setting``; this layer does not
read settings, it turns the values into what ``RemotingServer`` takes.
"""

from __future__ import annotations

import ssl

from rmq.errors import ConfigError
from rmq.net.cluster_auth import ClusterAuth
from rmq.net.server import ConnectionLimits
from rmq.net.tls import TlsServerOptions, server_context
from rmq.protocol.acl import ClusterAuthMode, SessionCredentials
from rmq.protocol.tls import TlsMode


class ServerConfig:
    """Mixin of a config dataclass holding the server settings below."""

    server_channel_max_idle_time_seconds: int
    server_max_connections: int | None
    server_socket_backlog: int
    server_frame_timeout_seconds: int
    server_max_pending_write_bytes: int
    tls_enable: bool
    tls_server_mode: TlsMode
    tls_server_cert_path: str | None
    tls_server_key_path: str | None
    cluster_access_key: str | None
    cluster_secret_key: str | None
    cluster_auth_mode: ClusterAuthMode

    def check_server_config(self) -> None:
        """The settings that only make sense together; ConfigError naming them otherwise."""
        if bool(self.cluster_access_key) != bool(self.cluster_secret_key):
            raise ConfigError("clusterAccessKey and clusterSecretKey go together: set both, or neither")
        if self.tls_enable and not (self.tls_server_cert_path and self.tls_server_key_path):
            raise ConfigError("tlsEnable=true needs tlsServerCertPath and tlsServerKeyPath (PEM files)")

    def connection_limits(self) -> ConnectionLimits:
        """What the remoting server (a broker's, a name server's) allows a connection."""
        return ConnectionLimits(
            idle_timeout=self.server_channel_max_idle_time_seconds,
            max_connections=self.server_max_connections,
            frame_timeout=self.server_frame_timeout_seconds,
            backlog=self.server_socket_backlog,
            max_pending_output_total=self.server_max_pending_write_bytes or None,
        )

    def server_tls(self) -> TlsServerOptions | None:
        """What the remoting server serves TLS with, or None without tlsEnable; ConfigError when the
        certificate or key cannot be loaded."""
        if not self.tls_enable:
            return None
        assert self.tls_server_cert_path and self.tls_server_key_path, "checked by check_server_config"
        try:
            context = server_context(self.tls_server_cert_path, self.tls_server_key_path)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"cannot load tlsServerCertPath={self.tls_server_cert_path} with tlsServerKeyPath="
                f"{self.tls_server_key_path}: {exc}"
            ) from None
        return TlsServerOptions(context, TlsMode(self.tls_server_mode.value))

    def cluster_auth(self, role: str = "name server", logger: str = "rmq.namesrv") -> ClusterAuth | None:
        """What a server checks the cluster's writes with: this config's cluster account, if it has one."""
        credentials = self.cluster_credentials()
        if credentials is None:
            return None
        return ClusterAuth(credentials.access_key, credentials.secret_key, self.cluster_auth_mode, role, logger)

    def cluster_credentials(self) -> SessionCredentials | None:
        """The cluster account (clusterAccessKey / clusterSecretKey), or None."""
        if not (self.cluster_access_key and self.cluster_secret_key):
            return None
        return SessionCredentials(self.cluster_access_key, self.cluster_secret_key)
