"""perf/power_loss.py: its LD_PRELOAD layer keeps exactly what was synced, and a few power-loss
rounds on a real broker lose nothing acknowledged under SYNC_FLUSH."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PERF = Path(__file__).resolve().parents[2] / "perf"
SRC = PERF.parent / "src"

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="the power-loss layer is built with gcc")


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("shim") / "libpowerloss.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O2", "-o", str(out), str(PERF / "power_loss_shim.c"), "-ldl"], check=True
    )
    return out


@needs_gcc
def test_the_disk_copy_holds_what_was_synced_and_nothing_else(shim, tmp_path):
    live, disk = tmp_path / "live", tmp_path / "disk"
    (live / "config").mkdir(parents=True)
    disk.mkdir()
    child = textwrap.dedent(
        f"""
        import mmap, os
        root = {str(live)!r}
        fd = os.open(root + "/data", os.O_RDWR | os.O_CREAT)
        os.ftruncate(fd, 3 * 4096)
        m = mmap.mmap(fd, 3 * 4096)
        m[0:6] = b"synced"
        m.flush(0, 4096)                       # msync(MS_SYNC) of the first page
        m[4096:4100] = b"lost"                 # written, never synced
        with open(root + "/config/a.json.tmp", "w") as f:
            f.write("{{}}"); f.flush(); os.fsync(f.fileno())
        os.replace(root + "/config/a.json.tmp", root + "/config/a.json")
        with open(root + "/unsynced", "w") as f:
            f.write("page cache only")
        """
    )
    env = {**os.environ, "LD_PRELOAD": str(shim), "RMQ_SHADOW_SRC": str(live), "RMQ_SHADOW_DST": str(disk)}
    subprocess.run([sys.executable, "-c", child], env=env, check=True, timeout=60)
    data = (disk / "data").read_bytes()
    assert data[:6] == b"synced" and b"lost" not in data
    assert (disk / "config" / "a.json").read_text() == "{}" and not (disk / "config" / "a.json.tmp").exists()
    assert not (disk / "unsynced").exists()
    assert (live / "unsynced").read_text() == "page cache only"


@needs_gcc
@pytest.mark.slow
def test_power_loss_rounds_lose_nothing_acknowledged_under_sync_flush():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    args = ["--rounds", "2", "--seconds", "1", "--min-acked", "200", "--flush", "SYNC_FLUSH", "--json"]
    done = subprocess.run(
        [sys.executable, str(PERF / "power_loss.py"), *args], env=env, capture_output=True, text=True, timeout=240
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    flush = report["SYNC_FLUSH"]
    assert flush["rounds"] == 2 and flush["acked"] >= 400, flush
    assert flush["lost"] == 0, flush
    assert report["ok"] and done.returncode == 0
