# The compiled store's facade (docs/store-format.md): StoreCore ties the rooms together, and the
# results of its puts and gets. The rooms, each with its own .pxd:
#
#   rmq.protocol._record   the CommitLog record codec (layout, writers, checks, msgIds)
#   rmq.store._mapped_file       MappedFile, MappedFileQueue
#   rmq.store._commit_log        CommitLog: appends, roll-over, records by offset; PutStatus
#   rmq.store._consume_queue     ConsumeQueue, StoreCheckpoint
#   rmq.store._group_commit      the SYNC_FLUSH group commit and its GIL-free flush thread
#   rmq.store._index             the IndexFile
from libc.stdint cimport int32_t, int64_t, uint32_t
from posix.time cimport clock_gettime, timespec

from rmq.store._commit_log cimport CommitLog
from rmq.store._consume_queue cimport ConsumeQueue, StoreCheckpoint
from rmq.store._group_commit cimport GroupCommit
from rmq.store._index cimport IndexService
from rmq.store._mapped_file cimport MappedFile


# GetMessageStatus values (names in rmq.store.status, same order as RocketMQ).
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


# One message of a batch put_batch_raw appends: its buffers (the caller's, alive during the call),
# and what put_batch_raw fills in (its body CRC, its record size).
cdef struct BatchRecord:
    const unsigned char* body
    Py_ssize_t body_len
    const unsigned char* props
    Py_ssize_t props_len
    int flag
    uint32_t crc
    Py_ssize_t size


# Where a put_raw (a put_batch_raw: its first message) went.
# What a put writes besides its topic, queue, body and properties, filled in by name by the caller
# (put_message, put_messages, the send lane) so that no field can change places between them.
# A batch takes its flag per record and writes no reconsume_times or prepared_tx_offset.
cdef struct PutFields:
    int sys_flag
    int64_t born_timestamp
    int flag
    int reconsume_times
    uint32_t born_host
    int born_port
    int64_t prepared_tx_offset


cdef struct PutPlace:
    int64_t phy_offset
    int64_t queue_offset
    int64_t store_timestamp
    Py_ssize_t total


# Where a get_into went: get_message's outcome, without the records.
cdef struct GetPlace:
    int status
    int64_t next_begin_offset
    int64_t min_offset
    int64_t max_offset
    Py_ssize_t count
    Py_ssize_t total_bytes
    int64_t last_phy_offset     # the CommitLog offset of the last record found (-1: none)


# A put a compiled lane made and whose answer waits for the group commit (``StoreCore.defer_put``):
# what ``complete_commits`` needs to decide it, without a Python object per put.
cdef struct DeferredPut:
    int64_t next_offset
    double since
    bint wait_slave
    int done_status


cdef class CommitSink:
    # The owner of the deferred puts (the broker's send lane): told in put order, merged with the
    # waiting PutMessageResults, as each completes (``complete``), then once per pass (``round_done``).
    cdef int complete(self, int status) except -1
    cdef int round_done(self) except -1


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
    # group commit: wait until the CommitLog is on disk (SYNC_FLUSH) and on a slave (_wait_slave)
    # past next_offset, then call callback(self) with status _done_status
    cdef readonly int64_t next_offset
    cdef double _since
    cdef bint _wait_slave
    cdef int _done_status
    cdef object _callback


cdef class GetMessageResult:
    cdef readonly int status_code
    cdef readonly int64_t next_begin_offset
    cdef readonly int64_t min_offset
    cdef readonly int64_t max_offset
    cdef readonly list messages
    cdef readonly list queue_offsets
    cdef readonly Py_ssize_t buffer_total_size


# StoreCore, a chain of classes, one per section, each the base of the next (_store.pyx says why);
# each declares the attributes its section owns and the cdef methods it defines.

cdef extern from "<time.h>" nogil:
    int CLOCK_BOOTTIME


