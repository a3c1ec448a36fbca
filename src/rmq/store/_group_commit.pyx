# cython: cdivision=True, auto_pickle=False
# The group commit (docs/store-format.md#flush): one completion mechanism for the puts that wait, whether for
# the disk (SYNC_FLUSH: every such put joins the next flush round, and one msync serves them all) or
# for a slave (SYNC_MASTER: the HA service publishes the best slave ack). A waiting put completes
# once every watermark it needs has passed its end. The flush thread is C only: it never takes the GIL.
#
#   put (GIL held)          flush thread (no GIL)                  completer (GIL held)
#   write the record        wait until requested > flushed
#   publish written,   -->  take [flushed, written), msync it,
#   requested, wake         publish flushed, count a round   -->   complete the puts below
#                                                                  flushed (and/or replicated)
#                           HA service (its own loop thread)
#                           a slave acked: publish          -->
#                           replicated, slaves, the rule
#                           (the best ack, or the sync
#                           state set's: ReplicaRule)
#
#   GroupCommitState (C, every field guarded by ``mutex``)
#   +---------+-----------+-----------+---------+-------+------+----------+------------+--------+--------------+
#   | written | requested | flushed   | error   | idle  | stop | event_fd | replicated | slaves | files[8]:    |
#   | (+ ts)  |           | (+ ts)    | (errno) |       |      | (rounds, |            |        | the newest   |
#   |         |           |           |         |       |      |  acks)   |            |        | mappings     |
#   +---------+-----------+-----------+---------+-------+------+----------+------------+--------+--------------+
#
# The put path publishes under ``mutex`` and signals only an idle flush thread, so the msync of
# one round runs while the next puts are written: the rounds overlap instead of taking turns with
# the GIL. The completer (the broker's event loop, or a store thread) polls ``event_fd`` and
# completes the waiting puts (rmq.store._store.StoreCore.complete_commits).
#
# The completer may make a round itself instead (``inline_round``: the broker's loop when nothing
# else is ready, syncFlushInlineMaxMicros), only while the flush thread makes no round and is not
# asked for one, and the last INLINE_AFTER_FAST_ROUNDS rounds were fast; the flush thread stays
# out until it is done.
#
# The flush thread msyncs through raw pointers to the mappings of the newest CommitLog files
# (``files``), republished under the mutex whenever the files change: it only flushes above its
# watermark, far from the oldest files that retention deletes.
import logging

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.errno cimport EIO, errno
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy, memset, strerror
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from posix.unistd cimport close as c_close, read as c_read, write as c_write

from rmq.includes.system cimport (EFD_CLOEXEC, EFD_NONBLOCK, MS_SYNC, eventfd, msync, pthread_cond_destroy,
                                  pthread_cond_init, pthread_cond_signal, pthread_cond_timedwait,
                                  pthread_condattr_destroy, pthread_condattr_init, pthread_condattr_setclock,
                                  pthread_condattr_t, pthread_mutex_destroy, pthread_mutex_init, pthread_mutex_lock,
                                  pthread_mutex_unlock)
from rmq.store._mapped_file cimport PAGE_SIZE, MappedFile

log = logging.getLogger("rmq.store")


cdef inline void deadline_after(timespec* ts, double seconds) noexcept nogil:
    clock_gettime(CLOCK_MONOTONIC, ts)
    ts.tv_sec += <long>seconds
    ts.tv_nsec += <long>((seconds - <long>seconds) * 1e9)
    if ts.tv_nsec >= 1000000000:
        ts.tv_sec += 1
        ts.tv_nsec -= 1000000000


cdef inline int64_t now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1000000000 + ts.tv_nsec


cdef inline bint request_round(GroupCommitState* gc, int64_t offset) noexcept nogil:
    """Ask for a flush round up to ``offset`` (``gc.mutex`` held): whether the flush thread is idle
    and must be signalled, which the caller does after unlocking, so that the woken thread does
    not block at once on the mutex its waker still holds."""
    if offset > gc.requested:
        gc.requested = offset
        if gc.idle:
            gc.idle = False     # one signal per wait
            gc.asked_ns = now_ns()
            return True
    return False


