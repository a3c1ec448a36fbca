"""What ``rmq-broker -p`` and ``rmq-namesrv -p`` print, read back: one ``key=value  # source`` a line."""

from __future__ import annotations


def print_config_rows(output: str) -> dict[str, tuple[str, str]]:
    """``--print-config`` output as {key: (value, where it came from)}."""
    rows = {}
    for line in output.splitlines():
        setting, _, source = line.partition("  # ")
        key, _, value = setting.rstrip().partition("=")
        rows[key] = (value, source)
    return rows
