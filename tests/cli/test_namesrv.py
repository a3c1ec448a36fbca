"""``rmq-namesrv`` as a process."""

from __future__ import annotations

import signal

from tests.helpers.processes import start_namesrv


def test_sigterm_exits_cleanly(spawn):
    proc, _ = start_namesrv(spawn)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
