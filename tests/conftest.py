"""Fixtures shared by every test: free loopback ports, temporary store directories, processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 10.0, proc: subprocess.Popen | None = None) -> None:
    """Block until something accepts on 127.0.0.1:port, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection((LOOPBACK, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"nothing listened on {LOOPBACK}:{port} within {timeout}s")


@pytest.fixture
def port_factory() -> Callable[[], int]:
    return free_port


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen]]:
    """Start ``python -m MODULE ARGS`` processes; every one is terminated (then killed) at teardown."""
    procs: list[subprocess.Popen] = []

    def _spawn(*args: str, env: dict | None = None, **kwargs) -> subprocess.Popen:
        full_env = dict(os.environ)
        full_env.update(env or {})
        proc = subprocess.Popen([sys.executable, *args], env=full_env, **kwargs)
        procs.append(proc)
        return proc

    yield _spawn
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    path.mkdir()
    return path
