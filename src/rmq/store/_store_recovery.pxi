# StoreCore's recovery (docs/store-format.md#recovery): the CommitLog scanned from a checkpointed
# file with CRC checks, its torn tail cut; and truncation at a record boundary (a rejoining or
# promoted slave, docs/replication.md#epochs-and-truncation). rmq.store.MessageStore decides where
# to start. Included by _store.pyx, whose module-level names (the rooms it cimports) it uses.

cdef class _StoreRecovery(_StoreGets):
    """Scan, re-dispatch and cut the CommitLog."""

    def first_store_timestamp(self, MappedFile mf):
        """STORETIMESTAMP of the first record of a CommitLog file, or 0 if it holds none."""
        if check_record_c(mf.base, mf.file_size, mf.file_from_offset, False) <= 0:
            return 0
        return load_be64(mf.base + REC_STORETIMESTAMP)

    def recover(self, Py_ssize_t start_index, bint redispatch):
        """Scan the CommitLog from file ``start_index`` with CRC checks up to the first invalid
        record, re-dispatching each record when asked, and cut everything after it.

        Returns ``(end_offset, records, cut)`` where ``cut`` is None or a description of what was
        found at the end (the torn tail).
        """
        cdef MappedFile mf
        cdef Py_ssize_t index = start_index, pos = 0, size
        cdef int64_t end = 0, records = 0
        cdef ConsumeQueue queue
        cdef const unsigned char* topic
        cdef const unsigned char* props
        cdef Py_ssize_t topic_len, props_len
        files = self.commit_log.files
        cut = None
        if not files:
            return 0, 0, None
        self._lock()
        try:
            while index < len(files):
                mf = files[index]
                pos = 0
                while True:
                    size = check_record_c(mf.base + pos, mf.file_size - pos, mf.file_from_offset + pos, True)
                    if size > 0:
                        if redispatch:
                            record_properties(mf.base + pos, &props, &props_len, &topic, &topic_len)
                            queue = self._find_or_create_queue(
                                (<char*>topic)[:topic_len].decode("utf-8", "replace"),
                                load_be32(mf.base + pos + REC_QUEUEID))           # 4 QUEUEID
                            if queue is not None:
                                self._dispatch(mf.base + pos, mf.file_from_offset + pos, <int32_t>size, queue, NULL)
                        mf.last_store_timestamp = load_be64(mf.base + pos + REC_STORETIMESTAMP)
                        self.last_store_timestamp = mf.last_store_timestamp
                        records += 1
                        pos += size
                        continue
                    if size == CHECK_END_OF_FILE:
                        pos = mf.file_size
                    elif size != CHECK_EMPTY:
                        cut = (f"{_record.CHECK_RESULTS[size]}: record header at {mf.file_from_offset + pos} "
                               f"claims {load_be32(mf.base + pos)} bytes")
                    break
                end = mf.file_from_offset + pos
                if pos < mf.file_size or index + 1 == len(files):
                    break
                index += 1
            # everything past the last valid record goes, later files included
            for mf in files[index + 1:]:
                if cut is None and check_record_c(mf.base, mf.file_size, -1, False) != CHECK_EMPTY:
                    cut = f"file {mf.path} after the end"
            self._cut(end)
            mf = self.commit_log.last_file()
            if mf is not None:
                mf.wrote_position = end - mf.file_from_offset
                mf.flushed_position = mf.wrote_position
            for mf in self.commit_log.files:
                if mf.file_from_offset + mf.file_size <= end:
                    mf.wrote_position = mf.flushed_position = mf.file_size
            self.commit_log.flushed_where = end
            return end, records, cut
        finally:
            self._unlock()

    cdef int _cut(self, int64_t end) except -1:
        """Forget everything at or past CommitLog offset ``end`` (put lock held): the log's bytes
        (later files deleted, the tail of its file zeroed) and the ConsumeQueue entries that point
        there; dispatch resumes at ``end``. Recovery cuts a torn tail with it, ``truncate_to`` a
        divergent one."""
        self.commit_log.truncate(end)
        self.reput_offset = end
        for queue in self.consume_queues():
            queue.truncate_dirty(end)
        return 0

    def truncate_to(self, int64_t offset):
        """Cut the store at CommitLog offset ``offset``, a record boundary: every record from there
        on goes, with its ConsumeQueue and index entries (a rejoining slave drops the tail its new
        master never had; a promoted slave drops a record it got only part of). What stays is
        flushed first-to-last as before. Returns ``(bytes, records)`` dropped."""
        cdef MappedFile mf
        cdef int64_t end, position, records = 0
        cdef Py_ssize_t pos, size
        self._lock()
        try:
            end = self.commit_log.max_offset()
            if offset >= end:
                return 0, 0
            if offset < self.commit_log.min_offset():
                raise StoreError(f"cannot cut the CommitLog at {offset}: it begins at {self.commit_log.min_offset()}")
            position = offset
            while position < end:
                mf = self.commit_log.find_by_offset(position)
                if mf is None:
                    break
                pos = position - mf.file_from_offset
                size = check_record_c(mf.base + pos, mf.wrote_position - pos, position, False)
                if size > 0:
                    records += 1
                    position += size
                elif (position == offset and (size == CHECK_BAD_MAGIC or size == CHECK_BAD_OFFSET)
                      and mf.wrote_position - pos >= REC_FIXED_OVERHEAD):
                    raise StoreError(f"cannot cut the CommitLog at {offset}: not a record boundary "
                                     f"({_record.CHECK_RESULTS.get(size, size)})")
                else:           # the EOF marker, or a record only partly copied: on to the next file
                    position = mf.file_from_offset + mf.file_size
            self.close_replica_file()
            self._cut(offset)
            self.index_service.truncate_to(offset)
            self.commit_log.flush(0)
            self.commit_log.publish_files()
            self._group_commit.rewind(offset)
            if self._completed_flushed > offset:
                self._completed_flushed = offset
            return end - offset, records
        finally:
            self._unlock()
