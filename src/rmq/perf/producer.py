"""One measured run of a producer load: interval records and a summary into the perf log, and the
lines a RocketMQ user knows from ``benchmark/producer.sh``::

    Current Time: 2026-11-25 00:41:07,512 | Send TPS: 21377 | Max RT(ms): 9 | Average RT(ms):   0.745
        | Send Failed: 0 | Response Failed: 0
    [Complete] Send Total: 213770 | Send Failed: 0 | Response Failed: 0 | Avg RT(ms):   0.747 | Max RT(ms): 12
        | p50/p99/p999 (ms): 0.612 / 2.104 / 8.330 | Generator CPU/msg (us): 1.942 (c)

(each one line, broken here; Send Failed: no answer, a timeout or a lost connection; Response
Failed: an answer with an error code; Generator CPU/msg: what the load generator's processes
spent per acked message, and its engine, ``rmq.perf.load``'s.) ``run_producer`` is what ``rmq-perf producer`` and every
``rmq-perf matrix`` cell run.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Callable
from typing import Any

from rmq.perf.cluster import ProcessSample, ProcessSampler, delta
from rmq.perf.load import SEND_FAILURES, IntervalReport, LoadSpec, engine_of, generator_fields, run_load
from rmq.perf.log import KIND_INTERVAL, KIND_SUMMARY, PerfLogWriter, cell_id

MB = 1 << 20


def _ms(us: float) -> float:
    return 0.0 if math.isnan(us) else us / 1000.0


def send_failed(r: IntervalReport) -> int:
    return sum(n for code, n in r.failed.items() if code in SEND_FAILURES)


def response_failed(r: IntervalReport) -> int:
    return sum(n for code, n in r.failed.items() if code not in SEND_FAILURES)


def interval_line(r: IntervalReport, msgs_per_s: float, when: float) -> str:
    stamp = datetime.datetime.fromtimestamp(when).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    h = r.histogram
    return (
        f"Current Time: {stamp} | Send TPS: {msgs_per_s:.0f} | Max RT(ms): {_ms(h.max_us()):.0f}"
        f" | Average RT(ms): {_ms(h.mean_us()):7.3f} | Send Failed: {send_failed(r)}"
        f" | Response Failed: {response_failed(r)}"
    )


def summary_line(r: IntervalReport, engine: str) -> str:
    h = r.histogram
    cpu_per_msg = f"{r.cpu_s * 1e6 / r.acked:.3f}" if r.acked else "-"
    return (
        f"[Complete] Send Total: {r.sent} | Send Failed: {send_failed(r)} | Response Failed: {response_failed(r)}"
        f" | Avg RT(ms): {_ms(h.mean_us()):7.3f} | Max RT(ms): {_ms(h.max_us()):.0f}"
        f" | p50/p99/p999 (ms): {_ms(h.percentile(50)):.3f} / {_ms(h.percentile(99)):.3f}"
        f" / {_ms(h.percentile(99.9)):.3f} | Generator CPU/msg (us): {cpu_per_msg} ({engine})"
    )


def record(
    kind: str,
    cell: dict[str, Any],
    r: IntervalReport,
    t_start: float,
    t_end: float,
    size: int,
    processes: int,
    engine: str | None = None,
) -> dict[str, Any]:
    """An interval or summary record (without ``broker``) of one merged report."""
    seconds = max(t_end - t_start, 1e-9)
    rec: dict[str, Any] = {
        "kind": kind,
        "cell": cell,
        "cell_id": cell_id(cell),
        "t_start": round(t_start, 3),
        "t_end": round(t_end, 3),
        "sent": r.sent,
        "acked": r.acked,
        "failed": dict(r.failed),
        "msgs_per_s": round(r.acked / seconds, 1),
        "mb_per_s": round(r.acked * size / seconds / MB, 3),
        "latency": r.histogram.to_json(),
        "consumed": None,
        "consume_lag": None,
        "broker": None,
        "generator": generator_fields(r.cpu_s, seconds, processes, r.wake_late_max_s, r.acked, engine),
    }
    if kind == KIND_SUMMARY:
        h = r.histogram
        rec.update(
            duration_s=round(seconds, 3),
            p50_us=h.percentile(50),
            p99_us=h.percentile(99),
            p999_us=h.percentile(99.9),
            max_us=h.max_us(),
        )
    return rec


def run_producer(
    spec: LoadSpec,
    cell: dict[str, Any],
    writer: PerfLogWriter | None,
    sampler: ProcessSampler | None = None,
    echo: Callable[[str], None] | None = None,
    echo_records: bool = False,
) -> dict[str, Any]:
    """Run ``spec``; write its intervals and summary for ``cell``; ``echo`` the producer.sh lines
    (the records themselves as JSON, ``echo_records``); the summary record."""
    processes = spec.effective_workers
    engine = engine_of(spec)
    samples: list[ProcessSample] = []
    first: list[float] = []
    last: list[float] = []

    def on_start() -> None:
        if sampler is not None:
            samples.append(sampler.sample())

    def emit(rec: dict[str, Any]) -> None:
        if writer is not None:
            writer.write(rec)
        if echo is not None and echo_records:
            echo(json.dumps({"run_id": writer.run_id if writer else None, **rec}, separators=(",", ":")))

    def on_interval(r: IntervalReport, t_start: float, t_end: float) -> None:
        if not first:
            first.append(t_start)
        last[:] = [t_end]
        rec = record(KIND_INTERVAL, cell, r, t_start, t_end, spec.size, processes, engine)
        if sampler is not None and samples:
            samples.append(sampler.sample())
            rec["broker"] = delta(samples[-2], samples[-1], r.acked)
        emit(rec)
        if echo is not None and not echo_records:
            echo(interval_line(r, rec["msgs_per_s"], t_end))

    total = run_load(spec, on_interval, on_start)
    t_start = first[0] if first else 0.0
    t_end = last[0] if last else t_start + spec.duration
    summary = record(KIND_SUMMARY, cell, total, t_start, t_end, spec.size, processes, engine)
    if sampler is not None and len(samples) > 1:
        summary["broker"] = delta(samples[0], samples[-1], total.acked)
    emit(summary)
    if echo is not None and not echo_records:
        echo(summary_line(total, engine))
    return summary


def make_cell(spec: LoadSpec, flush: str, role: str, peer_mode: str | None = None, repeat: int = 0) -> dict[str, Any]:
    """The perf log's CELL of a run of ``spec``."""
    return {
        "system": spec.system,
        "flush": flush,
        "role": role,
        "size": spec.size,
        "in_flight": spec.in_flight,
        "connections": spec.effective_workers,
        "batch": spec.batch,
        "rate": int(spec.rate) if spec.rate else None,
        "peer_mode": peer_mode,
        "repeat": repeat,
    }
