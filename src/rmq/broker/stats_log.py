"""The broker's stats log, as RocketMQ's ``stats.log``: every ``statsLogInterval`` ms (a minute by
default; 0 writes none) what each topic took in and each consumer group read, appended to
``<storePathRootDir>/logs/stats.log``.

Nothing is counted on the hot path: each line is read off what the store keeps anyway. A topic's
puts are its ConsumeQueues' growth, their sizes the sizes those new ConsumeQueue entries record (the
stored record's bytes: RocketMQ's TOPIC_PUT_SIZE counts the same ``wroteBytes``). A group's gets
are the one count kept where the work happens: the pull processor adds each answer's messages and
bytes to ``GetCounts`` (cumulative, so a line never loses what raced with its writing; one dict
lookup per pull of up to 32 messages, not per message). The put latency is sampled: up
to PUT_LATENCY_SAMPLES of the interval's new records per topic, each one's store timestamp minus its
born timestamp (the producer's clock, in ms: on one machine, the time from the client's send to the
store's write, before any flush), counted in RocketMQ's putMessageDistributeTime buckets.

The format is JSON Lines, one object per active topic or group per interval (a topic or group
that saw nothing is left out)::

    {"kind": "topic_put", "broker": "broker-a", "t_start": 1795566360.0, "t_end": 1795566420.0,
     "topic": "TopicA", "put_nums": 120000, "put_size": 135360000, "put_tps": 2000.0,
     "put_latency_ms": {"bounds": [0, 10, 50, 100, 200, 500, 1000], "counts": [5, 250, 1, 0, 0, 0, 0, 0],
                        "sampled": 256}}
    {"kind": "group_get", "broker": "broker-a", "t_start": ..., "t_end": ..., "group": "GroupA",
     "topic": "TopicA", "get_nums": 118000, "get_size": 133104000, "get_tps": 1966.7}

Times are Unix seconds; sizes bytes; ``counts[i]`` counts latencies ``<= bounds[i]`` ms and above
``bounds[i-1]`` (the last, above 1000 ms). RocketMQ's names: put_nums TOPIC_PUT_NUMS, put_size
TOPIC_PUT_SIZE, get_nums GROUP_GET_NUMS, get_size GROUP_GET_SIZE.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import struct
import time
from pathlib import Path
from typing import Any

from rmq.protocol.record import decode_record
from rmq.store.layout import CQ_COMMITLOG_OFFSET, CQ_SIZE, CQ_STORE_UNIT_SIZE

log = logging.getLogger("rmq.broker")

STATS_LOG = "stats.log"
PUT_LATENCY_SAMPLES = 256
PUT_LATENCY_BOUNDS_MS = (0, 10, 50, 100, 200, 500, 1000)
# ConsumeQueue entries read at a time when adding up sizes
_READ_CHUNK = 65536
_OFFSET_AND_SIZE = struct.Struct(">qi")
assert CQ_SIZE == CQ_COMMITLOG_OFFSET + 8


def sizes_sum(entries: bytes) -> int:
    """The sum of the size fields of whole ConsumeQueue entries, without a Python step per entry:
    each of the field's 4 big-endian bytes is a strided slice summed in C."""
    unit = CQ_STORE_UNIT_SIZE
    return sum(sum(entries[CQ_SIZE + i :: unit]) << (8 * (3 - i)) for i in range(4))


def entry_at(entries: bytes, i: int) -> tuple[int, int]:
    """(CommitLog offset, size) of the ``i``-th entry."""
    offset, size = _OFFSET_AND_SIZE.unpack_from(entries, i * CQ_STORE_UNIT_SIZE + CQ_COMMITLOG_OFFSET)
    return offset, size


