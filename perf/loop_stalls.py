"""The broker's longest event-loop iterations under an open-loop send load, and what each was doing:
the evidence behind issue 23's acceptance 5 (send p99 at half saturation).

    PYTHONPATH=src python perf/loop_stalls.py [--share 0.5] [--seconds 6] [--pin] [--top 12] [--json]

Starts an ASYNC_FLUSH broker as perf/open_loop_latency.py does, with this module imported into it
(``sitecustomize`` in a temporary directory put first on its PYTHONPATH, nothing in ``src`` changed)
when RMQ_LOOP_TRACE names a file: each iteration of every ``rmq.net.loop.EventLoop`` is timed, split
into the epoll wait and the rest, with the loop thread's CPU time, minor / major page faults and
voluntary / involuntary context switches (``getrusage(RUSAGE_THREAD)``) over it, and each garbage
collection is timed (``gc.callbacks``). An iteration whose busy part (wall time outside the wait)
was long tells by these counters why: CPU spent (on-CPU work, or page faults), off the CPU blocked
(voluntary switches: a lock, a fault waiting for I/O or the journal) or preempted (involuntary).
Printed: the busy-time distribution, the longest iterations, the collections, the per-thread CPU
time of the broker's threads over the run.

Tracing costs ~3 us per iteration: saturation and latency here are not the figures to quote.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import heapq
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time

TRACE_ENV = "RMQ_LOOP_TRACE"
KEEP = 40  # longest iterations kept per loop


def _install(path: str) -> None:
    """In the broker: wrap EventLoop._run_once and time the collections; the record is written to
    ``path`` as JSON when the process exits."""
    import orjson

    from rmq.net import loop as loop_module

    iterations: dict[str, list] = {}
    busy_hist: dict[str, dict[int, int]] = {}
    collections: list[tuple[float, int, float]] = []
    gc_started = [0.0, 0]
    names: dict[int, str] = {}  # native thread id -> Python thread name (Python leaves comm alone)
    original = loop_module.EventLoop._run_once
    clock = time.perf_counter
    rusage = resource.getrusage
    who = resource.RUSAGE_THREAD

    class TimedEpoll:
        def __init__(self, epoll, spent: list) -> None:
            self._epoll, self._spent = epoll, spent

        def poll(self, timeout):
            t = clock()
            try:
                return self._epoll.poll(timeout)
            finally:
                self._spent[0] += clock() - t

        def __getattr__(self, name):
            return getattr(self._epoll, name)

    def run_once(self) -> None:
        spent = self.__dict__.get("_trace_spent")
        if spent is None:
            spent = self._trace_spent = [0.0]
            self._epoll = TimedEpoll(self._epoll, spent)
        spent[0] = 0.0
        if len(names) < threading.active_count():
            names.update({t.native_id: t.name for t in threading.enumerate()})
        r0 = rusage(who)
        t0 = clock()
        original(self)
        wall = clock() - t0
        r1 = rusage(who)
        busy = wall - spent[0]
        hist = busy_hist.setdefault(self.name, {})
        bucket = int(busy * 1e6).bit_length()  # busy microseconds, powers of two
        hist[bucket] = hist.get(bucket, 0) + 1
        heap = iterations.setdefault(self.name, [])
        if len(heap) < KEEP or busy > heap[0][0]:
            row = (
                busy, t0, wall, spent[0], self.events_ready,
                (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), r1.ru_stime - r0.ru_stime,
                r1.ru_minflt - r0.ru_minflt, r1.ru_majflt - r0.ru_majflt,
                r1.ru_nvcsw - r0.ru_nvcsw, r1.ru_nivcsw - r0.ru_nivcsw,
            )  # fmt: skip
            (heapq.heappush if len(heap) < KEEP else heapq.heapreplace)(heap, row)

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_started[0], gc_started[1] = clock(), info["generation"]
        else:
            collections.append((gc_started[0], gc_started[1], clock() - gc_started[0]))

    def dump() -> None:
        names.update({t.native_id: t.name for t in threading.enumerate()})
        record = {
            "thread_names": names,
            "iterations": {name: sorted(rows, reverse=True) for name, rows in iterations.items()},
            "busy_us_log2": busy_hist,
            "collections": collections,
            "gc_frozen": gc.get_freeze_count(),
            "gc_thresholds": gc.get_threshold(),
        }
        with open(path, "wb") as f:
            f.write(orjson.dumps(record, option=orjson.OPT_NON_STR_KEYS))

    loop_module.EventLoop._run_once = run_once
    gc.callbacks.append(on_gc)
    atexit.register(dump)


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each thread of ``pid``, by thread id."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except FileNotFoundError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        out[tid] = (int(fields[11]) + int(fields[12])) / tick
    return out


def main() -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_broker
    import open_loop_latency
    import orjson
    from bench_broker import exit_on_signal, pin_master
    from report import Report

    signal.signal(signal.SIGTERM, exit_on_signal)
    signal.signal(signal.SIGINT, exit_on_signal)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    open_loop_latency.add_open_loop_arguments(parser, seconds=6.0)
    parser.add_argument("--rate", type=float, help="open-loop rate in msgs/s (instead of measuring saturation)")
    parser.add_argument("--top", type=int, default=12, help="longest iterations printed")
    parser.add_argument("--broker-src", help="the src dir of the broker's build (default: this one)")
    parser.add_argument("--perf", metavar="FILE", help="also `perf record -g` the broker over the open loop into FILE")
    args = parser.parse_args()
    if args.pin:
        pin_master(parser)
    report = Report(args.json)
    hook_dir = tempfile.mkdtemp(prefix="rmq-loop-trace-")
    trace = os.path.join(hook_dir, "trace.json")
    with open(os.path.join(hook_dir, "sitecustomize.py"), "w") as f:
        f.write(
            "import os, sys\n"
            f"if os.environ.get({TRACE_ENV!r}):\n"
            f"    sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
            "    import loop_stalls\n"
            f"    loop_stalls._install(os.environ[{TRACE_ENV!r}])\n"
        )
    src = args.broker_src or os.environ.get("PYTHONPATH", "")
    os.environ[TRACE_ENV] = trace
    with open_loop_latency.broker(hook_dir + (os.pathsep + src if src else "")) as port:
        proc = open_loop_latency.RUNNING[port]
        rate = args.rate or args.share * open_loop_latency.saturation(port)
        recorder = None
        if args.perf:
            recorder = subprocess.Popen(
                ["perf", "record", "-q", "-g", "-p", str(proc.pid), "-o", args.perf], stderr=subprocess.DEVNULL
            )
        cpu0, t0 = thread_cpu(proc.pid), time.monotonic()
        r = open_loop_latency.load(port, open_loop_latency.OPEN_LOOP_IN_FLIGHT, rate, args.seconds)
        cpu1, elapsed = thread_cpu(proc.pid), time.monotonic() - t0
        if recorder is not None:
            recorder.send_signal(signal.SIGINT)
            recorder.wait(30)
    del os.environ[TRACE_ENV]
    with open(trace, "rb") as f:
        record = orjson.loads(f.read())
    h = r.histogram
    pinned = " (pinned)" if bench_broker.PIN else ""
    report.line(
        f"open loop at {rate:,.0f} msgs/s{pinned}: acked {r.acked / args.seconds:,.0f} msgs/s, p50 / p99 / p999 "
        f"{h.percentile(50) / 1000:.3f} / {h.percentile(99) / 1000:.3f} / {h.percentile(99.9) / 1000:.3f} ms,"
        f" generator sent p99 {r.send_delay.percentile(99) / 1000:.3f} ms late, woke up to"
        f" {r.wake_late_max_s * 1000:.1f} ms late"
    )
    report.figure("p99", h.percentile(99) / 1000, "ms")
    for name, hist in record["busy_us_log2"].items():
        total = sum(hist.values())
        report.line(f"loop {name}: {total:,} iterations, busy time (outside epoll) by power of two:")
        for bucket in sorted(hist, key=int):
            b = int(bucket)
            low = 0 if b == 0 else 1 << (b - 1)
            report.line(f"  [{low:>7,} us, {1 << b:>7,} us): {hist[bucket]:>9,}")
        rows = record["iterations"][name]
        report.line(
            f"  longest {len(rows)}: busy {sum(r[0] for r in rows) * 1000:.1f} ms, on the CPU"
            f" {sum(r[5] for r in rows) * 1000:.1f} ms (in the kernel {sum(r[6] for r in rows) * 1000:.1f} ms),"
            f" major faults {sum(r[8] for r in rows)}, switched out waiting {sum(r[9] for r in rows)}"
            f" / preempted {sum(r[10] for r in rows)} times"
        )
        report.line(
            f"  longest {args.top}: busy ms | at s | epoll ms | events | cpu ms (sys) | minflt majflt | vcsw ivcsw"
        )
        first = min(row[1] for rows in record["iterations"].values() for row in rows)
        for busy, at, _wall, polled, events, cpu, sys_, minflt, majflt, vcsw, ivcsw in record["iterations"][name][
            : args.top
        ]:
            report.line(
                f"  {busy * 1000:8.2f} | {at - first:6.2f} | {polled * 1000:6.2f} | {events:3d} | {cpu * 1000:6.2f}"
                f" ({sys_ * 1000:5.2f}) | {minflt:6d} {majflt:3d} | {vcsw:3d} {ivcsw:3d}"
            )
    pauses = sorted(record["collections"], key=lambda c: -c[2])
    report.line(
        f"collections: {len(pauses)}, longest (generation, ms): "
        + ", ".join(f"({g}, {d * 1000:.2f})" for _, g, d in pauses[:8])
        + f"; frozen objects {record['gc_frozen']}, thresholds {record['gc_thresholds']}"
    )
    report.line(f"broker threads' CPU over the open loop ({elapsed:.1f} s), share of one CPU:")
    names = record["thread_names"]
    for tid in sorted(cpu1, key=lambda n: -(cpu1[n] - cpu0.get(n, 0.0))):
        used = cpu1[tid] - cpu0.get(tid, 0.0)
        if used > 0:
            report.line(f"  {names.get(tid, 'thread ' + tid):28s} {used / elapsed:6.1%}")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
