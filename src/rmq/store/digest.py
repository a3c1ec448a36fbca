"""Digests of the CommitLog in fixed ranges, to prove a replica holds the same bytes as its master.

Ranges are aligned on multiples of ``range_size`` from offset 0, so two stores cut the same ranges
whatever files they hold; each range is hashed over ``[max(start, range start), min(end, range
end))`` with xxh3-128 (``xxhash``: ~10 GB/s here, far faster than the disk that wrote the bytes).
The bytes are read zero-copy from the mapped files. Hashing a large log takes a while: callers run
it off the event loop (the broker on a worker of its own, ``rmq-broker-digest``), and bound each call
(``max_ranges``, ``max_bytes``), continuing from ``next_range(...)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import xxhash

from rmq.protocol.replica import MAX_RANGES, RangeDigest

if TYPE_CHECKING:
    from rmq.store.message_store import MessageStore


def commit_log_digests(
    store: MessageStore,
    start: int,
    end: int,
    range_size: int,
    *,
    max_ranges: int | None = None,
    max_bytes: int | None = None,
) -> list[RangeDigest]:
    """Digests of ``[start, end)`` of ``store``'s CommitLog (clamped to what it holds), one per
    ``range_size``-aligned range: the first ``max_ranges`` ranges at most, and no range begun once
    ``max_bytes`` are hashed (the first always is). What is left begins at ``next_range``."""
    if range_size <= 0:
        raise ValueError(f"range size must be positive, got {range_size}")
    start = max(start, store.get_min_phy_offset())
    end = min(end, store.get_max_phy_offset())
    if end > start and (end - 1) // range_size - start // range_size >= MAX_RANGES:
        raise ValueError(f"[{start}, {end}) in ranges of {range_size} bytes is more than {MAX_RANGES} ranges")
    digests: list[RangeDigest] = []
    offset = start
    hashed = 0
    while offset < end:
        if digests and (
            (max_ranges is not None and len(digests) >= max_ranges) or (max_bytes is not None and hashed >= max_bytes)
        ):
            break
        range_end = min(end, (offset // range_size + 1) * range_size)
        hasher = xxhash.xxh3_128()
        length = _hash_range(store, hasher, offset, range_end)
        digests.append(RangeDigest(offset, length, hasher.hexdigest()))
        hashed += length
        offset = range_end
    return digests


def next_range(digests: list[RangeDigest], range_size: int) -> int | None:
    """Where the range after the last of ``digests`` begins (None without digests)."""
    if not digests:
        return None
    return (digests[-1].offset // range_size + 1) * range_size


def _hash_range(store: MessageStore, hasher: xxhash.xxh3_128, offset: int, end: int) -> int:
    """Feed ``[offset, end)`` to ``hasher`` file by file; the number of bytes hashed."""
    hashed = 0
    file_size = store.config.mapped_file_size_commit_log
    while offset < end:
        view = store.get_commit_log_data(offset)
        if view is None:  # nothing written here in this file: go on in the next one
            offset = (offset // file_size + 1) * file_size
            continue
        chunk = view[: end - offset]
        hasher.update(chunk)
        hashed += len(chunk)
        offset += len(chunk)
    return hashed
