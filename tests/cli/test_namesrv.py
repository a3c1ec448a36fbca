"""``rmq-namesrv`` as a process."""

from __future__ import annotations

import signal
import socket
import time

from rmq.client.admin_client import AdminClient
from rmq.perf import procs
from tests.helpers import LOOPBACK, free_port, wait_until
from tests.helpers.frames import RawConnection, route_request_frame
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
        monkeypatch.setattr(procs, "free_port", lambda: next(ports, None) or free_port())
        proc, addr = start_namesrv(spawn)
        assert proc.poll() is None and addr != f"{LOOPBACK}:{taken}"
        with AdminClient(addr, timeout=2.0) as admin:
            assert admin.cluster_info() is not None


def test_connection_limits_are_options(spawn):
    _, addr = start_namesrv(spawn, "--max-connections", "2", "--idle-timeout", "1")
    port = int(addr.rsplit(":", 1)[1])
    first, second = served(port), served(port)
    try:
        with RawConnection(port) as third:
            assert third.is_closed_by_peer(timeout=3.0)  # past the maximum
        started = time.monotonic()
        assert second.is_closed_by_peer(timeout=5.0)  # silent for more than a second
        assert time.monotonic() - started > 0.5
    finally:
        first.close()
        second.close()


def served(port: int) -> RawConnection:
    """A connection the name server answers (its port probe may still count a moment after it closed)."""

    def answered() -> RawConnection | None:
        conn = RawConnection(port)
        try:
            conn.send(route_request_frame(1))
            conn.read_commands(1)  # the topic is unknown: an answer all the same
            return conn
        except OSError:
            conn.close()
            return None

    return wait_until(answered, 5, "a connection the name server answers")
