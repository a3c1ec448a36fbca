"""What a durable write costs on this disk, the floor under every SYNC_FLUSH figure (not part of the
test suite).

    python perf/probe_disk.py [--dir DIR] [--size 16384] [--blocks 12] [--per-block 300]

Appends ``--size`` bytes and makes them durable, several ways, interleaved in blocks of
``--per-block`` writes so that every variant sees the same device state: msync of a mmap'd file
(the bytes written through the mapping, as the store's puts write them, or by pwrite into the
same file) and pwrite through an O_DSYNC descriptor, each on a fallocated file (unwritten extents,
as the store creates them) and on a zero-filled one; and write() at the end of a growing file then
fdatasync, which is what Redis does with appendfsync always. A virtual disk may be throttled: a first
burst of writes is fast and later ones settle much slower, so variants measured one after another
are not comparable, and the medians here skip the first ``--skip`` writes of each.
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import tempfile
import time

FILE_SIZE = 128 << 20
VARIANTS = (
    ("fallocated", "msync"),
    ("zero-filled", "msync"),
    ("fallocated", "pwrite+msync"),
    ("fallocated", "O_DSYNC"),
    ("zero-filled", "O_DSYNC"),
    ("appended", "write+fdatasync"),
)


class Target:
    """One file, mapped, with an O_DSYNC descriptor next to the mapping."""

    def __init__(self, directory: str, kind: str):
        self.fd, self.path = tempfile.mkstemp(dir=directory, prefix="rmq-probe-")
        if kind == "zero-filled":
            zeros = bytes(1 << 20)
            for _ in range(FILE_SIZE >> 20):
                os.write(self.fd, zeros)
            os.fsync(self.fd)
        elif kind == "fallocated":
            os.posix_fallocate(self.fd, 0, FILE_SIZE)
        self.map = mmap.mmap(self.fd, FILE_SIZE) if kind != "appended" else None
        self.dsync_fd = os.open(self.path, os.O_WRONLY | os.O_DSYNC)
        self.position = 0

    def durable_append(self, data: bytes, how: str) -> float:
        """Seconds to make ``data`` durable at the end of what was written."""
        pos = self.position
        if pos + len(data) > FILE_SIZE:
            pos = self.position = 0
            if how == "write+fdatasync":
                os.ftruncate(self.fd, 0)
        if how in ("msync", "O_DSYNC"):
            self.map[pos : pos + len(data)] = data
        started = time.perf_counter()
        if how == "msync" or how == "pwrite+msync":
            if how == "pwrite+msync":
                os.pwrite(self.fd, data, pos)
            start = pos & ~(mmap.PAGESIZE - 1)
            self.map.flush(start, pos + len(data) - start)
        elif how == "write+fdatasync":
            os.pwrite(self.fd, data, pos)
            os.fdatasync(self.fd)
        else:
            os.pwrite(self.dsync_fd, memoryview(self.map)[pos : pos + len(data)], pos)
        self.position = pos + len(data)
        return time.perf_counter() - started

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
        os.close(self.dsync_fd)
        os.close(self.fd)
        os.unlink(self.path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=".", help="a directory on the disk to probe")
    parser.add_argument("--size", type=int, default=16384, help="bytes per durable write")
    parser.add_argument("--blocks", type=int, default=12, help="rounds over the four variants")
    parser.add_argument("--per-block", type=int, default=300, help="writes per variant per round")
    parser.add_argument("--skip", type=int, default=1200, help="writes per variant left out of the medians")
    parser.add_argument("--rest", type=float, default=20.0, help="seconds of rest after creating the files")
    args = parser.parse_args()
    targets = {variant: Target(args.dir, variant[0]) for variant in VARIANTS}
    try:
        time.sleep(args.rest)  # let a throttled device recover from the zero-filling
        data = b"y" * args.size
        seconds: dict[tuple[str, str], list[float]] = {variant: [] for variant in VARIANTS}
        for _ in range(args.blocks):
            for variant, target in targets.items():
                seconds[variant] += [target.durable_append(data, variant[1]) for _ in range(args.per_block)]
        print(f"durable {args.size}-byte appends, {args.blocks} x {args.per_block} per variant, interleaved")
        for (kind, how), taken in seconds.items():
            first, settled = taken[: args.skip], taken[args.skip :] or taken
            p90 = sorted(settled)[int(len(settled) * 0.9)]
            print(
                f"  {how:15s} {kind:12s} first {len(first)}: median {statistics.median(first) * 1e6:5.0f} us"
                f"   then: median {statistics.median(settled) * 1e6:5.0f} us, p90 {p90 * 1e6:5.0f} us"
            )
    finally:
        for target in targets.values():
            target.close()


if __name__ == "__main__":
    main()
