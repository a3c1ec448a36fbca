"""The interpreter's floor under ``Producer.send_async``: what perf/bench_client.py's async loop
costs with nothing sent (not part of the test suite).

    PYTHONPATH=src python perf/sdk_floor.py [--seconds 2] [--rounds 3]

The same window of 64 tokens in a ``queue.SimpleQueue``, a ``Message`` and a ``LightFuture`` per
send, its done callback handing the token back; the future completed by a second thread, as the
remoting loop thread completes answers. No encoding, no socket, no broker. Printed: msgs/s of

- ``bare``: that loop alone;
- ``uniq id``: plus the UNIQ_KEY every send sets (``create_uniq_id``, ``put_property``);
- ``one thread``: the bare loop completing its own futures (no second thread, no GIL hand-off).

Set beside what the compiled load generator gets from a broker (perf/sdk_vs_generator.py's
``c-gen-64``), these bound what any Python SDK with a Message and a Future per send can reach.
"""

from __future__ import annotations

import argparse
import queue
import statistics
import threading
import time
from collections.abc import Callable

from rmq.client import Message
from rmq.client.futures import LightFuture
from rmq.client.msg_id import create_uniq_id
from rmq.protocol.message import MessageProperty

BODY = b"x" * 1024
IN_FLIGHT = 64


def window() -> tuple[queue.SimpleQueue, Callable[[object], None]]:
    tokens: queue.SimpleQueue = queue.SimpleQueue()
    for _ in range(IN_FLIGHT):
        tokens.put(None)
    return tokens, lambda _future: tokens.put(None)


def two_threads(seconds: float, uniq_id: bool) -> float:
    tokens, release = window()
    handoff: queue.SimpleQueue = queue.SimpleQueue()

    def completer() -> None:
        while (future := handoff.get()) is not None:
            future.set_result(None)

    thread = threading.Thread(target=completer, name="sdk-floor-completer")
    thread.start()
    sent = 0
    started = time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        tokens.get()
        msg = Message("FloorTopic", BODY)
        if uniq_id:
            msg.put_property(MessageProperty.UNIQ_KEY, create_uniq_id())
        future = LightFuture()
        future.add_done_callback(release)
        handoff.put(future)
        sent += 1
    handoff.put(None)
    thread.join()
    return sent / (time.perf_counter() - started)


def one_thread(seconds: float) -> float:
    tokens, release = window()
    sent = 0
    started = time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        tokens.get()
        Message("FloorTopic", BODY)
        future = LightFuture()
        future.add_done_callback(release)
        future.set_result(None)
        sent += 1
    return sent / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, Callable[[], float]] = {
        "bare": lambda: two_threads(args.seconds, False),
        "uniq id": lambda: two_threads(args.seconds, True),
        "one thread": lambda: one_thread(args.seconds),
    }
    figures: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):  # interleaved
        for name, run in runs.items():
            figures[name].append(run())
    for name, values in figures.items():
        print(f"{name:10s} {statistics.median(values):10,.0f} msgs/s   {' '.join(f'{v:,.0f}' for v in values)}")


if __name__ == "__main__":
    main()
