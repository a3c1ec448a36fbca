# Stub of rmq-perf's compiled worker loop; rmq.perf.load._drive is its Python twin.

import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

LAYOUT: dict[str, int]
REMOTING: int
RESP: int
INTERVAL_END: int
DONE: int
CONNECTION_LOST: int

def bucket_index(value_us: int) -> int: ...

@disjoint_base
class Loop:
    @property
    def outstanding(self) -> int: ...
    def __init__(
        self,
        fd: int,
        protocol: int,
        templates: list[bytes],
        opaque_at: list[int],
        born_at: list[int],
        in_flight: int,
        period: float,
        batch: int,
        first_seq: int,
        t_warm: float,
        t0: float,
        end: float,
        drain_timeout: float,
        counts: npt.NDArray[np.int64],
        opaque_base: int = 0,
        opaque_span: int = 1,
        offset_at: list[int] | None = None,
        offset_limit: list[int] | None = None,
        delay_counts: npt.NDArray[np.int64] | None = None,
    ) -> None: ...
    def run(self, stop: float) -> int: ...
    def set_period(self, period: float) -> None: ...
    def take(self) -> tuple[int, int, dict[str, int], int, float]: ...
