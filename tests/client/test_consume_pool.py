"""ConsumePool, the push consumer's listener threads: every task runs, on at most its threads,
a failing task is logged and the next runs, shutdown drops what had not started."""

from __future__ import annotations

import logging
import threading

import pytest

from rmq.client.consume_pool import ConsumePool


def test_runs_every_task_on_at_most_its_threads():
    pool = ConsumePool(3, "rmq-consume-g")
    done = threading.Event()
    names: set[str] = set()
    seen = []
    gate = threading.Event()

    def task(i: int) -> None:
        gate.wait(5)  # all are busy: the ones queued behind them start more threads
        names.add(threading.current_thread().name)
        seen.append(i)
        if len(seen) == 50:
            done.set()

    for i in range(50):
        pool.submit(task, i)
    gate.set()
    assert done.wait(10)
    pool.shutdown(5)
    assert sorted(seen) == list(range(50))
    assert names == {"rmq-consume-g_0", "rmq-consume-g_1", "rmq-consume-g_2"}


def test_a_failing_task_is_logged_and_the_next_runs(caplog):
    pool = ConsumePool(1, "p")
    ran = threading.Event()

    def fail() -> None:
        raise ValueError("listener bug")

    with caplog.at_level(logging.ERROR, logger="rmq.client"):
        pool.submit(fail)
        pool.submit(ran.set)
        assert ran.wait(5)
    pool.shutdown(5)
    assert "listener bug" in caplog.text


def test_shutdown_drops_tasks_not_started_and_refuses_new_ones():
    pool = ConsumePool(1, "p")
    started, release = threading.Event(), threading.Event()
    ran = []
    pool.submit(lambda: (started.set(), release.wait(5)))
    assert started.wait(5)
    pool.submit(ran.append, "late")
    threading.Timer(0.05, release.set).start()
    pool.shutdown(5)
    assert ran == []
    assert not any(t.name.startswith("p_") and t.is_alive() for t in threading.enumerate())
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(ran.append, "after")


def test_shutdown_while_a_thread_is_being_started(monkeypatch):
    # the listener's first message and the consumer's shutdown at once (a rebalance test met it)
    starting = threading.Event()
    real_start = threading.Thread.start

    def slow_start(thread: threading.Thread) -> None:
        if thread.name.startswith("slow_"):
            starting.set()
            threading.Event().wait(0.3)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", slow_start)
    pool = ConsumePool(1, "slow")
    submitter = threading.Thread(target=pool.submit, args=(lambda: None,))
    submitter.start()
    assert starting.wait(5)
    pool.shutdown(5)  # raised "cannot join thread before it is started"
    submitter.join(5)
    assert not any(t.name.startswith("slow_") and t.is_alive() for t in threading.enumerate())


def test_no_task_is_stranded_when_its_thread_goes_to_sleep():
    # A task queued while the only awake thread ends its last one wakes nobody: that thread must
    # find it before it sleeps. Each task is queued the moment the one before it is done, when its
    # thread is on its way to sleep.
    pool = ConsumePool(4, "race")
    for i in range(2000):
        ran = threading.Event()
        pool.submit(ran.set)
        assert ran.wait(5), f"task {i} was never run"
    pool.shutdown(5)


def test_a_task_behind_a_stuck_one_runs_on_another_thread():
    # The thread awake in the first task was counted on to take the second when done; stuck, it
    # held the second up while 19 threads more were allowed (RocketMQ's executor runs it at once).
    pool = ConsumePool(20, "stuck")
    started, release, done = threading.Event(), threading.Event(), threading.Event()
    pool.submit(lambda: (started.set(), release.wait(10)))
    try:
        assert started.wait(5)
        pool.submit(done.set)
        assert done.wait(5), "the second task waited for the stuck first one"
    finally:
        release.set()
        pool.shutdown(5)
    assert not any(t.name.startswith("stuck_") and t.is_alive() for t in threading.enumerate())
