"""MessageStoreConfig: the store's settings under RocketMQ's names (snake_case here, camelCase in files)."""

from __future__ import annotations

import dataclasses
import enum
import os
import re
from typing import Any, Mapping

from rmq.errors import ConfigError, StoreError
from rmq.protocol.message import MAX_MESSAGE_SIZE

GiB = 1 << 30
MiB = 1 << 20


class FlushDiskType(str, enum.Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
DELAY_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(levels: str) -> dict[int, int]:
    """``"1s 5s 1m"`` -> ``{1: 1000, 2: 5000, 3: 60000}`` (delay level -> delay in ms).

    The one parser of ``messageDelayLevel``: the store uses it for the deliver time of delayed
    messages, the broker for its schedule service.
    """
    table: dict[int, int] = {}
    for level, token in enumerate(levels.split(), start=1):
        unit = DELAY_UNIT_MS.get(token[-1:])
        if unit is None or not token[:-1].isdigit():
            raise ConfigError(f"messageDelayLevel {levels!r}: level {level} is {token!r}, "
                              "expected digits followed by one of s, m, h, d")
        table[level] = int(token[:-1]) * unit
    if not table:
        raise ConfigError("messageDelayLevel is empty: expected delays like '1s 5s 10s'")
    return table


def camel_to_snake(name: str) -> str:
    """``storePathRootDir`` -> ``store_path_root_dir``, ``brokerIP1`` -> ``broker_ip1``."""
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return name.lower()


@dataclasses.dataclass
class MessageStoreConfig:
    """Settings of a MessageStore; defaults are RocketMQ 4.x's."""

    store_path_root_dir: str = os.path.join(os.path.expanduser("~"), "store")
    mapped_file_size_commit_log: int = GiB
    # bytes: 300,000 entries of 20 bytes
    mapped_file_size_consume_queue: int = 300_000 * 20
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    # ms between ASYNC_FLUSH rounds, and the dirty pages a round needs before it flushes
    flush_interval_commit_log: int = 500
    flush_commit_log_least_pages: int = 4
    # ms after which an ASYNC_FLUSH round flushes whatever is dirty
    flush_commit_log_thorough_interval: int = 10_000
    flush_interval_consume_queue: int = 1000
    # ms a SYNC_FLUSH put waits for its group commit before FLUSH_DISK_TIMEOUT
    sync_flush_timeout: int = 5000
    # hours a CommitLog file is kept
    file_reserved_time: int = 72
    # hours of the day (";"-separated) when expired files are deleted
    delete_when: str = "04"
    # percent of the disk above which the oldest files are deleted at once
    disk_max_used_space_ratio: int = 75
    # ms between retention checks
    clean_resource_interval: int = 10_000
    max_message_size: int = MAX_MESSAGE_SIZE
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    # the store host written in every record and in msgIds: brokerIP1 and the broker's listenPort
    broker_ip1: str = "127.0.0.1"
    listen_port: int = 10911

    def __post_init__(self) -> None:
        self.flush_disk_type = FlushDiskType(self.flush_disk_type)
        if self.mapped_file_size_consume_queue < 20:
            raise StoreError(f"mappedFileSizeConsumeQueue {self.mapped_file_size_consume_queue} "
                             "must hold at least one 20-byte entry")
        if self.mapped_file_size_commit_log < 4096:
            raise StoreError(f"mappedFileSizeCommitLog {self.mapped_file_size_commit_log} must be >= 4096")
        parse_delay_levels(self.message_delay_level)

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type is FlushDiskType.SYNC_FLUSH

    @property
    def delay_level_ms(self) -> list[int]:
        """Delay of level L at index L - 1."""
        return list(parse_delay_levels(self.message_delay_level).values())

    @property
    def delete_hours(self) -> set[int]:
        return {int(h) for h in self.delete_when.split(";") if h.strip()}

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> "MessageStoreConfig":
        """Build from a broker config file's key/values: camelCase (RocketMQ) or snake_case keys,
        string or typed values. Keys that are not store settings are ignored (the broker's own)."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in properties.items():
            name = camel_to_snake(key)
            field = fields.get(name)
            if field is None:
                continue
            default = field.default
            try:
                if isinstance(default, bool):
                    value = value if isinstance(value, bool) else str(value).strip().lower() == "true"
                elif isinstance(default, int):
                    value = int(value)
                elif isinstance(default, str) and not isinstance(default, enum.Enum):
                    value = str(value).strip()
            except ValueError:
                raise StoreError(f"store setting {key}={value!r}: expected {type(default).__name__}") from None
            kwargs[name] = value
        return cls(**kwargs)
