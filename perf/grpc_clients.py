"""Apache's 5.x Python client over rmq-broker's gRPC endpoint against the 4.x path (our SDK over
remoting) on the same ASYNC_FLUSH broker (issue 24, acceptance 5; not part of the test suite).

    PYTHONPATH=src python perf/grpc_clients.py [--seconds 5] [--drain 5000] [--rate 5000]
        [--procs 4] [--python5 .cache/compat/venv-rocketmq-python-client-5.1.2/bin/python] [--rounds 1]

Each figure is one client process (1 KiB bodies), the 5.x ones run by perf/grpc_client5.py in the
client's own virtual environment (``.ci/install-peers rocketmq-python-5`` makes it), the 4.x ones by
perf/sdk_vs_generator.py's ``--client``:
- send msgs/s: sync sends one at a time, and async sends with 64 in flight;
- receive msgs/s: the 5.x SimpleConsumer (receive 32, an ack per message) and the 4.x PullConsumer
  draining ``--drain`` stored messages, timed from the first one;
- the broker's CPU per request: its process CPU time (utime + stime) while the figure's client
  process lived, divided by the requests it made (a 5.x send is one SendMessage, warm-up sends
  counted; a 5.x receive loop counts its ReceiveMessage and AckMessage requests; a 4.x send is one
  SEND_MESSAGE_V2, its 0.3 s warm-up not counted): what a client's start-up and heartbeats cost the
  broker is in it, so it is an upper bound, the 4.x one a little more so;
- an open loop of 5.x sends at ``--rate`` msgs/s shared by ``--procs`` client processes (one
  Python client process sends ~3,000/s at most; send_async, latency from each send's due time):
  p50 / p99 / p999 over all of them, the rate reached and the broker's CPU per request.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench_broker import create_topic, exit_on_signal, start_broker, stop_process
from bench_client import fill
from bench_flush_inline import cpu_seconds

from rmq.client import Producer
from rmq.perf.procs import LOOPBACK, free_port

HERE = Path(__file__).resolve().parent
DEFAULT_PYTHON5 = HERE.parent / ".cache" / "compat" / "venv-rocketmq-python-client-5.1.2" / "bin" / "python"
IN_FLIGHT = 64
RECEIVE_BATCH = 32


def child(argv: list[str]) -> dict | float:
    env = dict(os.environ, RMQ_PERF_DIR=str(HERE))  # sdk_vs_generator's --client finds bench_client there
    out = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env)
    if out.returncode:
        raise RuntimeError(f"{argv[:4]} failed: {out.stderr[-2000:]}")
    last = out.stdout.strip().splitlines()[-1]
    return json.loads(last) if last.startswith("{") else float(last.split()[0])


def measured(broker_pid: int, argv: list[str]) -> tuple[dict | float, float]:
    """The child's figures and the broker's CPU seconds while it ran."""
    before = cpu_seconds(broker_pid)
    result = child(argv)
    return result, cpu_seconds(broker_pid) - before


def open_loop(broker_pid: int, five: list[str], endpoint: str, rate: float, procs: int, seconds: float) -> None:
    """``procs`` 5.x client processes sending ``rate`` / ``procs`` msgs/s each, at once; their
    latencies merged."""
    argv = [*five, endpoint, "Latency5", "open-loop", str(seconds), str(rate / procs)]
    before = cpu_seconds(broker_pid)
    with ThreadPoolExecutor(procs) as pool:
        results = list(pool.map(lambda _: child(argv), range(procs)))
    broker_cpu = cpu_seconds(broker_pid) - before
    latencies = sorted(x for r in results for x in r["latencies_ms"])
    reached = sum(r["msgs_per_s"] for r in results)
    requests = sum(r["requests"] for r in results)
    failed = sum(r["failed"] for r in results)

    def at(share: float) -> float:
        return latencies[min(len(latencies) - 1, int(len(latencies) * share))]

    print(
        f"  5.x open loop at {rate:,.0f}/s ({procs} processes): reached {reached:,.0f}/s, p50 {at(0.5):.2f} ms, "
        f"p99 {at(0.99):.2f} ms, p999 {at(0.999):.2f} ms, {failed} failed; "
        f"broker {broker_cpu * 1e6 / requests:.1f} us CPU/request",
        flush=True,
    )


def main() -> int:
    signal.signal(signal.SIGTERM, exit_on_signal)
    signal.signal(signal.SIGINT, exit_on_signal)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--drain", type=int, default=5000)
    parser.add_argument("--rate", type=float, default=5000.0)
    parser.add_argument("--python5", type=Path, default=DEFAULT_PYTHON5)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--procs", type=int, default=4, help="5.x client processes sharing the open loop's rate")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    if not args.python5.exists():
        print(f"no 5.x client at {args.python5}: run .ci/install-peers rocketmq-python-5", file=sys.stderr)
        return 2
    five = [str(args.python5), str(HERE / "grpc_client5.py")]
    four = [sys.executable, str(HERE / "sdk_vs_generator.py"), "--client"]
    grpc_port = free_port()
    with tempfile.TemporaryDirectory(prefix="rmq-grpc-perf-") as store:
        proc, port, namesrv_port = start_broker(store, "ASYNC_FLUSH", enableGrpc="true", grpcServerPort=str(grpc_port))
        try:
            endpoint, namesrv = f"{LOOPBACK}:{grpc_port}", f"{LOOPBACK}:{namesrv_port}"
            for topic in ("Send5", "Send4", "Drain5", "Drain4", "Latency5"):
                create_topic(port, topic)
            with Producer("grpc-perf-fill", namesrv, instance_name="grpc-perf-fill") as producer:
                fill(producer, "Drain5", args.drain * args.rounds)
                fill(producer, "Drain4", args.drain * args.rounds)
            for n in range(args.rounds):
                print(f"round {n + 1}", flush=True)
                for name, argv, requests_of in (
                    ("5.x send", [*five, endpoint, "Send5", "send", str(args.seconds)], None),
                    ("4.x send", [*four, namesrv, "Send4", "sync", str(args.seconds)], None),
                    (
                        "5.x send_async",
                        [*five, endpoint, "Send5", "send-async", str(args.seconds), str(IN_FLIGHT)],
                        None,
                    ),
                    ("4.x send_async", [*four, namesrv, "Send4", "async", str(args.seconds)], None),
                    (
                        "5.x receive",
                        [*five, endpoint, "Drain5", "drain", str(args.drain), f"perf5-{n}", str(RECEIVE_BATCH)],
                        None,
                    ),
                    ("4.x pull", [*four, namesrv, "Drain4", "pull", str(args.drain)], args.drain),
                ):
                    result, broker_cpu = measured(proc.pid, argv)
                    if isinstance(result, dict):
                        rate, requests = result["msgs_per_s"], result["requests"]
                    else:  # a 4.x figure: msgs/s; a send is a request, a pull drain's requests unknown
                        rate, requests = result, (None if requests_of else result * args.seconds)
                    line = f"  {name:16s} {rate:10,.0f} msgs/s"
                    if requests:
                        line += f"   broker {broker_cpu * 1e6 / requests:7.1f} us CPU/request"
                    print(line, flush=True)
                open_loop(proc.pid, five, endpoint, args.rate, args.procs, args.seconds)
        finally:
            stop_process(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