cdef int flush_range(CommitFileRef* files, int n_files, int64_t start, int64_t end) noexcept nogil:
    """msync the CommitLog bytes [start, end) through the mappings in ``files``: 0 or an errno."""
    cdef int i
    cdef int64_t lo, hi
    for i in range(n_files):
        lo = files[i].from_offset
        hi = lo + files[i].size
        if hi <= start or lo >= end:
            continue
        lo = (start if start > lo else lo) - files[i].from_offset
        hi = (end if end < hi else hi) - files[i].from_offset
        lo &= ~(<int64_t>PAGE_SIZE - 1)
        if msync(files[i].base + lo, hi - lo, MS_SYNC) != 0:
            return errno
    return 0


cdef inline int begin_round(GroupCommitState* gc, CommitFileRef* files, int64_t* start, int64_t* target,
                            int64_t* target_timestamp) noexcept nogil:
    """A round starts (``gc.mutex`` held): what it flushes, and a copy of the mappings to flush it
    through, taken under the mutex; returns how many."""
    gc.woke_ns = now_ns()
    start[0] = gc.flushed
    target[0] = gc.written
    target_timestamp[0] = gc.written_timestamp
    memcpy(files, gc.files, gc.n_files * sizeof(CommitFileRef))
    return gc.n_files


cdef inline void end_round(GroupCommitState* gc, int rc, int64_t target, int64_t target_timestamp) noexcept nogil:
    """A round's msync returned ``rc`` (``gc.mutex`` held, ``gc.woke_ns`` its start): publish
    what it made durable, and whether it was fast enough for the completer to make the next."""
    gc.synced_ns = now_ns()
    if rc == 0:
        if target > gc.flushed:     # a round of the other side may have passed it meanwhile
            gc.flushed = target
            gc.flushed_timestamp = target_timestamp
        gc.flush_count += 1
    else:
        gc.error = rc
    if rc == 0 and gc.synced_ns - gc.woke_ns <= gc.inline_max_ns:
        gc.fast_rounds += 1
    else:
        gc.fast_rounds = 0


cdef void run_flusher(GroupCommitState* gc, double interval) noexcept nogil:
    """Flush rounds until ``gc.stopping``: at once when a put waits, else every ``interval`` s
    (puts that do not wait are durable within it); never while the completer makes one."""
    cdef timespec until
    cdef CommitFileRef files[COMMIT_FILE_REFS]
    cdef int n_files, rc
    cdef int64_t start, target, target_timestamp
    cdef uint64_t one = 1
    pthread_mutex_lock(&gc.mutex)
    while not gc.stopping:
        if gc.requested <= gc.flushed or gc.error or gc.inline_running:
            deadline_after(&until, interval)
            gc.idle = True
            pthread_cond_timedwait(&gc.wake, &gc.mutex, &until)
            gc.idle = False
            if gc.stopping or gc.error or gc.inline_running or gc.written <= gc.flushed:
                continue
        n_files = begin_round(gc, files, &start, &target, &target_timestamp)
        gc.flushing = True
        pthread_mutex_unlock(&gc.mutex)
        rc = flush_range(files, n_files, start, target)
        pthread_mutex_lock(&gc.mutex)
        end_round(gc, rc, target, target_timestamp)
        gc.flushing = False
        pthread_mutex_unlock(&gc.mutex)
        c_write(gc.event_fd, &one, sizeof(one))
        pthread_mutex_lock(&gc.mutex)
    pthread_mutex_unlock(&gc.mutex)


