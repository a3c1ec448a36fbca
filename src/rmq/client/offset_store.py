"""Where a consumer keeps how far it has consumed each queue (RocketMQ's OffsetStore).

Clustering: on the broker (QUERY_CONSUMER_OFFSET / UPDATE_CONSUMER_OFFSET), cached here and
written every 5 s and at shutdown. Broadcasting: every consumer has its own progress, kept in a
local JSON file, written as the broker writes its metadata (``rmq._files``: fsynced temp file,
rename, ``.bak`` of the previous version to fall back on)::

    {"offsetTable": {"<topic>@<brokerName>@<queueId>": <offset>, ...}}

An offset is the next queue offset to consume. -1 means "none stored".
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from rmq._files import backup_path, write_file_atomically
from rmq.errors import ClientError, RemotingError, ResponseError
from rmq.protocol.message_queue import MessageQueue

if TYPE_CHECKING:
    from rmq.client.instance import ClientInstance

log = logging.getLogger("rmq.client")


class OffsetStore:
    """The in-memory table both kinds share."""

    def __init__(self, group: str):
        self.group = group
        self._table: dict[MessageQueue, int] = {}
        self._lock = threading.Lock()

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        if offset < 0:
            return
        with self._lock:
            if increase_only and self._table.get(mq, -1) >= offset:
                return
            self._table[mq] = offset

    def read_memory(self, mq: MessageQueue) -> int:
        return self._table.get(mq, -1)

    def remove(self, mq: MessageQueue) -> None:
        with self._lock:
            self._table.pop(mq, None)

    def snapshot(self, mqs: Iterable[MessageQueue] | None = None) -> dict[MessageQueue, int]:
        with self._lock:
            if mqs is None:
                return dict(self._table)
            return {mq: self._table[mq] for mq in mqs if mq in self._table}

    def read_store(self, mq: MessageQueue) -> int:
        raise NotImplementedError

    def persist(self, mqs: Iterable[MessageQueue]) -> None:
        raise NotImplementedError


class RemoteOffsetStore(OffsetStore):
    """Offsets kept by the broker of each queue: its master, else a slave (while the master is
    missing from the route or refuses connections; the slave hands them to the master when it
    returns)."""

    def __init__(self, group: str, instance: ClientInstance):
        super().__init__(group)
        self.instance = instance

    def read_store(self, mq: MessageQueue) -> int:
        """The broker's offset of ``mq`` (cached here too); -1 when the group has none."""
        api, timeout = self.instance.api, self.instance.config.request_timeout
        offset = self.instance.call_in_admin(
            mq.broker_name, mq.topic, lambda addr: api.query_consumer_offset(addr, self.group, mq, timeout)
        )
        self.update(mq, offset)
        return offset

    def persist(self, mqs: Iterable[MessageQueue]) -> None:
        """Write the cached offsets of ``mqs`` to their brokers (synchronously: a shutdown must not
        return before the broker has them)."""
        api, timeout = self.instance.api, self.instance.config.request_timeout
        for mq, offset in self.snapshot(mqs).items():
            try:
                self.instance.call_in_admin(
                    mq.broker_name,
                    mq.topic,
                    functools.partial(
                        api.update_consumer_offset, group=self.group, mq=mq, offset=offset, timeout=timeout
                    ),
                )
            except (RemotingError, ResponseError, ClientError) as exc:
                log.warning("committing offset %d of %s for group %s failed: %s", offset, mq, self.group, exc)


def mq_key(mq: MessageQueue) -> str:
    return f"{mq.topic}@{mq.broker_name}@{mq.queue_id}"


class LocalFileOffsetStore(OffsetStore):
    """Offsets in ``<directory>/<client id>/<group>/offsets.json`` (broadcasting)."""

    def __init__(self, group: str, directory: str | os.PathLike[str], client_id: str):
        super().__init__(group)
        self.path = Path(directory).expanduser() / client_id.replace(":", "_") / group / "offsets.json"
        self._file_lock = threading.Lock()
        self._stored = self._load()

    def _load(self) -> dict[str, int]:
        for path in (self.path, backup_path(self.path)):
            try:
                data = json.loads(path.read_text())
                return {str(k): int(v) for k, v in (data.get("offsetTable") or {}).items()}
            except FileNotFoundError:
                continue
            except (ValueError, TypeError, AttributeError, OSError) as exc:
                log.error("offset file %s is unreadable (%s)", path, exc)
        return {}

    def read_store(self, mq: MessageQueue) -> int:
        offset = self._stored.get(mq_key(mq), -1)
        self.update(mq, offset)
        return offset

    def persist(self, mqs: Iterable[MessageQueue]) -> None:
        with self._file_lock:
            for mq, offset in self.snapshot(mqs).items():
                self._stored[mq_key(mq)] = offset
            write_file_atomically(self.path, json.dumps({"offsetTable": self._stored}, indent=1, sort_keys=True))
