"""Client SDK benchmarks: ``rmq.client`` against a real ``rmq-broker`` process
(ASYNC_FLUSH, temporary store, free ports), 1 KiB bodies, each figure the median of ``--repeat`` runs.

    PYTHONPATH=src python perf/bench_client.py [--seconds 3] [--repeat 3] [--drain 30000] [--rate 5000]

- producer msgs/s: ``send`` (sync), ``send_async`` with 64 in flight, ``send_batch`` of 32;
- consumer msgs/s: a PushConsumer, then a PullConsumer (``poll``), draining ``--drain`` messages
  stored beforehand, each run with a fresh group reading from the first offset, timed from the
  first message received (start-up, rebalance and the first pull left out);
- end-to-end latency p50/p99 at a steady ``--rate``: a paced producer stamps ``perf_counter_ns`` in
  the body, a PushConsumer in the same process records when its listener sees it; the achieved
  send rate is printed too.

Unlike perf/bench_broker.py, which measures the broker with a raw pipelined socket, these figures
include the Python client: building messages, ids, routing, futures, decoding, listener threads.
The async window is a ``queue.SimpleQueue`` of tokens (C code): a ``threading.Semaphore`` is Python
code and would weigh on the very thing measured.

Where the time goes (py-spy, send_async): per-send Python work of about 40 us split between the
calling thread and the remoting loop thread, which hand the GIL back and forth: ``_dispatch`` and
``_request`` (header dict, RemotingCommand) about a quarter, ``concurrent.futures.Future`` (its
Condition) about a tenth, topic validation and UNIQ_KEY ids a few percent each. The broker is not
the limit: perf/bench_broker.py takes well over 100,000 single 1 KiB sends/s from a raw socket.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import queue
import statistics
import threading
import time

from bench_broker import QUEUES, create_topic, median_of, running_broker

from rmq.client import Message, Producer, PullConsumer, PushConsumer

BODY_SIZE = 1024
BODY = b"x" * BODY_SIZE
BATCH = 32
IN_FLIGHT = 64
# Send timestamps are this many ASCII digits at the start of a latency body.
STAMP_DIGITS = 20


def producer_rate(producer: Producer, topic: str, mode: str, seconds: float) -> float:
    """Messages/s acknowledged by the broker over ``seconds`` of sends of one ``mode``."""
    sent = 0
    started = time.perf_counter()
    deadline = started + seconds
    if mode == "sync":
        while time.perf_counter() < deadline:
            producer.send(Message(topic, BODY))
            sent += 1
    elif mode == "batch":
        while time.perf_counter() < deadline:
            producer.send_batch([Message(topic, BODY) for _ in range(BATCH)])
            sent += BATCH
    else:
        tokens: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(IN_FLIGHT):
            tokens.put(None)
        futures = []
        release = tokens.put
        while time.perf_counter() < deadline:
            tokens.get()
            future = producer.send_async(Message(topic, BODY))
            future.add_done_callback(lambda _f: release(None))
            futures.append(future)
        for _ in range(IN_FLIGHT):  # the window drains: every send has its outcome
            tokens.get()
        failed = [f.exception() for f in futures if f.exception() is not None]
        if failed:
            raise RuntimeError(f"{len(failed)} async sends failed, first: {failed[0]!r}")
        sent = len(futures)
    return sent / (time.perf_counter() - started)


def fill(producer: Producer, topic: str, count: int) -> None:
    for start in range(0, count, BATCH):
        producer.send_batch([Message(topic, BODY) for _ in range(min(BATCH, count - start))])


def push_drain_rate(namesrv: str, topic: str, group: str, count: int) -> float:
    """Messages/s for a PushConsumer with default settings to consume ``count`` stored messages."""
    return push_drain(namesrv, topic, group, count)[0]


def pull_drain_rate(namesrv: str, topic: str, group: str, count: int) -> float:
    """Messages/s for a PullConsumer polling ``count`` stored messages."""
    return pull_drain(namesrv, topic, group, count)[0]


def _drain_figures(first: tuple[float, float], after_first: int) -> tuple[float, float]:
    """(msgs/s, process CPU us per message) from the first message received (``first``: wall and
    CPU clocks then) to now: the consumer's start-up, rebalance and first pull are left out, which
    would otherwise weigh as much as the drain itself."""
    elapsed = time.perf_counter() - first[0]
    cpu = time.process_time() - first[1]
    return after_first / elapsed, cpu * 1e6 / after_first


def push_drain(namesrv: str, topic: str, group: str, count: int) -> tuple[float, float]:
    """(msgs/s, CPU us/msg) for a PushConsumer with default settings (a listener call per message)
    consuming ``count`` stored messages, timed from the first one."""
    counter = itertools.count(1)
    done = threading.Event()
    first: list[tuple[float, float]] = []

    def listener(msgs) -> None:
        if not first:
            first.append((time.perf_counter(), time.process_time()))
        for _ in msgs:
            if next(counter) == count:
                done.set()

    consumer = PushConsumer(group, namesrv, consume_from_where="FIRST_OFFSET", instance_name=group)
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    with consumer:
        if not done.wait(300):
            raise RuntimeError(f"push consumer {group} got fewer than {count} messages in 300 s")
        figures = _drain_figures(first[0], count - 1)
    return figures


def pull_drain(namesrv: str, topic: str, group: str, count: int) -> tuple[float, float]:
    """(msgs/s, CPU us/msg) for a PullConsumer polling ``count`` stored messages, timed from the
    first poll that returned some (those are not counted)."""
    got = skipped = 0
    first = (0.0, 0.0)
    consumer = PullConsumer(group, namesrv, consume_from_where="FIRST_OFFSET", instance_name=group)
    consumer.subscribe(topic, "*")
    with consumer:
        deadline = time.perf_counter() + 300
        while got < count:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"pull consumer {group} got {got} of {count} messages in 300 s")
            got += len(consumer.poll(1.0))
            if not skipped and got:
                first, skipped = (time.perf_counter(), time.process_time()), got
        figures = _drain_figures(first, got - skipped)
    return figures


def latency_run(
    producer: Producer, namesrv: str, topic: str, group: str, rate: float, seconds: float
) -> tuple[float, float, float]:
    """(p50 ms, p99 ms, achieved send rate) for sends paced at ``rate``/s for ``seconds``."""
    latencies: list[int] = []
    record = latencies.append
    warm = threading.Event()

    def listener(msgs) -> None:
        now = time.perf_counter_ns()
        for msg in msgs:
            if msg.body.startswith(b"warm"):
                warm.set()
            else:
                record(now - int(msg.body[:STAMP_DIGITS]))

    consumer = PushConsumer(group, namesrv, instance_name=group)
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    pad = b"x" * (BODY_SIZE - STAMP_DIGITS)
    with consumer:
        # the consumer owns every queue and its pulls are parked on the broker before the clock starts
        for _ in range(QUEUES):
            producer.send(Message(topic, b"warm"))
        if not warm.wait(30):
            raise RuntimeError("the latency consumer never got its warm-up message")
        time.sleep(0.5)
        sent = 0
        total = int(rate * seconds)
        started = time.perf_counter()
        while sent < total:
            due = min(total, int((time.perf_counter() - started) * rate) + 1)
            while sent < due:
                body = b"%0*d" % (STAMP_DIGITS, time.perf_counter_ns()) + pad
                producer.send_async(Message(topic, body))
                sent += 1
            time.sleep(0.001)
        achieved = sent / (time.perf_counter() - started)
        deadline = time.monotonic() + 30
        while len(latencies) < total and time.monotonic() < deadline:
            time.sleep(0.05)
    if len(latencies) < total:
        raise RuntimeError(f"latency consumer got {len(latencies)} of {total} messages")
    ordered = sorted(latencies)
    p50, p99 = ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.99)]
    return p50 / 1e6, p99 / 1e6, achieved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one producer or latency run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (the median is printed)")
    parser.add_argument("--drain", type=int, default=30000, help="messages a consumer run drains")
    parser.add_argument("--rate", type=float, default=5000, help="messages/s of the latency runs")
    args = parser.parse_args()
    # the consumers' "no route yet" for their %RETRY% topic at start is expected here
    logging.basicConfig(level=logging.ERROR)
    print(f"rmq.client, 1 KiB messages, ASYNC_FLUSH broker, median of {args.repeat}", flush=True)
    with running_broker("ASYNC_FLUSH") as (port, namesrv_port):
        namesrv = f"127.0.0.1:{namesrv_port}"
        with Producer("bench-client-p", namesrv, instance_name="bench-p") as producer:
            for mode, label in (
                ("sync", "send (sync)"),
                ("async", f"send_async, {IN_FLIGHT} in flight"),
                ("batch", f"send_batch of {BATCH}"),
            ):
                topic = f"BenchSend_{mode}"
                create_topic(port, topic)
                producer.send(Message(topic, b"route warm-up"))
                rate = median_of(args.repeat, producer_rate, producer, topic, mode, args.seconds)
                print(f"producer {label:27s} {rate:10,.0f} msgs/s", flush=True)

            create_topic(port, "BenchDrain")
            fill(producer, "BenchDrain", args.drain)
            runs = itertools.count()
            rate = median_of(
                args.repeat, lambda: push_drain_rate(namesrv, "BenchDrain", f"bench-push-{next(runs)}", args.drain)
            )
            print(f"consumer PushConsumer drain {args.drain:<10,d}  {rate:10,.0f} msgs/s", flush=True)
            rate = median_of(
                args.repeat, lambda: pull_drain_rate(namesrv, "BenchDrain", f"bench-pull-{next(runs)}", args.drain)
            )
            print(f"consumer PullConsumer poll  {args.drain:<10,d}  {rate:10,.0f} msgs/s", flush=True)

            results = []
            for run in range(args.repeat):
                topic = f"BenchLatency_{run}"
                create_topic(port, topic)
                results.append(latency_run(producer, namesrv, topic, f"bench-latency-{run}", args.rate, args.seconds))
            p50, p99, achieved = (statistics.median(r[i] for r in results) for i in range(3))
            print(
                f"end-to-end latency at {args.rate:,.0f} msgs/s: p50 {p50:.2f} ms, p99 {p99:.2f} ms "
                f"(achieved {achieved:,.0f} msgs/s sent)",
                flush=True,
            )


if __name__ == "__main__":
    main()
