"""The SDK against what the broker takes: ``rmq.client`` figures beside the compiled load generator
(``rmq.perf.load``, engine "c") on one ASYNC_FLUSH broker, interleaved round by round (not part of
the test suite).

    PYTHONPATH=src python perf/sdk_vs_generator.py [--rounds 3] [--seconds 3] [--drain 200000]
        [--old-tree /tmp/old] [--cpp-python .cache/compat/venv-rocketmq-0.4.4/bin/python]

Per round: the generator at 64 and at 1 in flight; then, each in a fresh process (one per tree:
this one, and ``--old-tree``, an export of an older revision built in place, when given),
perf/bench_client.py's ``send`` (sync), ``send_async`` (64 in flight), ``send_batch`` (32),
PushConsumer and PullConsumer drains of ``--drain`` stored messages (the issue's "raw pull
throughput" is the PullConsumer's: the same pulls and decode without the listener dispatch), each
timed from its first message so the consumer's start-up is left out, with the consumer process's
CPU per message beside (an old tree runs this tree's perf/bench_client.py if copied into its
perf/, else its own, timed from start()); with ``--cpp-python`` (the virtual environment
tests/compat installs PyPI ``rocketmq``, the C++ core client, into) a sync send loop of that
client too. The modes, and the trees, go in reverse order every other round. Printed: each
figure's median over the rounds, and the issue's ratios (send_async / generator at 64, sync send
/ C++ client, push / pull drain), medians of the per-round ratios. 1 KiB bodies everywhere.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_broker import create_topic, running_broker
from bench_client import fill

from rmq.client import Producer
from rmq.perf.load import LoadSpec, run_load

HERE = Path(__file__).resolve().parent
MODES = ("sync", "async", "batch", "push", "pull")
CPP_SYNC = """
import sys, time
from rocketmq.client import Message, Producer
namesrv, topic, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
producer = Producer("sdk-vs-generator-cpp-%d" % time.time_ns())
producer.set_namesrv_addr(namesrv)
producer.start()
def run(duration):
    sent, started = 0, time.perf_counter()
    while time.perf_counter() < started + duration:
        msg = Message(topic)
        msg.set_body(b"x" * 1024)
        producer.send_sync(msg)
        sent += 1
    return sent / (time.perf_counter() - started)
