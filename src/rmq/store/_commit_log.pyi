# Stub of the compiled CommitLog (rmq/store/_commit_log.pyx); its appends are called from C.

from collections.abc import Callable

from typing_extensions import disjoint_base

from rmq.store._group_commit import GroupCommit
from rmq.store._ha_stream import HAStream
from rmq.store._mapped_file import MappedFileQueue

MADE_AHEAD_WAIT_SECONDS: float

@disjoint_base
class CommitLog(MappedFileQueue):
    group_commit: GroupCommit | None
    ha_stream: HAStream | None
    def __init__(self, store_path: str, mapped_file_size: int, group_commit: GroupCommit | None = None) -> None: ...
    def attach_ha_stream(self, stream: HAStream | None) -> None: ...
    def set_prefault_waker(self, waker: Callable[[], object] | None) -> None: ...
    def prefault_ahead(self, chunks: int) -> None: ...
    def drop_made_ahead(self) -> None: ...
    def close(self) -> None: ...
