"""Query messages by key: the IndexFile of docs/store-format.md#indexfile, as RocketMQ 4.x lays it out.

The work is done by the compiled ``rmq.store._index`` (its module docstring draws the layout); this
module is its public face and the one Python copy of the layout constants of ``_index.pxd``
(tests/store/test_index.py checks the two agree). Index keys are ``topic#key`` for a message's UNIQ_KEY
and each token of its KEYS; the key hash is Java's ``String.hashCode``, so a query can return
offsets of other keys with the same hash: callers re-check the real key.
"""

from __future__ import annotations

from rmq.store._index import IndexFile, IndexService, index_file_size, index_key_hash

__all__ = [
    "IndexFile",
    "IndexService",
    "index_file_size",
    "index_key_hash",
]

INDEX_HEADER_SIZE = 40
HEADER_BEGIN_TIMESTAMP = 0  # int64, store time of the first entry (ms)
HEADER_END_TIMESTAMP = 8  # int64, store time of the last entry (ms)
HEADER_BEGIN_PHY_OFFSET = 16  # int64, CommitLog offset of the first entry
HEADER_END_PHY_OFFSET = 24  # int64, CommitLog offset of the last entry
HEADER_HASH_SLOT_COUNT = 32  # int32, slots in use
HEADER_INDEX_COUNT = 36  # int32, next entry number (entry 0 is never used)
HASH_SLOT_SIZE = 4  # int32, newest entry number of the bucket (0: empty)
INDEX_ENTRY_SIZE = 20
ENTRY_KEY_HASH = 0  # int32, |String.hashCode("topic#key")|
ENTRY_PHY_OFFSET = 4  # int64
ENTRY_TIME_DIFF = 12  # int32, seconds since the header's beginTimestamp
ENTRY_PREV_INDEX = 16  # int32, older entry of the same bucket (0: end of chain)
INVALID_INDEX = 0
# maxHashSlotNum / maxIndexNum of MessageStoreConfig: one file of 420,000,040 bytes
DEFAULT_MAX_HASH_SLOT_NUM = 5_000_000
DEFAULT_MAX_INDEX_NUM = 20_000_000
