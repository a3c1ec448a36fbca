"""A puller's latency beside a SYNC_FLUSH send load: does the broker's flush keep other connections
waiting? (issue 23: "a slow disk must not stall other connections' pulls and heartbeats").

    PYTHONPATH=src:perf python perf/bench_sync_puller.py [--in-flight 16] [--seconds 3] [--repeat 3]
        [--base OTHER_CHECKOUT/src] [--slow-msync-us 0]

Per round and build: an ``rmq-broker`` (flushDiskType=SYNC_FLUSH, embedded name server, a fresh
store), the compiled load generator (``rmq.perf._loadgen``, the C engine of ``rmq-perf producer``)
sending 1 KiB single sends with ``--in-flight`` outstanding over one connection, and on a second
connection a puller that sends one PULL_MESSAGE (32 messages, no suspension) every
``--pull-interval-ms`` and times it from its write to its answer. Reported per build: sends/s, and
the pulls' p50 / p99 / max in ms; the median over rounds, and the median of the per-round ratios of
the other build's p99 to this one's (``--base``: a second build, e.g. ``git archive main`` built in
place, measured right after this one in every round, its broker started from its ``src``).

``--slow-msync-us N`` makes every msync of the brokers take N µs more (``perf/slow_msync_shim.c``,
LD_PRELOAD): a slow disk. A design that flushed on the loop would show it in the pulls' latency; one
that flushes on a thread of its own must not.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
from bench_broker import PULL_BATCH, QUEUES, TOPIC, start_broker, stop_process

from rmq.net.codec import RemotingCommand, encode
from rmq.perf.load import ENGINE_C, LoadSpec, run_load
from rmq.perf.remoting import Pipeline
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.request_flags import PullSysFlag

SHIM_SOURCE = Path(__file__).with_name("slow_msync_shim.c")


def build_shim(out_dir: str) -> str:
    shim = os.path.join(out_dir, "slow_msync_shim.so")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", shim, str(SHIM_SOURCE), "-ldl"], check=True, timeout=60)
    return shim


@contextlib.contextmanager
def sync_broker(src: str | None, env: dict[str, str]) -> Iterator[int]:
    """A SYNC_FLUSH broker on a fresh store, started from the build in ``src`` (None: this one)."""
    root = tempfile.mkdtemp(prefix="rmq-bench-puller-")
    saved = dict(os.environ)
    os.environ.update(env)
    if src is not None:
        os.environ["PYTHONPATH"] = src
    try:
        proc, port, _namesrv_port = start_broker(root, "SYNC_FLUSH")
    finally:
        os.environ.clear()
        os.environ.update(saved)  # the load generator's workers are spawned from this build
    try:
        yield port
    finally:
        stop_process(proc)
        shutil.rmtree(root, ignore_errors=True)


def pull_frame(queue_id: int, offset: int, opaque: int) -> bytes:
    request = RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": "bench-puller",
            "topic": TOPIC,
            "queueId": str(queue_id),
            "queueOffset": str(offset),
            "maxMsgNums": str(PULL_BATCH),
            "sysFlag": str(PullSysFlag.SUBSCRIPTION),  # the subscription comes with the pull: no heartbeat needed
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": "*",
            "subVersion": "0",
            "expressionType": "TAG",
        },
    )
    request.opaque = opaque
    return encode(request)


class Puller(threading.Thread):
    """One pull at a time, every ``interval`` s, walking the queues; each one's latency in s."""

    def __init__(self, port: int, interval: float):
        super().__init__(name="bench-puller", daemon=True)
        self.port = port
        self.interval = interval
        self.latencies: list[float] = []
        self.found = 0
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        cursors = [0] * QUEUES
        try:
            with Pipeline("127.0.0.1", self.port) as pipe:
                opaque = 0
                while not self.stopping.is_set():
                    queue_id = opaque % QUEUES
                    opaque += 1
                    started = time.perf_counter()
                    pipe.sock.sendall(pull_frame(queue_id, cursors[queue_id], opaque))
                    answers: list[tuple[bytes, bytes]] = []
                    while not answers:
                        answers = pipe.answers()
                    self.latencies.append(time.perf_counter() - started)
                    header = orjson.loads(answers[0][0])
                    if header["code"] == ResponseCode.SUCCESS:
                        self.found += 1
                    next_offset = header.get("extFields", {}).get("nextBeginOffset")
                    if next_offset is not None:
                        cursors[queue_id] = int(next_offset)
                    self.stopping.wait(self.interval)
        except BaseException as e:  # reported by the round, not lost in a thread
            self.error = e


