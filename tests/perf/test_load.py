"""The load generator's open loop: latency runs from when a request was due, not from when a
stalled sender got round to sending it (no coordinated omission). Each test runs on both engines,
the compiled loop and its Python twin."""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import time

import pytest

from rmq.perf.load import ENGINE_PYTHON, ENGINES, IntervalReport, LoadSpec, _drive, make_driver, run_load
from tests.helpers import LOOPBACK

TOPIC = "OpenLoopTopic"


@pytest.fixture(params=ENGINES)
def engine(request) -> str:
    return request.param


def run(cluster, engine: str, rate: float, in_flight: int = 1) -> tuple[list[IntervalReport], IntervalReport]:
    spec = LoadSpec(
        "rmq", LOOPBACK, cluster.broker_port, TOPIC, size=100, in_flight=in_flight, rate=rate, duration=2, engine=engine
    )
    intervals: list[IntervalReport] = []
    total = run_load(spec, lambda report, t_start, t_end: intervals.append(report))
    return intervals, total


def test_a_rate_the_broker_cannot_meet_shows_latency_growing_with_the_backlog(cluster, engine):
    cluster.create_topic(TOPIC)
    # one request in flight cannot come near 200,000 msgs/s: each answer comes later after its due time
    intervals, total = run(cluster, engine, rate=200_000)
    first, second = (r.histogram.percentile(50) for r in intervals)
    assert total.acked < 200_000, "the broker met the rate: the test needs a rate it cannot meet"
    # request k is due at k / rate; sent at (k / capacity): half a second behind after half a second
    assert first > 200_000 and second > first + 500_000, (first, second)
    # that wait was for the window (the broker's answers), not for the generator: not a send delay
    assert total.send_delay.percentile(50) < 50_000, total.send_delay.percentile(50)


def test_a_rate_the_broker_meets_is_held_with_latencies_of_a_round_trip(cluster, engine):
    cluster.create_topic(TOPIC)
    # 4 in flight: room to catch up after a stall of a machine busy with other work
    intervals, total = run(cluster, engine, rate=200, in_flight=4)
    # every request due in the 2 s was sent (a stall of the machine may push a few past the end)
    acked = [r.acked for r in intervals]
    assert 390 <= total.acked <= 400 and all(140 <= n <= 260 for n in acked), acked
    assert total.histogram.percentile(50) < 100_000, total.histogram.percentile(50)


def test_a_generator_the_machine_does_not_run_says_how_late_it_woke(cluster, engine):
    cluster.create_topic(TOPIC)
    # room in flight for every request due while it is frozen: none waits for the window
    spec = LoadSpec(
        "rmq", LOOPBACK, cluster.broker_port, TOPIC, size=100, in_flight=256, rate=500, duration=2, engine=engine
    )

    def freeze_the_worker() -> None:  # as a machine busy with other work would, for 400 ms
        time.sleep(0.2)
        (worker,) = multiprocessing.active_children()
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGSTOP)
        time.sleep(0.4)
        os.kill(worker.pid, signal.SIGCONT)

    intervals: list[IntervalReport] = []
    total = run_load(spec, lambda report, t_start, t_end: intervals.append(report), freeze_the_worker)
    # the requests due while it was frozen waited for it: the latency tail is the generator's own
    assert total.histogram.max_us() >= 300_000 and total.wake_late_max_s >= 0.3, total.wake_late_max_s
    # and its send delay tells it apart from the broker's: requests went out that late after they
    # could, the latency's p99 is the send delay's (the broker answered each within 50 ms)
    p99, sent_p99 = total.histogram.percentile(99), total.send_delay.percentile(99)
    assert total.send_delay.max_us() >= 300_000 and abs(p99 - sent_p99) < 50_000, (p99, sent_p99)
    # the second interval ran undisturbed: its worst wake-up was far below the stall
    assert intervals[1].wake_late_max_s < 0.2, [r.wake_late_max_s for r in intervals]


def test_a_rate_profile_steps_the_offered_rate_at_its_interval(cluster, engine):
    cluster.create_topic(TOPIC)
    spec = LoadSpec(
        "rmq", LOOPBACK, cluster.broker_port, TOPIC, size=100, in_flight=8, rate=200, duration=3, engine=engine,
        profile=((200, 1), (600, 1), (200, 1)),
    )  # fmt: skip
    intervals: list[IntervalReport] = []
    total = run_load(spec, lambda report, t_start, t_end: intervals.append(report))
    # each second offers its step's rate; a stall of the machine may push a few into the next second
    acked = [r.acked for r in intervals]
    assert 980 <= total.acked <= 1000 and 150 <= acked[0] <= 250 and 520 <= acked[1] <= 680 and acked[2] <= 280, acked


def test_the_python_loop_drives_a_connection_numbered_past_1024(cluster):
    """select() refuses a descriptor numbered 1024 or more: a worker in a process holding many
    descriptors (a generator with many connections) must still wait for its answers."""
    cluster.create_topic(TOPIC)
    spec = LoadSpec(
        "rmq", LOOPBACK, cluster.broker_port, TOPIC, size=100, in_flight=4, duration=0.5, interval=0.5,
        engine=ENGINE_PYTHON,
    )  # fmt: skip
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        driver = make_driver(spec, 0)
        sock = driver.connect()
        assert sock.fileno() >= 1024
        reports: queue.Queue = queue.Queue()
        try:
            _drive(spec, 0, driver, sock, time.monotonic(), reports)
        finally:
            sock.close()
    finally:
        for fd in filler:
            os.close(fd)
    kind, _worker, (_index, sent, acked, failed, *_rest) = reports.get_nowait()
    assert kind == "interval" and sent > 0 and acked == sent and not failed, (sent, acked, failed)
