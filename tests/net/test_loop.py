"""The event loop under a server: calls from other threads, timers in due order, periodic and
cancelled ones."""

from __future__ import annotations

import threading

from tests.helpers import wait_until


def test_timers_and_calls_from_other_threads(server):
    fired = []
    done = threading.Event()
    server.call_soon_threadsafe(lambda: fired.append(("soon", threading.current_thread().name)))
    handle = server.loop.schedule_periodic(0.02, lambda: fired.append("tick"), initial_delay=0)
    cancelled = []
    server.call_soon_threadsafe(lambda: server.call_later(0.01, cancelled.append, 1).cancel())
    # timers run in due order: once the 0.1 s one ran, the cancelled 0.01 s one would have
    server.call_soon_threadsafe(lambda: server.call_later(0.1, done.set))
    assert done.wait(10.0)
    wait_until(lambda: fired.count("tick") >= 3, 10, "three ticks of the periodic timer")
    handle.cancel()
    assert fired[0] == ("soon", server.loop.name)
    assert fired.count("tick") >= 3
    assert cancelled == []
