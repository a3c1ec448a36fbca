# The master's replication stream without the GIL (rmq.store.ha): the drawing opens _ha_stream.pyx.
from libc.stdint cimport int64_t, uint32_t

from rmq.includes.system cimport pthread_mutex_t
from rmq.store._group_commit cimport GroupCommit


cdef enum:
    # rmq.protocol.ha's frame header ([i64 startOffset][i32 size]) and report ([i64 maxOffset])
    FRAME_HEADER_SIZE = 12
    REPORT_SIZE = 8
    # frames handed to one sendmsg at most (a header and a span of the mapping each)
    MAX_FRAMES_PER_SEND = 64
    # (offset, time) samples kept to tell how many ms a slave lags (oldest dropped first)
    LAG_SAMPLES = 4096
    # brokers of a sync state set at most (a broker set is a master and a few slaves)
    MAX_SYNC_STATE_SET = 16

# Why the stream gave a slave up (``Slave.failure``); the HA loop logs it and closes the socket.
cpdef enum Failure:
    NO_FAILURE = 0
    CLOSED_BY_SLAVE = 1
    READ_FAILED = 2         # a: errno
    SEND_FAILED = 3         # a: errno
    BEYOND_END = 4          # a: the report, b: this CommitLog's end
    WENT_BACKWARDS = 5      # a: the last report, b: this one
    PAST_SENT = 6           # a: the report, b: where what was sent ends
    OFFSET_GONE = 7         # a: the offset no longer in this CommitLog
    SILENT = 8


cdef struct StreamFile:
    const unsigned char* base
    int64_t from_offset
    int64_t size
    # the MappedFile's wrote_position: its writer stores it after the bytes below it (release order)
    const Py_ssize_t* wrote


cdef struct Slave:
    int fd                  # -1: a free slot
    int failure             # Failure: the stream no longer serves it, the HA loop closes it
    int64_t failure_a
    int64_t failure_b
    bint acks_count         # its acks complete SYNC_MASTER sends (authenticated, or no credentials)
    int64_t acked           # its last report
    int64_t broker_id       # the id it named (controller mode's SLAVE_ID), -1: none
    # when it last had everything this CommitLog held (0: never); a pending proof of it: an ack
    # reaching check_end shows it had, at check_ns, all there was (RocketMQ 5.x's lastCaughtUpTime)
    int64_t caught_up_ns
    int64_t check_end
    int64_t check_ns
    # the frame being sent: start, size (-1: none) and how many of its bytes (header first) went
    int64_t frame_start
    int64_t frame_size
    int64_t frame_sent
    int64_t sent_to         # where the data of the last frame begun ends: no report may pass it
    unsigned char report[REPORT_SIZE]   # a report's first bytes, the rest not read yet
    int report_len
    int64_t last_read_ns
    int64_t last_write_ns
    uint32_t events         # what epoll watches
    bint want_write


# Every field is guarded by ``mutex`` except ``wake_slot`` and ``wake_pending`` (atomics).
cdef struct StreamState:
    pthread_mutex_t mutex
    int epoll_fd
    int wake_fd             # eventfd: new bytes (SYNC_MASTER's loop, an idle stream's next put), slaves added, stop
    int notify_fd           # eventfd the HA loop watches: a slave failed
    int wake_slot           # an idle ASYNC stream's wake_fd for the next put to write once; -1 otherwise
    int wake_pending        # wake_fd written and not read yet (one write per wake-up)
    bint stopping
    bint sync               # SYNC_MASTER: woken per stored iteration; else polls while bytes come
    bint idle
    int quiet_polls
    int64_t last_end
    int64_t batch_size      # haTransferBatchSize: a frame's data at most
    int64_t max_bytes_per_wakeup
    int frames_per_send
    int poll_ms
    int idle_polls
    int idle_wait_ms
    int64_t heartbeat_ns
    int64_t housekeeping_ns
    StreamFile* files
    int n_files
    Slave* slaves
    int n_slots
    int n_slaves
    int failures            # slaves failed and not yet taken by the HA loop
    # the acks of the slaves the HA loop serves itself (TLS), combined with these into the group commit
    int64_t python_best
    int python_count
    # ... and those of them that named a broker id of the sync state set: (id, ack) each
    int64_t python_ids[MAX_SYNC_STATE_SET]
    int64_t python_acked[MAX_SYNC_STATE_SET]
    int n_python_named
    # controller mode: the sync state set's brokers (the master's own id among them), how many of
    # its slaves must ack a put, and the rule the group commit applies (ReplicaRule)
    int64_t set_ids[MAX_SYNC_STATE_SET]
    int set_size
    int set_acks_needed
    int set_rule
    int64_t published_best
    int published_count
    int published_rule
    int64_t sample_offset[LAG_SAMPLES]
    int64_t sample_ns[LAG_SAMPLES]
    int sample_first
    int sample_count


cdef class HAStream:
    cdef StreamState* state
    cdef GroupCommit group_commit
    # what keeps the mappings in ``state.files`` alive: their MappedFiles and a view of each
    cdef list _file_refs

    cdef void publish_files(self, list files)
    cdef void _wake(self) noexcept


cdef extern from *:
    """
    static inline int rmq_exchange_int(int* p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
    static inline void rmq_store_int(int* p, int v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
    static inline Py_ssize_t rmq_load_acquire_ssize(const Py_ssize_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline void rmq_full_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
    """
    int rmq_exchange_int(int* p, int v) nogil
    void rmq_store_int(int* p, int v) nogil
    Py_ssize_t rmq_load_acquire_ssize(const Py_ssize_t* p) nogil
    # no load after it passes a store before it (x86 reorders those alone)
    void rmq_full_fence() nogil


cdef extern from "<unistd.h>" nogil:
    ssize_t write_eventfd "write"(int fd, const void* buf, size_t n)


cdef inline void wake_on_put(HAStream stream) noexcept:
    """After a put (GIL held): an idle ASYNC stream asked the next one to wake it, once."""
    cdef int fd
    cdef unsigned long long one = 1
    # Dekker's pattern with the stream going idle (``serve``): it stores the slot, then reads the
    # CommitLog's end; the put stored the end, then reads the slot. Without a fence on each side
    # x86 lets the load pass the store: each side misses the other's, the stream idles and the
    # put's bytes wait for its next look (idle_wait_ms, 100 ms). A fence per put, no syscall.
    rmq_full_fence()
    if stream.state.wake_slot >= 0:
        fd = rmq_exchange_int(&stream.state.wake_slot, -1)
        if fd >= 0:
            write_eventfd(fd, &one, sizeof(one))
