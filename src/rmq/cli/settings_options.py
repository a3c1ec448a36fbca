"""What ``rmq-broker``, ``rmq-namesrv`` and ``rmq-controller`` share of reading settings: ``-c FILE``,
``--set KEY=VALUE`` and ``-p`` (print every effective setting, as RocketMQ's ``mqbroker -p`` /
``mqnamesrv -p``), ``--log-level``, and how a refused setting ends the command (one line, exit code 2)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click

from rmq.settings import LoadedSettings, SettingsView

_Command = TypeVar("_Command", bound=Callable[..., Any])


class SettingsRefused(click.ClickException):
    """A setting that cannot be used: one line, exit code 2 (a usage error), no traceback."""

    exit_code = 2


def settings_options(example: str) -> Callable[[_Command], _Command]:
    """The ``-c``, ``--set`` and ``-p`` options of a command; ``example`` is a ``--set`` for its help."""

    def decorate(command: _Command) -> _Command:
        command = click.option(
            "-p",
            "--print-config",
            "print_only",
            is_flag=True,
            help="Print every effective setting and where it came from (default, file, --set, an option), then exit.",
        )(command)
        command = click.option(
            "--set",
            "settings",
            multiple=True,
            metavar="KEY=VALUE",
            help=f"Override one setting (repeatable), e.g. --set {example}.",
        )(command)
        help_c = "Settings file (Java properties, RocketMQ's key names)."
        return click.option("-c", "--config", "config_file", metavar="FILE", help=help_c)(command)

    return decorate


# ``--host``: the address a server listens on
host_option = click.option("--host", default=None, help="Address to listen on (bindAddress; default every interface).")

# ``--log-level``: the logging level of the process's root logger
log_level_option = click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)


def print_config(loaded: LoadedSettings, configs: Iterable[SettingsView]) -> None:
    """Every setting of ``loaded``'s table as ``key=value``, with where its value came from."""
    effective: dict[str, str] = {}
    for config in configs:
        effective.update(config.to_properties())
    rows = []
    for key, declared in loaded.table.items():
        value = effective.get(key, declared.format(declared.default))
        source = loaded.source(key)
        if declared.secret and value:
            value = "******"
        if key not in loaded.values and value != declared.format(declared.default):
            source = "derived"  # brokerIP1 from the host or the embedded name server
        rows.append((f"{key}={value}", source))
    width = max(len(line) for line, _ in rows)
    for line, source in rows:
        click.echo(f"{line:<{width}}  # {source}")
