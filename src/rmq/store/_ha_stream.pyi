# Stub of the compiled replication stream (rmq/store/_ha_stream.pyx): a master's plain slaves served by a
# C loop without the GIL; the HA service (rmq.store.ha) hands them over and closes the failed ones.
import enum
from collections.abc import Collection, Iterable

from typing_extensions import disjoint_base

from rmq.store._group_commit import GroupCommit

FRAME_HEADER_BYTES: int
REPORT_BYTES: int

class Failure(enum.IntEnum):
    NO_FAILURE = 0
    CLOSED_BY_SLAVE = 1
    READ_FAILED = 2
    SEND_FAILED = 3
    BEYOND_END = 4
    WENT_BACKWARDS = 5
    PAST_SENT = 6
    OFFSET_GONE = 7
    SILENT = 8

@disjoint_base
class HAStream:
    def __init__(
        self,
        group_commit: GroupCommit,
        *,
        sync: bool,
        batch_size: int,
        max_bytes_per_wakeup: int,
        frames_per_send: int,
        poll: float,
        idle_polls: int,
        idle_wait: float,
        heartbeat_interval: float,
        housekeeping_interval: float,
    ) -> None: ...
    @property
    def notify_fd(self) -> int: ...
    @property
    def idle(self) -> bool: ...
    def run(self) -> None: ...
    def stop(self) -> None: ...
    def close(self) -> None: ...
    def notify(self) -> None: ...
    def add(
        self,
        fd: int,
        start: int,
        acked: int,
        acks_count: bool,
        pending_report: bytes = b"",
        broker_id: int = -1,
        caught_up_ns: int = 0,
    ) -> None: ...
    def remove(self, fd: int) -> bool: ...
    def take_failures(self) -> list[tuple[int, int, int, int]]: ...
    def publish_python_acks(self, best: int, count: int, named: Iterable[tuple[int, int]] = ()) -> None: ...
    def set_sync_state_set(self, broker_ids: Collection[int], acks_needed: int, rule: int) -> None: ...
    def in_sync(self, window: float) -> list[int]: ...
    def status(self, fd: int) -> tuple[int, int] | None: ...
