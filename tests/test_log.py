"""rmq._log.RateLimitedLog: a repeated line is written once per interval, with the count left out."""

from __future__ import annotations

import logging

import pytest

from rmq._log import RateLimitedLog


def test_a_repeated_key_is_logged_once_per_interval_and_the_next_line_counts_the_rest(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [100.0]
    monkeypatch.setattr("rmq._log.time.monotonic", lambda: clock[0])
    limited = RateLimitedLog(logging.getLogger("rmq.test"), interval=10.0)
    with caplog.at_level(logging.WARNING, logger="rmq.test"):
        assert limited.warning("forged", "forged write from %s", "10.0.0.1")
        for _ in range(999):
            assert not limited.warning("forged", "forged write from %s", "10.0.0.1")
        assert limited.warning("other", "another error")
        clock[0] += 10.0
        assert limited.warning("forged", "forged write from %s", "10.0.0.1")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "forged write from 10.0.0.1",
        "another error",
        "forged write from 10.0.0.1 (999 more like it in the last 10 s not logged)",
    ]
    assert limited.suppressed == 999


def test_distinct_keys_beyond_the_bound_forget_the_oldest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rmq._log.time.monotonic", lambda: 5.0)
    limited = RateLimitedLog(logging.getLogger("rmq.test"), interval=10.0, max_keys=3)
    for key in range(100):
        assert limited.warning(key, "line %d", key)
    assert len(limited._keys) == 3
    assert limited.warning(0, "line 0")  # forgotten, so written again


def test_an_exception_line_carries_its_traceback_once(caplog: pytest.LogCaptureFixture) -> None:
    limited = RateLimitedLog(logging.getLogger("rmq.test"), interval=10.0)
    with caplog.at_level(logging.ERROR, logger="rmq.test"):
        for _ in range(3):
            try:
                raise RecursionError("deep")
            except RecursionError:
                limited.exception("failed", "processor failed")
    assert [r.exc_info[0] for r in caplog.records if r.exc_info] == [RecursionError]
    assert len(caplog.records) == 1
