"""``rmq-namesrv`` as a process."""

from __future__ import annotations

import signal
import socket

from rmq.client.admin_client import AdminClient
from tests.helpers import LOOPBACK, free_port, harness
from tests.helpers.processes import start_namesrv


def test_sigterm_exits_cleanly(spawn):
    proc, _ = start_namesrv(spawn)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0


def test_a_port_taken_before_the_name_server_binds_it_is_replaced(spawn, monkeypatch):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind((LOOPBACK, 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        ports = iter([taken])
        # the first port handed out is one someone else took meanwhile
        monkeypatch.setattr(harness, "free_port", lambda: next(ports, None) or free_port())
        proc, addr = start_namesrv(spawn)
        assert proc.poll() is None and addr != f"{LOOPBACK}:{taken}"
        with AdminClient(addr, timeout=2.0) as admin:
            assert admin.cluster_info() is not None
