"""Committed consumer offsets (RocketMQ's ConsumerOffsetManager), in ``config/consumerOffset.json``:

    {"offsetTable": {"<topic>@<group>": {"<queueId>": <next offset to consume>}}}

Commits only touch memory; the broker calls ``persist()`` on a timer (flushConsumerOffsetInterval,
5 s) and at shutdown, and it writes only when something was committed since. A crash therefore
loses at most one interval of commits: consumers then see a few messages again, never miss one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from rmq.broker.config_manager import ConfigManager

log = logging.getLogger("rmq.broker")

TOPIC_GROUP_SEPARATOR = "@"


def topic_at_group(topic: str, group: str) -> str:
    """The table key. Neither name may contain ``@`` (message.VALID_NAME_PATTERN)."""
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


def split_topic_at_group(key: str) -> tuple[str, str] | None:
    parts = key.split(TOPIC_GROUP_SEPARATOR)
    return (parts[0], parts[1]) if len(parts) == 2 else None


class ConsumerOffsetManager(ConfigManager):
    """``topic@group -> {queueId: offset}``; -1 means nothing committed."""

    file_name = "consumerOffset.json"

    def __init__(self, store_path_root_dir: str | os.PathLike[str]):
        super().__init__(store_path_root_dir)
        self._offsets: dict[str, dict[int, int]] = {}

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int, client_host: str | None = None) -> None:
        with self._lock:
            queues = self._offsets.setdefault(topic_at_group(topic, group), {})
            previous = queues.get(queue_id)
            queues[queue_id] = offset
            self.mark_changed()
        if previous is not None and offset < previous:
            # Legal (a reset, a rebalance handing the queue to a slower consumer) but worth a trace.
            log.info(
                "offset of %s@%s queue %d moved back from %d to %d by %s",
                topic,
                group,
                queue_id,
                previous,
                offset,
                client_host or "a client",
            )

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed one for this queue."""
        with self._lock:
            return self._offsets.get(topic_at_group(topic, group), {}).get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        """All committed offsets of a group on a topic (queueId -> offset); empty when none."""
        with self._lock:
            return dict(self._offsets.get(topic_at_group(topic, group), {}))

    def reset_offset(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        """Set the given queues' offsets, backwards as well as forwards (``consumer reset-offset``)."""
        with self._lock:
            self._offsets.setdefault(topic_at_group(topic, group), {}).update(offsets)
            self.mark_changed()
        log.info("offsets of %s@%s reset to %s", topic, group, dict(offsets))

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> None:
        with self._lock:
            offsets = self._offsets.get(topic_at_group(topic, src_group))
            if offsets is not None:
                self._offsets[topic_at_group(topic, dest_group)] = dict(offsets)
                self.mark_changed()

    def clean_offset_by_topic(self, topic: str) -> None:
        """Forget every group's offsets on ``topic`` (the topic was deleted)."""
        self._remove_where(lambda t, g: t == topic)

    def remove_offset(self, group: str) -> None:
        """Forget every offset of ``group`` (the group was deleted)."""
        self._remove_where(lambda t, g: g == group)

    def _remove_where(self, predicate: Callable[[str, str], bool]) -> None:
        with self._lock:
            doomed = [
                key for key in self._offsets if (pair := split_topic_at_group(key)) is not None and predicate(*pair)
            ]
            for key in doomed:
                del self._offsets[key]
                log.info("removed consumer offsets %s", key)
            if doomed:
                self.mark_changed()

    def which_topic_by_consumer(self, group: str) -> set[str]:
        """Topics on which ``group`` has committed offsets."""
        return {t for t, g in self._pairs() if g == group}

    def which_group_by_topic(self, topic: str) -> set[str]:
        """Groups that have committed offsets on ``topic``."""
        return {g for t, g in self._pairs() if t == topic}

    def _pairs(self) -> list[tuple[str, str]]:
        with self._lock:
            return [pair for key in self._offsets if (pair := split_topic_at_group(key)) is not None]

    def encode(self) -> dict[str, Any]:
        with self._lock:
            return {
                "offsetTable": {
                    key: {str(q): o for q, o in sorted(queues.items())} for key, queues in self._offsets.items()
                }
            }

    def decode(self, obj: Any) -> None:
        table = {key: {int(q): int(o) for q, o in queues.items()} for key, queues in obj["offsetTable"].items()}
        with self._lock:
            self._offsets = table
