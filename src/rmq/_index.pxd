# The IndexFile service: contract between rmq._store (which dispatches every stored message here
# from C) and rmq._index. Fields of the cdef classes may be added by _index; the signature of
# build_index is what _store relies on.
from libc.stdint cimport int64_t


cdef class IndexService:
    # Index one stored message: its UNIQ_KEY (if uniq_key_len > 0) and every space-separated token of
    # KEYS (if keys_len > 0), each keyed "topic#key". A message whose phy_offset is below what the
    # index already holds is skipped (re-dispatch after recovery is a no-op).
    cdef int build_index(self, const unsigned char* topic, Py_ssize_t topic_len,
                         const unsigned char* uniq_key, Py_ssize_t uniq_key_len,
                         const unsigned char* keys, Py_ssize_t keys_len,
                         int64_t phy_offset, int64_t store_timestamp) except -1
