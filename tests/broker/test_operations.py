"""The operations scripts' short runs (README, "Operations: fuzzing, soak, power loss"): the frame
fuzzer against a real broker, and the crash soak. Each runs as an operator runs it, in a process of
its own, and its report says what it found."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PERF = Path(__file__).resolve().parents[2] / "perf"
SRC = PERF.parent / "src"


def run_script(name: str, *args: str, timeout: float) -> dict:
    """``python perf/NAME ARGS --json``: its report (the script's exit code is in ``"exit"``)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(PERF / name), *args, "--json"], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.stdout.strip(), f"{name} printed no report; stderr:\n{done.stderr[-3000:]}"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    report["exit"] = done.returncode
    return report


@pytest.mark.slow
def test_twenty_thousand_mutated_frames_leave_the_broker_serving():
    report = run_script("fuzz_broker.py", "--frames", "20000", "--workers", "2", "--seed", "3", timeout=240)
    assert report["sent"] == 20000
    assert report["broker_alive"], report
    assert report["unexpected_exceptions"] == [], report["unexpected_exceptions"]
    assert report["control"]["errors"] == 0 and report["control"]["acked"] > 0, report["control"]
    assert report["recovery"]["missing"] == 0, report["recovery"]
    assert "no answer in time" not in report["outcomes"], report["outcomes"]
    # the mutations reached the processors: refusals of several kinds, and successes
    assert {"0 SUCCESS", "1 SYSTEM_ERROR", "3 REQUEST_CODE_NOT_SUPPORTED", "13 MESSAGE_ILLEGAL"} <= set(
        report["answered"]
    )
    # a share went to the embedded name server, forged registrations among them: refused, and the
    # control topic stayed routed to the real master throughout (checked about once a second)
    assert report["cluster_auth"] and "16 NO_PERMISSION" in report["answered"], report["answered"]
    assert report["control"]["route_checks"] > 0, report["control"]
    assert report["ok"] and report["exit"] == 0


@pytest.mark.slow
def test_ten_sigkill_rounds_lose_nothing_acknowledged():
    report = run_script("soak_crash.py", "--rounds", "10", "--failover-rounds", "2", "--min-acked", "300", timeout=240)
    flush, master = report["sync_flush"], report["sync_master"]
    assert flush["rounds"] == 10 and flush["acked"] >= 3000, flush
    assert (flush["lost"], flush["torn"], flush["offset_errors"]) == (0, 0, 0), flush
    assert flush["consumed"] > 0 and flush["commits"] > 0, flush
    assert master["rounds"] == 2 and (master["lost"], master["torn"]) == (0, 0), master
    assert report["ok"] and report["exit"] == 0
