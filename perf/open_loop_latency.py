"""Send latency in an open loop at a share of the ASYNC_FLUSH saturation rate (issue 23, acceptance 5:
p99 <= 1 ms at half of it), measured with rmq-perf's compiled generator on one connection.

    PYTHONPATH=src python perf/open_loop_latency.py [--share 0.5] [--seconds 10] [--rounds 3]
        [--base OTHER_CHECKOUT/src] [--pin] [--json]

Per round, on a fresh ASYNC_FLUSH broker (1 KiB messages): the saturation rate, the best of a
closed loop at 16 and at 64 in flight; then an open loop at ``--share`` of it for ``--seconds``
(64 may be in flight), each request's latency taken from the time it was due, not from when it
went out, so that a broker that stalls is charged for every request that should have gone out
meanwhile (no coordinated omission). Printed per round: the rates, p50 / p99 / p999, and the
generator's latest wake-up: on a shared machine a generator woken that late stalled itself, and a
p99 of the same size is the machine's, not the broker's. Medians over rounds at the end.
``--base SRC`` runs a broker of another build (its ``src`` dir, built in place) in every round
too, right after this one's, with this build's generator and the same rates.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator

from bench_broker import BODY, PIN_HELP, QUEUES, TOPIC, exit_on_signal, pin_master, start_broker, stop_process
from report import JSON_HELP, Report

from rmq.perf.load import ENGINE_C, IntervalReport, LoadSpec, run_load

SATURATION_DEPTHS = (16, 64)
SATURATION_SECONDS = 3.0
OPEN_LOOP_IN_FLIGHT = 64


@contextlib.contextmanager
def broker(src: str | None) -> Iterator[int]:
    """An ASYNC_FLUSH ``rmq-broker`` of the build in ``src`` (None: this one) on a temporary store,
    holding TOPIC: its port."""
    root = tempfile.mkdtemp(prefix="rmq-open-loop-")
    try:
        proc, port, _namesrv_port = start_broker(
            root, "ASYNC_FLUSH", env=None if src is None else {"PYTHONPATH": src}, stderr=subprocess.DEVNULL
        )
        try:
            yield port
        finally:
            stop_process(proc)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def load(port: int, in_flight: int, rate: float, seconds: float) -> IntervalReport:
    spec = LoadSpec(
        "rmq", "127.0.0.1", port, TOPIC, size=len(BODY), in_flight=in_flight, rate=rate, duration=seconds,
        warmup=1.0, interval=seconds, queues=QUEUES, engine=ENGINE_C,
    )  # fmt: skip
    return run_load(spec, lambda report, t_start, t_end: None)


def saturation(port: int) -> float:
    return max(load(port, depth, 0.0, SATURATION_SECONDS).acked / SATURATION_SECONDS for depth in SATURATION_DEPTHS)


def main() -> int:
    signal.signal(signal.SIGTERM, exit_on_signal)
    signal.signal(signal.SIGINT, exit_on_signal)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--share", type=float, default=0.5, help="open-loop rate as a share of the saturation rate")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the open-loop run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (the medians are printed at the end)")
    parser.add_argument("--base", help="the src dir of another build, measured in every round too")
    parser.add_argument("--pin", action="store_true", help=PIN_HELP)
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    args = parser.parse_args()
    if args.pin:
        pin_master(parser)
    report = Report(args.json)
    sides = {"this build": None, **({"base": args.base} if args.base else {})}
    figures: dict[tuple[str, str], list[float]] = {}
    report.line(f"1 KiB sends, one connection, open loop at {args.share:g} x saturation for {args.seconds:g} s")
    for round_ in range(1, args.rounds + 1):
        for side, src in sides.items():
            with broker(src) as port:
                saturated = saturation(port)
                r = load(port, OPEN_LOOP_IN_FLIGHT, args.share * saturated, args.seconds)
            h = r.histogram
            got = {
                "saturation": (saturated, "msgs/s"),
                "open-loop rate": (r.acked / args.seconds, "msgs/s"),
                "p50": (h.percentile(50) / 1000, "ms"),
                "p99": (h.percentile(99) / 1000, "ms"),
                "p999": (h.percentile(99.9) / 1000, "ms"),
                "generator's latest wake-up": (r.wake_late_max_s * 1000, "ms"),
            }
            for name, (value, unit) in got.items():
                figures.setdefault((f"{side}: {name}", unit), []).append(value)
            p50, p99, p999 = (got[p][0] for p in ("p50", "p99", "p999"))
            rate = r.acked / args.seconds
            report.line(
                f"round {round_} {side:10s}: saturation {saturated:,.0f} msgs/s, open loop {rate:,.0f}"
                f" msgs/s, p50 / p99 / p999 {p50:.3f} / {p99:.3f} / {p999:.3f} ms, failed {sum(r.failed.values())},"
                f" generator woke up to {r.wake_late_max_s * 1000:.1f} ms late"
            )
    for (name, unit), values in figures.items():
        report.figure(name, statistics.median(values), unit)
        report.line(f"median {name}: {statistics.median(values):,.3f} {unit}")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
