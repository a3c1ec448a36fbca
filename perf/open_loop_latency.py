"""Send latency in an open loop at a share of the ASYNC_FLUSH saturation rate (issue 23, acceptance 5:
p99 <= 1 ms at half of it), measured with rmq-perf's compiled generator on one connection.

    PYTHONPATH=src python perf/open_loop_latency.py [--share 0.5] [--seconds 10] [--rounds 3]
        [--base OTHER_CHECKOUT/src] [--pin] [--json]

Per round, on a fresh ASYNC_FLUSH broker (1 KiB messages): the saturation rate, the best of a
closed loop at 16 and at 64 in flight; then an open loop at ``--share`` of it for ``--seconds``
(64 may be in flight), each request's latency taken from the time it was due, not from when it
went out, so that a broker that stalls is charged for every request that should have gone out
meanwhile (no coordinated omission). That latency holds the generator's own lateness too: a
request the generator sends late (it was not run: a shared machine) is charged from its due time
like one the broker answered late. So beside p50 / p99 / p999 each round prints the generator's
send delay (how long after it could go out each request went out: after it fell due and a slot
of the in-flight window was free, a broker's stall that fills the window stays the broker's) at p99
and p999, and its latest wake-up: a latency percentile no larger than the send delay's is the
generator's, not the broker's.
Medians over rounds at the end.
``--base SRC`` runs a broker of another build (its ``src`` dir, built in place) in every round
too, right after this one's, with this build's generator and the same rates. ``--floor`` adds
perf/null_remoting_server.c at this build's rate of each round: the p99 this machine and the
generator leave with no broker at all.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import bench_broker
from bench_broker import (
    BODY,
    PIN_HELP,
    QUEUES,
    TOPIC,
    exit_on_signal,
    free_port,
    pin_master,
    start_broker,
    stop_process,
    wait_for_port,
)
from report import JSON_HELP, Report

from rmq.perf.load import ENGINE_C, IntervalReport, LoadSpec, run_load

SATURATION_DEPTHS = (16, 64)
SATURATION_SECONDS = 3.0
OPEN_LOOP_IN_FLIGHT = 64
# the broker process of each running ``broker()``, by port (loop_stalls.py reads its threads' CPU)
RUNNING: dict[int, subprocess.Popen] = {}


@contextlib.contextmanager
def broker(src: str | None) -> Iterator[int]:
    """An ASYNC_FLUSH ``rmq-broker`` of the build in ``src`` (None: this one) on a temporary store,
    holding TOPIC: its port."""
    root = tempfile.mkdtemp(prefix="rmq-open-loop-")
    try:
        proc, port, _namesrv_port = start_broker(
            root, "ASYNC_FLUSH", env=None if src is None else {"PYTHONPATH": src}, stderr=subprocess.DEVNULL
        )
        RUNNING[port] = proc
        try:
            yield port
        finally:
            RUNNING.pop(port, None)
            stop_process(proc)
    finally:
        shutil.rmtree(root, ignore_errors=True)


FLOOR = "null server"
FLOOR_HELP = (
    "also measure, each round at this build's rate, perf/null_remoting_server.c (answers at once, no "
    "broker behind it, placed as the broker is): what the generator and this machine leave of a percentile"
)


def build_null_server() -> str:
    """perf/null_remoting_server.c compiled into a temporary directory: its path."""
    out = os.path.join(tempfile.mkdtemp(prefix="rmq-null-server-"), "null_remoting_server")
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "null_remoting_server.c")
    subprocess.run(["cc", "-O2", "-o", out, source], check=True)
    return out


@contextlib.contextmanager
def null_server(binary: str) -> Iterator[int]:
    """The null server on a free port, pinned as a broker would be: its port."""
    port = free_port()
    proc = subprocess.Popen([binary, str(port)])
    try:
        if bench_broker.PIN is not None:
            os.sched_setaffinity(proc.pid, bench_broker.PIN[0])
        wait_for_port(port, proc)
        yield port
    finally:
        stop_process(proc)


def load(port: int, in_flight: int, rate: float, seconds: float) -> IntervalReport:
    spec = LoadSpec(
        "rmq", "127.0.0.1", port, TOPIC, size=len(BODY), in_flight=in_flight, rate=rate, duration=seconds,
        warmup=1.0, interval=seconds, queues=QUEUES, engine=ENGINE_C,
    )  # fmt: skip
    return run_load(spec, lambda report, t_start, t_end: None)


def saturation(port: int) -> float:
    return max(load(port, depth, 0.0, SATURATION_SECONDS).acked / SATURATION_SECONDS for depth in SATURATION_DEPTHS)


def add_open_loop_arguments(parser: argparse.ArgumentParser, seconds: float) -> None:
    """--share and --seconds (of the open loop, ``seconds`` by default); --pin and --json."""
    parser.add_argument("--share", type=float, default=0.5, help="open-loop rate as a share of the saturation rate")
    parser.add_argument("--seconds", type=float, default=seconds, help="length of the open-loop run")
    parser.add_argument("--pin", action="store_true", help=PIN_HELP)
    parser.add_argument("--json", action="store_true", help=JSON_HELP)


def main() -> int:
    signal.signal(signal.SIGTERM, exit_on_signal)
    signal.signal(signal.SIGINT, exit_on_signal)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_open_loop_arguments(parser, seconds=10.0)
    parser.add_argument("--rounds", type=int, default=3, help="rounds (the medians are printed at the end)")
    parser.add_argument("--base", help="the src dir of another build, measured in every round too")
    parser.add_argument("--floor", action="store_true", help=FLOOR_HELP)
    args = parser.parse_args()
    if args.pin:
        pin_master(parser)
    report = Report(args.json)
    sides = {"this build": None, **({"base": args.base} if args.base else {})}
    if args.floor:
        sides[FLOOR] = build_null_server()
    figures: dict[tuple[str, str], list[float]] = {}
    report.line(f"1 KiB sends, one connection, open loop at {args.share:g} x saturation for {args.seconds:g} s")
    for round_ in range(1, args.rounds + 1):
        saturated = 0.0
        for side, src in sides.items():
            if side == FLOOR:  # at this build's rate of the round
                with null_server(src) as port:
                    r = load(port, OPEN_LOOP_IN_FLIGHT, args.share * figures[("this build: saturation", "msgs/s")][-1],
                             args.seconds)  # fmt: skip
            else:
                with broker(src) as port:
                    saturated = saturation(port)
                    r = load(port, OPEN_LOOP_IN_FLIGHT, args.share * saturated, args.seconds)
            h = r.histogram
            got = {
                "saturation": (saturated if side != FLOOR else 0.0, "msgs/s"),
                "open-loop rate": (r.acked / args.seconds, "msgs/s"),
                "p50": (h.percentile(50) / 1000, "ms"),
                "p99": (h.percentile(99) / 1000, "ms"),
                "p999": (h.percentile(99.9) / 1000, "ms"),
                "generator's send delay p99": (r.send_delay.percentile(99) / 1000, "ms"),
                "generator's send delay p999": (r.send_delay.percentile(99.9) / 1000, "ms"),
                "generator's latest wake-up": (r.wake_late_max_s * 1000, "ms"),
            }
            for name, (value, unit) in got.items():
                figures.setdefault((f"{side}: {name}", unit), []).append(value)
            p50, p99, p999 = (got[p][0] for p in ("p50", "p99", "p999"))
            late99, late999 = (got[f"generator's send delay {p}"][0] for p in ("p99", "p999"))
            rate = r.acked / args.seconds
            report.line(
                f"round {round_} {side:10s}: saturation {got['saturation'][0]:,.0f} msgs/s, open loop {rate:,.0f}"
                f" msgs/s, p50 / p99 / p999 {p50:.3f} / {p99:.3f} / {p999:.3f} ms, failed {sum(r.failed.values())},"
                f" generator sent p99 / p999 {late99:.3f} / {late999:.3f} ms late,"
                f" woke up to {r.wake_late_max_s * 1000:.1f} ms late"
            )
    for (name, unit), values in figures.items():
        report.figure(name, statistics.median(values), unit)
        report.line(f"median {name}: {statistics.median(values):,.3f} {unit}")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
