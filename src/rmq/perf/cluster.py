"""Fresh real processes for one matrix cell, and what is sampled from them while it runs.

``RmqCell`` starts ``rmq-namesrv``, an ``rmq-broker`` master and, for the replicated roles, a slave,
each with a store of its own in a temporary directory, on free loopback ports; it creates the
topic, waits until a master's slave is connected, and stops and removes everything on exit.

``ProcessSampler`` reads a process's CPU time and RSS from /proc, and the bytes written to the block
device holding its store from /sys (see ``device_stat_path`` for why not /proc/<pid>/io);
``BrokerSampler`` adds a broker's own counters: CommitLog flush rounds (GET_BROKER_RUNTIME_INFO
``commitLogFlushRounds``: under SYNC_FLUSH one msync per group-commit round) and replication lag
(GET_HA_STATUS 9101). ``delta`` turns two samples into the perf log's ``broker`` object.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from rmq.client.admin_client import AdminClient
from rmq.errors import RmqError
from rmq.perf.procs import (
    START_TIMEOUT,
    STOP_TIMEOUT,
    Processes,
    broker_settings,
    start_broker_process,
    start_namesrv,
    wait_until,
)

BROKER_NAME = "perf-broker"
_TICKS = os.sysconf("SC_CLK_TCK")

ROLES = ("standalone", "async_master", "sync_master")
# brokerRole of the master of each matrix role; "standalone" is a master without a slave
MASTER_ROLE = {"standalone": "ASYNC_MASTER", "async_master": "ASYNC_MASTER", "sync_master": "SYNC_MASTER"}


class RmqCell(contextlib.AbstractContextManager["RmqCell"]):
    """Name server, master and (for ``async_master``/``sync_master``) a slave for one cell."""

    def __init__(self, flush: str, role: str, topic: str, queues: int = 4, settings: dict[str, str] | None = None):
        if role not in MASTER_ROLE:
            raise ValueError(f"role {role!r}, expected one of {', '.join(ROLES)}")
        self.flush, self.role, self.topic, self.queues = flush, role, topic, queues
        self.settings = settings or {}
        self.processes = Processes()
        self.root = Path(tempfile.mkdtemp(prefix="rmq-perf-"))
        self.namesrv_addr = ""
        self.master_addr = ""
        self.master: subprocess.Popen[bytes] | None = None
        self.slave: subprocess.Popen[bytes] | None = None

    def _broker(self, store: str, **settings: str) -> subprocess.Popen[bytes]:
        """A broker of the cell, once routed."""
        chosen = {"brokerName": BROKER_NAME, "flushDiskType": self.flush, **self.settings, **settings}
        merged = broker_settings(self.root / store, small_files=False, **chosen)
        del merged["namesrvListenPort"]  # registers with the cell's name server: nothing embedded
        # its stderr in a file, read when it fails to start: a pipe nobody reads fills and stalls it
        with open(self.root / f"{store}.stderr", "ab") as stderr:
            proc, addr = start_broker_process(
                self.processes.spawn,
                merged,
                self.namesrv_addr,
                ("--log-level", "WARNING"),
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        if settings.get("brokerRole") != "SLAVE":
            self.master_addr = addr
        return proc

    def start(self) -> RmqCell:
        try:
            with open(self.root / "namesrv.stderr", "ab") as log:
                _, self.namesrv_addr = start_namesrv(
                    self.processes.spawn, "--log-level", "WARNING", stdout=subprocess.DEVNULL, stderr=log
                )
            self.master = self._broker("master", brokerRole=MASTER_ROLE[self.role])
            with AdminClient(self.namesrv_addr, timeout=3.0) as admin:
                admin.update_topic(self.topic, self.queues, self.queues, broker_addr=self.master_addr)
                if self.role != "standalone":
                    self.slave = self._broker("slave", brokerRole="SLAVE", brokerId="1")
                    wait_until(lambda: self._slave_connected(admin), START_TIMEOUT, "the slave to connect")
        except BaseException:
            self.close()
            raise
        return self

    def _slave_connected(self, admin: AdminClient) -> bool:
        try:
            return bool(admin.ha_status(BROKER_NAME)[1].slaves)
        except RmqError:
            return False

    def close(self) -> None:
        self.processes.stop_all(STOP_TIMEOUT)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> RmqCell:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclasses.dataclass
class ProcessSample:
    at: float  # time.monotonic()
    cpu_s: float | None = None
    rss_bytes: int | None = None
    device_bytes_written: int | None = None  # by every writer on the store's block device, since boot
    flush_rounds: int | None = None
    repl_lag_bytes: int | None = None
    repl_lag_ms: float | None = None


def device_stat_path(path: str | os.PathLike[str]) -> Path | None:
    """The kernel's I/O counters (Documentation/block/stat.rst) of the block device, or partition,
    that holds ``path``; None when no block device does (tmpfs, overlayfs, btrfs: an anonymous st_dev).

    These, not ``/proc/<pid>/io`` ``write_bytes``, say what a store wrote to disk. The kernel charges
    ``write_bytes`` "at page-dirtying time" (Documentation/filesystems/proc.rst): a whole folio each
    time the process turns a clean one dirty, whether or not, and how often, it is written back. A
    broker writes its CommitLog through a mapping and msyncs it every flush round; each round cleans
    the tail page and the next message dirties it again, and warming a mapped file ahead of the
    writes (MADV_POPULATE_WRITE) dirties every page it touches at once, so the charge follows the
    mapping's faults, not the device's writes (the matrix logged 7-30 GB per 8 s cell that way). The
    device's counters count what reached it, from every writer on it: a replicated cell's slave
    (its store sits beside the master's), the file system's journal, other programs; on an
    otherwise idle machine that is the cell's own."""
    with contextlib.suppress(OSError):
        st_dev = os.stat(path).st_dev
        stat = Path(f"/sys/dev/block/{os.major(st_dev)}:{os.minor(st_dev)}/stat")
        if stat.exists():
            return stat
    return None


def _device_bytes_written(stat: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(stat.read_text().split()[6]) * 512  # field 7, sectors written: 512 bytes whatever the device's
    return None


class ProcessSampler:
    """CPU seconds and RSS of one process, from /proc, and the bytes written to the block device
    holding ``store_dir`` (None where unreadable, or without ``store_dir``)."""

    def __init__(self, pid: int, store_dir: str | os.PathLike[str] | None = None):
        self.pid = pid
        self.device_stat = None if store_dir is None else device_stat_path(store_dir)

    def sample(self) -> ProcessSample:
        s = ProcessSample(time.monotonic())
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            s.cpu_s = (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
            s.rss_bytes = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        if self.device_stat is not None:
            s.device_bytes_written = _device_bytes_written(self.device_stat)
        return s


class BrokerSampler(ProcessSampler):
    """A broker's process figures and its flush rounds and replication lag, asked over the wire."""

    def __init__(
        self, pid: int, namesrv_addr: str, broker_addr: str, replicated: bool, store_dir: str | os.PathLike[str]
    ):
        super().__init__(pid, store_dir)
        self.admin = AdminClient(namesrv_addr, timeout=2.0).__enter__()
        self.broker_addr = broker_addr
        self.replicated = replicated

    def sample(self) -> ProcessSample:
        s = super().sample()
        with contextlib.suppress(RmqError, KeyError, ValueError):
            s.flush_rounds = int(self.admin.broker_runtime_info(self.broker_addr)["commitLogFlushRounds"])
        if self.replicated:
            with contextlib.suppress(RmqError, KeyError, ValueError):
                slaves = self.admin.ha_status(BROKER_NAME)[1].slaves
                if slaves:
                    s.repl_lag_bytes = max(x.lag_bytes for x in slaves)
                    s.repl_lag_ms = float(max(x.lag_ms for x in slaves))
        return s

    def close(self) -> None:
        self.admin.__exit__(None, None, None)


def delta(before: ProcessSample, after: ProcessSample, acked: int) -> dict[str, Any]:
    """The perf log's ``broker`` object over the time between two samples (``acked`` messages)."""
    seconds = max(after.at - before.at, 1e-9)
    cpu = after.cpu_s - before.cpu_s if after.cpu_s is not None and before.cpu_s is not None else None
    rounds = (
        after.flush_rounds - before.flush_rounds
        if after.flush_rounds is not None and before.flush_rounds is not None
        else None
    )
    written = (
        after.device_bytes_written - before.device_bytes_written
        if after.device_bytes_written is not None and before.device_bytes_written is not None
        else None
    )
    return {
        "cpu_pct": None if cpu is None else round(100.0 * cpu / seconds, 1),
        "rss_bytes": after.rss_bytes,
        "flushes_per_s": None if rounds is None else round(rounds / seconds, 1),
        "msgs_per_flush": round(acked / rounds, 2) if rounds else None,
        "repl_lag_bytes": after.repl_lag_bytes,
        "repl_lag_ms": after.repl_lag_ms,
        "disk_bytes_written": written,
    }
