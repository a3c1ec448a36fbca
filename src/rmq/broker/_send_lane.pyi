from collections.abc import Callable
from typing import Any

from typing_extensions import disjoint_base

from rmq.net._codec import FastLane
from rmq.store._store import StoreCore

@disjoint_base
class SendLane(FastLane):
    served: int
    left: int
    pull_lane: FastLane | None
    def __init__(self, store: StoreCore, processor: Any, topics: Any, hold: Any) -> None: ...
    def role_changed(self) -> None: ...
    def connect(self, remote_address: str, deliver: Callable[[bytearray], object] | None = None) -> object: ...

def scan_send_header(header: bytes | bytearray | memoryview) -> dict[str, Any] | None: ...
def scan_batch(body: bytes | bytearray | memoryview) -> list[tuple[bytes, bytes, int]] | None: ...
