# Stub of the compiled group commit (rmq/store/_group_commit.pyx): SYNC_FLUSH rounds and SYNC_MASTER acks;
# the store drives it from C, the HA service publishes slave acks.
import enum

from typing_extensions import disjoint_base

class ReplicaRule(enum.IntEnum):
    REPLICAS_BEST_SLAVE = 0
    REPLICAS_SYNC_STATE_SET = 1
    REPLICAS_MASTER_ALONE = 2
    REPLICAS_TOO_FEW = 3

@disjoint_base
class GroupCommit:
    def run(self, interval: float) -> None: ...
    def publish_replicated(self, offset: int, slaves: int, rule: int = ...) -> None: ...
    def allow_inline_rounds(self, max_msync_seconds: float) -> None: ...
    @property
    def inline_rounds(self) -> int: ...
    @property
    def replicated(self) -> int: ...
    @property
    def round_times(self) -> tuple[float, float, float]: ...
