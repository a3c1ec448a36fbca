"""rmq.perf.procs: the one harness that starts, waits for and stops real processes, for rmq-perf,
the scripts in perf/ and the suite."""

from __future__ import annotations

import ast
import fcntl
import os
from pathlib import Path

import pytest

from rmq.perf.cluster import RmqCell
from rmq.perf.procs import ProcessExited, WaitTimeout, broker_settings, start_broker_process, wait_until

ROOT = Path(__file__).resolve().parents[2]
# the harness's own waits and port picker, of which there must be one each
HARNESS_FUNCTIONS = {"free_port", "wait_for_port", "wait_until"}


def live_children() -> list[int]:
    """Processes this one started that still run (zombies aside)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def test_a_broker_that_dies_while_starting_is_reported_with_the_end_of_its_log(spawn, store_dir):
    # its store is locked by someone else: it logs why and exits before listening
    with open(store_dir / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.write("4242\n")
        lock.flush()
        with pytest.raises(ProcessExited) as failed:
            start_broker_process(spawn, broker_settings(store_dir))
    assert "exited with 1 before listening" in str(failed.value)
    assert "locked by another process (pid 4242)" in str(failed.value)


def test_a_perf_cell_that_cannot_start_says_why_and_leaves_nothing_behind():
    before = set(live_children())  # earlier tests' processes (session fixtures) are not this cell's
    cell = RmqCell("ASYNC_FLUSH", "standalone", "CellTopic", settings={"listenPortt": "1"})
    with pytest.raises(AssertionError, match="listenPortt is not a setting.*did you mean listenPort"):
        cell.start()
    assert not cell.root.exists()
    assert set(live_children()) - before == set()


def test_a_wait_returns_what_it_waited_for_and_names_what_did_not_happen():
    values = iter([0, "", "found"])
    assert wait_until(lambda: next(values), 1.0, "never told") == "found"
    with pytest.raises(WaitTimeout, match=r"^the slave connected: not within 0.05 s$") as failed:
        wait_until(lambda: False, 0.05, lambda: "the slave connected")
    # a test fails on it as on its own assertions; scripts catching timeouts catch it too
    assert isinstance(failed.value, AssertionError) and isinstance(failed.value, TimeoutError)


def test_there_is_one_free_port_one_wait_for_port_and_one_wait_until():
    defined = {}
    for top in ("src", "tests", "perf", "spark"):
        for path in (ROOT / top).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef) and node.name in HARNESS_FUNCTIONS:
                    defined.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    assert defined == {name: ["src/rmq/perf/procs.py"] for name in HARNESS_FUNCTIONS}
