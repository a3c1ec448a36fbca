"""``rmq-namesrv``: run a name server in the foreground until SIGTERM or SIGINT."""

from __future__ import annotations

import logging
import signal
import ssl
import threading

import click

from rmq.namesrv import ClusterAuth, NameServer, NamesrvConfig
from rmq.net.server import LISTEN_BACKLOG, ConnectionLimits
from rmq.net.tls import TlsServerOptions, server_context
from rmq.protocol.acl import ClusterAuthMode
from rmq.protocol.tls import TlsMode


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", default="0.0.0.0", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    "-p",
    default=9876,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (0 picks a free one).",
)
@click.option(
    "--scan-interval",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0.01),
    help="Seconds between scans for silent brokers.",
)
@click.option(
    "--broker-expired",
    default=120.0,
    show_default=True,
    type=click.FloatRange(min=0.01),
    help="Seconds of silence after which a broker is dropped.",
)
@click.option(
    "--idle-timeout",
    default=120,
    show_default=True,
    type=click.IntRange(min=0),
    help="Seconds a connection may stay silent before it is closed (0: never).",
)
@click.option(
    "--max-connections",
    default=None,
    type=click.IntRange(min=1),
    help="Connections served at once; one more is closed at once. Default: the open-file limit less 256.",
)
@click.option(
    "--frame-timeout",
    default=60,
    show_default=True,
    type=click.IntRange(min=0),
    help="Seconds a frame or TLS handshake may take from its first byte to its last (0: never).",
)
@click.option(
    "--backlog",
    default=LISTEN_BACKLOG,
    show_default=True,
    type=click.IntRange(min=1),
    help="Connections the kernel queues for accept (listen()'s backlog, capped by net.core.somaxconn).",
)
@click.option("--tls-cert", default=None, help="Serve TLS with this certificate chain (PEM); needs --tls-key.")
@click.option("--tls-key", default=None, help="The private key of --tls-cert (PEM, unencrypted).")
@click.option(
    "--tls-mode",
    default=TlsMode.PERMISSIVE.value,
    show_default=True,
    type=click.Choice([m.value for m in TlsMode]),
    help="permissive: TLS and plain clients on one port; enforcing: TLS only.",
)
@click.option(
    "--cluster-access-key",
    default=None,
    help="The cluster account (the brokers' clusterAccessKey): registrations, unregistrations and topic "
    "deletions must be signed by it (plain ACL); reads stay open. Needs --cluster-secret-key.",
)
@click.option(
    "--cluster-secret-key",
    envvar="RMQ_CLUSTER_SECRET_KEY",
    default=None,
    help="The cluster account's secret (or the RMQ_CLUSTER_SECRET_KEY environment variable, kept out of ps).",
)
@click.option(
    "--cluster-auth-mode",
    default=ClusterAuthMode.ENFORCING.value,
    show_default=True,
    type=click.Choice([m.value for m in ClusterAuthMode]),
    help="With --cluster-access-key: enforcing refuses unsigned writes; permissive takes them and logs "
    "who sent them (an upgrade: give every broker and rmq-admin the credentials, then enforce).",
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
def main(
    host: str,
    port: int,
    scan_interval: float,
    broker_expired: float,
    idle_timeout: int,
    max_connections: int | None,
    frame_timeout: int,
    backlog: int,
    tls_cert: str | None,
    tls_key: str | None,
    tls_mode: str,
    cluster_access_key: str | None,
    cluster_secret_key: str | None,
    cluster_auth_mode: str,
    log_level: str,
) -> None:
    """Run an rmq name server: brokers register here and clients ask it for topic routes."""
    tls = None
    if tls_cert or tls_key:
        if not (tls_cert and tls_key):
            raise click.UsageError("--tls-cert and --tls-key go together")
        try:
            tls = TlsServerOptions(server_context(tls_cert, tls_key), TlsMode(tls_mode))
        except (OSError, ssl.SSLError) as exc:
            raise click.UsageError(f"cannot load --tls-cert {tls_cert} with --tls-key {tls_key}: {exc}") from None
    cluster_auth = None
    if cluster_access_key or cluster_secret_key:
        if not (cluster_access_key and cluster_secret_key):
            raise click.UsageError(
                "--cluster-access-key and --cluster-secret-key (or RMQ_CLUSTER_SECRET_KEY) go together"
            )
        cluster_auth = ClusterAuth(cluster_access_key, cluster_secret_key, ClusterAuthMode(cluster_auth_mode))
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    config = NamesrvConfig(
        listen_host=host,
        listen_port=port,
        scan_not_active_broker_interval=scan_interval,
        broker_channel_expired_ms=int(broker_expired * 1000),
        tls=tls,
        limits=ConnectionLimits(idle_timeout, max_connections, frame_timeout, backlog),
        cluster_auth=cluster_auth,
    )
    server = NameServer(config).start()
    click.echo(f"rmq-namesrv listening on {host}:{server.port}", err=True)
    while not stop.wait(3600):
        pass
    server.shutdown()


if __name__ == "__main__":
    main()
