"""``.ci/run``, run for real with a stand-in ``python`` first on PATH that records each call and
answers pytest with the exit status a test gives it: the two stages together are the README's
``python -m pytest`` (each test path in exactly one), a failed (or empty: exit status 5) fast gate
stops the run before the peers and stage 2, and a failed stage 2 fails the run."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# answers `-m pytest` with the next status of $FAKE_PYTEST_EXITS (0 when none is left), anything
# else (pip, .ci/install-peers) with 0; every call's arguments are a line of $FAKE_CALLS
FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$FAKE_CALLS"
if [ "$1 $2" = "-m pytest" ]; then
    n=$(grep -c '^-m pytest' "$FAKE_CALLS")
    status=$(echo "$FAKE_PYTEST_EXITS" | cut -d' ' -f"$n")
    exit "${status:-0}"
fi
"""
NO_TESTS = 5  # pytest's ExitCode.NO_TESTS_COLLECTED


def run_ci(tmp_path: Path, *pytest_exits: int) -> tuple[subprocess.CompletedProcess, list[str]]:
    checkout = tmp_path / "checkout"
    (checkout / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", checkout / ".ci" / "run")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(FAKE_PYTHON)
    (bin_dir / "python").chmod(0o755)
    calls = tmp_path / "calls"
    calls.touch()
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_CALLS": str(calls),
        "FAKE_PYTEST_EXITS": " ".join(map(str, pytest_exits)),
    }
    done = subprocess.run(["bash", str(checkout / ".ci" / "run")], capture_output=True, text=True, timeout=30, env=env)
    return done, calls.read_text().splitlines()


def test_the_two_stages_are_the_whole_suite_each_test_path_once(tmp_path):
    done, calls = run_ci(tmp_path, 0, 0)
    assert done.returncode == 0, done.stderr
    assert calls[0] == "-m pip install -e .[test]"
    pytest_calls = [c.split()[2:] for c in calls if c.startswith("-m pytest")]
    assert len(pytest_calls) == 2
    fast, rest = pytest_calls
    assert fast and all(not arg.startswith("-") and (ROOT / arg).exists() for arg in fast)
    # stage 2 is `python -m pytest` (testpaths: tests) without what stage 1 ran
    assert rest == [f"--ignore={path}" for path in fast]
    assert calls.index("-m pytest " + " ".join(fast)) < calls.index(".ci/install-peers") < len(calls) - 1


@pytest.mark.parametrize("status", [1, NO_TESTS])
def test_a_failed_fast_gate_stops_the_run_saying_so(tmp_path, status):
    done, calls = run_ci(tmp_path, status)
    assert done.returncode != 0
    assert "stage 1" in done.stderr and "the rest of the suite was not run" in done.stderr
    assert len([c for c in calls if c.startswith("-m pytest")]) == 1
    assert ".ci/install-peers" not in calls


@pytest.mark.parametrize("status", [1, NO_TESTS])
def test_a_failed_stage_two_fails_the_run(tmp_path, status):
    done, calls = run_ci(tmp_path, 0, status)
    assert done.returncode != 0
    assert "stage 2" in done.stderr
