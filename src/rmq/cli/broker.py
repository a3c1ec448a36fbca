"""``rmq-broker``: run a broker in the foreground until SIGTERM or SIGINT.

    rmq-broker                                  # embedded name server on 9876, store in ~/store
    rmq-broker -c broker.conf -n "ns1:9876;ns2:9876" --set flushDiskType=SYNC_FLUSH
    rmq-broker -c broker.conf --print-config    # every effective setting and where it came from

Settings are checked before anything starts: an unknown key, a bad value or an unreadable ``-c``
file stops the command with exit code 2 and one line naming the key, the value and what is expected.

Logs go to stderr and to ``<storePathRootDir>/logs/broker.log``. With no name server configured
(``namesrvAddr``, ``-n``), ``BrokerStartup`` runs one in the same process first, on
``namesrvListenPort``, and the broker registers with it: one command gives a working broker. The
broker and the name server stay separate roles; this command is where they are put together. With
``enableGrpc`` (the default) the gRPC endpoint for RocketMQ 5.x clients (rmq.proxy) starts after the
broker, on ``grpcServerPort``, and stops before it.
The threads of the process are listed in docs/threads.md.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sys
import threading

import click

from rmq._rpc_latency import PROTOCOL_GRPC
from rmq.broker.config import BrokerConfig, load_broker_settings
from rmq.broker.controller import BIND_ADDRESS, BrokerController
from rmq.cli.settings_options import SettingsRefused, log_level_option, print_config, settings_options
from rmq.errors import ConfigError, RmqError
from rmq.namesrv import NameServer, NamesrvConfig
from rmq.namesrv.config import cluster_auth
from rmq.protocol.tls import TlsMode
from rmq.proxy import GrpcProxy, ProxyConfig
from rmq.settings import ProxySettings, parse_set_options
from rmq.store import MessageStoreConfig

LOG_FORMAT = "%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"
LOG_DIR_NAME = "logs"
LOG_FILE_NAME = "broker.log"


def setup_logging(store_path: str, level: str) -> str:
    """stderr plus ``<store>/logs/broker.log``; returns the log file's path."""
    log_dir = os.path.join(store_path, LOG_DIR_NAME)
    os.makedirs(log_dir, exist_ok=True)
    log_file = os.path.join(log_dir, LOG_FILE_NAME)
    formatter = logging.Formatter(LOG_FORMAT)
    root = logging.getLogger()
    root.setLevel(level)
    for handler in (logging.StreamHandler(sys.stderr), logging.FileHandler(log_file, encoding="utf-8")):
        handler.setFormatter(formatter)
        root.addHandler(handler)
    return log_file


