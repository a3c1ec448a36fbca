"""Perf logs made for tests: hand-made cells from given latencies, and the synthetic matrix behind
``spark/samples/`` (regenerate with ``PYTHONPATH=src python -m tests.helpers.perf_logs spark/samples``).

The samples are not measurements. rmq-perf did not exist when the capacity pipeline was written, so
they come from a documented model whose constants are this machine's figures (README benchmarks,
issue 12): a broker set of mode m serves at most C(m, size) msgs/s, with 1/C = a + b * size (a fixed
cost per message, a cost per byte); a closed-loop cell with N in flight sees the mean latency
r0 + N / C (a round trip, then N ahead of it) and so throughput N / (r0 + N / C); each acked send's
latency is drawn lognormal around that mean, its tail widening as the broker nears C. Each repeat
scales C by a few per cent, as runs on a shared machine differ. Every record is written through
``rmq.perf.log.PerfLogWriter`` with ``rmq.perf.histogram`` counts, so the files are in the real format.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rmq.perf import log
from rmq.perf.histogram import Histogram

ENV = {
    "cpu_model": "synthetic (tests.helpers.perf_logs)",
    "cores": 2,
    "mem_bytes": 24 << 30,
    "disk": "synthetic",
    "kernel": "synthetic",
    "python": "3.11",
    "rmq_version": "0.1.0",
    "git_rev": None,
}

# mode -> (a: us per message, b: us per byte, r0: round trip us) for one broker set
MODES = {
    ("ASYNC_FLUSH", "standalone"): (15.0, 0.0020, 140.0),
    ("SYNC_FLUSH", "standalone"): (19.0, 0.0030, 330.0),
    ("ASYNC_FLUSH", "async_master"): (18.0, 0.0028, 160.0),
    ("SYNC_FLUSH", "async_master"): (23.0, 0.0036, 350.0),
    ("ASYNC_FLUSH", "sync_master"): (25.0, 0.0040, 420.0),
    ("SYNC_FLUSH", "sync_master"): (30.0, 0.0048, 560.0),
}


def cell(**fields: Any) -> dict[str, Any]:
    """A CELL (rmq.perf.log) with defaults for what a test does not care about."""
    defaults = {
        "system": "rmq",
        "flush": "ASYNC_FLUSH",
        "role": "standalone",
        "size": 1024,
        "in_flight": 1,
        "connections": 1,
        "batch": 1,
        "rate": None,
        "peer_mode": None,
        "repeat": 0,
    }
    return {**defaults, **fields}


def point(in_flight: int, msgs_per_s: float, p99_us: float, size: int = 1024, **fields: Any) -> Any:
    """A ``rmq.perf.capacity.model.Point`` made by hand (rmq ASYNC_FLUSH standalone, closed loop
    unless ``rate=`` is given), its other percentiles derived from ``p99_us``."""
    from rmq.perf.capacity import model  # Spark: only the tests that need it load it

    defaults = dict(
        system="rmq", peer_mode="", flush="ASYNC_FLUSH", role="standalone", batch=1, connections=1, rate=0,
        mb_per_s=msgs_per_s * size / model.MB, acked=int(msgs_per_s), seconds=1.0, p50_us=p99_us / 3,
        p90_us=p99_us / 2, p999_us=p99_us * 1.5, max_us=p99_us * 2, mean_us=p99_us / 3,
        cell_ids=[f"cell-if{in_flight}-{size}"], run_ids=["run"], repeats=[],
    )  # fmt: skip
    return model.Point(**{**defaults, **fields}, in_flight=in_flight, msgs_per_s=msgs_per_s, p99_us=p99_us, size=size)


def header(run_id: str, started: float = 1.7e9) -> dict[str, Any]:
    return {
        "kind": log.KIND_HEADER,
        "schema": log.SCHEMA_VERSION,
        "started": started,
        "argv": ["synthetic"],
        "env": ENV,
    }


def cell_records(
    the_cell: dict[str, Any], intervals_us: Sequence[np.ndarray], t0: float = 1.7e9, seconds: float = 1.0
) -> list[dict[str, Any]]:
    """The interval records of one cell, one per array of acked latencies (us), and its summary."""
    records = []
    total = Histogram()
    for n, latencies in enumerate(intervals_us):
        h = Histogram()
        h.record_us(latencies)
        total.merge(h)
        records.append(_record(log.KIND_INTERVAL, the_cell, h, t0 + n * seconds, t0 + (n + 1) * seconds))
    summary = _record(log.KIND_SUMMARY, the_cell, total, t0, t0 + len(intervals_us) * seconds)
    summary.update(
        duration_s=len(intervals_us) * seconds,
        p50_us=total.percentile(50),
        p99_us=total.percentile(99),
        p999_us=total.percentile(99.9),
        max_us=total.max_us(),
    )
    return [*records, summary]


def _record(kind: str, the_cell: dict[str, Any], h: Histogram, t_start: float, t_end: float) -> dict[str, Any]:
    acked = h.total
    seconds = t_end - t_start
    return {
        "kind": kind,
        "cell": the_cell,
        "cell_id": log.cell_id(the_cell),
        "t_start": t_start,
        "t_end": t_end,
        "sent": acked,
        "acked": acked,
        "failed": {},
        "msgs_per_s": acked / seconds,
        "mb_per_s": acked * the_cell["size"] / seconds / 1e6,
        "latency": h.to_json(),
        "consumed": None,
        "consume_lag": None,
        "broker": None,
        "generator": {"cpu_pct": 40.0, "processes": 2, "saturated": False},
    }


def write_run(out_dir: Path, run_id: str, cells: Sequence[tuple[dict[str, Any], Sequence[np.ndarray]]]) -> Path:
    """One run's perf log: its header, then each (cell, per-interval latencies) in turn."""
    with log.PerfLogWriter(out_dir, run_id) as writer:
        writer.write(header(run_id))
        t0 = 1.7e9
        for the_cell, intervals in cells:
            for record in cell_records(the_cell, intervals, t0):
                writer.write(record)
            t0 += len(intervals) + 5
        return writer.path


