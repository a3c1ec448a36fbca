"""``rmq-dashboard``: the dashboard's pages (``rmq.dashboard``) over HTTP until SIGTERM or SIGINT.

    rmq-dashboard                          # on 8080; the name servers of $NAMESRV_ADDR, else 127.0.0.1:9876
    rmq-dashboard -n 10.0.0.1:9876 --port 8081 --login-required
    rmq-dashboard -c dashboard.conf -p     # every effective setting and where it came from

Settings are ``rmq.settings.DASHBOARD_SETTINGS`` (listenPort, namesrvAddr, loginRequired, readOnly,
sessionSecret, capacityReportDir ...), read as strictly as rmq-broker reads its own; the options
are shortcuts for keys and win over the file and ``--set``. The pages are served by waitress (a
production WSGI server: a pool of threads, no C build), never Flask's development server.
"""

from __future__ import annotations

import logging
import signal
import ssl
from typing import Any, NoReturn

import click
from waitress.server import BaseWSGIServer, create_server

from rmq.cli.settings_options import SettingsRefused, host_option, log_level_option, print_config, settings_options
from rmq.dashboard.app import create_app
from rmq.dashboard.config import DashboardSettings
from rmq.dashboard.session import DashboardState
from rmq.errors import ConfigError
from rmq.settings import DASHBOARD_SETTINGS, load_settings, parse_set_options

# waitress's worker threads: a page waits on the cluster, so a few more than cores
SERVER_THREADS = 8


class Stop(Exception):
    """SIGTERM: leave waitress's loop as SIGINT does."""


def _stop(*_: Any) -> NoReturn:
    raise Stop


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@settings_options(example="listenPort=8081")
@host_option
@click.option("--port", default=None, type=click.IntRange(0, 65535), help="HTTP port (listenPort; 0 picks a free one).")
@click.option(
    "-n",
    "--namesrv",
    envvar="NAMESRV_ADDR",
    default=None,
    help="Name server address(es) of the cluster, host:port[;host:port] (namesrvAddr).",
)
@click.option(
    "--login-required",
    is_flag=True,
    default=None,
    help="Ask for an ACL account (accessKey, secretKey) before any page; its requests are signed (loginRequired).",
)
@click.option("--read-only", is_flag=True, default=None, help="Offer and accept no writes (readOnly).")
@click.option("--tls", "use_tls", is_flag=True, default=None, help="Reach the cluster over TLS (tlsEnable).")
@click.option(
    "--tls-ca",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="Verify the cluster's TLS certificates against this CA certificate, PEM (tlsTrustCertPath).",
)
@click.option(
    "--capacity-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="A directory rmq-capacity wrote, shown on the capacity page (capacityReportDir).",
)
@log_level_option
def main(
    config_file: str | None,
    settings: tuple[str, ...],
    print_only: bool,
    host: str | None,
    port: int | None,
    namesrv: str | None,
    login_required: bool | None,
    read_only: bool | None,
    use_tls: bool | None,
    tls_ca: str | None,
    capacity_dir: str | None,
    log_level: str,
) -> None:
    """Run the rmq dashboard: the cluster, topics, consumers, messages, producers and capacity plan in a browser."""
    options: dict[str, Any] = {
        "bindAddress": host,
        "listenPort": port,
        "namesrvAddr": namesrv,
        "loginRequired": login_required,
        "readOnly": read_only,
        "capacityReportDir": capacity_dir,
        "tlsEnable": use_tls,
        "tlsTrustCertPath": tls_ca,
    }
    try:
        layers = [("--set", parse_set_options(settings)), ("option", options)]
        loaded = load_settings(config_file, layers, table=DASHBOARD_SETTINGS)
        config = DashboardSettings.from_settings(loaded)
    except ConfigError as e:
        raise SettingsRefused(str(e)) from None
    if print_only:
        print_config(loaded, [config])
        return
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        app = create_app(config)
    except (OSError, ssl.SSLError) as e:  # tlsTrustCertPath that does not read as a CA certificate
        raise SettingsRefused(f"tlsTrustCertPath {config.tls_trust_cert_path!r} cannot be used: {e}") from None
    server = create_server(
        app, host=config.bind_address, port=config.listen_port, threads=SERVER_THREADS, ident="rmq-dashboard"
    )
    signal.signal(signal.SIGTERM, _stop)
    login = "login required" if config.login_required else "no login"
    mode = ", read-only" if config.read_only else ""
    # a host name of several addresses gets a server per address
    listening = server.getsockname()[1] if isinstance(server, BaseWSGIServer) else server.effective_listen[0][1]
    click.echo(
        f"rmq-dashboard listening on http://{config.bind_address}:{listening} "
        f"(name servers {config.namesrv_addr}; {login}{mode})",
        err=True,
    )
    try:
        server.run()
    except (KeyboardInterrupt, Stop):
        pass
    finally:
        # the workers first: one still answering would wake a closed server
        server.task_dispatcher.shutdown()
        server.close()
        state_of: DashboardState = app.extensions["rmq-dashboard"]
        state_of.close()


if __name__ == "__main__":
    main()
