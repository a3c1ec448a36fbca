# StoreCore's gets: records of a queue from a queue offset (get_message, and get_into, what the
# broker's compiled pull lane calls), a record by CommitLog offset, a queue offset by time. Included
# by _store.pyx, whose module-level names (the rooms it cimports, GetMessageResult, TagFilter) it uses.

cdef class _StoreGets(_StorePuts):
    """Reads of stored records, under the put lock (mapped memory stays put while they walk it)."""

    def get_message(self, str group, str topic, int queue_id, int64_t offset, int max_msgs,
                    Py_ssize_t max_total_bytes=262144, TagFilter tag_filter=None):
        """Read up to ``max_msgs`` stored records of (topic, queue_id) from queue ``offset``.

        Records come back whole, as zero-copy memoryviews into the CommitLog mapping (write them
        back to back as a pull response body). ``group`` is accepted for RocketMQ parity.
        """
        cdef GetMessageResult result = GetMessageResult.__new__(GetMessageResult)
        cdef GetPlace place
        result.messages = []
        result.queue_offsets = []
        self.get_into(topic, queue_id, offset, max_msgs, max_total_bytes, tag_filter, result, None, &place)
        result.status_code = place.status
        result.next_begin_offset = place.next_begin_offset
        result.min_offset = place.min_offset
        result.max_offset = place.max_offset
        result.buffer_total_size = place.total_bytes
        return result

    cdef int get_into(self, str topic, int queue_id, int64_t offset, int max_msgs, Py_ssize_t max_total_bytes,
                      object tag_filter, GetMessageResult result, bytearray out, GetPlace* place) except -1:
        """get_message's read, its outcome in ``place``: each record found either appended to
        ``result`` (a view and its queue offset) or, with ``out``, copied onto the end of ``out``
        (the compiled pull lane's answer body: no Python object per record)."""
        cdef TagFilter tags = None if tag_filter is None else <TagFilter?>tag_filter
        cdef ConsumeQueue queue
        cdef MappedFile cq_file, mf = None
        cdef int64_t min_offset, max_offset, cur, end, phy, tags_code, min_phy
        cdef int32_t size
        cdef Py_ssize_t total_bytes = 0, pos, count = 0, scan_limit, out_size
        cdef const unsigned char* e
        cdef int status = NO_MATCHED_MESSAGE
        memset(place, 0, sizeof(GetPlace))
        place.last_phy_offset = -1
        self._lock()
        try:
            queues = self.consume_queue_table.get(topic)
            queue = (<dict>queues).get(queue_id) if queues is not None else None
            if queue is None:
                place.status = NO_MATCHED_LOGIC_QUEUE
                return 0
            min_offset = queue.min_logic_offset // CQ_STORE_UNIT_SIZE
            max_offset = queue.max_offset()
            place.min_offset = min_offset
            place.max_offset = max_offset
            if max_offset == 0:
                place.status = NO_MESSAGE_IN_QUEUE
                place.next_begin_offset = 0
                return 0
            if offset < min_offset:
                place.status = OFFSET_TOO_SMALL
                place.next_begin_offset = min_offset
                return 0
            if offset == max_offset:
                place.status = OFFSET_OVERFLOW_ONE
                place.next_begin_offset = offset
                return 0
            if offset > max_offset:
                place.status = OFFSET_OVERFLOW_BADLY
                place.next_begin_offset = min_offset if min_offset == 0 else max_offset
                return 0
            cq_file = queue.files.find_by_offset(offset * CQ_STORE_UNIT_SIZE)
            if cq_file is None:
                place.status = OFFSET_FOUND_NULL
                place.next_begin_offset = offset + 1
                return 0
            # scan within one ConsumeQueue file, as RocketMQ does; the next pull continues
            end = (cq_file.file_from_offset + cq_file.wrote_position) // CQ_STORE_UNIT_SIZE
            scan_limit = max_msgs if max_msgs > MAX_FILTER_SCAN_ENTRIES else MAX_FILTER_SCAN_ENTRIES
            if end > offset + scan_limit:
                end = offset + scan_limit
            min_phy = self.commit_log.min_offset()
            cur = offset
            while cur < end:
                if count >= max_msgs:
                    break
                e = cq_file.base + (cur * CQ_STORE_UNIT_SIZE - cq_file.file_from_offset)
                phy = load_be64(e + CQ_COMMITLOG_OFFSET)
                size = load_be32(e + CQ_SIZE)
                tags_code = load_be64(e + CQ_TAGS_CODE)
                if size == CQ_BLANK_SIZE:
                    cur += 1
                    continue
                if count > 0 and total_bytes + size > max_total_bytes:
                    break
                cur += 1
                if phy < min_phy:
                    status = MESSAGE_WAS_REMOVING
                    continue
                if tags is not None and not tags.accepts_code(tags_code):
                    continue
                if mf is None or phy < mf.file_from_offset or phy >= mf.file_from_offset + mf.file_size:
                    mf = self.commit_log.find_by_offset(phy)
                    if mf is None:
                        status = MESSAGE_WAS_REMOVING
                        continue
                pos = phy - mf.file_from_offset
                if pos + size > mf.wrote_position or load_be32(mf.base + pos) != size:
                    status = MESSAGE_WAS_REMOVING
                    continue
                if tags is not None and not tags.accepts_record(mf.base + pos):
                    continue
                if out is None:
                    result.messages.append(mf.view(pos, size))
                    result.queue_offsets.append(cur - 1)
                else:
                    out_size = PyByteArray_GET_SIZE(out)
                    PyByteArray_Resize(out, out_size + size)
                    memcpy(PyByteArray_AS_STRING(out) + out_size, mf.base + pos, size)
                place.last_phy_offset = phy
                total_bytes += size
                count += 1
            place.next_begin_offset = cur
            place.total_bytes = total_bytes
            place.count = count
            place.status = FOUND if count > 0 else status
            return 0
        finally:
            self._unlock()

    def look_message_by_offset(self, int64_t phy_offset, Py_ssize_t size=-1):
        """The whole stored record at a CommitLog offset (zero-copy view), or None."""
        self._lock()
        try:
            return self.commit_log.look_message(phy_offset, size)
        finally:
            self._unlock()

    def store_timestamp_at(self, int64_t phy_offset):
        """STORETIMESTAMP of the record at a CommitLog offset, or -1."""
        return self.commit_log.store_timestamp_at(phy_offset)

    def offset_in_queue_by_time(self, str topic, int queue_id, int64_t timestamp):
        """Smallest queue offset whose message was stored at or after ``timestamp`` (ms); the max
        offset if none was. Binary search over the ConsumeQueue, reading CommitLog store times."""
        cdef ConsumeQueue queue = self.find_consume_queue(topic, queue_id)
        cdef int64_t lo, hi, mid, ts
        cdef const unsigned char* e
        if queue is None:
            return 0
        self._lock()
        try:
            lo = queue.min_logic_offset // CQ_STORE_UNIT_SIZE
            hi = queue.max_offset()
            while lo < hi:
                mid = (lo + hi) // 2
                e = queue.entry(mid)
                ts = -1
                if e != NULL and load_be32(e + CQ_SIZE) != CQ_BLANK_SIZE:
                    ts = self.commit_log.store_timestamp_at(load_be64(e + CQ_COMMITLOG_OFFSET))
                if ts < timestamp:
                    lo = mid + 1
                else:
                    hi = mid
            return lo
        finally:
            self._unlock()
