"""``rmq-controller``: run one controller of a Raft group in the foreground until SIGTERM or SIGINT.

    rmq-controller                                  # a group of one: remoting on 9878, Raft on 9877
    rmq-controller -c controller.conf --set controllerDLegerSelfId=n1
    rmq-controller -c controller.conf -p            # every effective setting and where it came from

A group of three on one machine, each with its own controllerStorePath::

    controllerDLegerGroup=group1
    controllerDLegerPeers=n0-127.0.0.1:9877;n1-127.0.0.1:9867;n2-127.0.0.1:9857
    controllerDLegerSelfId=n0
    controllerStorePath=/var/lib/rmq/controller-n0
    listenPort=9878

Settings are RocketMQ 5.x's ControllerConfig keys, declared in ``rmq.settings.CONTROLLER_SETTINGS``
and read as strictly as ``rmq-namesrv`` reads its own: an unknown key, a bad value or an unreadable
``-c`` file stops the command with exit code 2 and one line saying what was expected. A name server
runs a controller too with ``enableControllerInNamesrv=true`` (``rmq-namesrv``).
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

import click

from rmq.cli.settings_options import SettingsRefused, host_option, log_level_option, print_config, settings_options
from rmq.controller import Controller
from rmq.controller.config import ControllerSettings, load_controller_settings
from rmq.errors import ConfigError
from rmq.settings import parse_set_options


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@settings_options(example="controllerDLegerSelfId=n1")
@host_option
@click.option(
    "--port",
    default=None,
    type=click.IntRange(0, 65535),
    help="Remoting port to listen on (listenPort; 0: a free one).",
)
@log_level_option
def main(
    config_file: str | None,
    settings: tuple[str, ...],
    print_only: bool,
    host: str | None,
    port: int | None,
    log_level: str,
) -> None:
    """Run an rmq controller: brokers in controller mode register and heartbeat here, and the
    controllers' Raft group elects each broker set's master."""
    options: dict[str, Any] = {"bindAddress": host, "listenPort": port}
    try:
        loaded = load_controller_settings(config_file, [("--set", parse_set_options(settings)), ("option", options)])
        controller_settings = ControllerSettings.from_settings(loaded)
        if print_only:
            print_config(loaded, [controller_settings])
            return
        config = controller_settings.controller_config()
    except ConfigError as e:
        raise SettingsRefused(str(e)) from None
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        controller = Controller(config).start()
    except ConfigError as e:
        raise SettingsRefused(str(e)) from None
    click.echo(
        f"rmq-controller {config.self_id} of {config.group} listening on {config.listen_host}:{controller.port}",
        err=True,
    )
    while not stop.wait(3600):
        pass
    controller.shutdown()


if __name__ == "__main__":
    main()
