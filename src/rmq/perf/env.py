"""The environment a perf log's header records: what machine and which rmq measured."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import rmq


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def mem_bytes() -> int:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def disk_of(path: str | os.PathLike[str]) -> str:
    """The device and file system that hold ``path`` (where brokers keep their stores), from
    /proc/mounts: ``"/dev/vda ext4 ssd"`` (``hdd`` when the kernel says it rotates)."""
    target = os.path.realpath(path)
    best = ("", "", "")
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            device, mount, fstype = line.split()[:3]
            if (target == mount or target.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best[1]):
                best = (device, mount, fstype)
    device, _mount, fstype = best
    kind = ""
    with contextlib.suppress(OSError, ValueError):
        name = os.path.basename(os.path.realpath(device)).rstrip("0123456789")
        rotational = Path(f"/sys/block/{name}/queue/rotational").read_text().strip()
        kind = " hdd" if rotational == "1" else " ssd"
    return f"{device or 'unknown'} {fstype or 'unknown'}{kind}"


def git_rev() -> str | None:
    """The checkout's revision rmq runs from (``+dirty`` with local changes); None for an install."""
    root = Path(rmq.__file__).resolve().parent.parent.parent
    if not (root / ".git").exists():
        return None
    try:
        rev = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return rev + ("+dirty" if dirty else "")


def rmq_version() -> str:
    try:
        return metadata.version("rmq")
    except metadata.PackageNotFoundError:
        return "unknown"


def environment(store_dir: str | os.PathLike[str] = "/tmp") -> dict[str, Any]:
    """The header's ``env`` object."""
    return {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count() or 1,
        "mem_bytes": mem_bytes(),
        "disk": disk_of(store_dir),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "rmq_version": rmq_version(),
        "git_rev": git_rev(),
    }
