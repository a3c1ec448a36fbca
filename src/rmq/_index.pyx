# Placeholder until the IndexFile lands (issue 2): the full API of the contract, indexing nothing.
# The real module keeps these names and signatures.
from libc.stdint cimport int64_t


cdef class IndexService:
    def __init__(self, str store_path, int max_hash_slot_num=5000000, int max_index_num=20000000):
        pass

    def load(self, bint last_exit_ok, int64_t index_checkpoint_ms=0):
        pass

    cdef int build_index(self, const unsigned char* topic, Py_ssize_t topic_len,
                         const unsigned char* uniq_key, Py_ssize_t uniq_key_len,
                         const unsigned char* keys, Py_ssize_t keys_len,
                         int64_t phy_offset, int64_t store_timestamp) except -1:
        return 0

    def put_key(self, str topic, str key, int64_t phy_offset, int64_t store_timestamp):
        return False

    def query(self, str topic, str key, int max_num, int64_t begin_ms, int64_t end_ms):
        return []

    def flush(self):
        return 0

    def delete_expired_files(self, int64_t min_phy_offset):
        return 0

    def shutdown(self):
        pass

    @property
    def max_phy_offset(self):
        return 0
