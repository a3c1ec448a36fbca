# Stub of the compiled group commit (rmq/_group_commit.pyx): SYNC_FLUSH rounds and SYNC_MASTER acks;
# the store drives it from C, the HA service publishes slave acks.
from typing_extensions import disjoint_base

@disjoint_base
class GroupCommit:
    def run(self, interval: float) -> None: ...
    def publish_replicated(self, offset: int, slaves: int) -> None: ...
    @property
    def replicated(self) -> int: ...
