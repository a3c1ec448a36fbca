"""The perf log: what every rmq-perf run writes, and what the Spark capacity pipeline reads.

One file per run, ``<out>/<run_id>.perf.jsonl``: JSON Lines, one record per line, each an object
with ``"kind"``. Times are Unix seconds (float); sizes bytes; latencies microseconds, always as a
mergeable histogram (``rmq.perf.histogram``), never as pre-computed percentiles alone.

``header`` (first line, once per run)::

    kind "header", schema 1, run_id str, started float, argv [str],
    env {cpu_model str, cores int, mem_bytes int, disk str, kernel str, python str,
         rmq_version str, git_rev str|null}

``interval`` (one per cell per interval, default 1 s) and ``summary`` (one per cell, at its end)::

    kind, run_id, cell CELL, cell_id str, t_start float, t_end float,
    sent int, acked int, failed {code(str): int},          # code: response code or "timeout"
    msgs_per_s float, mb_per_s float,                       # acked over the interval
    latency HISTOGRAM,                                      # acked sends, intended-send-time based
    consumed int|null, consume_lag int|null,                # messages; null when no consumer ran
    broker {cpu_pct float|null, rss_bytes int|null, flushes_per_s float|null,
            msgs_per_flush float|null, repl_lag_bytes int|null, repl_lag_ms float|null,
            disk_bytes_written int|null}|null,              # null for peers we cannot look into
    generator {cpu_pct float, processes int, saturated bool,
               wake_late_max_ms float,                     # the latest a worker woke from a wait
               cpu_us_per_msg float|null, engine "c"|"python"}  # its own CPU per acked message

``disk_bytes_written`` is what reached the block device holding the broker's (or peer's) store in
the interval: its sectors written (``/sys/dev/block/MAJ:MIN/stat``, field 7, x 512), so page-rounded
CommitLog writes and the file system's journal count, and so does every other writer on that device
(a replicated cell's slave, whose store sits beside the master's; other programs): it is the
store's own only on an otherwise idle device. null when the store is on no block device (tmpfs,
overlayfs). Not ``/proc/<pid>/io`` ``write_bytes``: that charges a page each time one
turns dirty, which for a mapped, msync'd CommitLog is not what the disk wrote
(``rmq.perf.cluster.device_stat_path``).

``summary`` adds ``duration_s float, p50_us float, p99_us float, p999_us float, max_us float``
(from its histogram, for people; the pipeline recomputes from the merged histograms).

``CELL`` names what was measured::

    system "rmq"|"redis"|"nats", flush "ASYNC_FLUSH"|"SYNC_FLUSH",
    role "standalone"|"async_master"|"sync_master", size int, in_flight int, connections int,
    batch int, rate int|null (msgs/s target of an open-loop run; null = as fast as acked),
    peer_mode str|null (e.g. "appendfsync=always"), repeat int (0-based run of the same cell)

A reader must ignore fields it does not know (later schema versions only add fields) and count,
not fail on, lines that do not parse or lack a required field.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

SCHEMA_VERSION = 1
SUFFIX = ".perf.jsonl"

KIND_HEADER = "header"
KIND_INTERVAL = "interval"
KIND_SUMMARY = "summary"

HEADER_FIELDS = ("kind", "schema", "run_id", "started", "argv", "env")
ENV_FIELDS = ("cpu_model", "cores", "mem_bytes", "disk", "kernel", "python", "rmq_version", "git_rev")
CELL_FIELDS = (
    "system",
    "flush",
    "role",
    "size",
    "in_flight",
    "connections",
    "batch",
    "rate",
    "peer_mode",
    "repeat",
)
INTERVAL_FIELDS = (
    "kind",
    "run_id",
    "cell",
    "cell_id",
    "t_start",
    "t_end",
    "sent",
    "acked",
    "failed",
    "msgs_per_s",
    "mb_per_s",
    "latency",
    "consumed",
    "consume_lag",
    "broker",
    "generator",
)
SUMMARY_EXTRA_FIELDS = ("duration_s", "p50_us", "p99_us", "p999_us", "max_us")
BROKER_FIELDS = (
    "cpu_pct",
    "rss_bytes",
    "flushes_per_s",
    "msgs_per_flush",
    "repl_lag_bytes",
    "repl_lag_ms",
    "disk_bytes_written",
)
REQUIRED = {
    KIND_HEADER: HEADER_FIELDS,
    KIND_INTERVAL: INTERVAL_FIELDS,
    KIND_SUMMARY: INTERVAL_FIELDS + SUMMARY_EXTRA_FIELDS,
}


class BadRecord(ValueError):
    """A perf-log line that is not a record of this schema."""


def cell_id(cell: Mapping[str, Any]) -> str:
    """A short stable name for a cell: ``rmq/SYNC_FLUSH/sync_master/1024B/if16/c1/b1/open5000/r0``."""
    rate = f"open{cell['rate']}" if cell.get("rate") else "closed"
    mode = f"/{cell['peer_mode']}" if cell.get("peer_mode") else ""
    return (
        f"{cell['system']}{mode}/{cell['flush']}/{cell['role']}/{cell['size']}B/if{cell['in_flight']}"
        f"/c{cell['connections']}/b{cell['batch']}/{rate}/r{cell.get('repeat', 0)}"
    )


def check(record: Any) -> dict[str, Any]:
    """The record if it is one of this schema; BadRecord naming what is wrong otherwise."""
    if not isinstance(record, dict):
        raise BadRecord(f"record is a {type(record).__name__}, expected an object")
    kind = record.get("kind")
    if kind not in REQUIRED:
        raise BadRecord(f"kind {kind!r}, expected one of {sorted(REQUIRED)}")
    missing = [f for f in REQUIRED[kind] if f not in record]
    if missing:
        raise BadRecord(f"{kind} record lacks {', '.join(missing)}")
    if kind != KIND_HEADER:
        cell = record["cell"]
        if not isinstance(cell, dict) or any(f not in cell for f in CELL_FIELDS):
            raise BadRecord(f"cell {cell!r} lacks one of {', '.join(CELL_FIELDS)}")
    return record


class PerfLogWriter:
    """Appends records to one run's file, a line each, flushed so a killed run keeps what it wrote."""

    def __init__(self, out_dir: str | os.PathLike[str], run_id: str):
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        self.path = Path(out_dir) / f"{run_id}{SUFFIX}"
        self.run_id = run_id
        self._file: IO[str] = open(self.path, "a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        record = check({"run_id": self.run_id, **record})
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> PerfLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read(path: str | os.PathLike[str]) -> Iterator[dict[str, Any] | BadRecord]:
    """Each line's record, or the BadRecord saying why the line is not one (the caller counts them)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield check(json.loads(line))
            except (ValueError, BadRecord) as e:
                yield BadRecord(f"{path}:{n}: {e}")