class GetCounts:
    """Messages and bytes each (group, topic) was handed by pulls since the broker started; added
    to on the event loop thread only, read (copied) by the stats log."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], list[int]] = {}

    def add(self, group: str, topic: str, messages: int, size: int) -> None:
        entry = self.counts.get((group, topic))
        if entry is None:
            entry = self.counts[(group, topic)] = [0, 0]
        entry[0] += messages
        entry[1] += size

    def snapshot(self) -> dict[tuple[str, str], tuple[int, int]]:
        return {key: (entry[0], entry[1]) for key, entry in list(self.counts.items())}


class StatsLog:
    """Appends a stats log record per active topic and group each time ``log_once`` runs."""

    def __init__(self, store: Any, get_counts: GetCounts, broker_name: str, store_path_root_dir: str):
        self.store = store
        self.get_counts = get_counts
        self.broker_name = broker_name
        self.path = Path(store_path_root_dir) / "logs" / STATS_LOG
        self._queue_max: dict[tuple[str, int], int] = {}
        self._gets = get_counts.snapshot()
        self._since = time.time()
        for cq in self.store.consume_queues():
            self._queue_max[(cq.topic, cq.queue_id)] = cq.max_offset_in_queue

    def _entries(self, topic: str, queue_id: int, start: int, end: int) -> list[bytes]:
        """The ConsumeQueue entries [start, end) of a queue that are still there, in chunks."""
        cq = self.store.find_consume_queue(topic, queue_id)
        out: list[bytes] = []
        if cq is None:
            return out
        offset = max(start, cq.min_offset)
        while offset < end:
            view = cq.read_entries(offset, min(_READ_CHUNK, end - offset))
            if view is None or len(view) < CQ_STORE_UNIT_SIZE:
                break
            chunk = bytes(view[: len(view) - len(view) % CQ_STORE_UNIT_SIZE])
            out.append(chunk)
            offset += len(chunk) // CQ_STORE_UNIT_SIZE
        return out

    def log_once(self) -> list[dict[str, Any]]:
        """Write the records of the interval since the last call; the records."""
        now = time.time()
        t_start, self._since = self._since, now
        seconds = max(now - t_start, 1e-9)
        records: list[dict[str, Any]] = []
        topics: dict[str, list[bytes]] = {}
        for cq in self.store.consume_queues():
            key = (cq.topic, cq.queue_id)
            end = cq.max_offset_in_queue
            start = self._queue_max.get(key, 0)
            self._queue_max[key] = end
            if end > start:
                topics.setdefault(cq.topic, []).extend(self._entries(cq.topic, cq.queue_id, start, end))
        for topic, chunks in sorted(topics.items()):
            nums = sum(len(c) for c in chunks) // CQ_STORE_UNIT_SIZE
            if not nums:
                continue
            records.append(
                {
                    "kind": "topic_put",
                    "broker": self.broker_name,
                    "t_start": round(t_start, 3),
                    "t_end": round(now, 3),
                    "topic": topic,
                    "put_nums": nums,
                    "put_size": sum(sizes_sum(c) for c in chunks),
                    "put_tps": round(nums / seconds, 2),
                    "put_latency_ms": self._put_latency(chunks, nums),
                }
            )
        gets = self.get_counts.snapshot()
        for (group, topic), (nums, size) in sorted(gets.items()):
            before_nums, before_size = self._gets.get((group, topic), (0, 0))
            if nums > before_nums:
                records.append(
                    {
                        "kind": "group_get",
                        "broker": self.broker_name,
                        "t_start": round(t_start, 3),
                        "t_end": round(now, 3),
                        "group": group,
                        "topic": topic,
                        "get_nums": nums - before_nums,
                        "get_size": size - before_size,
                        "get_tps": round((nums - before_nums) / seconds, 2),
                    }
                )
        self._gets = gets
        if records:
            self._append(records)
        return records

    def _put_latency(self, chunks: list[bytes], nums: int) -> dict[str, Any]:
        """Born-to-store ms of up to PUT_LATENCY_SAMPLES entries spread evenly over ``chunks``."""
        counts = [0] * (len(PUT_LATENCY_BOUNDS_MS) + 1)
        samples = min(PUT_LATENCY_SAMPLES, nums)
        picks = sorted({k * nums // samples for k in range(samples)})
        located = []
        first = 0  # index of the first entry of the chunk
        chunk_iter = iter(chunks)
        chunk = next(chunk_iter)
        for i in picks:
            while i >= first + len(chunk) // CQ_STORE_UNIT_SIZE:
                first += len(chunk) // CQ_STORE_UNIT_SIZE
                chunk = next(chunk_iter)
            located.append(entry_at(chunk, i - first))
        sampled = 0
        for phy_offset, size in located:
            view = self.store.look_message_by_offset(phy_offset, size)
            if view is None:
                continue
            try:
                record = decode_record(view, check_crc=False)
            except ValueError:
                continue
            latency = record.store_timestamp - record.born_timestamp
            counts[bisect.bisect_left(PUT_LATENCY_BOUNDS_MS, latency)] += 1
            sampled += 1
        return {"bounds": list(PUT_LATENCY_BOUNDS_MS), "counts": counts, "sampled": sampled}

    def _append(self, records: list[dict[str, Any]]) -> None:
        try:
            os.makedirs(self.path.parent, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
        except OSError as e:  # a full disk must not stop the scheduler's other work
            log.warning("cannot write %s: %s", self.path, e)
