"""The scheduler thread: periodic jobs, jobs brought forward, cancelled jobs, a job that fails."""

from __future__ import annotations

import threading
import time

from rmq._service import Scheduler


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
        time.sleep(0.3)
        assert runs.count("p") >= 3
        scheduler.run_soon(failing)  # brought forward from 10 s
        assert ran.wait(2)
        periodic_timer.cancel()
        time.sleep(0.1)
        count = runs.count("p")
        time.sleep(0.2)
        assert runs.count("p") == count
    finally:
        scheduler.shutdown()
