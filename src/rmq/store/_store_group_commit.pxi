# StoreCore's flushing: the CommitLog's msync on demand (ASYNC_FLUSH's service), and under SYNC_FLUSH
# and SYNC_MASTER the puts that wait, for the disk (the group commit, rmq.store._group_commit,
# docs/sync-flush.md) or a slave's ack: how a stored put joins the wait (publish) and how it ends
# (complete_commits, in put order). Included by _store.pyx, whose module-level names (the rooms it
# cimports, monotonic, complete_put, PutMessageResult, CommitSink) it uses.

cdef class _StoreGroupCommit(_StoreReplication):
    """The waiting puts (PutMessageResults, and the lanes' deferred puts in a C ring) and their completion."""

    def __dealloc__(self):
        PyMem_Free(self._deferred)

    def flush_commit_log(self, int least_pages=0):
        """msync the CommitLog (GIL released); returns the offset up to which it is durable."""
        self.commit_log.flush(least_pages)
        return self.commit_log.flushed_where

    # -- a put joins the wait ---------------------------------------------------------------

    cdef int _wait_status(self, int64_t next_offset, bint* wait_slave) noexcept:
        """SYNC_MASTER: whether a put ending at ``next_offset`` waits for a slave's ack, and the status
        it completes with: SLAVE_NOT_AVAILABLE (stored, but degraded) when no slave is in sync (or
        the sync state set is smaller than its rule needs), as RocketMQ's handleHA answers; PUT_OK
        at once when the rule needs no slave."""
        cdef int wait
        wait_slave[0] = False
        if self.sync_master:
            wait = self._group_commit.replica_wait(next_offset, self.ha_max_gap_not_in_sync)
            if wait == REPLICA_NOT_AVAILABLE:
                return SLAVE_NOT_AVAILABLE
            wait_slave[0] = wait == REPLICA_WAIT
        return PUT_OK

    cdef void _publish_put(self, PutMessageResult result, object callback):
        """SYNC_FLUSH: tell the flush thread how far the CommitLog goes. With a ``callback`` the put
        waits: for the disk (SYNC_FLUSH: the flush thread is woken if it sleeps, or, with
        ``kick_rounds_myself``, the caller's next ``kick_group_commit`` asks for the round) and
        for a slave's ack (SYNC_MASTER, ``_wait_status``)."""
        cdef bint wait_slave = False
        cdef int done_status = PUT_OK
        if callback is not None:
            done_status = self._wait_status(result.next_offset, &wait_slave)
            if wait_slave or self.sync_flush:
                result._callback = callback
                result._since = monotonic()
                result._wait_slave = wait_slave
                result._done_status = done_status
                self._commit_requests.append(result)
            else:
                result.status_code = done_status
        if self.sync_flush:
            self._group_commit.publish_put(result.next_offset, result.store_timestamp,
                                           callback is not None and not self._kicks_rounds)

    cdef void publish_raw(self, const PutPlace* place) noexcept:
        """What ``put_message`` does after a put that waits for nothing, for a ``put_raw`` of a lane
        whose store completes puts for its owner: the flush thread learns how far the CommitLog
        goes (its timed rounds cover the put), the HA service that there is more to send."""
        if not self._completes_commits:
            return  # put_raw woke the HA service; no group commit runs for it
        if self.sync_flush:
            self._group_commit.publish_put(place.phy_offset + place.total, place.store_timestamp, False)
        self._wake_replication()

    cdef int defer_put(self, CommitSink sink, PutPlace* place, int* status) except -1:
        """``put_message``'s completion for a put a compiled lane made with ``put_raw``, without a
        Python object per put: 1 when its answer waits (``sink.complete`` is called with its status
        in put order, among the waiting PutMessageResults, by ``complete_commits``); 0 when it is
        answered now with ``status`` (nothing to wait for: SYNC_MASTER with no slave in sync). A
        store has one sink."""
        cdef int64_t next_offset = place.phy_offset + place.total
        cdef bint wait_slave
        cdef DeferredPut* d
        cdef DeferredPut* grown
        cdef Py_ssize_t i, cap
        if self._sink is not sink:
            if self._deferred_len:
                raise StoreError("a store answers its deferred puts through one sink")
            self._sink = sink
        status[0] = self._wait_status(next_offset, &wait_slave)
        if not (wait_slave or self.sync_flush):
            self._wake_replication()
            return 0
        if self._deferred_len == self._deferred_cap:
            cap = max(64, 2 * self._deferred_cap)
            grown = <DeferredPut*>PyMem_Realloc(self._deferred, cap * sizeof(DeferredPut))
            if grown == NULL:
                raise MemoryError()
            if self._deferred_head:  # the ring wrapped: its head's run moves to the block's new end
                i = cap - self._deferred_cap
                memmove(grown + self._deferred_head + i, grown + self._deferred_head,
                        (self._deferred_cap - self._deferred_head) * sizeof(DeferredPut))
                self._deferred_head += i
            self._deferred = grown
            self._deferred_cap = cap
        d = &self._deferred[(self._deferred_head + self._deferred_len) % self._deferred_cap]
        d.next_offset = next_offset
        d.since = monotonic()
        d.wait_slave = wait_slave
        d.done_status = status[0]
        self._deferred_len += 1
        if self.sync_flush:
            self._group_commit.publish_put(next_offset, place.store_timestamp, not self._kicks_rounds)
        self._wake_replication()
        return 1

    # -- the SYNC_FLUSH group commit's rounds, and completion -------------------------------

    def start_group_commit(self):
        """Ready the group commit for the CommitLog as recovered (before ``run_group_commit``)."""
        cdef int64_t end = self.commit_log.max_offset()
        self._group_commit.start(end)
        self._completed_flushed = end
        self.commit_log.publish_files()

    def run_group_commit(self, double interval):
        """The flush thread's body: flush rounds, without the GIL, until ``stop_group_commit``."""
        self._group_commit.run(interval)

    def stop_group_commit(self):
        """Make ``run_group_commit`` return after its current round."""
        self._group_commit.stop()

    def kick_rounds_myself(self, double inline_max_msync=0.0):
        """Puts that wait for the disk no longer start a flush round themselves: the caller calls
        ``kick_group_commit`` (or first ``complete_round_here``) after each batch of puts (the
        broker: once per event-loop iteration), so one round covers the whole batch instead of its
        first put. ``inline_max_msync`` > 0: ``complete_round_here`` may make rounds while recent
        msyncs took at most that many seconds."""
        self._kicks_rounds = True
        self._group_commit.allow_inline_rounds(inline_max_msync)

    def kick_group_commit(self):
        """Ask for a flush round covering every put so far (if some of them wait for the disk)."""
        if self._commit_requests or self._deferred_len:
            self._group_commit.kick()

    def complete_round_here(self):
        """Make the flush round the puts so far wait for on this thread, the completer's, and
        complete them at once: no hand-off to the flush thread and back (two cross-CPU wake-ups a
        round). For a caller with nothing else to do meanwhile (the broker's loop when no other
        work is ready). False when it may not (SYNC_MASTER: the puts wait for a slave anyway;
        nothing or more than INLINE_ROUND_MAX_PUTS puts wait; ``GroupCommit.inline_round``'s
        reasons, a slow disk among them): then ``kick_group_commit``."""
        cdef Py_ssize_t waiting = len(self._commit_requests) + self._deferred_len
        if self.sync_master or waiting == 0 or waiting > INLINE_ROUND_MAX_PUTS:
            return False
        if self._group_commit.inline_round() < 0:
            return False
        self.complete_commits()
        return True

    def commit_files_changed(self):
        """CommitLog files were deleted or truncated: the flush thread must not keep their mappings."""
        self.commit_log.publish_files()

    @property
    def commit_event_fd(self):
        """Readable (an eventfd) after each flush round and each new slave ack: then call
        ``complete_commits``."""
        return self._group_commit.state.event_fd

    @property
    def group_commit(self):
        """The completion state the HA service publishes slave acks into (``publish_replicated``)."""
        return self._group_commit

    @property
    def group_commit_flushes(self):
        """Flush rounds made by the group commit (benchmarks report fsyncs per second)."""
        return self._group_commit.state.flush_count

    @property
    def group_commit_inline_rounds(self):
        """Of ``group_commit_flushes``, the rounds ``complete_round_here`` made."""
        return self._group_commit.state.inline_rounds

    @property
    def commit_queue_size(self):
        """Puts stored and not yet answered: waiting for the disk (SYNC_FLUSH) or a slave
        (SYNC_MASTER) in ``complete_commits``'s queue; the broker's send queue (its
        sendThreadPoolQueueCapacity bounds it)."""
        return len(self._commit_requests) + self._deferred_len

    @property
    def disk_wait_seconds(self):
        """SYNC_FLUSH: how long the disk has kept puts waiting, the longer of the running flush
        round's age and the oldest put waiting for the disk (0.0: nothing waits). Past
        osPageCacheBusyTimeOutMills the disk counts as busy, as RocketMQ's isOSPageCacheBusy."""
        cdef PutMessageResult oldest
        cdef DeferredPut* d
        cdef GroupCommitState* gc = self._group_commit.state
        cdef double now, waited = 0.0
        if not self.sync_flush:
            return 0.0
        now = monotonic()
        # read without the mutex: a torn pair only makes one answer stale by a round
        if gc.woke_ns > gc.synced_ns:
            waited = now - gc.woke_ns / 1e9
        if self._commit_requests:
            oldest = self._commit_requests[0]
            if oldest.next_offset > self._completed_flushed and now - oldest._since > waited:
                waited = now - oldest._since
        if self._deferred_len:
            d = &self._deferred[self._deferred_head]
            if d.next_offset > self._completed_flushed and now - d.since > waited:
                waited = now - d.since
        return waited

    def complete_commits(self):
        """Complete every waiting put whose end every watermark it waits for has passed (on disk
        under SYNC_FLUSH, on a slave under SYNC_MASTER): PUT_OK (or SLAVE_NOT_AVAILABLE when no
        slave was in sync at the put); or past its deadline (FLUSH_DISK_TIMEOUT when the disk is
        late, else FLUSH_SLAVE_TIMEOUT), or hit by a failed msync (FLUSH_DISK_TIMEOUT), calling its
        callback here. Returns how many completed.

        Run by whoever owns the completions (the broker's event loop; a store thread otherwise)
        when ``commit_event_fd`` is readable, and on a timer so deadlines pass while a msync hangs
        or a slave stalls.
        """
        cdef int64_t flushed, flushed_timestamp, replicated
        cdef int error, status
        cdef PutMessageResult r = None
        cdef DeferredPut* d
        cdef DeferredPut head
        cdef MappedFile mf
        cdef double now
        cdef Py_ssize_t done = 0, deferred_done = 0
        cdef bint disk_late, slave_late
        error = self._group_commit.take_round(&flushed, &flushed_timestamp, &replicated)
        if not self.sync_flush:
            flushed = INT64_MAX
        elif error:
            log.error("CommitLog flush failed: %s", strerror(error).decode())
        if self.sync_flush and flushed > self._completed_flushed:
            self._completed_flushed = flushed
            if flushed > self.commit_log.flushed_where:
                self.commit_log.flushed_where = flushed
                mf = self.commit_log.find_by_offset(flushed - 1)
                if mf is not None and flushed - mf.file_from_offset > mf.flushed_position:
                    mf.flushed_position = flushed - mf.file_from_offset
            if flushed_timestamp and self.checkpoint is not None:
                self.checkpoint.physic_msg_timestamp = flushed_timestamp
        requests = self._commit_requests
        now = monotonic()
        memset(&head, 0, sizeof(head))
        # the waiting PutMessageResults and the deferred puts, merged in put (offset) order, so
        # that a connection's answers leave in the order its sends were stored
        while requests or self._deferred_len:
            if self._deferred_len:
                d = &self._deferred[self._deferred_head]
                head = d[0]
            if requests and (not self._deferred_len or (<PutMessageResult>requests[0]).next_offset < head.next_offset):
                r = requests[0]
                head.next_offset = r.next_offset
                head.since = r._since
                head.wait_slave = r._wait_slave
                head.done_status = r._done_status
            else:
                r = None
            disk_late = head.next_offset > flushed
            slave_late = head.wait_slave and head.next_offset > replicated
            # past a deadline first, as RocketMQ's producer thread gives up waiting
            if self.sync_flush and now - head.since > self.sync_flush_timeout:
                status = FLUSH_DISK_TIMEOUT
            elif head.wait_slave and now - head.since > self.slave_timeout:
                status = FLUSH_DISK_TIMEOUT if disk_late else FLUSH_SLAVE_TIMEOUT
            elif not disk_late and not slave_late:
                status = head.done_status
            elif disk_late and error:
                status = FLUSH_DISK_TIMEOUT
            else:
                break
            if r is not None:
                requests.popleft()
                if deferred_done:  # the sink's answers so far go first
                    self._deferred_round_done()
                    deferred_done = 0
                complete_put(r, status)
            else:
                self._complete_deferred(status)
                deferred_done += 1
            done += 1
        if deferred_done:
            self._deferred_round_done()
        return done

    cdef void _complete_deferred(self, int status):
        """The oldest deferred put is done: off the ring, then its sink answers it (an answer that
        raises is logged: the ring stays in order)."""
        self._deferred_head = (self._deferred_head + 1) % self._deferred_cap
        self._deferred_len -= 1
        try:
            self._sink.complete(status)
        except Exception:
            log.exception("deferred put completion by %r raised", self._sink)

    cdef void _deferred_round_done(self):
        try:
            self._sink.round_done()
        except Exception:
            log.exception("deferred put completion by %r raised", self._sink)

    def abandon_commits(self):
        """At shutdown, after the last flush round: complete the puts still waiting for a slave
        (FLUSH_SLAVE_TIMEOUT: stored, but no slave acked) or for the disk. Returns how many."""
        cdef PutMessageResult r
        cdef DeferredPut* d
        cdef Py_ssize_t done = self.complete_commits(), deferred = 0
        # in put order, as complete_commits: the ring's puts before the later PutMessageResults
        while self._commit_requests or self._deferred_len:
            d = &self._deferred[self._deferred_head] if self._deferred_len else NULL
            if d == NULL or (self._commit_requests
                             and (<PutMessageResult>self._commit_requests[0]).next_offset < d.next_offset):
                r = self._commit_requests.popleft()
                if deferred:
                    self._deferred_round_done()
                    deferred = 0
                complete_put(r, FLUSH_DISK_TIMEOUT if (self.sync_flush and r.next_offset > self._completed_flushed)
                             else FLUSH_SLAVE_TIMEOUT)
            else:
                self._complete_deferred(FLUSH_DISK_TIMEOUT if (self.sync_flush and d.next_offset > self._completed_flushed)
                                        else FLUSH_SLAVE_TIMEOUT)
                deferred += 1
            done += 1
        if deferred:
            self._deferred_round_done()
        return done

    def finish_group_commit(self):
        """After ``run_group_commit`` returned: flush what is left and complete every waiting put."""
        cdef int error = 0
        try:
            self.commit_log.flush(0)
        except OSError as e:
            error = e.errno or EIO
        self._group_commit.finish(error, self.commit_log.flushed_where, self.last_store_timestamp)
        return self.complete_commits()