cdef inline int64_t boottime_ns() noexcept nogil:
    """CLOCK_BOOTTIME in ns: it runs on while the process is stopped and the machine suspended
    (as the controllers' clocks do), what a master lease is measured on."""
    cdef timespec ts
    clock_gettime(CLOCK_BOOTTIME, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


cdef class _StoreState:
    cdef readonly str store_path
    cdef readonly CommitLog commit_log
    cdef readonly IndexService index_service
    cdef readonly StoreCheckpoint checkpoint
    cdef readonly bint sync_flush
    cdef readonly bint running
    # replication: sends wait for a slave (SYNC_MASTER); a slave's CommitLog is the master's copy
    cdef readonly bint sync_master
    cdef readonly bint slave
    # a master the name servers refused (another master of its name has a newer epoch): no puts
    cdef readonly bint fenced
    # the disk is fuller than diskSpaceWarningLevelRatio (RocketMQ's DISK_FULL running flag): no puts
    cdef readonly bint disk_full
    cdef bint _writable
    # controller mode's master lease (docs/controller.md#fencing): puts only until then, CLOCK_BOOTTIME
    # ns (the controllers may have replaced a master that stalled past it); 0: no lease
    cdef int64_t _lease_until_ns
    # a slave: where its own dispatch of replicated bytes has reached (a demoted master's starts at
    # its end, recovery's at the cut)
    cdef readonly int64_t reput_offset
    # puts are answered once the group commit says so (SYNC_FLUSH or SYNC_MASTER)
    cdef bint _completes_commits
    # the put lock: serialises writers and readers of mapped memory (see _lock)
    cdef bint _busy
    # shut down (StoreCore.close): no file is mapped any more, the put lock refuses every caller
    cdef readonly bint closed
    cdef GroupCommit _group_commit
    # store timestamps of the newest record written / dispatched (checkpoint bookkeeping)
    cdef readonly int64_t last_store_timestamp

    cdef int _lock(self) except -1
    cdef void _unlock(self) noexcept

    cdef inline bint lease_expired(self) noexcept:
        """A master lease is set and has run out: refuse the put (SERVICE_NOT_AVAILABLE)."""
        return self._lease_until_ns != 0 and boottime_ns() > self._lease_until_ns


cdef class _StoreQueues(_StoreState):
    cdef readonly dict consume_queue_table
    cdef readonly Py_ssize_t mapped_file_size_consume_queue
    cdef list _delay_level_ms

    cdef ConsumeQueue _find_or_create_queue(self, str topic, int queue_id)
    cdef int64_t _tags_code(self, const unsigned char* topic, Py_ssize_t topic_len,
                            PropertySpans* spans, int64_t store_timestamp) noexcept
    cdef int _dispatch(self, const unsigned char* record, int64_t phy_offset, int32_t size,
                       ConsumeQueue queue, PropertySpans* spans) except -1


cdef class _StoreReplication(_StoreQueues):
    # a slave: the CommitLog file append_replica pwrites into, and its descriptor (-1: none)
    cdef MappedFile _replica_file
    cdef int _replica_fd
    # an idle ASYNC_MASTER's HA thread: the eventfd the next put writes once (-1: none)
    cdef int _ha_wake_fd

    cdef void _wake_replication(self) noexcept
    cdef void _wake_ha(self) noexcept
    cdef int _dispatch_replica(self) except -1
    cdef int _write_replica(self, MappedFile mf, const char* data, Py_ssize_t n) except -1


cdef class _StoreGroupCommit(_StoreReplication):
    cdef readonly double sync_flush_timeout
    cdef readonly double slave_timeout
    cdef readonly int64_t ha_max_gap_not_in_sync
    # SYNC_FLUSH puts waiting for the disk (PutMessageResults in offset order), and the group commit
    cdef object _commit_requests
    # the deferred puts, a ring in put order (defer_put), and the one sink they are answered through
    cdef DeferredPut* _deferred
    cdef Py_ssize_t _deferred_head
    cdef Py_ssize_t _deferred_len
    cdef Py_ssize_t _deferred_cap
    cdef CommitSink _sink
    cdef int64_t _completed_flushed
    cdef bint _kicks_rounds

    cdef int defer_put(self, CommitSink sink, PutPlace* place, int* status) except -1
    cdef void publish_raw(self, const PutPlace* place) noexcept
    cdef int _wait_status(self, int64_t next_offset, bint* wait_slave) noexcept
    cdef void _publish_put(self, PutMessageResult result, object callback)
    cdef void _complete_deferred(self, int status)
    cdef void _deferred_round_done(self)


cdef class _StorePuts(_StoreGroupCommit):
    cdef readonly int64_t max_message_size
    cdef readonly uint32_t store_ip
    cdef readonly int32_t store_port

    cdef int put_raw(self, str topic, int queue_id, const unsigned char* body_ptr, Py_ssize_t body_len,
                     const unsigned char* props_ptr, Py_ssize_t props_len, const PutFields* fields,
                     PutPlace* place) except -1
    cdef int put_batch_raw(self, str topic, int queue_id, BatchRecord* records, Py_ssize_t n,
                           const PutFields* fields, PutPlace* place) except -1
    cdef PutMessageResult _stored(self, const PutPlace* place, int msg_num, list offsets, callback)
    cdef int _reserve_queue(self, ConsumeQueue queue, Py_ssize_t entries, int* status) except -1
    cdef int _reserve_index(self, Py_ssize_t entries, int* status) except -1


cdef class _StoreGets(_StorePuts):
    cdef int get_into(self, str topic, int queue_id, int64_t offset, int max_msgs, Py_ssize_t max_total_bytes,
                      object tag_filter, GetMessageResult result, bytearray out, GetPlace* place) except -1


cdef class _StoreRecovery(_StoreGets):
    cdef int _cut(self, int64_t end) except -1


cdef class StoreCore(_StoreRecovery):
    pass
