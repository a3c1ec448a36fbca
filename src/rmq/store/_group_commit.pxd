# The group commit: the watermarks a waiting put needs passed (flushed: SYNC_FLUSH; replicated:
# SYNC_MASTER), shared by the put path (GIL held), a flush thread that never holds the GIL and the
# HA service; one eventfd tells the completer either moved (the drawing opens _group_commit.pyx).
from libc.stdint cimport int64_t

from rmq.includes.system cimport pthread_cond_t, pthread_mutex_t


cdef enum:
    # CommitLog files the flush thread can see: the newest ones (a flush never lags further behind)
    COMMIT_FILE_REFS = 8
    # rounds in a row whose msync was fast before the completer may make one itself again: a slow
    # disk keeps the msync on the flush thread, off the loop every connection waits on
    INLINE_AFTER_FAST_ROUNDS = 16

# How a SYNC_MASTER put waits for its replicas (``replica_rule``, set by the HA side with the acks;
# rmq.store.ha picks it from the sync state set).
cpdef enum ReplicaRule:
    REPLICAS_BEST_SLAVE = 0         # no sync state set (4.x): the best slave ack, a slave in sync
    REPLICAS_SYNC_STATE_SET = 1     # ``replicated`` is the ack the sync state set's rule computed
    REPLICAS_MASTER_ALONE = 2       # the rule needs no slave: a put completes once stored
    REPLICAS_TOO_FEW = 3            # the set is smaller than the rule needs

# What a SYNC_MASTER put does (``replica_wait``).
cdef enum ReplicaWait:
    REPLICA_NOT_AVAILABLE = -1      # answered SLAVE_NOT_AVAILABLE at once (stored, not replicated)
    REPLICA_DONE = 0                # answered once stored
    REPLICA_WAIT = 1                # answered once ``replicated`` passes its end, or at slaveTimeout

cdef struct CommitFileRef:
    unsigned char* base
    int64_t from_offset
    int64_t size

# Every field is guarded by ``mutex``.
cdef struct GroupCommitState:
    pthread_mutex_t mutex
    pthread_cond_t wake                 # the flush thread waits on it when it has nothing to do
    int64_t written                     # CommitLog end after the newest put
    int64_t written_timestamp           # store timestamp of that put
    int64_t requested                   # a put waits for the disk up to here
    int64_t flushed                     # everything below is on disk
    int64_t flushed_timestamp
    int64_t flush_count
    int64_t replicated                  # the replicas' ack: everything below is on the slaves the rule needs
    int slaves                          # slaves connected to the HA service
    int replica_rule                    # ReplicaRule
    int error                           # errno of a failed msync, until the completer has seen it
    bint idle                           # the flush thread is waiting on ``wake``
    bint flushing                       # the flush thread is making a round (its msync under way)
    bint stopping
    int event_fd                        # counts flush rounds: the completer polls it
    # rounds the completer made itself (``inline_round``), while the flush thread stayed asleep
    int64_t inline_rounds
    bint inline_running                 # the completer is making a round: the flush thread stays out
    # a round's msync slower than this (ns) sends the next INLINE_AFTER_FAST_ROUNDS back to the
    # flush thread (0: the completer never makes a round)
    int64_t inline_max_ns
    int64_t fast_rounds                 # rounds in a row whose msync took at most inline_max_ns
    # the last round's stages, CLOCK_MONOTONIC ns (perf/trace_sync_send.py): when a put asked the
    # idle flush thread for it, when that thread ran, when its msync returned
    int64_t asked_ns
    int64_t woke_ns
    int64_t synced_ns
    int n_files
    CommitFileRef files[COMMIT_FILE_REFS]


cdef class GroupCommit:
    cdef GroupCommitState* state

    cdef void close(self) noexcept
    cdef void start(self, int64_t end) noexcept
    cdef void rewind(self, int64_t end) noexcept
    cdef void publish_put(self, int64_t next_offset, int64_t store_timestamp, bint wait) noexcept
    cdef void publish_files(self, list files)
    cdef void kick(self) noexcept
    cdef int inline_round(self) noexcept
    cdef void stop(self) noexcept
    cdef int take_round(self, int64_t* flushed, int64_t* flushed_timestamp, int64_t* replicated) noexcept
    cdef int replica_wait(self, int64_t end, int64_t max_gap) noexcept
    cdef void finish(self, int error, int64_t flushed, int64_t flushed_timestamp) noexcept


# The HA side (any thread, no GIL needed): how far the replicas the rule needs acked, how many
# slaves acked, and the rule (ReplicaRule); wakes the completer when the ack moved forward.
cdef void publish_replicated_to(GroupCommitState* gc, int64_t offset, int slaves, int rule) noexcept nogil
