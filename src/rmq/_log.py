"""Logging that a flood cannot turn into a flood of log lines.

A peer that repeats a bad request (a forged registration, an unknown code, a malformed frame) must
not be able to fill the disk with identical lines or spend the loop formatting them. ``RateLimitedLog``
logs the first occurrence of a key at once and then at most one line per ``interval`` seconds for that
key, saying how many were left out since the last line. Keys are kept in a bounded table (the oldest
is forgotten first), so distinct keys chosen by a client cannot grow memory either.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable

# Seconds between two lines of one key.
DEFAULT_INTERVAL = 10.0
# Keys remembered at once; past it the least recently logged key is forgotten (and so may log again).
DEFAULT_MAX_KEYS = 1024


class RateLimitedLog:
    """``log(level, key, msg, *args)``: logged now if ``key`` was not logged in the last ``interval``
    seconds, else counted; the next line of that key says how many were suppressed. Thread-safe."""

    def __init__(self, logger: logging.Logger, interval: float = DEFAULT_INTERVAL, max_keys: int = DEFAULT_MAX_KEYS):
        self._logger = logger
        self.interval = interval
        self._max_keys = max_keys
        # key -> [time of its last line, occurrences suppressed since]
        self._keys: OrderedDict[Hashable, list[float]] = OrderedDict()
        self._lock = threading.Lock()
        #: lines left out, over every key (for tests and stats)
        self.suppressed = 0

    def log(self, level: int, key: Hashable, msg: str, *args: object, exc_info: bool | BaseException = False) -> bool:
        """True when the line was written, False when it was counted instead; ``exc_info`` as
        logging's (True: the exception being handled), on the lines written only."""
        now = time.monotonic()
        with self._lock:
            entry = self._keys.get(key)
            if entry is not None and now - entry[0] < self.interval:
                entry[1] += 1
                self.suppressed += 1
                return False
            left_out = int(entry[1]) if entry is not None else 0
            self._keys[key] = [now, 0]
            self._keys.move_to_end(key)
            while len(self._keys) > self._max_keys:
                self._keys.popitem(last=False)
        if left_out:
            msg = f"{msg} ({left_out} more like it in the last %.0f s not logged)"
            args = (*args, self.interval)
        self._logger.log(level, msg, *args, exc_info=exc_info)
        return True

    def warning(self, key: Hashable, msg: str, *args: object) -> bool:
        return self.log(logging.WARNING, key, msg, *args)

    def error(self, key: Hashable, msg: str, *args: object) -> bool:
        return self.log(logging.ERROR, key, msg, *args)

    def exception(self, key: Hashable, msg: str, *args: object) -> bool:
        """``error`` with the traceback of the exception being handled."""
        return self.log(logging.ERROR, key, msg, *args, exc_info=True)
