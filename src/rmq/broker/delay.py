"""Delay levels and the scheduler's progress (RocketMQ's ScheduleMessageService bookkeeping).

``messageDelayLevel`` lists the delays of levels 1, 2, ...: ``"1s 5s 10s 30s 1m ... 2h"`` (units
s, m, h, d). A message of level L waits in queue L-1 of SCHEDULE_TOPIC_XXXX with its deliver time
as tagsCode (docs/messaging.md#delayed-messages). The offset up to which each level's queue has been re-put is
kept in ``config/delayOffset.json``:

    {"offsetTable": {"<level>": <next offset of queue level-1>}}
"""

from __future__ import annotations

import os
from typing import Any

from rmq.broker.config_manager import ConfigManager

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


def delay_level_to_queue_id(level: int) -> int:
    return level - 1


def queue_id_to_delay_level(queue_id: int) -> int:
    return queue_id + 1


class DelayOffsetManager(ConfigManager):
    """Level -> the next SCHEDULE_TOPIC_XXXX offset to re-put; persisted on the broker's timer."""

    file_name = "delayOffset.json"

    def __init__(self, store_path_root_dir: str | os.PathLike[str]):
        super().__init__(store_path_root_dir)
        self._offsets: dict[int, int] = {}

    def offset(self, level: int) -> int:
        """Where the level's scheduler resumes: 0 when it never ran."""
        with self._lock:
            return self._offsets.get(level, 0)

    def update_offset(self, level: int, offset: int) -> None:
        with self._lock:
            if self._offsets.get(level) != offset:
                self._offsets[level] = offset
                self.mark_changed()

    def offset_table(self) -> dict[int, int]:
        with self._lock:
            return dict(self._offsets)

    def copy_from(self, obj: Any) -> None:
        """Take another broker's table (``encode``'s shape): a slave copying its master."""
        table = {int(level): int(o) for level, o in obj["offsetTable"].items()}
        with self._lock:
            if table == self._offsets:
                return
            self._offsets = table
            self.mark_changed()
        self.persist()

    def encode(self) -> dict[str, Any]:
        with self._lock:
            return {"offsetTable": {str(level): o for level, o in sorted(self._offsets.items())}}

    def decode(self, obj: Any) -> None:
        table = {int(level): int(o) for level, o in obj["offsetTable"].items()}
        with self._lock:
            self._offsets = table