def round_of(src: str | None, env: dict[str, str], args) -> dict[str, float]:
    with sync_broker(src, env) as port:
        spec = LoadSpec("rmq", "127.0.0.1", port, TOPIC, in_flight=args.in_flight, workers=1,
                        duration=args.seconds, warmup=0.5, queues=QUEUES, engine=ENGINE_C)  # fmt: skip
        spec.interval = args.seconds
        puller = Puller(port, args.pull_interval_ms / 1000)
        report = run_load(spec, lambda *_: None, puller.start)
        puller.stopping.set()
        puller.join(5)
    if puller.error is not None:
        raise RuntimeError(f"the puller failed: {puller.error!r}")
    lat = sorted(puller.latencies)
    if not lat:
        raise RuntimeError("the puller made no pull")
    return {
        "sends": report.acked / args.seconds,
        "pulls": len(lat),
        "found": puller.found,
        "p50": lat[len(lat) // 2] * 1e3,
        "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3,
        "max": lat[-1] * 1e3,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pull-interval-ms", type=float, default=2.0)
    parser.add_argument("--base", help="the src dir of another build, measured after this one in every round")
    parser.add_argument("--slow-msync-us", type=int, default=0, help="add this many µs to every msync")
    args = parser.parse_args()
    env: dict[str, str] = {}
    tmp = tempfile.mkdtemp(prefix="rmq-bench-puller-shim-")
    try:
        if args.slow_msync_us:
            env = {"LD_PRELOAD": build_shim(tmp), "RMQ_SLOW_MSYNC_US": str(args.slow_msync_us)}
        builds = {"this": None, **({"base": args.base} if args.base else {})}
        rows: dict[str, list[dict[str, float]]] = {name: [] for name in builds}
        for r in range(args.repeat):
            for name, src in builds.items():
                row = round_of(src, env, args)
                rows[name].append(row)
                print(
                    f"round {r + 1} {name:4s}: {row['sends']:9,.0f} sends/s | {row['pulls']:5.0f} pulls "
                    f"({row['found']:.0f} found): p50 {row['p50']:6.2f} ms, p99 {row['p99']:6.2f} ms, "
                    f"max {row['max']:7.2f} ms",
                    flush=True,
                )
        load = os.getloadavg()[0]
        print(f"\nmedians over {args.repeat} rounds (in flight {args.in_flight}, slow msync +{args.slow_msync_us} us, "
              f"load {load:.1f}):")  # fmt: skip
        for name, got in rows.items():
            med = {key: statistics.median(row[key] for row in got) for key in ("sends", "p50", "p99", "max")}
            print(f"  {name:4s}: {med['sends']:9,.0f} sends/s | pull p50 {med['p50']:6.2f} ms, "
                  f"p99 {med['p99']:6.2f} ms, max {med['max']:7.2f} ms")  # fmt: skip
        if args.base:
            ratios = [b["p99"] / t["p99"] for t, b in zip(rows["this"], rows["base"], strict=True)]
            sends = [t["sends"] / b["sends"] for t, b in zip(rows["this"], rows["base"], strict=True)]
            print(f"  base p99 / this p99, median per round: {statistics.median(ratios):.2f}x; "
                  f"sends this / base: {statistics.median(sends):.2f}x")  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
