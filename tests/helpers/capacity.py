"""``rmq-capacity`` and ``rmq-traffic`` as a user runs them: a subprocess of this Python, the
checkout's ``src`` first on its path, Spark's driver on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# synthetic perf logs to plan from (tests.helpers.perf_logs made them)
SAMPLES = ROOT / "spark" / "samples"
COMMAND_TIMEOUT = 240


def command_env() -> dict[str, str]:
    """This environment with ``src`` on PYTHONPATH, executors on this Python, Spark on 127.0.0.1."""
    paths = [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


def run_module(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS`` from the checkout's root; its exit code and output."""
    command = [sys.executable, "-m", module, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, env=command_env(), cwd=ROOT)
