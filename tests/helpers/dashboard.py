"""The dashboard's tests: an ``rmq-dashboard`` process on a free port, and Debian's Chromium (found
where ``.ci/install-peers chromium`` put it, as the compatibility tests find their peers) driven by
Playwright, which is never let download a browser of its own."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from typing import Any

from playwright.sync_api import Browser, sync_playwright

from rmq.perf.procs import LOOPBACK, Spawn, free_port, wait_listening
from tests.helpers.compat import peer

# What headless Chromium needs here: no sandbox as root, no GPU, and none of the connections it makes
# on its own (updates, sync, QUIC probes), which this machine's closed network refuses slowly.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
# every wait of a page: the pages ask a live cluster, on a machine shared with other test runs
PAGE_TIMEOUT_MS = 15_000


def start_dashboard(spawn: Spawn, namesrv: str, *args: str, **popen: Any) -> tuple[subprocess.Popen[Any], str]:
    """``rmq-dashboard -n NAMESRV ARGS`` on a free loopback port; (process, base URL) once it listens."""
    port = free_port()
    proc = spawn("-m", "rmq.cli.dashboard", "-n", namesrv, "--host", LOOPBACK, "--port", str(port), *args, **popen)
    wait_listening(proc, port, "rmq-dashboard")
    return proc, f"http://{LOOPBACK}:{port}"


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """Headless Chromium, closed on leaving."""
    executable = peer("chromium")["chromium"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=list(CHROMIUM_FLAGS))
        try:
            yield browser
        finally:
            browser.close()
