"""A small file system to fill up: a tmpfs mounted for one test (root only; the test is skipped,
saying why, where it cannot mount), and filler files that take what space it has left."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHUNK = 4096


@contextmanager
def tiny_tmpfs(mount_point: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (mount's ``size=``: ``512k``, ``8m``) at ``mount_point``, unmounted after."""
    mount_point.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill up (needs root): {proc.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False, timeout=30)


def fill(path: Path, leave: int = 0) -> int:
    """Write ``path`` until its disk is full (ENOSPC), then give back ``leave`` bytes; its size."""
    written = 0
    with open(path, "wb") as f:
        chunk = b"\1" * CHUNK
        try:
            while True:
                written += os.write(f.fileno(), chunk)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
        if leave:
            written = max(0, written - leave)
            f.truncate(written)
    return written


def used_ratio(path: Path) -> float:
    st = os.statvfs(path)
    return 1.0 - st.f_bfree / st.f_blocks
