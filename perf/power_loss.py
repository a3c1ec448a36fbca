"""Power-loss rounds: what a broker's store holds after the machine loses power, not only the process.

    PYTHONPATH=src python perf/power_loss.py [--rounds 10] [--flush SYNC_FLUSH,ASYNC_FLUSH] [--json]

A SIGKILL leaves the page cache intact: everything the broker wrote, synced or not, is still read
back after a restart, so a kill alone cannot show that a send was answered before its bytes were
durable. Here the broker runs with ``power_loss_shim.c`` preloaded (built by this script with gcc),
which keeps a second copy of the store, the "disk", holding only what the broker made durable: the
ranges of a mapping it ``msync``ed (MS_SYNC), files it ``fsync``ed / ``fdatasync``ed, ranges it
``sync_file_range``d, as they were at that call; renames are applied to the copy too. A round:

1. the broker (SYNC_FLUSH or ASYNC_FLUSH, 1 MiB CommitLog files) takes sends, 32 in flight, for
   ``--seconds`` (and ``--min-acked`` acknowledged at least); the bodies answered SUCCESS are recorded;
2. the broker is SIGKILLed with sends in flight: the "power loss". The disk copy gets the names and
   sizes of the files as they are (the metadata model below), and becomes the store: the live store
   is thrown away and replaced by a copy of the disk;
3. the broker restarts on it (recovery runs as after any crash), and every queue is pulled from
   offset 0, records CRC-checked; lost = acknowledged bodies not found. The next round goes on
   from there.

SYNC_FLUSH must lose nothing acknowledged; what ASYNC_FLUSH loses (messages, bytes, per round) is
reported: it answers once a message is in the page cache and syncs every flushIntervalCommitLog
(500 ms) or every 4 pages, so a power loss takes up to that much.

**The model and its limits.** Data becomes durable only through those calls, at the moment of the
call and with the content the file had then; writes through a mapping, ``write`` and ``pwrite`` are
lost unless such a call covers them afterwards (a kernel's background writeback, which may save
more, is not modelled: the copy is the least a disk may hold). File creation, deletion, size
(``ftruncate``, ``fallocate``) and renames are durable at once, as a journaling file system's
metadata is within its commit interval (ext4: 5 s); a power loss between a rename and the next
journal commit, and torn sectors inside one synced range (a disk writes 4 KiB sectors atomically,
not a whole msync), are outside it. It intercepts the C library's calls only (a raw ``syscall``
bypasses it), which is how rmq's store (Cython msync, Python's mmap, os.fsync, os.replace) reaches
the kernel.

Why not LazyFS (a FUSE file system that drops what was not fsynced on command): FUSE mounts work
here and LazyFS builds (with Debian's libspdlog-dev and libtoml11-dev in place of its downloads),
but a store on FUSE is another store: its mapped writes reach the file system only when the kernel
writes the pages back, and in a first probe even a file fsynced and renamed was gone after its
``clear-cache`` (it also wants the directory fsynced). The preloaded layer sees exactly the calls
rmq makes, on the file system the broker runs on in production.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import (
    QUEUES,
    TOPIC,
    Sender,
    bodies_in,
    update_topic_request,
)

from rmq.net import RemotingClient
from rmq.perf.procs import Processes, broker_settings, start_broker_process, wait_until
from rmq.protocol.codes import ResponseCode

SHIM_SOURCE = Path(__file__).resolve().parent / "power_loss_shim.c"


def build_shim(out_dir: Path) -> Path:
    library = out_dir / "libpowerloss.so"
    command = ["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-o", str(library), str(SHIM_SOURCE), "-ldl", "-lpthread"]
    subprocess.run(command, check=True)
    return library


def mirror_metadata(live: Path, disk: Path) -> None:
    """Give the disk copy the live store's names and sizes (metadata is durable at once): files that
    are gone go, new files come as zeros, every file gets its live size; data stays as synced."""
    for path in sorted(disk.rglob("*"), reverse=True):
        twin = live / path.relative_to(disk)
        if path.is_file() and not twin.is_file():
            path.unlink()
        elif path.is_dir() and not twin.is_dir():
            shutil.rmtree(path)
    for path in live.rglob("*"):
        twin = disk / path.relative_to(live)
        if path.is_dir():
            twin.mkdir(parents=True, exist_ok=True)
        elif path.is_file():
            twin.parent.mkdir(parents=True, exist_ok=True)
            with open(twin, "ab"):
                pass
            os.truncate(twin, path.stat().st_size)


def rounds_of(flush: str, rounds: int, root: Path, shim: Path, min_acked: int, seconds: float, log) -> dict:
    live, disk = root / "live", root / "disk"
    live.mkdir(parents=True)
    disk.mkdir(parents=True)
    procs = Processes()
    client = RemotingClient()
    client.start()
    settings = broker_settings(live, flushDiskType=flush, mappedFileSizeCommitLog=str(1 << 20))
    addr = f"127.0.0.1:{settings['listenPort']}"
    env = {"LD_PRELOAD": str(shim), "RMQ_SHADOW_SRC": str(live), "RMQ_SHADOW_DST": str(disk)}
    per_round: list[dict] = []
    acked: set[bytes] = set()
    log_file = root / "broker.log"

    def start():
        with open(log_file, "ab") as out:
            proc, _ = start_broker_process(
                lambda *a, **kw: procs.spawn(*a, env=env, **kw),
                settings,
                extra_args=("--log-level", "WARNING"),
                stderr=out,
            )
        return proc

    try:
        proc = start()
        answer = client.invoke_sync(addr, update_topic_request(TOPIC, QUEUES), 10)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        for n in range(1, rounds + 1):
            sender = Sender(client, addr, 1_000_000 * n).start()
            try:
                began = time.monotonic()
                wait_until(
                    lambda s=sender, t=began: len(s.acked) >= min_acked and time.monotonic() - t >= seconds,
                    60 + seconds,
                    f"{min_acked} sends acked",
                )
                proc.send_signal(signal.SIGKILL)  # sends in flight: the power goes
                proc.wait(10)
            finally:
                sender.stop()
            round_acked = set(sender.acked)
            acked |= round_acked
            live_bytes = sum(p.stat().st_size for p in (live / "commitlog").glob("*"))
            mirror_metadata(live, disk)
            shutil.rmtree(live)
            shutil.copytree(disk, live)  # the machine comes back with what the disk holds
            t0 = time.monotonic()
            proc = start()
            restart = time.monotonic() - t0
            found = bodies_in(client, addr)
            lost = acked - found
            lost_this_round = round_acked - found
            per_round.append(
                {
                    "round": n,
                    "acked": len(round_acked),
                    "lost": len(lost_this_round),
                    "lost_bytes": sum(len(b) for b in lost_this_round),
                    "restart_s": round(restart, 2),
                }
            )
            if lost - lost_this_round:
                log(f"{flush} round {n}: messages of earlier rounds lost: {len(lost - lost_this_round)}")
            log(f"  {flush} round {n}: {len(round_acked)} acked, {len(lost_this_round)} lost; commitlog {live_bytes} B")
            acked -= lost  # what is gone is counted once, in its round
        lost_counts = [r["lost"] for r in per_round]
        return {
            "rounds": rounds,
            "acked": sum(r["acked"] for r in per_round),
            "lost": sum(lost_counts),
            "lost_bytes": sum(r["lost_bytes"] for r in per_round),
            "lost_per_round": {
                "min": min(lost_counts),
                "median": sorted(lost_counts)[len(lost_counts) // 2],
                "max": max(lost_counts),
            },
            "per_round": per_round,
        }
    finally:
        client.shutdown()
        procs.stop_all()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--flush", default="SYNC_FLUSH,ASYNC_FLUSH")
    parser.add_argument("--min-acked", type=int, default=500, help="acknowledged sends per round before the loss")
    parser.add_argument("--seconds", type=float, default=2.0, help="sending time per round, at least")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rmq-power-loss-"))
    log = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    report: dict = {}
    try:
        shim = build_shim(root)
        for flush in args.flush.split(","):
            report[flush] = rounds_of(flush, args.rounds, root / flush, shim, args.min_acked, args.seconds, log)
    finally:
        if args.keep:
            log(f"kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    report["ok"] = not report.get("SYNC_FLUSH", {}).get("lost")
    print(json.dumps(report, indent=None if args.json else 2))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
