# The ConsumeQueue and the checkpoint (the drawing opens _consume_queue.pyx). rmq.store.layout
# mirrors every constant here for Python; tests/store/test_layout.py checks they agree.
#
#   ConsumeQueue entry, 20 bytes:   0 int64 commitLogOffset | 8 int32 size | 12 int64 tagsCode
#   checkpoint file, one 4 KiB page: 0 int64 physicMsgTimestamp | 8 logicsMsgTimestamp | 16 indexMsgTimestamp
from libc.stdint cimport int32_t, int64_t
from cpython.buffer cimport Py_buffer

from rmq.store._mapped_file cimport MappedFileQueue


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
    cdef unsigned char* base   # NULL once closed

    cdef unsigned char* field(self, Py_ssize_t at) except NULL
