"""Type stubs of the compiled IndexFile (rmq.store._index); the layout is drawn in _index.pyx."""

from typing import Final

from typing_extensions import disjoint_base

LAYOUT: Final[dict[str, int]]
FILE_NAME_FORMAT: Final[str]

def index_file_size(hash_slot_num: int, index_num: int) -> int: ...
def java_hash(text: str) -> int: ...
def index_key_hash(topic: str, key: str) -> int: ...

@disjoint_base
class IndexFile:
    path: str
    hash_slot_num: int
    index_num: int
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int
    def __init__(
        self,
        path: str,
        hash_slot_num: int,
        index_num: int,
        create: bool = False,
        carried_phy_offset: int = 0,
        carried_timestamp: int = 0,
    ) -> None: ...
    @property
    def is_full(self) -> bool: ...
    def destroy(self) -> None: ...

@disjoint_base
class IndexService:
    store_path: str
    max_hash_slot_num: int
    max_index_num: int
    def __init__(
        self, store_path: str, max_hash_slot_num: int = 5_000_000, max_index_num: int = 20_000_000
    ) -> None: ...
    def load(self, last_exit_ok: bool, index_checkpoint_ms: int = 0) -> None: ...
    def build_index_py(
        self, topic: bytes, uniq_key: bytes, keys: bytes, phy_offset: int, store_timestamp: int
    ) -> None: ...
    def build_index_batch(
        self,
        topic: bytes,
        uniq_keys: list[bytes],
        first_phy_offset: int,
        phy_offset_step: int,
        store_timestamp: int,
    ) -> None: ...
    def put_key(self, topic: str, key: str, phy_offset: int, store_timestamp: int) -> bool: ...
    def query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]: ...
    def flush(self) -> int: ...
    def delete_expired_files(self, min_phy_offset: int) -> int: ...
    def truncate_to(self, phy_offset: int) -> int: ...
    def shutdown(self) -> None: ...
    @property
    def max_phy_offset(self) -> int: ...
    @property
    def files(self) -> list[str]: ...
