"""The wall clock in RocketMQ's unit: every timestamp on the wire and on disk is epoch milliseconds."""

from __future__ import annotations

import time


def now_ms() -> int:
    """Wall-clock milliseconds (files, wire fields, expiry checks)."""
    return int(time.time() * 1000)
