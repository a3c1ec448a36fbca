"""LightFuture, the Future sends return: the concurrent.futures contract, whether the outcome comes
before or after a thread starts waiting, with a Condition made only for those that wait."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import threading
import weakref

import pytest

from rmq.client.futures import LightFuture


def test_is_a_future_completed_before_anyone_waits():
    future = LightFuture()
    seen = []
    future.add_done_callback(seen.append)
    assert not future.done()
    future.set_result(7)
    assert future.done() and future.result() == 7 and future.exception() is None
    assert seen == [future]
    assert isinstance(future, concurrent.futures.Future)
    assert future._cond is None  # nobody waited: no Condition was made


def test_a_callback_added_after_completion_runs_at_once():
    future = LightFuture()
    future.set_exception(ValueError("refused"))
    seen = []
    future.add_done_callback(seen.append)
    assert seen == [future]
    with pytest.raises(ValueError, match="refused"):
        future.result()
    assert isinstance(future.exception(), ValueError)


def test_a_second_outcome_is_refused():
    future = LightFuture()
    future.set_result(1)
    with pytest.raises(concurrent.futures.InvalidStateError):
        future.set_result(2)
    with pytest.raises(concurrent.futures.InvalidStateError):
        future.set_exception(ValueError())
    assert future.result() == 1


@pytest.mark.parametrize("outcome", ["result", "exception"])
def test_a_waiting_thread_is_woken(outcome):
    future = LightFuture()
    got = []
    started = threading.Event()

    def wait() -> None:
        started.set()
        try:
            got.append(future.result(timeout=10))
        except ValueError as exc:
            got.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    started.wait(5)
    while future._cond is None or not future._cond._waiters:  # the waiter is inside wait()
        waiter.join(0.001)
    if outcome == "result":
        future.set_result("ok")
    else:
        future.set_exception(ValueError("no"))
    waiter.join(10)
    assert not waiter.is_alive()
    assert got == ["ok"] if outcome == "result" else isinstance(got[0], ValueError)


def test_times_out_like_a_future():
    with pytest.raises(concurrent.futures.TimeoutError):
        LightFuture().result(timeout=0.01)


def test_wait_as_completed_and_cancel():
    done, pending = LightFuture(), LightFuture()
    done.set_result(1)
    finished, not_done = concurrent.futures.wait([done, pending], timeout=0.01)
    assert finished == {done} and not_done == {pending}
    threading.Timer(0.01, pending.set_result, (2,)).start()
    assert sorted(f.result() for f in concurrent.futures.as_completed([done, pending], timeout=10)) == [1, 2]
    cancelled = LightFuture()
    assert cancelled.cancel() and cancelled.cancelled()
    with pytest.raises(concurrent.futures.CancelledError):
        cancelled.result()


def test_awaitable_through_asyncio():
    async def main() -> int:
        future = LightFuture()
        asyncio.get_running_loop().call_later(0.01, future.set_result, 5)
        return await asyncio.wrap_future(future)

    assert asyncio.run(main()) == 5


def test_a_finished_future_lets_its_callbacks_go():
    # send_async callers keep their futures: what a callback captured must not live as long
    class Token:
        pass

    token = Token()
    ref = weakref.ref(token)
    future = LightFuture()
    future.add_done_callback(lambda _f, t=token: None)
    del token
    future.set_result(1)
    gc.collect()
    assert ref() is None
