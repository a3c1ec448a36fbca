"""Latency fault tolerance with a fake clock."""

from __future__ import annotations

from rmq.client.fault import LatencyFaultTolerance, not_available_duration_ms


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_durations_follow_the_spec_table():
    assert not_available_duration_ms(10) == 0
    assert not_available_duration_ms(120) == 0
    assert not_available_duration_ms(551) == 3_000
    assert not_available_duration_ms(1_000) == 60_000
    assert not_available_duration_ms(20_000) == 600_000


def test_slow_broker_is_avoided_for_a_while_then_back():
    clock = Clock()
    fault = LatencyFaultTolerance(clock=clock)
    fault.update("broker-a", 600)
    fault.update("broker-b", 20)
    assert not fault.is_available("broker-a")
    assert fault.is_available("broker-b")
    assert fault.is_available("never-seen")
    clock.now += 3.01
    assert fault.is_available("broker-a")


def test_failed_send_isolates_the_broker():
    clock = Clock()
    fault = LatencyFaultTolerance(clock=clock)
    fault.update("broker-a", 5, isolation=True)
    clock.now += 60
    assert not fault.is_available("broker-a")


def test_pick_one_at_least_prefers_the_better_half():
    clock = Clock()
    fault = LatencyFaultTolerance(clock=clock)
    assert fault.pick_one_at_least() is None
    fault.update("slow", 2_500)
    assert fault.pick_one_at_least() == "slow"
    fault.update("slower", 16_000)
    fault.update("ok", 600)
    fault.update("worst", 30_000, isolation=True)
    picks = {fault.pick_one_at_least() for _ in range(10)}
    assert picks == {"ok", "slow"}


def test_a_send_waiting_longer_than_550_ms_sets_its_broker_aside_until_it_ends():
    clock = Clock()
    fault = LatencyFaultTolerance(clock=clock)
    first = fault.send_started("broker-a")
    clock.now += 0.3
    second = fault.send_started("broker-a")
    assert fault.is_available("broker-a")  # waiting, but not yet for long
    clock.now += 0.3
    assert not fault.is_available("broker-a")  # the first has waited 600 ms: a hung broker looks so
    assert fault.is_available("broker-b")
    fault.send_ended("broker-a", first)
    assert fault.is_available("broker-a")  # the one left has waited 300 ms
    clock.now += 0.3
    assert not fault.is_available("broker-a")
    fault.send_ended("broker-a", second)
    assert fault.is_available("broker-a")
    fault.send_ended("broker-a", second)  # twice is harmless


def test_send_done_ends_the_send_and_records_its_latency():
    clock = Clock()
    fault = LatencyFaultTolerance(clock=clock)
    token = fault.send_started("broker-a")
    clock.now += 0.6
    assert not fault.is_available("broker-a")  # still waiting after 600 ms
    fault.send_done("broker-a", token, 100)
    assert fault.is_available("broker-a")  # ended, and answered fast enough
    failed = fault.send_started("broker-a")
    fault.send_done("broker-a", failed, 5, isolation=True)
    clock.now += 60
    assert not fault.is_available("broker-a")  # a failure isolates it