def synthetic_latencies(
    flush: str, role: str, size: int, in_flight: int, rng: np.random.Generator, seconds: int
) -> list[np.ndarray]:
    """Each interval's acked latencies (us) of a closed-loop cell under the model above."""
    a, b, r0 = MODES[(flush, role)]
    service_us = (a + b * size) * (1 + rng.normal(0, 0.03))  # this repeat's machine
    capacity = 1e6 / service_us
    mean_us = r0 + in_flight * service_us
    throughput = in_flight / mean_us * 1e6
    load = throughput / capacity
    sigma = 0.18 + 0.5 * load**6
    # a lognormal of this sigma whose mean is mean_us
    mu = math.log(mean_us) - sigma**2 / 2
    return [rng.lognormal(mu, sigma, size=int(throughput * rng.uniform(0.97, 1.0))) for _ in range(seconds)]


def synthetic_matrix(
    out_dir: Path,
    in_flight: dict[int, Sequence[int]] | None = None,
    repeats: int = 2,
    seconds: int = 1,
    seed: int = 12,
) -> list[Path]:
    """The sample matrix: every mode x size x in-flight (``{size: [in-flight, ...]}``), ``repeats``
    runs of it, a file per run."""
    in_flight = in_flight or {1024: (1, 4, 8, 16, 32, 64), 4096: (1, 16, 64)}
    rng = np.random.default_rng(seed)
    paths = []
    for repeat in range(repeats):
        cells = []
        for flush, role in MODES:
            for size, loads in in_flight.items():
                for n in loads:
                    the_cell = cell(flush=flush, role=role, size=size, in_flight=n, repeat=repeat)
                    cells.append((the_cell, synthetic_latencies(flush, role, size, n, rng, seconds)))
        paths.append(write_run(out_dir, f"synthetic-{seed}-r{repeat}", cells))
    return paths


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "spark/samples")
    for old in target.glob(f"*{log.SUFFIX}"):
        old.unlink()
    for path in synthetic_matrix(target):
        print(path, path.stat().st_size)


def stats_log_lines(broker: str = "broker-a", t0: float = 1.7e9) -> list[dict[str, Any]]:
    """Two minutes of a broker's stats.log (rmq.broker.stats_log's format): TopicA took 120,000 then
    60,000 messages of 1,176 stored bytes; GroupA read 170,000 of them."""
    bounds = [0, 10, 50, 100, 200, 500, 1000]
    return [
        {"kind": "topic_put", "broker": broker, "t_start": t0, "t_end": t0 + 60, "topic": "TopicA",
         "put_nums": 120_000, "put_size": 120_000 * 1176, "put_tps": 2000.0,
         "put_latency_ms": {"bounds": bounds, "counts": [0, 250, 6, 0, 0, 0, 0, 0], "sampled": 256}},
        {"kind": "topic_put", "broker": broker, "t_start": t0 + 60, "t_end": t0 + 120, "topic": "TopicA",
         "put_nums": 60_000, "put_size": 60_000 * 1176, "put_tps": 1000.0,
         "put_latency_ms": {"bounds": bounds, "counts": [0, 250, 0, 0, 6, 0, 0, 0], "sampled": 256}},
        {"kind": "group_get", "broker": broker, "t_start": t0, "t_end": t0 + 120, "group": "GroupA",
         "topic": "TopicA", "get_nums": 170_000, "get_size": 170_000 * 1176, "get_tps": 1416.67},
    ]  # fmt: skip


def throughput_saturation(flush: str, role: str, msgs_per_s: float) -> Any:
    """A saturation point of ``msgs_per_s`` (rmq, 1 KiB, 16 in flight) for an SLO of 2 ms."""
    from rmq.perf.capacity import model

    at = model.Point(
        system="rmq", peer_mode="", flush=flush, role=role, size=1024, batch=1, in_flight=16, connections=1,
        rate=0, msgs_per_s=msgs_per_s, mb_per_s=0, acked=0, seconds=1, p50_us=1, p90_us=1, p99_us=1,
        p999_us=1, max_us=1, mean_us=1, cell_ids=[f"{flush}/{role}"], run_ids=["run-1"], repeats=[],
    )  # fmt: skip
    return model.Saturation(at, slo_us=2000)


def five_saturations() -> list[Any]:
    """Saturation points of five modes, made by hand (SYNC_FLUSH sync_master: no load met the SLO)."""
    return [
        throughput_saturation("ASYNC_FLUSH", "standalone", 26_000),
        throughput_saturation("SYNC_FLUSH", "standalone", 15_000),
        throughput_saturation("ASYNC_FLUSH", "async_master", 20_000),
        throughput_saturation("SYNC_FLUSH", "async_master", 14_000),
        throughput_saturation("ASYNC_FLUSH", "sync_master", 17_000),
    ]