cdef void publish_replicated_to(GroupCommitState* gc, int64_t offset, int slaves, int rule) noexcept nogil:
    cdef uint64_t one = 1
    cdef bint moved
    pthread_mutex_lock(&gc.mutex)
    moved = offset > gc.replicated
    gc.replicated = offset      # may go down: the best slave left, a lagging one remains
    gc.slaves = slaves
    gc.replica_rule = rule
    pthread_mutex_unlock(&gc.mutex)
    if moved:
        c_write(gc.event_fd, &one, sizeof(one))


cdef class GroupCommit:
    """The state a SYNC_FLUSH store shares with its flush thread, and the calls either side makes.

    The store calls ``publish_put`` after each put, ``publish_files`` after the CommitLog files
    changed, and ``take_round`` to learn what a flush round made durable; the flush thread runs
    ``run`` until ``stop``."""

    def __cinit__(self):
        cdef pthread_condattr_t attr
        self.state = <GroupCommitState*>PyMem_Malloc(sizeof(GroupCommitState))
        if self.state == NULL:
            raise MemoryError()
        memset(self.state, 0, sizeof(GroupCommitState))
        self.state.event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
        if self.state.event_fd < 0:
            PyMem_Free(self.state)
            self.state = NULL
            raise OSError(errno, f"eventfd: {strerror(errno).decode()}")
        pthread_mutex_init(&self.state.mutex, NULL)
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(&self.state.wake, &attr)
        pthread_condattr_destroy(&attr)

    def __dealloc__(self):
        if self.state != NULL:
            pthread_cond_destroy(&self.state.wake)
            pthread_mutex_destroy(&self.state.mutex)
            if self.state.event_fd >= 0:
                c_close(self.state.event_fd)
            PyMem_Free(self.state)

    cdef void close(self) noexcept:
        """The store shut down, its flush thread and replication stopped: ``event_fd`` is closed
        (-1 from now on, so no late write can reach a descriptor that reused its number)."""
        cdef int fd
        pthread_mutex_lock(&self.state.mutex)
        fd = self.state.event_fd
        self.state.event_fd = -1
        self.state.n_files = 0
        pthread_mutex_unlock(&self.state.mutex)
        if fd >= 0:
            c_close(fd)

    cdef void start(self, int64_t end) noexcept:
        """Rounds start from the CommitLog as recovered: everything below ``end`` is on disk."""
        cdef GroupCommitState* gc = self.state
        pthread_mutex_lock(&gc.mutex)
        gc.written = gc.requested = gc.flushed = end
        if gc.replicated > end:
            gc.replicated = end
        gc.written_timestamp = gc.flushed_timestamp = 0
        gc.error = 0
        gc.stopping = False
        pthread_mutex_unlock(&gc.mutex)

    cdef void rewind(self, int64_t end) noexcept:
        """The CommitLog was cut at ``end`` (and flushed): no watermark may stay past it, or a put
        written there later would count as durable or replicated before it is."""
        cdef GroupCommitState* gc = self.state
        pthread_mutex_lock(&gc.mutex)
        if gc.written > end:
            gc.written = end
        if gc.requested > end:
            gc.requested = end
        if gc.flushed > end:
            gc.flushed = end
        if gc.replicated > end:
            gc.replicated = end
        pthread_mutex_unlock(&gc.mutex)

    def run(self, double interval):
        """The flush thread's body: flush rounds, without the GIL, until ``stop``."""
        with nogil:
            run_flusher(self.state, interval)

    cdef void publish_put(self, int64_t next_offset, int64_t store_timestamp, bint wait) noexcept:
        """Tell the flush thread how far the CommitLog goes after a put; ``wait``: that put waits
        for the disk, so ask for a round now (waking the flush thread if it sleeps)."""
        cdef GroupCommitState* gc = self.state
        cdef bint signal = False
        pthread_mutex_lock(&gc.mutex)
        if next_offset > gc.written:
            gc.written = next_offset
            gc.written_timestamp = store_timestamp
        if wait:
            signal = request_round(gc, next_offset)
        pthread_mutex_unlock(&gc.mutex)
        if signal:
            pthread_cond_signal(&gc.wake)

    cdef void publish_files(self, list files):
        """Show the flush thread the mappings of the newest CommitLog ``files`` (after any change).
        A file that drops out of its view unflushed (many roll-overs within one round) is flushed
        here, so no byte the flush thread reports durable was skipped."""
        cdef GroupCommitState* gc = self.state
        cdef Py_ssize_t first = max(0, len(files) - COMMIT_FILE_REFS), i
        cdef int64_t flushed
        cdef MappedFile mf
        pthread_mutex_lock(&gc.mutex)
        flushed = gc.flushed
        pthread_mutex_unlock(&gc.mutex)
        for i in range(first - 1, -1, -1):
            mf = files[i]
            if mf.file_from_offset + mf.file_size <= flushed:
                break
            try:
                mf.flush_to(mf.wrote_position)
            except OSError as e:
                log.error("CommitLog flush failed: %s", e)
                pthread_mutex_lock(&gc.mutex)
                gc.error = e.errno or EIO
                pthread_mutex_unlock(&gc.mutex)
        pthread_mutex_lock(&gc.mutex)
        gc.n_files = 0
        for i in range(first, len(files)):
            mf = files[i]
            gc.files[gc.n_files].base = mf.base
            gc.files[gc.n_files].from_offset = mf.file_from_offset
            gc.files[gc.n_files].size = mf.file_size
            gc.n_files += 1
        pthread_mutex_unlock(&gc.mutex)

    cdef void kick(self) noexcept:
        """Ask for a round covering every put so far."""
        cdef bint signal
        pthread_mutex_lock(&self.state.mutex)
        signal = request_round(self.state, self.state.written)
        pthread_mutex_unlock(&self.state.mutex)
        if signal:
            pthread_cond_signal(&self.state.wake)

    cdef int inline_round(self) noexcept:
        """Make the round a ``kick`` would ask for on the calling thread (the completer, which then
        completes it without ``event_fd``): -1 when it may not (inline rounds off, a recent round
        slow or failed, the flush thread making or asked for a round, an error not yet taken, nothing
        to flush), else 0 or the msync's errno, published as the flush thread publishes its rounds'.
        The flush thread need not be asleep yet: a round of its own it has not begun waits for the
        mutex and then finds nothing to do (on a busy machine, the completer woken by a round's end
        often runs before that thread is back in its wait)"""
        cdef GroupCommitState* gc = self.state
        cdef CommitFileRef files[COMMIT_FILE_REFS]
        cdef int n_files, rc
        cdef int64_t start, target, target_timestamp
        cdef bint signal
        pthread_mutex_lock(&gc.mutex)
        if (gc.inline_max_ns <= 0 or gc.fast_rounds < INLINE_AFTER_FAST_ROUNDS or gc.flushing
                or gc.requested > gc.flushed or gc.error or gc.stopping or gc.written <= gc.flushed):
            pthread_mutex_unlock(&gc.mutex)
            return -1
        gc.inline_running = True
        gc.requested = gc.written
        n_files = begin_round(gc, files, &start, &target, &target_timestamp)
        gc.asked_ns = gc.woke_ns
        pthread_mutex_unlock(&gc.mutex)
        with nogil:
            rc = flush_range(files, n_files, start, target)
        pthread_mutex_lock(&gc.mutex)
        end_round(gc, rc, target, target_timestamp)
        gc.inline_rounds += 1
        gc.inline_running = False
        # another thread's put asked for a round meanwhile: the flush thread stayed out, wake it
        signal = gc.requested > gc.flushed and gc.idle
        if signal:
            gc.idle = False
        pthread_mutex_unlock(&gc.mutex)
        if signal:
            pthread_cond_signal(&gc.wake)
        return rc

    def allow_inline_rounds(self, double max_msync_seconds):
        """Let ``inline_round`` make rounds while the last INLINE_AFTER_FAST_ROUNDS rounds' msyncs
        each took at most ``max_msync_seconds`` (0: never)."""
        pthread_mutex_lock(&self.state.mutex)
        self.state.inline_max_ns = <int64_t>(max_msync_seconds * 1e9)
        pthread_mutex_unlock(&self.state.mutex)

    @property
    def inline_rounds(self):
        """Rounds ``inline_round`` made (the rest of ``flush_count`` the flush thread made)."""
        return self.state.inline_rounds

    cdef void stop(self) noexcept:
        """Make ``run`` return after its current round."""
        pthread_mutex_lock(&self.state.mutex)
        self.state.stopping = True
        pthread_cond_signal(&self.state.wake)
        pthread_mutex_unlock(&self.state.mutex)

    def publish_replicated(self, int64_t offset, int slaves, int rule=REPLICAS_BEST_SLAVE):
        """The HA service's side (any thread): how far the replicas ``rule`` needs acked (the best
        slave's without a sync state set) and how many slaves are connected; wakes the completer
        when the ack moved forward."""
        with nogil:
            publish_replicated_to(self.state, offset, slaves, rule)

    @property
    def replicated(self):
        """The best offset a slave acked."""
        return self.state.replicated

    @property
    def round_times(self):
        """The last flush round's stages, seconds on ``time.monotonic``'s clock: when a put asked
        the idle flush thread for a round, when the last round started, when its msync returned (0: none
        yet)."""
        cdef GroupCommitState* gc = self.state
        pthread_mutex_lock(&gc.mutex)
        times = (gc.asked_ns / 1e9, gc.woke_ns / 1e9, gc.synced_ns / 1e9)
        pthread_mutex_unlock(&gc.mutex)
        return times

    cdef int replica_wait(self, int64_t end, int64_t max_gap) noexcept:
        """What a SYNC_MASTER put ending at ``end`` does (ReplicaWait). Without a sync state set it
        waits while a slave is connected and lags less than ``max_gap`` bytes behind ``end``;
        with one, as the rule the HA side published says."""
        cdef GroupCommitState* gc = self.state
        cdef int wait
        pthread_mutex_lock(&gc.mutex)
        if gc.replica_rule == REPLICAS_SYNC_STATE_SET:
            wait = REPLICA_WAIT
        elif gc.replica_rule == REPLICAS_MASTER_ALONE:
            wait = REPLICA_DONE
        elif gc.replica_rule == REPLICAS_TOO_FEW:
            wait = REPLICA_NOT_AVAILABLE
        elif gc.slaves > 0 and end - gc.replicated < max_gap:
            wait = REPLICA_WAIT
        else:
            wait = REPLICA_NOT_AVAILABLE
        pthread_mutex_unlock(&gc.mutex)
        return wait

    cdef int take_round(self, int64_t* flushed, int64_t* flushed_timestamp, int64_t* replicated) noexcept:
        """After a round or an ack (``event_fd`` readable) or on a timer: how far the CommitLog is
        on disk and on a slave, and the errno of a failed msync since the last call (0 if none)."""
        cdef GroupCommitState* gc = self.state
        cdef uint64_t counter
        cdef int error
        c_read(gc.event_fd, &counter, sizeof(counter))
        pthread_mutex_lock(&gc.mutex)
        flushed[0] = gc.flushed
        flushed_timestamp[0] = gc.flushed_timestamp
        replicated[0] = gc.replicated
        error = gc.error
        gc.error = 0
        pthread_mutex_unlock(&gc.mutex)
        return error

    cdef void finish(self, int error, int64_t flushed, int64_t flushed_timestamp) noexcept:
        """After ``run`` returned and the store flushed the rest itself: record the outcome, so
        ``take_round`` completes every waiting put."""
        cdef GroupCommitState* gc = self.state
        pthread_mutex_lock(&gc.mutex)
        if error:
            gc.error = error
        else:
            gc.flushed = gc.written = flushed
            gc.flushed_timestamp = flushed_timestamp
        pthread_mutex_unlock(&gc.mutex)