run(0.3)
print(run(seconds))
producer.shutdown()
"""


def client_main(namesrv: str, topic: str, mode: str, amount: float) -> None:
    """In the child process: one SDK figure (msgs/s) on stdout."""
    sys.path.insert(0, os.environ["RMQ_PERF_DIR"])  # the tree's own bench_client
    import bench_client
    from bench_client import producer_rate

    logging.basicConfig(level=logging.ERROR)
    group = f"sdk-vs-gen-{mode}-{os.getpid()}"
    if hasattr(bench_client, "push_drain"):  # timed from the first message, with CPU per message
        drain = bench_client.push_drain if mode == "push" else bench_client.pull_drain
        if mode in ("push", "pull"):
            print(*drain(namesrv, topic, group, int(amount)))
            return
    elif mode in ("push", "pull"):  # an older tree: timed from start(), no CPU figure
        rate = bench_client.push_drain_rate if mode == "push" else bench_client.pull_drain_rate
        print(rate(namesrv, topic, group, int(amount)), "nan")
        return
    with Producer("sdk-vs-gen", namesrv, instance_name=f"sdk-vs-gen-{os.getpid()}") as producer:
        producer_rate(producer, topic, mode, 0.3)  # routes, connection, warm-up
        print(producer_rate(producer, topic, mode, amount))


def run_child(argv: list[str], env: dict[str, str] | None = None) -> list[float]:
    """The numbers on the last line the child printed."""
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    if out.returncode:
        raise RuntimeError(f"{argv[:3]} failed: {out.stderr[-2000:]}")
    return [float(word) for word in out.stdout.strip().splitlines()[-1].split()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--drain", type=int, default=200000)
    parser.add_argument("--old-tree", type=Path, help="an older revision's checkout, built in place")
    parser.add_argument("--cpp-python", type=Path, help="python of a virtual environment with PyPI rocketmq")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--client", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client_main(args.client[0], args.client[1], args.client[2], float(args.client[3]))
        return 0
    logging.basicConfig(level=logging.ERROR)
    modes = args.modes.split(",")
    trees = {"new": HERE.parent} | ({"old": args.old_tree.resolve()} if args.old_tree else {})
    figures: dict[str, list[float]] = {}

    def record(key: str, numbers: list[float] | float) -> None:
        rate, *cpu = numbers if isinstance(numbers, list) else [numbers]
        figures.setdefault(key, []).append(rate)
        line = f"  {key:12s} {rate:12,.0f} msgs/s"
        if cpu and cpu[0] == cpu[0]:  # not nan: the drain's consumer process CPU per message
            figures.setdefault(f"{key}-cpu", []).append(cpu[0])
            line += f"  {cpu[0]:6.1f} us CPU/msg"
        print(line, flush=True)

    with running_broker("ASYNC_FLUSH") as (port, namesrv_port):
        namesrv = f"127.0.0.1:{namesrv_port}"
        for topic in ("GenT", "SdkT", "DrainT"):
            create_topic(port, topic)
        if "push" in modes or "pull" in modes:
            with Producer("sdk-vs-gen-fill", namesrv, instance_name="sdk-vs-gen-fill") as producer:
                fill(producer, "DrainT", args.drain)
        for n in range(args.rounds):
            print(f"round {n + 1}", flush=True)
            for depth in (64, 1) if set(modes) - {"push", "pull"} else ():
                spec = LoadSpec("rmq", "127.0.0.1", port, "GenT", in_flight=depth, duration=args.seconds,
                                interval=args.seconds, warmup=0.3, engine="c")  # fmt: skip
                record(f"c-gen-{depth}", run_load(spec, lambda *_: None).acked / args.seconds)
            # push and pull (and the trees) swap places every round: neither always goes first
            for mode in modes if n % 2 == 0 else modes[::-1]:
                if mode == "sync" and args.cpp_python:
                    cpp = [str(args.cpp_python), "-c", CPP_SYNC, namesrv, "SdkT", str(args.seconds)]
                    record("cpp-sync", run_child(cpp))
                for name, tree in list(trees.items())[:: 1 if n % 2 == 0 else -1]:  # each tree first in turn
                    env = dict(os.environ, PYTHONPATH=str(tree / "src"), RMQ_PERF_DIR=str(tree / "perf"))
                    topic, amount = ("DrainT", args.drain) if mode in ("push", "pull") else ("SdkT", args.seconds)
                    argv = [
                        sys.executable,
                        str(Path(__file__).resolve()),
                        "--client",
                        namesrv,
                        topic,
                        mode,
                        str(amount),
                    ]
                    record(f"{name}-{mode}", run_child(argv, env))
                    time.sleep(0.2)
    print("\nmedians over", args.rounds, "rounds (msgs/s; -cpu: the consumer's us of CPU per message)")
    for key, values in figures.items():
        shown = "{:,.1f}" if key.endswith("-cpu") else "{:,.0f}"
        median = shown.format(statistics.median(values))
        print(f"  {key:12s} {median:>12s}   {' '.join(shown.format(v) for v in values)}")

    def ratio(top: str, bottom: str) -> None:
        if top in figures and bottom in figures:
            per_round = [a / b for a, b in zip(figures[top], figures[bottom], strict=True)]
            print(
                f"  {top} / {bottom}: {statistics.median(per_round):.2f}  ({' '.join(f'{r:.2f}' for r in per_round)})"
            )

    print("ratios (median of per-round ratios)")
    for name in trees:
        ratio(f"{name}-async", "c-gen-64")
        ratio(f"{name}-sync", "cpp-sync")
        ratio(f"{name}-push", f"{name}-pull")
    if "old" in trees:
        for mode in modes:
            ratio(f"new-{mode}", f"old-{mode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
