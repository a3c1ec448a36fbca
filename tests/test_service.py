"""The scheduler thread: periodic jobs, jobs brought forward, cancelled jobs, a job that fails."""

from __future__ import annotations

import threading

from rmq._service import Scheduler
from tests.helpers import wait_until


def test_periodic_run_soon_cancel_and_a_failing_job():
    scheduler = Scheduler("rmq-test-timer")
    runs: list[str] = []
    ran = threading.Event()

    def periodic() -> None:
        runs.append("p")

    def failing() -> None:
        runs.append("f")
        ran.set()
        raise RuntimeError("logged, not fatal")

    periodic_timer = scheduler.schedule_periodic(0.05, periodic, initial_delay=0)
    scheduler.schedule_periodic(10.0, failing)
    scheduler.start()
    try:
        wait_until(lambda: runs.count("p") >= 3, 10, "three periodic runs")
        scheduler.run_soon(failing)  # brought forward from 10 s
        assert ran.wait(10)
        periodic_timer.cancel()
        # jobs run one at a time in due order: once these ran, so would have every run due before them
        drained = threading.Event()
        scheduler.run_soon(drained.set)
        assert drained.wait(10)
        count = runs.count("p")
        four_periods_later = threading.Event()
        scheduler.call_later(0.2, four_periods_later.set)
        assert four_periods_later.wait(10)
        assert runs.count("p") == count
    finally:
        scheduler.shutdown()
