# The compiled store: mapped files, the CommitLog appends, the ConsumeQueue (SPEC.md section 5). The
# CommitLog record is rmq.protocol._record's (_record.pxd: its layout, writers and checks).
#
# ConsumeQueue entry, 20 bytes:   0 int64 commitLogOffset | 8 int32 size | 12 int64 tagsCode
# checkpoint file, one 4 KiB page: 0 int64 physicMsgTimestamp | 8 logicsMsgTimestamp | 16 indexMsgTimestamp
#
# Python mirror of every constant here: rmq.store.layout (tests/store/test_layout.py checks they agree).
from libc.stdint cimport int32_t, int64_t, uint32_t
from cpython.buffer cimport Py_buffer

from rmq._index cimport IndexService


cdef enum ConsumeQueueLayout:
    CQ_COMMITLOG_OFFSET = 0
    CQ_SIZE = 8
    CQ_TAGS_CODE = 12
    CQ_STORE_UNIT_SIZE = 20
    # size of a "blank" entry, written where a queue starts past offset 0 (as RocketMQ's fillPreBlank)
    CQ_BLANK_SIZE = 0x7FFFFFFF


cdef enum CheckpointLayout:
    CHECKPOINT_PHYSIC_TIMESTAMP = 0
    CHECKPOINT_LOGICS_TIMESTAMP = 8
    CHECKPOINT_INDEX_TIMESTAMP = 16
    CHECKPOINT_FILE_SIZE = 4096


# PutMessageStatus / GetMessageStatus values (names in rmq.store.status, same order as RocketMQ).
cdef enum PutStatus:
    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPPED_FILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGECACHE_BUSY = 8
    UNKNOWN_ERROR = 9


cdef enum GetStatus:
    FOUND = 0
    NO_MATCHED_MESSAGE = 1
    MESSAGE_WAS_REMOVING = 2
    OFFSET_FOUND_NULL = 3
    OFFSET_OVERFLOW_BADLY = 4
    OFFSET_OVERFLOW_ONE = 5
    OFFSET_TOO_SMALL = 6
    NO_MATCHED_LOGIC_QUEUE = 7
    NO_MESSAGE_IN_QUEUE = 8


# Values of the properties the store reads on every put, found by one scan of k\x01v\x02 bytes.
cdef struct PropertySpans:
    const unsigned char* tags
    Py_ssize_t tags_len
    const unsigned char* keys
    Py_ssize_t keys_len
    const unsigned char* uniq_key
    Py_ssize_t uniq_key_len
    const unsigned char* delay
    Py_ssize_t delay_len


cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass


# The SYNC_FLUSH group commit, shared by the thread that puts (holding the GIL) and the flush
# thread (never holding it). Every field is guarded by ``mutex``.
cdef enum:
    # CommitLog files the flush thread can see: the newest ones (a flush never lags further behind)
    COMMIT_FILE_REFS = 8

cdef struct CommitFileRef:
    unsigned char* base
    int64_t from_offset
    int64_t size

cdef struct GroupCommit:
    pthread_mutex_t mutex
    pthread_cond_t wake                 # the flush thread waits on it when it has nothing to do
    int64_t written                     # CommitLog end after the newest put
    int64_t written_timestamp           # store timestamp of that put
    int64_t requested                   # a put waits for the disk up to here
    int64_t flushed                     # everything below is on disk
    int64_t flushed_timestamp
    int64_t flush_count
    int error                           # errno of a failed msync, until the completer has seen it
    bint idle                           # the flush thread is waiting on ``wake``
    bint stopping
    int event_fd                        # counts flush rounds: the completer polls it
    int n_files
    CommitFileRef files[COMMIT_FILE_REFS]


cdef class MappedFile:
    cdef readonly str path
    cdef readonly int64_t file_from_offset
    cdef readonly Py_ssize_t file_size
    # bytes written (only the writer advances it) and bytes known to be on disk
    cdef Py_ssize_t wrote_position
    cdef Py_ssize_t flushed_position
    cdef unsigned char* base
    cdef object _mmap
    cdef object _view
    cdef Py_buffer _buffer
    cdef bint _has_buffer
    # store timestamp of the newest record written here (CommitLog files; checkpoint bookkeeping)
    cdef int64_t last_store_timestamp

    cdef void prefault(self, Py_ssize_t position) noexcept
    cdef object view(self, Py_ssize_t position, Py_ssize_t size)
    cdef int flush_to(self, Py_ssize_t position) except -1
    cdef void _release(self) noexcept


