"""FIFO POP's queue locks (RocketMQ 5.x's ConsumerOrderInfoManager), in ``config/consumerOrderInfo.json``
beside the consumer offsets and written with them (every flushConsumerOffsetInterval, and at shutdown):

    {"table": {"<topic>@<group>": {"<queueId>": {"o": [popped offsets], "n": next offset,
                                                "v": visible at (epoch ms), "a": [acked offsets],
                                                "oc": {"<offset>": times popped}}}}}

A queue popped with ``order=true`` is locked to its batch (``o``) until every offset is acked or
``v`` passes: the next message of the queue (its message group) comes only after the previous one
is acked. A restart reads the locks back, so a batch still invisible stays locked; what was acked
after the last write is popped again (as RocketMQ's FIFO, whose acks are offset commits).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from rmq.broker.config_manager import ConfigManager
from rmq.broker.consumer_offset import split_topic_at_group, topic_at_group


@dataclasses.dataclass
class OrderBatch:
    """A FIFO queue's last popped batch (OrderInfo)."""

    offsets: list[int]
    next_offset: int  # where the queue goes on once the batch is acked
    visible_at: int
    acked: set[int] = dataclasses.field(default_factory=set)
    attempts: dict[int, int] = dataclasses.field(default_factory=dict)  # offset -> times popped

    @property
    def done(self) -> bool:
        return len(self.acked) >= len(self.offsets)

    def blocks(self, now: int) -> bool:
        return not self.done and now < self.visible_at

    def first_unacked(self) -> int:
        """The consume offset the batch holds the queue at: its first unacked message, or past it."""
        return next((o for o in self.offsets if o not in self.acked), self.next_offset)

    def to_json(self) -> dict[str, Any]:
        return {
            "o": self.offsets,
            "n": self.next_offset,
            "v": self.visible_at,
            "a": sorted(self.acked),
            "oc": {str(o): n for o, n in self.attempts.items()},
        }

    @classmethod
    def from_json(cls, obj: Any) -> OrderBatch:
        return cls(
            [int(o) for o in obj["o"]],
            int(obj["n"]),
            int(obj["v"]),
            {int(o) for o in obj.get("a") or ()},
            {int(o): int(n) for o, n in (obj.get("oc") or {}).items()},
        )


class ConsumerOrderInfoManager(ConfigManager):
    """(group, topic, queueId) -> its FIFO batch. Loop thread; ``persist`` on the scheduler's."""

    file_name = "consumerOrderInfo.json"

    def __init__(self, store_path_root_dir: str | os.PathLike[str]):
        super().__init__(store_path_root_dir)
        self._table: dict[tuple[str, str, int], OrderBatch] = {}

    def get(self, group: str, topic: str, queue_id: int) -> OrderBatch | None:
        with self._lock:
            return self._table.get((group, topic, queue_id))

    def popped(
        self, group: str, topic: str, queue_id: int, offsets: list[int], next_offset: int, visible_at: int
    ) -> OrderBatch:
        """A FIFO pop took ``offsets``: the queue is locked to them. A batch popped again (its
        invisible time passed unacked) counts one more attempt per message."""
        with self._lock:
            old = self._table.get((group, topic, queue_id))
            attempts = {o: (old.attempts.get(o, 0) if old is not None else 0) + 1 for o in offsets}
            batch = self._table[(group, topic, queue_id)] = OrderBatch(
                offsets, next_offset, visible_at, attempts=attempts
            )
            self.mark_changed()
            return batch

    def ack(self, group: str, topic: str, queue_id: int, offset: int) -> OrderBatch | None:
        """Mark ``offset`` acked; the batch (gone from the table once done), None when the offset is
        not in the queue's current batch."""
        with self._lock:
            batch = self._table.get((group, topic, queue_id))
            if batch is None or offset not in batch.offsets:
                return None
            batch.acked.add(offset)
            if batch.done:
                del self._table[(group, topic, queue_id)]
            self.mark_changed()
            return batch

    def change_visible_at(self, group: str, topic: str, queue_id: int, offset: int, visible_at: int) -> bool:
        with self._lock:
            batch = self._table.get((group, topic, queue_id))
            if batch is None or offset not in batch.offsets or offset in batch.acked:
                return False
            batch.visible_at = visible_at
            self.mark_changed()
            return True

    def encode(self) -> dict[str, Any]:
        with self._lock:
            table: dict[str, dict[str, Any]] = {}
            for (group, topic, queue_id), batch in self._table.items():
                table.setdefault(topic_at_group(topic, group), {})[str(queue_id)] = batch.to_json()
            return {"table": table}

    def decode(self, obj: Any) -> None:
        table: dict[tuple[str, str, int], OrderBatch] = {}
        for key, queues in (obj.get("table") or {}).items():
            names = split_topic_at_group(key)
            if names is None:
                raise ValueError(f"{key!r} is not topic@group")
            for queue_id, batch in queues.items():
                table[(names[1], names[0], int(queue_id))] = OrderBatch.from_json(batch)
        with self._lock:
            self._table = table
