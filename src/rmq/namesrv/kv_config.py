"""The name server's KV config (RocketMQ's KVConfigManager): namespace -> {key: value}, set by
operators (PUT_KV_CONFIG, DELETE_KV_CONFIG) and read by clients (GET_KV_CONFIG; 4.x producers ask
namespace ORDER_TOPIC_CONFIG for an ordered topic's "brokerName:queueNums;..."), in kvConfigPath:

    {"configTable": {"<namespace>": {"<key>": "<value>"}}}

Written after each change (a file write and fsync per operator command); without a path (a name
server a broker embeds, a test's) the table lives in memory only.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from rmq._files import read_with_backup, write_file_atomically
from rmq.errors import ConfigError

log = logging.getLogger("rmq.namesrv")

CONFIG_TABLE = "configTable"


def _parse(text: str) -> dict[str, dict[str, str]]:
    table = json.loads(text).get(CONFIG_TABLE) or {}
    return {str(ns): {str(k): str(v) for k, v in items.items()} for ns, items in table.items()}


class KVConfigManager:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path).expanduser() if path else None
        self._lock = threading.Lock()
        self._table: dict[str, dict[str, str]] = {}
        if self.path is not None:
            try:
                self._table = read_with_backup(self.path, _parse) or {}
            except (ValueError, AttributeError, OSError) as e:
                raise ConfigError(
                    f"kvConfigPath {str(self.path)!r} cannot be read as a KV config ({e}): expected "
                    '{"configTable": {"<namespace>": {"<key>": "<value>"}}}, or no file'
                ) from None

    def get(self, namespace: str, key: str) -> str | None:
        with self._lock:
            return self._table.get(namespace, {}).get(key)

    def namespace(self, namespace: str) -> dict[str, str]:
        with self._lock:
            return dict(self._table.get(namespace, {}))

    def put(self, namespace: str, key: str, value: str) -> None:
        """OSError when the file cannot be written; the table is unchanged then."""
        with self._lock:
            table = {ns: dict(items) for ns, items in self._table.items()}
            table.setdefault(namespace, {})[key] = value
            self._replace(table)
        log.info("KV config put: %s %s = %s", namespace, key, value)

    def delete(self, namespace: str, key: str) -> bool:
        """Whether the key was there; OSError when the file cannot be written (nothing deleted)."""
        with self._lock:
            if key not in self._table.get(namespace, {}):
                return False
            table = {ns: dict(items) for ns, items in self._table.items()}
            del table[namespace][key]
            if not table[namespace]:
                del table[namespace]
            self._replace(table)
        log.info("KV config deleted: %s %s", namespace, key)
        return True

    def _replace(self, table: dict[str, dict[str, str]]) -> None:
        """The new table, on disk first: a write that fails leaves file and memory as they were."""
        if self.path is not None:
            write_file_atomically(self.path, json.dumps({CONFIG_TABLE: table}, indent=2, sort_keys=True))
        self._table = table
