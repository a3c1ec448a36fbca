# Python-visible API of the compiled store's facade (rmq/store/_store.pyx), with what it re-exports from
# its rooms. Layouts: rmq/protocol/layout.py (the record), rmq/store/layout.py (the store's files).
from collections.abc import Callable, Iterable
from typing import Any, Final

from typing_extensions import disjoint_base

from rmq.store._commit_log import CommitLog
from rmq.store._consume_queue import ConsumeQueue as ConsumeQueue
from rmq.store._consume_queue import StoreCheckpoint as StoreCheckpoint
from rmq.store._group_commit import GroupCommit
from rmq.store._ha_stream import HAStream
from rmq.store._index import IndexService
from rmq.store._mapped_file import MappedFile as MappedFile
from rmq.store._mapped_file import MappedFileQueue as MappedFileQueue
from rmq.store.status import GetMessageStatus, PutMessageStatus

LAYOUT: Final[dict[str, int]]
CRC_NATIVE: Final[bool]

@disjoint_base
class CommitSink: ...

@disjoint_base
class PutMessageResult:
    status_code: int
    status: PutMessageStatus
    ok: bool
    pending: bool
    wrote_offset: int
    wrote_bytes: int
    queue_offset: int
    store_timestamp: int
    msg_num: int
    next_offset: int
    msg_id: str | None
    msg_ids: list[str]
    wrote_offsets: list[int]

@disjoint_base
class GetMessageResult:
    status_code: int
    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[memoryview]
    queue_offsets: list[int]
    buffer_total_size: int
    message_count: int

@disjoint_base
class TagFilter:
    codes: frozenset[int] | None
    tags: frozenset[str] | None
    properties_filter: Callable[[dict[str, str]], bool] | None
    def __init__(
        self,
        codes: Iterable[int] | None = ...,
        tags: Iterable[str] | None = None,
        properties_filter: Callable[[dict[str, str]], bool] | None = None,
        property_names: Iterable[str] = (),
    ) -> None: ...
    @classmethod
    def of_tags(cls, tags: Iterable[str], exact: bool = True) -> TagFilter: ...
    @classmethod
    def of_properties(
        cls, properties_filter: Callable[[dict[str, str]], bool], property_names: Iterable[str]
    ) -> TagFilter: ...

# not a disjoint base itself: a chain of private classes, one per section of the store core, holds
# its fields (rmq/store/_store.pyx), and StoreCore adds none
class StoreCore:
    store_path: str
    commit_log: CommitLog
    consume_queue_table: dict[str, dict[int, ConsumeQueue]]
    index_service: IndexService
    checkpoint: StoreCheckpoint
    mapped_file_size_consume_queue: int
    max_message_size: int
    store_ip: int
    store_port: int
    sync_flush: bool
    sync_flush_timeout: float
    running: bool
    sync_master: bool
    slave_timeout: float
    ha_max_gap_not_in_sync: int
    slave: bool
    fenced: bool
    disk_full: bool
    reput_offset: int
    last_store_timestamp: int
    closed: bool
    def __init__(
        self,
        store_path: str,
        *,
        mapped_file_size_commit_log: int,
        mapped_file_size_consume_queue: int,
        max_message_size: int,
        store_ip: str,
        store_port: int,
        sync_flush: bool,
        sync_flush_timeout: float,
        delay_level_ms: Iterable[int],
        sync_master: bool = False,
        slave_timeout: float = 3.0,
        ha_max_gap_not_in_sync: int = ...,
        slave: bool = False,
    ) -> None: ...
    def attach(self, index_service: IndexService, checkpoint: StoreCheckpoint) -> None: ...
    def close(self) -> None: ...
    def set_running(self, running: bool) -> None: ...
    def become_master(self, sync_master: bool) -> None: ...
    def become_slave(self) -> None: ...
    def fence(self) -> None: ...
    def unfence(self) -> None: ...
    def set_master_lease(self, until: float) -> None: ...
    @property
    def master_lease_expired(self) -> bool: ...
    def mark_disk_full(self, full: bool) -> bool: ...
    def truncate_to(self, offset: int) -> tuple[int, int]: ...
    def acquire_put_lock(self) -> None: ...
    def release_put_lock(self) -> None: ...
    def load_consume_queues(self) -> None: ...
    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None: ...
    def consume_queues(self) -> list[ConsumeQueue]: ...
    def put_message(
        self,
        topic: str,
        queue_id: int,
        body: Any,
        properties: bytes | dict[str, str] = b"",
        *,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        flag: int = 0,
        reconsume_times: int = 0,
        born_host: int = 0,
        born_port: int = 0,
        prepared_tx_offset: int = 0,
        callback: Callable[[PutMessageResult], None] | None = None,
    ) -> PutMessageResult: ...
    def put_messages(
        self,
        topic: str,
        queue_id: int,
        messages: list[tuple[Any, bytes | dict[str, str], int]],
        *,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: int = 0,
        born_port: int = 0,
        callback: Callable[[PutMessageResult], None] | None = None,
    ) -> PutMessageResult: ...
    def flush_commit_log(self, least_pages: int = 0) -> int: ...
    def start_group_commit(self) -> None: ...
    def run_group_commit(self, interval: float) -> None: ...
    def stop_group_commit(self) -> None: ...
    def finish_group_commit(self) -> int: ...
    def abandon_commits(self) -> int: ...
    def commit_files_changed(self) -> None: ...
    def kick_rounds_myself(self, inline_max_msync: float = 0.0) -> None: ...
    def kick_group_commit(self) -> None: ...
    def complete_round_here(self) -> bool: ...
    @property
    def commit_event_fd(self) -> int: ...
    @property
    def group_commit(self) -> GroupCommit: ...
    @property
    def group_commit_flushes(self) -> int: ...
    @property
    def group_commit_inline_rounds(self) -> int: ...
    @property
    def commit_queue_size(self) -> int: ...
    @property
    def disk_wait_seconds(self) -> float: ...
    def complete_commits(self) -> int: ...
    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msgs: int,
        max_total_bytes: int = 262144,
        tag_filter: TagFilter | None = None,
    ) -> GetMessageResult: ...
    def wake_ha_on_next_put(self, fd: int) -> None: ...
    def attach_ha_stream(self, stream: HAStream | None) -> None: ...
    def replica_view(self, offset: int, max_bytes: int) -> memoryview | None: ...
    def dispatch_replica(self) -> None: ...
    def append_replica(self, offset: int, data: Any) -> int: ...
    def close_replica_file(self) -> None: ...
    def look_message_by_offset(self, phy_offset: int, size: int = -1) -> memoryview | None: ...
    def store_timestamp_at(self, phy_offset: int) -> int: ...
    def offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int: ...
    def first_store_timestamp(self, mf: MappedFile) -> int: ...
    def recover(self, start_index: int, redispatch: bool) -> tuple[int, int, str | None]: ...
