"""``rmq-namesrv`` as a process."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

from rmq.client.admin_client import AdminClient
from rmq.perf import procs
from tests.helpers import LOOPBACK, free_port, wait_for_port, wait_until
from tests.helpers.frames import RawConnection, route_request_frame
from tests.helpers.processes import start_namesrv
from tests.helpers.settings import print_config_rows


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


NAMESRV = [sys.executable, "-m", "rmq.cli.namesrv"]


def print_config(*args: str) -> dict[str, tuple[str, str]]:
    """``rmq-namesrv ARGS -p`` as {key: (value, where it came from)}."""
    result = subprocess.run([*NAMESRV, *args, "-p"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return print_config_rows(result.stdout)


def test_print_config_shows_the_name_servers_settings_and_where_they_came_from(tmp_path):
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPort=9877\nscanNotActiveBrokerInterval=5000\nserverChannelMaxIdleTimeSeconds=30\n")
    rows = print_config("-c", str(conf), "--set", "listenPort=9878", "--idle-timeout", "45")
    assert rows["listenPort"] == ("9878", "--set")  # --set over the file
    assert rows["scanNotActiveBrokerInterval"] == ("5000", f"file {conf}")
    assert rows["serverChannelMaxIdleTimeSeconds"] == ("45", "option")  # an option over both
    assert rows["bindAddress"] == ("0.0.0.0", "default")
    assert rows["serverSocketBacklog"] == ("1024", "default")
    assert "namesrvListenPort" not in rows and "brokerName" not in rows, "the broker's settings are not its"


def test_set_listen_port_is_where_it_listens(spawn):
    port = free_port()
    proc = spawn("-m", "rmq.cli.namesrv", "--set", f"listenPort={port}", "--set", f"bindAddress={LOOPBACK}")
    wait_for_port(port, proc, timeout=20.0)
    with AdminClient(f"{LOOPBACK}:{port}", timeout=2.0) as admin:
        assert admin.cluster_info() is not None


def test_an_unknown_setting_is_refused_with_a_suggestion(tmp_path):
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPrt=9877\n")
    result = subprocess.run([*NAMESRV, "-c", str(conf)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert f"listenPrt is not a setting (from file {conf}): did you mean listenPort?" in result.stderr
