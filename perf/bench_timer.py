"""Timed messages at scale (not part of the test suite): python perf/bench_timer.py [--messages N]

A broker (in this process, as ``rmq-broker`` puts it together, embedded name server on free ports)
takes N timed messages (default 1,000,000), due at random times from 10 minutes to 3 days ahead,
through the send path's own steps (``TimerMessageStore.redirect``, then the store's put), and files
them into the timing wheel. Printed: the process's resident memory before and once all are filed,
split into anonymous memory (the heap: what an in-memory heap of the messages would grow) and
file-backed pages (the CommitLog and timer log mappings, which the kernel may drop), then the time
a restart takes to rebuild the wheel and the memory after it. Memory is not timing: one run says it.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time

from bench_broker import free_port

from rmq._clock import now_ms
from rmq.broker.config import load_broker_config
from rmq.cli.broker import BrokerStartup
from rmq.protocol.message import MessageProperty, encode_properties

TOPIC = "BenchTimer"
BODY = b"x" * 100


def memory() -> dict[str, int]:
    """RssAnon and RssFile of this process, in MiB."""
    found = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile", "VmRSS"):
                found[key] = int(value.split()[0]) // 1024
    return found


def start(root: str, port: int, namesrv_port: int) -> BrokerStartup:
    settings = {
        "brokerIP1": "127.0.0.1",
        "listenPort": str(port),
        "namesrvListenPort": str(namesrv_port),
        "haListenPort": str(free_port()),
        "enableGrpc": "false",  # no 5.x endpoint to measure here, nor a fixed port to collide on
        "storePathRootDir": root,
    }
    return BrokerStartup(*load_broker_config(None, settings)).start()


def wait_filed(timer, count: int, timeout: float) -> float:
    t = time.perf_counter()
    deadline = time.monotonic() + timeout
    while timer.enqueue_offset < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"filed {timer.enqueue_offset} of {count} in {timeout} s")
        time.sleep(0.05)
    return time.perf_counter() - t


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--dir", default=None, help="where the store goes (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="rmq-bench-timer-", dir=args.dir)
    port, namesrv_port = free_port(), free_port()
    figures: dict[str, object] = {"messages": args.messages}
    try:
        startup = start(root, port, namesrv_port)
        controller = startup.controller
        assert controller is not None
        figures["memory_before_mib"] = memory()
        timer, store = controller.timer_message_store, controller.store
        rng = random.Random(13)
        t = time.perf_counter()
        for i in range(args.messages):
            delay_ms = rng.randrange(600_000, 3 * 24 * 3600 * 1000 - 60_000)
            props = encode_properties(
                {
                    MessageProperty.UNIQ_KEY: f"7F0000010000BEEF{i:016X}",
                    MessageProperty.TIMER_DELIVER_MS: str(now_ms() + delay_ms),
                }
            ).decode()
            topic, queue_id, props = timer.redirect(TOPIC, i & 3, props)
            result = store.put_message(topic, queue_id, BODY, props.encode())
            assert result.ok, result.status
        figures["put_per_s"] = round(args.messages / (time.perf_counter() - t))
        wait_filed(timer, args.messages, 600)
        figures["filed_per_s"] = round(args.messages / (time.perf_counter() - t))
        figures["memory_filed_mib"] = memory()
        startup.shutdown()

        t = time.perf_counter()
        startup = start(root, port, namesrv_port)
        assert startup.controller is not None
        figures["restart_s"] = round(time.perf_counter() - t, 2)
        figures["memory_after_restart_mib"] = memory()
        startup.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
