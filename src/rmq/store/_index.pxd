# The IndexFile service: contract between rmq.store._store (which dispatches every stored message here
# from C) and rmq.store._index. Fields of the cdef classes may be added by _index; the signature of
# build_index is what _store relies on.
from libc.stdint cimport int32_t, int64_t, uint32_t


# Byte layout of an IndexFile (docs/store-format.md#indexfile; the drawing is at the top of _index.pyx).
# Mirrored once in Python by rmq.store.index; tests/store/test_index.py checks the two agree.
cdef enum:
    INDEX_HEADER_SIZE = 40
    HEADER_BEGIN_TIMESTAMP = 0      # int64, store time of the first entry (ms)
    HEADER_END_TIMESTAMP = 8        # int64, store time of the last entry (ms)
    HEADER_BEGIN_PHY_OFFSET = 16    # int64, CommitLog offset of the first entry
    HEADER_END_PHY_OFFSET = 24      # int64, CommitLog offset of the last entry
    HEADER_HASH_SLOT_COUNT = 32     # int32, slots in use
    HEADER_INDEX_COUNT = 36         # int32, next entry number (entry 0 is never used)
    HASH_SLOT_SIZE = 4              # int32, newest entry number of the bucket (0: empty)
    INDEX_ENTRY_SIZE = 20
    ENTRY_KEY_HASH = 0              # int32, |String.hashCode("topic#key")|
    ENTRY_PHY_OFFSET = 4            # int64
    ENTRY_TIME_DIFF = 12            # int32, seconds since the header's beginTimestamp
    ENTRY_PREV_INDEX = 16           # int32, older entry of the same bucket (0: end of chain)
    INVALID_INDEX = 0
    DEFAULT_MAX_HASH_SLOT_NUM = 5000000
    DEFAULT_MAX_INDEX_NUM = 20000000


# One mapped index file. Header fields are kept here in host order and written through to the
# mapping on every put, so a killed process leaves a consistent file in the page cache.
cdef class IndexFile:
    cdef readonly str path
    cdef unsigned char* base          # the whole file, mapped shared; NULL once closed
    cdef Py_ssize_t size
    cdef readonly int32_t hash_slot_num
    cdef readonly int32_t index_num
    cdef readonly int64_t begin_timestamp
    cdef readonly int64_t end_timestamp
    cdef readonly int64_t begin_phy_offset
    cdef readonly int64_t end_phy_offset
    cdef readonly int32_t hash_slot_count
    cdef readonly int32_t index_count
    cdef int32_t flushed_index_count  # index_count when the last msync started

    cdef bint put(self, uint32_t key_hash, int64_t phy_offset, int64_t store_timestamp) noexcept nogil
    cdef Py_ssize_t select_phy_offsets(self, uint32_t key_hash, int64_t* out, Py_ssize_t found,
                                       Py_ssize_t max_num, int64_t begin_ms, int64_t end_ms) noexcept nogil
    cdef bint is_time_matched(self, int64_t begin_ms, int64_t end_ms) noexcept nogil
    cdef unsigned char* slot_at(self, uint32_t key_hash) noexcept nogil
    cdef unsigned char* entry_at(self, int32_t n) noexcept nogil
    cdef void write_header(self) noexcept nogil
    cdef read_header(self)
    cdef int msync(self) except -1
    cdef void close(self) noexcept


cdef class IndexService:
    cdef readonly str store_path
    cdef readonly int32_t max_hash_slot_num
    cdef readonly int32_t max_index_num
    cdef list index_files             # of IndexFile, oldest first
    cdef object files_lock            # held while files are msync'd or unmapped

    # Index one stored message: its UNIQ_KEY (if uniq_key_len > 0) and every space-separated token of
    # KEYS (if keys_len > 0), each keyed "topic#key". A message whose phy_offset is below what the
    # index already holds is skipped (re-dispatch after recovery is a no-op).
    # Raises OSError when a new index file cannot be created (ENOSPC): the message's remaining keys
    # are then not indexed.
    cdef int build_index(self, const unsigned char* topic, Py_ssize_t topic_len,
                         const unsigned char* uniq_key, Py_ssize_t uniq_key_len,
                         const unsigned char* keys, Py_ssize_t keys_len,
                         int64_t phy_offset, int64_t store_timestamp) except -1
    cdef int put_hashed(self, uint32_t key_hash, int64_t phy_offset, int64_t store_timestamp) except -1
    # Before a message is written: whether the newest file has room for its index entries. When it
    # has not, the store makes the next file (create_file) first, so that a full disk refuses the
    # message (OSError) instead of leaving it stored but not indexed.
    cdef bint has_room(self, Py_ssize_t entries) noexcept
    cdef IndexFile writable_file(self)
    cdef IndexFile create_file(self)


# At least as many index entries as a message takes: one for its UNIQ_KEY, one per space-separated
# token of KEYS (n tokens need 2n - 1 bytes). A bound, not a count: a new file a few entries early
# costs nothing, counting the separators of every message's KEYS does.
cdef inline Py_ssize_t index_entries_bound(Py_ssize_t uniq_key_len, Py_ssize_t keys_len) noexcept nogil:
    return (1 if uniq_key_len > 0 else 0) + (keys_len + 1) // 2
