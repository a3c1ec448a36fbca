"""The Future a send returns: a ``concurrent.futures.Future`` that makes its Condition only when a
thread has to wait on it.

``send_async`` keeps many futures in flight and callers keep them: the standard Future allocates a
Condition (its dict, an RLock, a deque of waiters) for each, which the loop thread then notifies
although nobody waits, and which the garbage collector walks for as long as the future lives
(measured: a third of the client's time in ``perf/bench_client.py``'s send_async run went to
collections). Here a future completed before anyone waited never has one; ``result()``,
``exception()``, ``cancel()``, ``concurrent.futures.wait`` and ``as_completed`` make it on first use.

Whether the Condition exists and the state changes are decided under one module lock, so a thread
that starts waiting either sees the result already set or is notified.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED, LOGGER, PENDING
from typing import Any

__all__ = ["LightFuture"]

_DONE = frozenset({CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED})
_lock = threading.Lock()
_NO_CALLBACKS = ()  # a finished future's: nothing is added to it any more


class LightFuture(Future[Any]):
    """A Future (the same API, ``isinstance(f, concurrent.futures.Future)``) without a Condition
    until a thread waits on it."""

    def __init__(self) -> None:  # no super().__init__(): it would make the Condition
        self._cond: threading.Condition | None = None
        self._state = PENDING
        self._result = None
        self._exception: BaseException | None = None
        self._waiter_list: list[Any] | None = None
        self._done_callbacks: list[Any] = []

    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        # only concurrent.futures.wait / as_completed put waiters here, holding the Condition
        waiters = self._waiter_list
        if waiters is None:
            waiters = self._waiter_list = []
        return waiters

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        cond = self._cond
        if cond is None:
            with _lock:
                if self._cond is None:
                    self._cond = threading.Condition()
                cond = self._cond
        return cond

    def done(self) -> bool:
        return self._state in _DONE

    # Once FINISHED a future stays so: its outcome is read without the Condition.
    def result(self, timeout: float | None = None) -> Any:
        if self._state == FINISHED and self._cond is None:
            if self._exception is not None:
                raise self._exception
            return self._result
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state == FINISHED and self._cond is None:
            return self._exception
        return super().exception(timeout)

    def add_done_callback(self, fn: Any) -> None:
        with _lock:
            cond = self._cond
            if cond is None and self._state not in _DONE:
                self._done_callbacks.append(fn)
                return
        if cond is not None:
            super().add_done_callback(fn)
            return
        try:
            fn(self)
        except Exception:
            LOGGER.exception("exception calling callback for %r", self)

    def set_result(self, result: Any) -> None:
        if not self._complete(result, None):
            super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        if not self._complete(None, exception):
            super().set_exception(exception)

    def _invoke_callbacks(self) -> None:
        super()._invoke_callbacks()  # type: ignore[misc]
        # run once: a finished future holds its callbacks (and what they hold) no longer
        self._done_callbacks = _NO_CALLBACKS  # type: ignore[assignment]

    def _complete(self, result: Any, exception: BaseException | None) -> bool:
        """Finish without a Condition if there is none (so nobody waits); False: there is one."""
        with _lock:
            if self._cond is not None:
                return False
            state = self._state
            if state not in _DONE:
                self._result = result
                self._exception = exception
                self._state = FINISHED
        if state in _DONE:  # (repr takes the lock: raised outside it)
            raise InvalidStateError(f"{state}: {self!r}")
        self._invoke_callbacks()
        return True
