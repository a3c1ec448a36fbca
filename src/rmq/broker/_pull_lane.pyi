from typing import Any

from typing_extensions import disjoint_base

from rmq.net._codec import FastLane
from rmq.store._store import StoreCore

@disjoint_base
class PullLane(FastLane):
    served: int
    left: int
    def __init__(self, store: StoreCore, processor: Any) -> None: ...
    def role_changed(self) -> None: ...

def scan_pull_header(header: bytes | bytearray | memoryview) -> dict[str, Any] | None: ...
