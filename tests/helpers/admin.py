"""``rmq-admin`` run in-process (through click) against a name server, for the CLI tests."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from rmq.cli.admin import main


def admin(namesrv: str, *args: str) -> tuple[int, str]:
    """``rmq-admin ARGS -n NAMESRV``: its exit code and output."""
    result = CliRunner().invoke(main, [*args, "-n", namesrv])
    return result.exit_code, result.output


def admin_json(namesrv: str, *args: str) -> Any:
    """``rmq-admin ARGS --json``, which must succeed: what it printed."""
    code, out = admin(namesrv, *args, "--json")
    assert code == 0, out
    return json.loads(out)
