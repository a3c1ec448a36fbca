# placeholder until the IndexFile lands (issue 2): accepts and forgets every key.
from libc.stdint cimport int64_t


cdef class IndexService:
    cdef int build_index(self, const unsigned char* topic, Py_ssize_t topic_len,
                         const unsigned char* uniq_key, Py_ssize_t uniq_key_len,
                         const unsigned char* keys, Py_ssize_t keys_len,
                         int64_t phy_offset, int64_t store_timestamp) except -1:
        return 0
