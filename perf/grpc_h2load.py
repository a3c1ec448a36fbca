"""The broker's gRPC SendMessage under a C load generator: nghttp2's ``h2load`` (Debian package
nghttp2-client) sends one prepared SendMessageRequest over and over, so the figure is the broker's
cost, not a Python client's (issue 24, acceptance 5; equal tooling: the 4.x figures come from the
compiled generator, ``rmq-perf``). Not part of the test suite.

    PYTHONPATH=src python perf/grpc_h2load.py [--rates 1000,2500,5000] [--seconds 10] [--in-flight 16]

For each rate: an open loop at ``--rate`` requests/s over one HTTP/2 connection with at most
``--in-flight`` streams (h2load ``--rps``, ``-m``), then the latency percentiles of the requests
h2load logged (from its per-request log: time to the response's end), the rate reached, the gRPC
CommitLog bytes stored per request (a send that was refused stores nothing: the gRPC status is in
trailers h2load does not log), and the broker's process CPU per request (utime + stime over the
run / requests).
Then a closed loop (``-m`` in flight, as fast as it answers) for the maximum rate.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_broker import create_topic, max_phy_offset, start_broker, stop_process  # noqa: E402
from bench_flush_inline import cpu_seconds  # noqa: E402

from rmq.perf.procs import free_port  # noqa: E402
from rmq.protocol.grpc.v2 import definition_pb2, service_pb2  # noqa: E402

TOPIC = "H2LoadTopic"
PATH = "/apache.rocketmq.v2.MessagingService/SendMessage"


def request_frame(size: int) -> bytes:
    """One gRPC message frame (no compression flag, big-endian length) of a SendMessageRequest as
    the 5.x clients build it: a NORMAL message with an id, born time and host."""
    message = definition_pb2.Message(
        topic=definition_pb2.Resource(name=TOPIC),
        body=b"x" * size,
        system_properties=definition_pb2.SystemProperties(
            message_id="01H2LOAD0000000000000000000000",
            message_type=definition_pb2.NORMAL,
            body_encoding=definition_pb2.IDENTITY,
            born_host="127.0.0.1",
        ),
    )
    message.system_properties.born_timestamp.GetCurrentTime()
    payload = service_pb2.SendMessageRequest(messages=[message]).SerializeToString()
    return struct.pack(">BI", 0, len(payload)) + payload


def h2load(port: int, body: Path, log: Path, seconds: int, in_flight: int, rate: int | None) -> str:
    args = [
        "h2load", "-c", "1", "-m", str(in_flight), "-D", str(int(seconds)), "-d", str(body), "--log-file", str(log),
        "-H", "content-type: application/grpc", "-H", "te: trailers", "-H", "x-mq-client-id: h2load@1",
        "-H", "x-mq-language: PYTHON", "-H", "x-mq-protocol: v2", "-H", "x-mq-client-version: 5.1.2",
        f"http://127.0.0.1:{port}{PATH}",
    ]  # fmt: skip
    if rate:
        args[1:1] = ["--rps", str(rate)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=seconds + 60)
    return done.stdout + done.stderr


def percentiles(log: Path) -> tuple[int, list[float]]:
    """(requests logged, [p50, p99, p999] in ms) from h2load's log: start, status, duration µs."""
    if not log.exists():
        return 0, [0.0, 0.0, 0.0]
    durations = sorted(int(line.split()[2]) for line in log.read_text().splitlines() if line.strip())
    if not durations:
        return 0, [0.0, 0.0, 0.0]
    pick = [durations[min(len(durations) - 1, int(q * len(durations)))] / 1000 for q in (0.5, 0.99, 0.999)]
    return len(durations), pick


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="1000,2500,5000")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    if shutil.which("h2load") is None:
        sys.exit("h2load not found: apt-get install nghttp2-client")
    work = Path(tempfile.mkdtemp(prefix="rmq-h2load-"))
    grpc_port = free_port()
    proc, port, _ = start_broker(str(work / "store"), "ASYNC_FLUSH", enableGrpc="true", grpcServerPort=str(grpc_port))
    try:
        create_topic(port, TOPIC)
        body = work / "request.bin"
        body.write_bytes(request_frame(args.size))
        h2load(grpc_port, body, work / "warm.log", 2, args.in_flight, None)
        for rate in [int(r) for r in args.rates.split(",")] + [0]:
            log = work / f"run-{rate}.log"
            before, stored = cpu_seconds(proc.pid), max_phy_offset(port)
            out = h2load(grpc_port, body, log, args.seconds, args.in_flight, rate or None)
            cpu, stored = cpu_seconds(proc.pid) - before, max_phy_offset(port) - stored
            count, (p50, p99, p999) = percentiles(log)
            if not count:
                print(out, flush=True)
            failed = next((line.strip() for line in out.splitlines() if line.startswith("requests:")), "")
            label = f"open loop {rate:,}/s" if rate else f"closed loop, {args.in_flight} in flight"
            print(
                f"{label:>28}: {count / args.seconds:8,.0f} req/s  p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  "
                f"p999 {p999:7.2f} ms  broker {cpu / max(count, 1) * 1e6:6.1f} us CPU/request, "
                f"{stored / max(count, 1):,.0f} B stored/request  ({failed})",
                flush=True,
            )
    finally:
        stop_process(proc)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(HERE.parent / "src"))
    main()
