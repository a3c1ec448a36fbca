"""Where a SYNC_FLUSH send's round trip goes: per-stage medians for sends with 1 in flight against an
in-process broker (not part of the test suite).

    python perf/trace_sync_send.py [--sends 2000] [--big-files]

Stages: client send -> send handler entered -> handler returned (the put) -> the loop completes the
put once its flush round ended (the answer goes out) -> the client has the answer. The send
processor's methods are wrapped before the broker is built (handlers are bound at registration).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, for tests.helpers

import rmq.broker.processor.send as send_module

marks: dict[int, dict[str, float]] = {}


def trace_send_processor() -> None:
    processor = send_module.SendProcessor
    send_message, durable_callback = processor.send_message, processor._durable_callback

    def traced_send(self, channel, request):
        marks.setdefault(request.opaque, {})["enter"] = time.perf_counter()
        answer = send_message(self, channel, request)
        marks[request.opaque]["leave"] = time.perf_counter()
        return answer

    def traced_callback(self, channel, request, queue_id):
        inner = durable_callback(self, channel, request, queue_id)

        def on_durable(result):
            marks[request.opaque]["durable"] = time.perf_counter()
            inner(result)

        return on_durable

    processor.send_message = traced_send
    processor._durable_callback = traced_callback


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=2000)
    parser.add_argument("--big-files", action="store_true", help="default 1 GiB CommitLog and full-size index")
    args = parser.parse_args()
    trace_send_processor()
    from rmq.broker.config import load_broker_config
    from rmq.cli.broker import BrokerStartup
    from rmq.net import RemotingClient
    from tests.helpers import free_port
    from tests.helpers.requests import send_request

    sizes = (
        {}
        if args.big_files
        else {
            "mappedFileSizeCommitLog": str(4 << 20),
            "mappedFileSizeConsumeQueue": "60000",
            "maxHashSlotNum": "1024",
            "maxIndexNum": "4096",
        }
    )
    settings = {
        "brokerIP1": "127.0.0.1",
        "listenPort": str(free_port()),
        "namesrvListenPort": str(free_port()),
        "storePathRootDir": tempfile.mkdtemp(prefix="rmq-trace-"),
        "flushDiskType": "SYNC_FLUSH",
        **sizes,
    }
    startup = BrokerStartup(*load_broker_config(None, settings))
    controller = startup.start().controller
    try:
        with RemotingClient() as client:
            for _ in range(args.sends):
                request = send_request("Trace", b"x" * 1024)
                sent = time.perf_counter()
                client.invoke_sync(controller.broker_addr, request, 5.0)
                marks.setdefault(request.opaque, {}).update(sent=sent, got=time.perf_counter())
    finally:
        startup.shutdown()
    rows = [m for m in marks.values() if len(m) == 5][args.sends // 10 :]  # skip the warm-up tenth

    def median_us(a: str, b: str) -> float:
        return statistics.median((m[b] - m[a]) * 1e6 for m in rows)

    print(f"{len(rows)} SYNC_FLUSH sends, 1 KiB, 1 in flight; medians in microseconds")
    for label, a, b in (
        ("client send -> handler entered", "sent", "enter"),
        ("handler (the put)", "enter", "leave"),
        ("handler returned -> loop answers (flushed)", "leave", "durable"),
        ("loop answers -> client has it", "durable", "got"),
        ("whole round trip", "sent", "got"),
    ):
        print(f"  {label:42s} {median_us(a, b):7.0f}")


if __name__ == "__main__":
    main()