cdef class MappedFileQueue:
    cdef readonly str store_path
    cdef readonly Py_ssize_t mapped_file_size
    cdef list files
    # everything below this offset is on disk
    cdef int64_t flushed_where
    # msync calls made (benchmarks report flushes per second)
    cdef readonly int64_t flush_count

    cdef MappedFile last_file(self)
    cdef MappedFile create_file(self, int64_t start_offset)
    cdef MappedFile find_by_offset(self, int64_t offset)
    cdef int64_t min_offset(self) noexcept
    cdef int64_t max_offset(self) noexcept
    cdef int flush(self, int least_pages) except -1
    cdef int truncate(self, int64_t offset) except -1


cdef class ConsumeQueue:
    cdef readonly str topic
    cdef readonly int queue_id
    cdef MappedFileQueue files
    # byte offset of the first live entry (entries below point at deleted CommitLog files)
    cdef int64_t min_logic_offset
    # the queue offset the next stored message gets
    cdef int64_t next_queue_offset
    # end of the newest CommitLog record dispatched here
    cdef int64_t max_physic_offset

    cdef int reserve(self, Py_ssize_t entries) except -1
    cdef int put_entry(self, int64_t phy_offset, int32_t size, int64_t tags_code,
                       int64_t queue_offset) except -1
    cdef int _write_at(self, int64_t position, int64_t phy_offset, int32_t size,
                       int64_t tags_code) except -1
    cdef const unsigned char* entry(self, int64_t queue_offset) noexcept
    cdef int64_t max_offset(self) noexcept


cdef class StoreCheckpoint:
    cdef readonly str path
    cdef object _mmap
    cdef Py_buffer _buffer
    cdef bint _has_buffer
    cdef unsigned char* base


cdef class PutMessageResult:
    cdef readonly int status_code
    cdef readonly int64_t wrote_offset
    cdef readonly int wrote_bytes
    cdef readonly int64_t queue_offset
    cdef readonly int64_t store_timestamp
    cdef readonly int msg_num
    cdef uint32_t _store_ip
    cdef int32_t _store_port
    # a batch: physical offset of every message (None for a single message)
    cdef list _offsets
    # group commit: wait until the CommitLog is on disk past next_offset, then call callback(self)
    cdef readonly int64_t next_offset
    cdef double _deadline
    cdef object _callback


cdef class GetMessageResult:
    cdef readonly int status_code
    cdef readonly int64_t next_begin_offset
    cdef readonly int64_t min_offset
    cdef readonly int64_t max_offset
    cdef readonly list messages
    cdef readonly list queue_offsets
    cdef readonly Py_ssize_t buffer_total_size


cdef class StoreCore:
    cdef readonly str store_path
    cdef readonly MappedFileQueue commit_log
    cdef readonly dict consume_queue_table
    cdef readonly IndexService index_service
    cdef readonly StoreCheckpoint checkpoint
    cdef readonly Py_ssize_t mapped_file_size_consume_queue
    cdef readonly int64_t max_message_size
    cdef readonly uint32_t store_ip
    cdef readonly int32_t store_port
    cdef readonly bint sync_flush
    cdef readonly double sync_flush_timeout
    cdef readonly bint running
    cdef list _delay_level_ms
    # the put lock: serialises writers and readers of mapped memory (see _lock)
    cdef bint _busy
    # SYNC_FLUSH puts waiting for the disk (PutMessageResults in offset order), and the group commit
    cdef object _commit_requests
    cdef GroupCommit* _gc
    cdef int64_t _completed_flushed
    cdef bint _kicks_rounds
    # store timestamps of the newest record written / dispatched (checkpoint bookkeeping)
    cdef readonly int64_t last_store_timestamp
    cdef int64_t _last_roll_check

    cdef int _lock(self) except -1
    cdef void _unlock(self) noexcept
    cdef ConsumeQueue _find_or_create_queue(self, str topic, int queue_id)
    cdef MappedFile _writable_file(self, Py_ssize_t size, int* status)
    cdef int _reserve_queue(self, ConsumeQueue queue, Py_ssize_t entries, int* status) except -1
    cdef void _publish_put(self, PutMessageResult result, object callback)
    cdef void _publish_files(self)
    cdef int _dispatch(self, const unsigned char* record, int64_t phy_offset, int32_t size,
                       ConsumeQueue queue) except -1
    cdef int64_t _tags_code(self, const unsigned char* topic, Py_ssize_t topic_len,
                            PropertySpans* spans, int64_t store_timestamp) noexcept