class BrokerStartup:
    """A broker, and the name server it embeds when none is configured (RocketMQ's BrokerStartup).

    startup = BrokerStartup(broker_config, store_config).start()
    startup.controller ...; startup.namesrv (None with external name servers); startup.proxy
    startup.shutdown()    # the gRPC endpoint stops, the broker unregisters, the embedded name server stops
    """

    def __init__(self, broker_config: BrokerConfig, store_config: MessageStoreConfig):
        self.broker_config = broker_config
        self.store_config = store_config
        self.namesrv: NameServer | None = None
        self.controller: BrokerController | None = None
        self.proxy: GrpcProxy | None = None

    def start(self) -> BrokerStartup:
        config = self.broker_config
        if config.embedded_namesrv:
            config.resolve()  # brokerIP1 defaults to loopback with an embedded name server
            # permissive whatever tlsServerMode says: the broker registers with it over plain TCP
            tls = config.server_tls()
            if tls is not None:
                tls = dataclasses.replace(tls, mode=TlsMode.PERMISSIVE)
            namesrv_config = NamesrvConfig(
                listen_port=config.namesrv_listen_port,
                tls=tls,
                limits=config.connection_limits(),
                cluster_auth=cluster_auth(config),
            )
            self.namesrv = NameServer(namesrv_config).start()
            config.namesrv_addr = self.namesrv.address
        try:
            self.controller = BrokerController(config, self.store_config).start()
            if config.enable_grpc:
                self.proxy = GrpcProxy(self.proxy_config(), self.controller.server).start()
                if self.controller.metrics is not None:  # one scrape shows both protocols
                    self.controller.metrics.collector.rpc_latency_sources.append(
                        (PROTOCOL_GRPC, self.proxy.rpc_latency)
                    )
                # what the broker tells another broker's endpoint its gRPC port is (a port 0 was a free one)
                config.grpc_server_port = self.proxy.port
        except BaseException:
            self.shutdown()
            raise
        return self

    def proxy_config(self) -> ProxyConfig:
        """The gRPC endpoint's settings: the broker's, and what it needs to know of the broker."""
        config = self.broker_config
        return ProxyConfig(
            **{field.name: getattr(config, field.name) for field in dataclasses.fields(ProxySettings)},
            host=BIND_ADDRESS,
            namesrv_addrs=config.namesrv_addr_list,
            broker_name=config.broker_name,
            broker_addr=config.broker_addr,
            max_message_size=self.store_config.max_message_size,
            delay_levels_ms=list(self.store_config.delay_level_ms),
            tls_cert_path=config.tls_server_cert_path if config.tls_enable else None,
            tls_key_path=config.tls_server_key_path if config.tls_enable else None,
            acl_enable=config.acl_enable,
            cluster_credentials=config.cluster_credentials(),
        )

    def shutdown(self) -> None:
        if self.proxy is not None:
            self.proxy.shutdown()
        if self.controller is not None:
            self.controller.shutdown()
        if self.namesrv is not None:
            self.namesrv.shutdown()

    def __enter__(self) -> BrokerStartup:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@settings_options(example="listenPort=20911")
@click.option("-n", "--namesrv-addr", help='Name servers, "host:port;host:port". Absent: run an embedded one.')
@log_level_option
def main(
    config_file: str | None, namesrv_addr: str | None, settings: tuple[str, ...], print_only: bool, log_level: str
) -> None:
    """Run an rmq broker: RocketMQ 4.x clients produce to and consume from it."""
    try:
        namesrv = [("-n", {"namesrvAddr": namesrv_addr})] if namesrv_addr else []
        loaded = load_broker_settings(config_file, parse_set_options(settings), namesrv)
        broker_config = BrokerConfig.from_settings(loaded).resolve()
        store_config = broker_config.store_config(loaded)
        if config_file and not broker_config.broker_config_path:
            broker_config.broker_config_path = config_file  # RocketMQ keeps live changes in the -c file
    except ConfigError as e:
        raise SettingsRefused(str(e)) from None
    if print_only:
        print_config(loaded, (broker_config, store_config))
        return
    log_file = setup_logging(store_config.store_path_root_dir, log_level.upper())
    startup = BrokerStartup(broker_config, store_config)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        startup.start()
    except (RmqError, OSError) as e:
        logging.getLogger("rmq.broker").error("broker failed to start: %s", e)
        raise click.ClickException(f"broker failed to start: {e}") from None
    controller = startup.controller
    assert controller is not None
    namesrv_text = (
        f"embedded name server on port {startup.namesrv.port}"
        if startup.namesrv is not None
        else f"name servers {';'.join(controller.namesrv_addrs)}"
    )
    grpc_text = f", gRPC (5.x clients) on port {startup.proxy.port}" if startup.proxy is not None else ""
    click.echo(
        f"rmq-broker {broker_config.broker_name} listening on port {controller.server.port}{grpc_text} "
        f"(address {controller.broker_addr}), {namesrv_text}, store {controller.store.store_path} "
        f"({store_config.flush_disk_type.value}), log {log_file}",
        err=True,
    )
    while not stop.wait(3600):
        pass
    click.echo("rmq-broker shutting down", err=True)
    startup.shutdown()


if __name__ == "__main__":
    main()
