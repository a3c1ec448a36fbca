# StoreCore's replication (rmq.store.ha, docs/replication.md): a master's CommitLog read by its HA
# service and woken by puts; a slave's CommitLog appended from its master's bytes and dispatched.
# Before the puts and the group commit in the chain: they wake replication after each put.
# Included by _store.pyx, whose module-level names (the rooms it cimports) it uses.

cdef class _StoreReplication(_StoreQueues):
    """The master reads its CommitLog, a slave appends a copy."""

    def wake_ha_on_next_put(self, int fd):
        """An idle ASYNC_MASTER's HA thread sleeps on eventfd ``fd``: the next put, whichever
        thread makes it, writes it once (-1: none). A put that came first is the caller's to see:
        it sets this, then looks at the CommitLog's end again (both under the GIL)."""
        self._ha_wake_fd = fd

    def attach_ha_stream(self, HAStream stream):
        """A master's replication stream (rmq.store._ha_stream) reads the CommitLog from now on: it is
        shown the files whenever they change, and an idle one is woken by the next put (None:
        detach it)."""
        self._lock()
        try:
            self.commit_log.attach_ha_stream(stream)
        finally:
            self._unlock()

    cdef void _wake_replication(self) noexcept:
        """After a put: whatever replicates the CommitLog and sleeps until the next put."""
        if self._ha_wake_fd >= 0:
            self._wake_ha()
        if self.commit_log.ha_stream is not None:
            wake_on_put(self.commit_log.ha_stream)

    cdef void _wake_ha(self) noexcept:
        cdef uint64_t one = 1
        c_write(self._ha_wake_fd, &one, sizeof(one))
        self._ha_wake_fd = -1

    def replica_view(self, int64_t offset, Py_ssize_t max_bytes):
        """Zero-copy view of the CommitLog bytes from ``offset``: at most ``max_bytes``, never past
        the end of the file that holds ``offset`` nor past what is written (an empty view when
        nothing is there yet; None when ``offset`` is below the oldest file or past the end). The
        view keeps its file's mapping alive, even if retention deletes the file meanwhile."""
        cdef MappedFile mf
        cdef Py_ssize_t pos, n
        self._lock()
        try:
            if offset == self.commit_log.max_offset():
                return memoryview(b"")
            mf = self.commit_log.find_by_offset(offset)
            if mf is None:
                return None
            pos = offset - mf.file_from_offset
            n = mf.wrote_position - pos
            if n < 0:
                return None
            if n > max_bytes:
                n = max_bytes
            return mf.view(pos, n)
        finally:
            self._unlock()

    def dispatch_replica(self):
        """A slave: dispatch the records ``append_replica`` wrote but could not dispatch (a full
        disk refused a ConsumeQueue file: OSError, then and now while it still does)."""
        self._lock()
        try:
            self._dispatch_replica()
        finally:
            self._unlock()

    def append_replica(self, int64_t offset, data):
        """A slave: append bytes of the master's CommitLog at ``offset``, which must be where this
        CommitLog ends (or, for an empty one, the start of a file: a new slave begins with its
        master's last file), within one file; then dispatch every record they complete into its
        ConsumeQueue and the index. A record cut at the end waits for the next append. Returns the
        new end; raises StoreError (nothing written) for bytes that do not continue this log."""
        cdef Py_buffer buf
        cdef MappedFile mf, made
        cdef int64_t end
        cdef bint created = False
        PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
        self._lock()
        try:
            mf = self.commit_log.last_file()
            end = self.commit_log.max_offset()
            if mf is None:
                if offset % self.commit_log.mapped_file_size != 0:
                    raise StoreError(f"replica bytes at {offset} into an empty CommitLog: expected the start "
                                     f"of a file (a multiple of {self.commit_log.mapped_file_size})")
                end = offset
            elif offset != end:
                raise StoreError(f"replica bytes at {offset}: this CommitLog ends at {end}")
            if buf.len == 0:
                return end
            if mf is None or mf.wrote_position == mf.file_size:
                # the file the prefault thread made ahead, as a master's roll-over takes it
                made = self.commit_log.take_made_ahead(end) if mf is not None else None
                mf = made if made is not None else self.commit_log.create_file(end)
                created = True
            if mf.wrote_position + buf.len > mf.file_size:
                raise StoreError(f"replica bytes [{offset}, {offset + buf.len}) cross the end of CommitLog "
                                 f"file {mf.path} at {mf.file_from_offset + mf.file_size}")
            if created:
                self.commit_log.publish_files()
                if self.reput_offset < end:
                    self.reput_offset = end
            self._write_replica(mf, <const char*>buf.buf, buf.len)
            mf.wrote_position += buf.len
            end += buf.len
            self._dispatch_replica()
        finally:
            self._unlock()
            PyBuffer_Release(&buf)
        if self.sync_flush:
            self._group_commit.publish_put(end, self.last_store_timestamp, False)
        return end

    cdef int _write_replica(self, MappedFile mf, const char* data, Py_ssize_t n) except -1:
        """Write replicated bytes at the end of ``mf`` with pwrite, not through the mapping: the
        mapping sees them all the same (one page cache), and whole pages written to the file's
        allocated-but-unwritten extents skip the zero-fill that faulting them in costs (on a slave
        that was most of its CPU)."""
        cdef ssize_t done
        cdef Py_ssize_t written = 0
        cdef int fd
        if self._replica_file is not mf:
            if self._replica_fd >= 0:
                c_close(self._replica_fd)
                self._replica_fd = -1
            fd = c_open(mf.path.encode(), O_WRONLY | O_CLOEXEC)
            if fd < 0:
                raise OSError(errno, f"cannot open {mf.path}: {strerror(errno).decode()}")
            self._replica_fd = fd
            self._replica_file = mf
        while written < n:
            with nogil:
                done = pwrite(self._replica_fd, data + written, n - written, mf.wrote_position + written)
            if done < 0:
                if errno == EINTR:
                    continue
                raise OSError(errno, f"cannot write {mf.path}: {strerror(errno).decode()}")
            written += done
        return 0

    def close_replica_file(self):
        """The slave stops appending: close the file ``append_replica`` writes through."""
        if self._replica_fd >= 0:
            c_close(self._replica_fd)
            self._replica_fd = -1
        self._replica_file = None

    cdef int _dispatch_replica(self) except -1:
        """Dispatch the whole records between ``reput_offset`` and the CommitLog's end (put lock
        held), as recovery re-dispatches them: the slave's own ConsumeQueues and index."""
        cdef MappedFile mf
        cdef Py_ssize_t pos, avail, size
        cdef int32_t total
        cdef uint32_t magic
        cdef ConsumeQueue queue
        cdef const unsigned char* topic
        cdef const unsigned char* props
        cdef Py_ssize_t topic_len, props_len
        while True:
            mf = self.commit_log.find_by_offset(self.reput_offset)
            if mf is None:
                return 0
            pos = self.reput_offset - mf.file_from_offset
            avail = mf.wrote_position - pos
            if pos == mf.file_size:
                self.reput_offset = mf.file_from_offset + mf.file_size
                continue
            if avail < END_FILE_MIN_BLANK_LENGTH:
                return 0
            total = load_be32(mf.base + pos + REC_TOTALSIZE)                      # 1 TOTALSIZE
            magic = <uint32_t>load_be32(mf.base + pos + REC_MAGIC)               # 2 MAGIC
            if magic == BLANK_MAGIC_CODE:
                if mf.wrote_position < mf.file_size:
                    return 0                        # the rest of the file's blank tail is to come
                self.reput_offset = mf.file_from_offset + mf.file_size
                continue
            if magic == MESSAGE_MAGIC_CODE and REC_FIXED_OVERHEAD <= total and total > avail:
                return 0                            # a record cut by the frame: the rest comes next
            size = check_record_c(mf.base + pos, avail, self.reput_offset, False)
            if size <= 0:
                raise StoreError(f"replicated CommitLog is not a record at {self.reput_offset}: "
                                 f"{_record.CHECK_RESULTS.get(size, size)}")
            record_properties(mf.base + pos, &props, &props_len, &topic, &topic_len)
            queue = self._find_or_create_queue((<char*>topic)[:topic_len].decode("utf-8", "replace"),
                                               load_be32(mf.base + pos + REC_QUEUEID))   # 4 QUEUEID
            if queue is not None:
                self._dispatch(mf.base + pos, self.reput_offset, <int32_t>size, queue, NULL)
            mf.last_store_timestamp = load_be64(mf.base + pos + REC_STORETIMESTAMP)    # 11 STORETIMESTAMP
            self.last_store_timestamp = mf.last_store_timestamp
            self.reput_offset += size
