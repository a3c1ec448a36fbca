# The CommitLog: every topic's records back to back in one log of mapped files (the drawing opens
# _commit_log.pyx; the record itself is rmq.protocol._record's). What every put runs is ``cdef
# inline`` here, compiled into the caller: a call into another extension module is a pointer call.
from libc.stdint cimport int64_t

from rmq.store._group_commit cimport GroupCommit
from rmq.store._ha_stream cimport HAStream
from rmq.store._mapped_file cimport PREFAULT_CHUNK, MappedFile, MappedFileQueue


# PutMessageStatus values (names in rmq.store.status, same order as RocketMQ).
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


cdef class CommitLog(MappedFileQueue):
    # SYNC_FLUSH: the group commit shown the newest files whenever they change; None otherwise
    cdef readonly GroupCommit group_commit
    # a master's replication stream, shown the files whenever they change; None without one
    cdef readonly HAStream ha_stream
    # the store's prefault thread's wakeup, handed to every file made from now on (None: the
    # writer populates each next chunk itself)
    cdef object prefault_waker
    # the next file, made by the prefault thread before the writer needs it (named with
    # MADE_AHEAD_SUFFIX until the writer's roll-over takes it); None when there is none yet
    cdef MappedFile made_ahead
    # held while that file is made, by the prefault thread, and by a roll-over taking or making
    # its next file: one file made at a time (``_roll_over_file``)
    cdef object making_ahead

    cdef MappedFile writable_file(self, Py_ssize_t size, int* status)
    cdef void publish_files(self)
    cdef void _hand_prefault(self, MappedFile mf) noexcept
    cdef MappedFile _roll_over_file(self, int64_t offset)
    cdef int _make_ahead(self, Py_ssize_t chunks) except -1
    cdef MappedFile take_made_ahead(self, int64_t offset)
    cdef object look_message(self, int64_t phy_offset, Py_ssize_t size)
    cdef int64_t store_timestamp_at(self, int64_t phy_offset)


cdef extern from *:
    """
    static inline void rmq_release_fence(void) { __atomic_thread_fence(__ATOMIC_RELEASE); }
    """
    # the bytes below a new wrote_position are stored before it: the replication stream reads
    # wrote_position without the GIL (rmq.store._ha_stream), then the bytes
    void rmq_release_fence() nogil


cdef inline void record_appended(MappedFile mf, Py_ssize_t size, int64_t store_timestamp) noexcept:
    """The record of ``size`` bytes just written at the end of ``mf`` (by the put lock's holder)
    joins the CommitLog. Only once it is whole: a flush thread msyncs up to ``wrote_position``
    whenever it holds the GIL, and the prefault below releases the GIL."""
    cdef Py_ssize_t chunk_mask = ~(<Py_ssize_t>PREFAULT_CHUNK - 1)
    if (mf.wrote_position + size) & chunk_mask != mf.wrote_position & chunk_mask:   # into the next chunk
        if mf.prefault_waker is None:
            mf.prefault(mf.wrote_position + size)
        else:
            mf.prefault_waker()
    rmq_release_fence()
    mf.wrote_position += size
    mf.last_store_timestamp = store_timestamp
