"""Where a SYNC_FLUSH send's round trip goes: per-stage medians of the cycles of a pipelined sender
with N requests in flight against an in-process broker (not part of the test suite).

    PYTHONPATH=src python perf/trace_sync_send.py [--in-flight 1,16] [--seconds 3] [--big-files]

The sender is ``perf/bench_broker.py``'s raw pipeline in a child process (its own GIL), so the
broker's loop thread is the only busy Python thread here. With every answer of a flush round
written in one go, the sender answers with the next N requests at once: the broker works in cycles,
read -> puts -> flush round -> completions -> answers written -> (sender) -> read. The broker's
methods on that path are wrapped before it is built (handlers are bound at registration); the
flush thread's stages come from the group commit's own clock (``GroupCommit.round_times``: asked,
started, msync returned), all on CLOCK_MONOTONIC.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT))  # the checkout, for tests.helpers

import rmq.broker.controller as controller_module  # noqa: E402
import rmq.net.channel as channel_module  # noqa: E402
import rmq.store.message_store as store_module  # noqa: E402

# (stage mark, time) in the order the loop thread saw them
marks: list[tuple[str, float]] = []
STAGES = (
    ("answers written -> next request read (network, sender)", "wrote", "read"),
    ("request read -> flush round asked (decode, puts)", "read", "kick"),
    ("asking the flush thread (futex wake)", "kick", "kicked"),
    ("asked -> flush thread runs", "asked", "started"),
    ("msync", "started", "synced"),
    ("msync returned -> loop completes (eventfd wake)", "synced", "complete"),
    ("completions -> answers queued (callbacks, encoding)", "complete", "write"),
    ("answers written (send)", "write", "wrote"),
)


def wrap(cls, name: str, before: str | None, after: str | None = None, record=None) -> None:
    inner = getattr(cls, name)

    def traced(self, *args):
        if before:
            marks.append((before, time.perf_counter()))
        result = inner(self, *args)
        if after:
            marks.append((after, time.perf_counter()))
        if record is not None:
            record(self, result)
        return result

    setattr(cls, name, traced)


def on_completed(store, done) -> None:
    if done:
        asked, started, synced = store.group_commit.round_times
        marks.extend((("asked", asked), ("started", started), ("synced", synced), ("completed", time.perf_counter())))


def trace() -> None:
    wrap(channel_module.Channel, "_read", "read")
    wrap(channel_module.Channel, "_flush", "write", "wrote")
    wrap(controller_module.FlushRoundKicker, "_flush", "kick", "kicked")
    wrap(store_module.MessageStore, "complete_commits", "complete", None, on_completed)


def cycles(depth: int) -> list[dict[str, float]]:
    """Each cycle's stage times: from one answer write to the next, with one flush round."""
    out, cycle = [], {}
    for name, t in marks:
        if name == "wrote" and {"read", "kick", "completed", "write"} <= cycle.keys():
            cycle["wrote"] = t
            out.append(cycle)
            cycle = {"wrote_before": t}
        elif name == "read" and "read" in cycle:
            continue  # the rest of a request burst
        elif name == "complete" and "completed" in cycle:
            continue
        elif name not in ("write", "wrote") or "completed" in cycle:
            cycle.setdefault(name, t)
    return [c for c in out if "wrote_before" in c and c["asked"] >= c.get("kick", 0)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", default="1,16")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--big-files", action="store_true", help="default 1 GiB CommitLog and full-size index")
    parser.add_argument(
        "--sender",
        choices=("pipeline", "rmq-perf"),
        default="pipeline",
        help="bench_broker.py's raw pipeline, or rmq-perf's load generator (what a matrix cell runs)",
    )
    parser.add_argument("--workers", type=int, default=1, help="rmq-perf's worker processes (= connections)")
    args = parser.parse_args()
    trace()
    from bench_broker import create_topic

    from rmq.broker.config import load_broker_config
    from rmq.cli.broker import BrokerStartup
    from tests.helpers import free_port

    sizes = {} if args.big_files else {"mappedFileSizeCommitLog": str(64 << 20)}
    port = free_port()
    settings = {
        "brokerIP1": "127.0.0.1",
        "listenPort": str(port),
        "namesrvListenPort": str(free_port()),
        "storePathRootDir": (store := tempfile.mkdtemp(prefix="rmq-trace-")),
        "flushDiskType": "SYNC_FLUSH",
        "enableGrpc": "false",  # the 4.x path is what is traced; no fixed gRPC port to collide on
        **sizes,
    }
    startup = BrokerStartup(*load_broker_config(None, settings))
    startup.start()
    try:
        create_topic(port, "BenchTopic")
        for depth in (int(d) for d in args.in_flight.split(",")):
            sender = (
                "import sys; from bench_broker import sends_per_second; "
                f"sends_per_second({port}, {depth}, False, 0.5); "
                f"sys.stdout.write(str(sends_per_second({port}, {depth}, False, {args.seconds})))"
            )
            if args.sender == "rmq-perf":
                sender = (
                    "import sys; from rmq.perf.load import LoadSpec, run_load\n"
                    "if __name__ == '__main__':\n"
                    f"    spec = LoadSpec('rmq', '127.0.0.1', {port}, 'BenchTopic', in_flight={depth},"
                    f" workers={args.workers}, duration={args.seconds}, warmup=0.5, interval={args.seconds})\n"
                    f"    sys.stdout.write(str(run_load(spec, lambda *_: None).acked / {args.seconds}))"
                )
            env = dict(
                os.environ, PYTHONPATH=os.pathsep.join([str(CHECKOUT / "perf"), os.environ.get("PYTHONPATH", "")])
            )
            child = subprocess.Popen([sys.executable, "-c", sender], stdout=subprocess.PIPE, env=env, text=True)
            time.sleep(0.5)  # past the child's warm-up
            del marks[:]
            rate = float(child.communicate(timeout=args.seconds + 60)[0])
            rows = cycles(depth)
            total = statistics.median(c["wrote"] - c["wrote_before"] for c in rows)
            print(f"{depth} in flight: {rate:,.0f} msgs/s, {len(rows)} cycles; medians in microseconds")
            for label, a, b in STAGES:
                start = "wrote_before" if a == "wrote" else a
                print(f"  {label:55s} {statistics.median(c[b] - c[start] for c in rows) * 1e6:7.0f}")
            print(f"  {'one cycle (answers written to answers written)':55s} {total * 1e6:7.0f}")
    finally:
        startup.shutdown()
        shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    main()
