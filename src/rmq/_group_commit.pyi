# Stub of the compiled SYNC_FLUSH group commit (rmq/_group_commit.pyx); the store drives it from C.
from typing_extensions import disjoint_base

@disjoint_base
class GroupCommit:
    def run(self, interval: float) -> None: ...
