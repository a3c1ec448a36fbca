"""JSON metadata files under ``<storePathRootDir>/config/``, as RocketMQ's ConfigManager keeps them.

    config/topics.json             TopicConfigManager
    config/consumerOffset.json     ConsumerOffsetManager
    config/consumerOrderInfo.json  ConsumerOrderInfoManager (FIFO POP's queue locks)
    config/subscriptionGroup.json  SubscriptionGroupManager
    config/delayOffset.json        DelayOffsetManager

Crash safety of ``persist`` is ``rmq._files.write_file_atomically``'s: at every instant either
``<name>`` or ``<name>.bak`` holds a complete version, and ``load`` falls back to ``.bak`` when
``<name>`` is missing or unreadable.

Files written by Java RocketMQ carry integer map keys unquoted (``{0:12}``, fastjson's habit);
``load`` accepts them. rmq writes standard JSON (``{"0":12}``), which Java reads too.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from rmq._clock import now_ms
from rmq._files import backup_path, write_file_atomically
from rmq.protocol.java_json import loads_java_json

log = logging.getLogger("rmq.broker")

CONFIG_DIR_NAME = "config"


@dataclass
class DataVersion:
    """RocketMQ's DataVersion: name servers re-read a broker's topics only when it changes."""

    timestamp: int
    counter: int = 0

    @classmethod
    def new(cls) -> DataVersion:
        return cls(now_ms(), 0)

    def next_version(self) -> None:
        self.timestamp = now_ms()
        self.counter += 1

    def to_json(self) -> dict[str, int]:
        return {"timestamp": self.timestamp, "counter": self.counter}

    @classmethod
    def from_json(cls, obj: Any) -> DataVersion:
        if not isinstance(obj, dict):
            return cls.new()
        return cls(int(obj.get("timestamp", 0)), int(obj.get("counter", 0)))


class ConfigManager(ABC):
    """A JSON file of broker metadata: load with ``.bak`` fallback, atomic persist.

    Subclasses name their file, encode their state into a JSON-able object and decode it back.
    ``decode`` must build the new state completely before replacing the old one, so that a file
    that fails half-way leaves the manager as it was (and ``load`` can try ``.bak``).
    Mutators call ``mark_changed``; ``persist`` writes only when something changed since the last
    write (``force=True`` writes anyway).
    """

    file_name: str

    def __init__(self, store_path_root_dir: str | os.PathLike[str]):
        self.path = Path(store_path_root_dir) / CONFIG_DIR_NAME / self.file_name
        self._lock = threading.RLock()
        self._persist_lock = threading.Lock()
        self._changes = 0
        self._persisted_changes = 0

    @property
    def backup_path(self) -> Path:
        return backup_path(self.path)

    @abstractmethod
    def encode(self) -> Any:
        """The state as a JSON-able object in RocketMQ's file shape."""

    @abstractmethod
    def decode(self, obj: Any) -> None:
        """Replace the state by the one in ``obj`` (a parsed file); raise on a malformed object."""

    def mark_changed(self) -> None:
        with self._lock:
            self._changes += 1

    @property
    def changed(self) -> bool:
        """True when the state changed since it was last persisted or loaded."""
        return self._changes != self._persisted_changes

    def load(self) -> bool:
        """Read the file, or ``.bak`` when it is missing or corrupt. Never raises.

        True when the state came from a file, or when neither file exists (a fresh store).
        False when every file present was unreadable: the state stays as constructed, and the
        caller decides whether to start (RocketMQ refuses to).
        """
        for path in (self.path, self.backup_path):
            if not path.exists():
                if path == self.path and self.backup_path.exists():
                    log.warning("%s is missing; loading %s", self.path, self.backup_path)
                continue
            try:
                text = path.read_text(encoding="utf-8")
                if not text.strip():
                    raise ValueError("the file is empty")
                with self._lock:
                    self.decode(loads_java_json(text))
                    self._persisted_changes = self._changes
            except Exception as e:  # any malformed content: fall back, never stop the broker here
                log.error(
                    "cannot load %s (%s: %s); %s",
                    path,
                    type(e).__name__,
                    e,
                    "trying the backup" if path == self.path else "giving up",
                )
                continue
            log.info("loaded %s", path)
            return True
        return not self.path.exists() and not self.backup_path.exists()

    def persist(self, force: bool = False) -> bool:
        """Write the state if it changed (or ``force``); True when a file was written.

        An I/O error is logged, not raised (a full disk must not stop the broker serving), and the
        state stays marked as changed so the next call retries.
        """
        with self._persist_lock:
            with self._lock:
                changes = self._changes
                if not force and changes == self._persisted_changes:
                    return False
                text = json.dumps(self.encode(), indent=2)
            try:
                write_file_atomically(self.path, text)
            except OSError as e:
                log.error("cannot persist %s: %s", self.path, e)
                return False
            with self._lock:
                self._persisted_changes = changes
            return True


class JsonItem(Protocol):
    def to_json(self) -> dict[str, Any]: ...


Item = TypeVar("Item", bound=JsonItem)


class VersionedTableManager(ConfigManager, Generic[Item]):
    """A ``name -> config`` table with a DataVersion that moves on every change, in RocketMQ's shape
    ``{"<table_key>": {"<name>": {...}}, "dataVersion": {"timestamp", "counter"}}``.

    Loading merges the file over the built-in entries a subclass put in the table first (an
    operator may have changed those).
    """

    table_key: str

    def __init__(self, store_path_root_dir: str | os.PathLike[str]):
        super().__init__(store_path_root_dir)
        self.data_version = DataVersion.new()
        self._table: dict[str, Item] = {}

    @abstractmethod
    def item_from_json(self, obj: dict[str, Any]) -> Item:
        """One entry of the table from its JSON object."""

    def _put(self, name: str, item: Item) -> None:
        self._table[name] = item
        self.data_version.next_version()
        self.mark_changed()

    def _remove(self, name: str) -> Item | None:
        item = self._table.pop(name, None)
        if item is not None:
            self.data_version.next_version()
            self.mark_changed()
        return item

    def encode(self) -> dict[str, Any]:
        with self._lock:
            return {
                self.table_key: {name: item.to_json() for name, item in self._table.items()},
                "dataVersion": self.data_version.to_json(),
            }

    def decode(self, obj: Any) -> None:
        table = {name: self.item_from_json(item) for name, item in obj[self.table_key].items()}
        version = DataVersion.from_json(obj.get("dataVersion"))
        with self._lock:
            self._table.update(table)
            self.data_version = version

    def copy_from(self, obj: Any) -> bool:
        """Replace the whole table and its DataVersion by another broker's (``encode``'s shape): a
        slave copying its master. Nothing happens when the versions already match (False)."""
        table = {name: self.item_from_json(item) for name, item in obj[self.table_key].items()}
        version = DataVersion.from_json(obj.get("dataVersion"))
        with self._lock:
            if version == self.data_version:
                return False
            self._table = table
            self.data_version = version
            self.mark_changed()
        self.persist()
        return True
