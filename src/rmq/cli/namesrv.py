"""``rmq-namesrv``: run a name server in the foreground until SIGTERM or SIGINT.

    rmq-namesrv                                     # on 9876, every interface
    rmq-namesrv -c namesrv.conf --set listenPort=9877
    rmq-namesrv -c namesrv.conf -p                  # every effective setting and where it came from

Settings are RocketMQ's name server keys (listenPort, bindAddress, scanNotActiveBrokerInterval,
serverChannelMaxIdleTimeSeconds ...), declared in ``rmq.settings.NAMESRV_SETTINGS`` and read as strictly
as ``rmq-broker`` reads its own: an unknown key (with a "did you mean"), a bad value or an unreadable
``-c`` file stops the command with exit code 2 and one line saying what was expected. The options
below (``--port``, ``--tls-cert`` ...) are shortcuts for keys and win over the file and ``--set``.

With ``enableControllerInNamesrv=true`` the process runs a controller too (RocketMQ 5.x's), on the
name server's port, with the controller keys (controllerDLegerPeers ...) of the same settings.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

import click

from rmq.cli.settings_options import SettingsRefused, host_option, log_level_option, print_config, settings_options
from rmq.controller import Controller
from rmq.controller.config import ControllerConfig, controller_config
from rmq.errors import ConfigError
from rmq.namesrv import NameServer
from rmq.namesrv.config import NamesrvSettings, load_namesrv_settings
from rmq.protocol.acl import ClusterAuthMode
from rmq.protocol.tls import TlsMode
from rmq.settings import parse_set_options


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@settings_options(example="listenPort=9877")
@host_option
@click.option(
    "--port", default=None, type=click.IntRange(0, 65535), help="Port to listen on (listenPort; 0 picks a free one)."
)
@click.option(
    "--scan-interval",
    default=None,
    type=click.FloatRange(min=0.001),
    help="Seconds between scans for silent brokers (scanNotActiveBrokerInterval, in ms).",
)
@click.option(
    "--broker-expired",
    default=None,
    type=click.FloatRange(min=0.001),
    help="Seconds of silence after which a broker is dropped (brokerChannelExpiredTime, in ms).",
)
@click.option(
    "--idle-timeout",
    default=None,
    type=click.IntRange(min=0),
    help="Seconds a connection may stay silent before it is closed, 0: never (serverChannelMaxIdleTimeSeconds).",
)
@click.option(
    "--max-connections",
    default=None,
    type=click.IntRange(min=1),
    help="Connections served at once; one more is closed at once (serverMaxConnections).",
)
@click.option(
    "--frame-timeout",
    default=None,
    type=click.IntRange(min=0),
    help="Seconds a frame or TLS handshake may take from its first byte to its last (serverFrameTimeoutSeconds).",
)
@click.option(
    "--backlog",
    default=None,
    type=click.IntRange(min=1),
    help="Connections the kernel queues for accept (serverSocketBacklog).",
)
@click.option("--tls-cert", default=None, help="Serve TLS with this certificate chain (PEM); needs --tls-key.")
@click.option("--tls-key", default=None, help="The private key of --tls-cert (PEM, unencrypted).")
@click.option(
    "--tls-mode",
    default=None,
    type=click.Choice([m.value for m in TlsMode]),
    help="permissive: TLS and plain clients on one port; enforcing: TLS only (tlsServerMode).",
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
    default=None,
    type=click.Choice([m.value for m in ClusterAuthMode]),
    help="With --cluster-access-key: enforcing refuses unsigned writes; permissive takes them and logs "
    "who sent them (clusterAuthMode).",
)
@log_level_option
def main(
    config_file: str | None,
    settings: tuple[str, ...],
    print_only: bool,
    host: str | None,
    port: int | None,
    scan_interval: float | None,
    broker_expired: float | None,
    idle_timeout: int | None,
    max_connections: int | None,
    frame_timeout: int | None,
    backlog: int | None,
    tls_cert: str | None,
    tls_key: str | None,
    tls_mode: str | None,
    cluster_access_key: str | None,
    cluster_secret_key: str | None,
    cluster_auth_mode: str | None,
    log_level: str,
) -> None:
    """Run an rmq name server: brokers register here and clients ask it for topic routes."""
    if bool(tls_cert) != bool(tls_key):
        raise click.UsageError("--tls-cert and --tls-key go together")
    if bool(cluster_access_key) != bool(cluster_secret_key):
        raise click.UsageError("--cluster-access-key and --cluster-secret-key (or RMQ_CLUSTER_SECRET_KEY) go together")
    options: dict[str, Any] = {
        "bindAddress": host,
        "listenPort": port,
        "scanNotActiveBrokerInterval": _ms(scan_interval),
        "brokerChannelExpiredTime": _ms(broker_expired),
        "serverChannelMaxIdleTimeSeconds": idle_timeout,
        "serverMaxConnections": max_connections,
        "serverFrameTimeoutSeconds": frame_timeout,
        "serverSocketBacklog": backlog,
        "tlsEnable": True if tls_cert else None,
        "tlsServerCertPath": tls_cert,
        "tlsServerKeyPath": tls_key,
        "tlsServerMode": tls_mode,
        "clusterAccessKey": cluster_access_key,
        "clusterSecretKey": cluster_secret_key,
        "clusterAuthMode": cluster_auth_mode,
    }
    try:
        loaded = load_namesrv_settings(config_file, [("--set", parse_set_options(settings)), ("option", options)])
        namesrv_settings = NamesrvSettings.from_settings(loaded)
        if print_only:
            print_config(loaded, [namesrv_settings])
            return
        config = namesrv_settings.namesrv_config()
        controller_config = (
            embedded_controller_config(namesrv_settings) if namesrv_settings.enable_controller_in_namesrv else None
        )
    except ConfigError as e:
        raise SettingsRefused(str(e)) from None
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        server = NameServer(config).start()
    except ConfigError as e:  # its KV config file (kvConfigPath) does not read
        raise SettingsRefused(str(e)) from None
    # RocketMQ 5.x's NamesrvStartup with enableControllerInNamesrv: the controller answers on the
    # name server's port, its requests beside the name server's
    controller = None if controller_config is None else Controller(controller_config, server=server.server).start()
    inside = "" if controller is None else f", with controller {controller.config.self_id} inside"
    click.echo(f"rmq-namesrv listening on {config.listen_host}:{server.port}{inside}", err=True)
    while not stop.wait(3600):
        pass
    if controller is not None:
        controller.shutdown()
    server.shutdown()


def embedded_controller_config(settings: NamesrvSettings) -> ControllerConfig:
    """The controller a name server runs: the name server's controller keys, and its port, TLS and
    cluster account; its scan is the name server's scanNotActiveBrokerInterval, as in RocketMQ."""
    return controller_config(
        settings, settings, settings.bind_address, settings.listen_port, settings.scan_not_active_broker_interval
    )


if __name__ == "__main__":
    main()
