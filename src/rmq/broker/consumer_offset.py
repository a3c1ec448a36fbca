"""Committed consumer offsets (RocketMQ's ConsumerOffsetManager), in ``config/consumerOffset.json``:

    {"offsetTable": {"<topic>@<group>": {"<queueId>": <next offset to consume>}}}

Commits only touch memory; the broker calls ``persist()`` on a timer (flushConsumerOffsetInterval,
5 s) and at shutdown, and it writes only when something was committed since. A crash therefore
loses at most one interval of commits: consumers then see a few messages again, never miss one.

**On a slave** the table is a copy of the master's (``copy_from_master``, every 10 s), except for
what clients committed on the slave itself while they could not reach the master. RocketMQ's slave
overwrites everything with the master's table, so a master that comes back after a crash (its file
up to 5 s old, and nothing of what was committed on the slave meanwhile) wins, and a consumer that
restarts re-reads messages it had consumed. rmq keeps those commits apart ("slave commits", also in
the file under ``slaveCommitTable``) until the master has them:

- a slave commit higher than the master's offset for its queue is kept over the master's, and the
  slave hands it to the master (UPDATE_CONSUMER_OFFSET); the master then has it and the mark goes;
- a slave commit the master's offset has reached or passed is dropped: the master is ahead.

So an offset of a queue never moves back on the slave while it holds a commit the master has not
seen, and the master takes the slave's higher offset when it returns. The one thing this overrides
is an admin reset on the master of a queue that has a pending slave commit (the reset moved it back
below the slave's): reset again once the slave has handed its commits over. And a consumer that
commits to the master between the slave's read of the master's table and its hand-over (a few ms)
sees its offset moved back to the slave's until its own next commit (every 5 s).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from rmq.broker.config_manager import ConfigManager

log = logging.getLogger("rmq.broker")

TOPIC_GROUP_SEPARATOR = "@"
# The file's key of the commits a slave took that its master has not seen yet (rmq only; RocketMQ
# ignores unknown keys).
SLAVE_COMMIT_TABLE = "slaveCommitTable"


def topic_at_group(topic: str, group: str) -> str:
    """The table key. Neither name may contain ``@`` (message.VALID_NAME_PATTERN)."""
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


def split_topic_at_group(key: str) -> tuple[str, str] | None:
    parts = key.split(TOPIC_GROUP_SEPARATOR)
    return (parts[0], parts[1]) if len(parts) == 2 else None


class ConsumerOffsetManager(ConfigManager):
    """``topic@group -> {queueId: offset}``; -1 means nothing committed."""

    file_name = "consumerOffset.json"

    def __init__(self, store_path_root_dir: str | os.PathLike[str], slave: bool = False):
        super().__init__(store_path_root_dir)
        self._offsets: dict[str, dict[int, int]] = {}
        # a slave's commits its master has not seen: "topic@group" -> {queueId: offset}
        self.slave = slave
        self._slave_commits: dict[str, dict[int, int]] = {}

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int, client_host: str | None = None) -> None:
        key = topic_at_group(topic, group)
        with self._lock:
            queues = self._offsets.setdefault(key, {})
            previous = queues.get(queue_id)
            queues[queue_id] = offset
            if self.slave:
                self._slave_commits.setdefault(key, {})[queue_id] = offset
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

    def topics_and_groups(self) -> list[tuple[str, str]]:
        """Every (topic, group) with committed offsets (any thread)."""
        return self._pairs()

    def _pairs(self) -> list[tuple[str, str]]:
        with self._lock:
            return [pair for key in self._offsets if (pair := split_topic_at_group(key)) is not None]

    # -- a slave's copy of its master (module docstring) -----------------------------------------

    def slave_commits(self) -> dict[str, dict[int, int]]:
        """The commits taken on this slave that its master has not seen (``topic@group`` keys)."""
        with self._lock:
            return {key: dict(queues) for key, queues in self._slave_commits.items()}

    def copy_from_master(self, master_table: Mapping[str, Mapping[int, int]]) -> dict[str, dict[int, int]]:
        """Take the master's ``offsetTable``, keeping the slave commits higher than the master's
        offsets; those are returned, for the master. Slave commits the master reached are dropped."""
        table = {key: {int(q): int(o) for q, o in queues.items()} for key, queues in master_table.items()}
        ahead: dict[str, dict[int, int]] = {}
        with self._lock:
            for key, queues in self._slave_commits.items():
                for queue_id, offset in queues.items():
                    if offset > table.get(key, {}).get(queue_id, -1):
                        table.setdefault(key, {})[queue_id] = offset
                        ahead.setdefault(key, {})[queue_id] = offset
            self._slave_commits = {key: dict(queues) for key, queues in ahead.items()}
            if table != self._offsets:
                self._offsets = table
                self.mark_changed()
        return ahead

    def master_has(self, key: str, queue_id: int, offset: int) -> None:
        """The master took this slave commit: forget the mark (unless a newer commit replaced it)."""
        with self._lock:
            queues = self._slave_commits.get(key)
            if queues is not None and queues.get(queue_id) == offset:
                del queues[queue_id]
                if not queues:
                    del self._slave_commits[key]
                self.mark_changed()

    # -- file -----------------------------------------------------------------------------------

    def encode(self) -> dict[str, Any]:
        with self._lock:
            obj: dict[str, Any] = {"offsetTable": _encode_table(self._offsets)}
            if self._slave_commits:
                obj[SLAVE_COMMIT_TABLE] = _encode_table(self._slave_commits)
            return obj

    def decode(self, obj: Any) -> None:
        table = _decode_table(obj["offsetTable"])
        slave_commits = _decode_table(obj.get(SLAVE_COMMIT_TABLE) or {})
        with self._lock:
            self._offsets = table
            self._slave_commits = slave_commits


def _encode_table(table: Mapping[str, Mapping[int, int]]) -> dict[str, dict[str, int]]:
    return {key: {str(q): o for q, o in sorted(queues.items())} for key, queues in table.items()}


def _decode_table(obj: Mapping[str, Mapping[Any, Any]]) -> dict[str, dict[int, int]]:
    return {key: {int(q): int(o) for q, o in queues.items()} for key, queues in obj.items()}
