# StoreCore's puts: a message (put_message) or a batch to one queue (put_messages) appended to the
# CommitLog and dispatched, under the put lock; their raw forms (put_raw, put_batch_raw) are what the
# broker's compiled send lane calls, with no Python object per message. The put path of _store.pyx's
# diagram. Included by _store.pyx, whose module-level names (the rooms it cimports, now_ms,
# scan_properties, put_failure, encoded_properties, PutMessageResult) it uses.

cdef class _StorePuts(_StoreGroupCommit):
    """Appends: checks, reservations, the record written, dispatch; then the wait (_StoreGroupCommit)."""

    cdef int _reserve_index(self, Py_ssize_t entries, int* status) except -1:
        if entries == 0 or self.index_service.has_room(entries):
            return 0
        try:
            self.index_service.create_file()
        except OSError as e:
            log.error("cannot create an index file: %s", e)
            status[0] = CREATE_MAPPED_FILE_FAILED
        return 0

    cdef int _reserve_queue(self, ConsumeQueue queue, Py_ssize_t entries, int* status) except -1:
        try:
            queue.reserve(entries)
        except OSError as e:
            log.error("cannot create a ConsumeQueue file for %s/%d: %s", queue.topic, queue.queue_id, e)
            status[0] = CREATE_MAPPED_FILE_FAILED
        return 0

    cdef int put_raw(self, str topic, int queue_id, const unsigned char* body_ptr, Py_ssize_t body_len,
                     const unsigned char* props_ptr, Py_ssize_t props_len, const PutFields* fields,
                     PutPlace* place) except -1:
        """Append one message from raw buffers (``put_message``'s body, and the broker's compiled send
        lane's, which has no Python object per message); its PutStatus, where it went in ``place``.
        Nothing waits for the disk here: ``put_message`` publishes a waiting put."""
        cdef Py_ssize_t topic_len, total
        cdef const unsigned char* topic_ptr
        cdef uint32_t crc
        cdef int status = PUT_OK
        cdef ConsumeQueue queue
        cdef MappedFile mf
        cdef int64_t store_timestamp, phy_offset
        cdef unsigned char* p
        cdef PropertySpans spans
        if not self._writable or self.lease_expired():
            return SERVICE_NOT_AVAILABLE
        if props_len > PROPERTIES_MAX_BYTES:
            return PROPERTIES_SIZE_EXCEEDED
        topic_ptr = <const unsigned char*>PyUnicode_AsUTF8AndSize(topic, &topic_len)
        if topic_len > TOPIC_MAX_BYTES or topic_len == 0 or queue_id < 0:
            return MESSAGE_ILLEGAL
        total = REC_FIXED_OVERHEAD + body_len + topic_len + props_len
        if total > self.max_message_size:
            return MESSAGE_ILLEGAL
        crc = body_crc_of(body_ptr, body_len)
        self._lock()
        try:
            queue = self._find_or_create_queue(topic, queue_id)
            if queue is None:
                return MESSAGE_ILLEGAL
            self._reserve_queue(queue, 1, &status)
            if status != PUT_OK:
                return status
            mf = self.commit_log.writable_file(total, &status)
            if mf is None:
                return status
            scan_properties(props_ptr, props_len, &spans)
            self._reserve_index(index_entries_bound(spans.uniq_key_len, spans.keys_len), &status)
            if status != PUT_OK:
                return status
            store_timestamp = now_ms()
            phy_offset = mf.file_from_offset + mf.wrote_position
            place.queue_offset = queue.next_queue_offset
            p = mf.base + mf.wrote_position
            write_record(p, <int32_t>total, crc, queue_id, fields.flag, place.queue_offset, phy_offset,
                         fields.sys_flag, fields.born_timestamp if fields.born_timestamp else store_timestamp,
                         fields.born_host, fields.born_port, store_timestamp, self.store_ip, self.store_port,
                         fields.reconsume_times, fields.prepared_tx_offset, body_ptr, body_len, topic_ptr, topic_len,
                         props_ptr, props_len)
            record_appended(mf, total, store_timestamp)
            self.last_store_timestamp = store_timestamp
            self._dispatch(p, phy_offset, <int32_t>total, queue, &spans)
        finally:
            self._unlock()
        place.phy_offset = phy_offset
        place.store_timestamp = store_timestamp
        place.total = total
        if not self._completes_commits:  # else put_message wakes them once the put is published
            self._wake_replication()
        return PUT_OK

    def put_message(self, str topic, int queue_id, body, properties=b"", *, int sys_flag=0,
                    int64_t born_timestamp=0, int flag=0, int reconsume_times=0,
                    uint32_t born_host=0, int born_port=0, int64_t prepared_tx_offset=0, callback=None):
        """Append one message to the CommitLog and dispatch it to its ConsumeQueue and the index.

        ``properties`` are encoded ``k\\x01v\\x02`` bytes (a dict is encoded for convenience);
        the record's other fields are keyword-only, so that no caller can pass them out of order;
        ``born_host`` is an IPv4 as int (``ipv4_to_int``). Returns a PutMessageResult at once.
        Under SYNC_FLUSH with a ``callback``, the result is ``pending`` and ``callback(result)`` is
        called by ``complete_commits`` once the record is on disk (status PUT_OK) or the deadline
        passed (FLUSH_DISK_TIMEOUT). Without a callback nothing waits for the disk.
        """
        cdef Py_buffer body_buf
        cdef int status
        cdef PutPlace place
        cdef PutFields fields
        if not self._writable or self.lease_expired():
            return put_failure(SERVICE_NOT_AVAILABLE)
        properties = encoded_properties(properties)
        fields.sys_flag = sys_flag
        fields.born_timestamp = born_timestamp
        fields.flag = flag
        fields.reconsume_times = reconsume_times
        fields.born_host = born_host
        fields.born_port = born_port
        fields.prepared_tx_offset = prepared_tx_offset
        if PyBytes_CheckExact(body):
            status = self.put_raw(topic, queue_id, <const unsigned char*>PyBytes_AS_STRING(body),
                                  PyBytes_GET_SIZE(body), <const unsigned char*>PyBytes_AS_STRING(properties),
                                  PyBytes_GET_SIZE(properties), &fields, &place)
        else:
            PyObject_GetBuffer(body, &body_buf, PyBUF_SIMPLE)
            try:
                status = self.put_raw(topic, queue_id, <const unsigned char*>body_buf.buf, body_buf.len,
                                      <const unsigned char*>PyBytes_AS_STRING(properties),
                                      PyBytes_GET_SIZE(properties), &fields, &place)
            finally:
                PyBuffer_Release(&body_buf)
        if status != PUT_OK:
            return put_failure(status)
        return self._stored(&place, 1, None, callback)

    cdef PutMessageResult _stored(self, const PutPlace* place, int msg_num, list offsets, callback):
        """The result of a stored put or batch (``offsets``: each message's, for a batch), published
        to the commit completion when the store completes commits (the lane's puts use defer_put)."""
        cdef PutMessageResult result = PutMessageResult.__new__(PutMessageResult)
        result.status_code = PUT_OK
        result.wrote_offset = place.phy_offset
        result.wrote_bytes = <int>place.total
        result.next_offset = place.phy_offset + place.total
        result.queue_offset = place.queue_offset
        result.store_timestamp = place.store_timestamp
        result.msg_num = msg_num
        result._offsets = offsets
        result._store_ip = self.store_ip
        result._store_port = self.store_port
        if self._completes_commits:
            self._publish_put(result, callback)
            # after the put is published: a slave's ack may complete it at once
            self._wake_replication()
        return result

    cdef int put_batch_raw(self, str topic, int queue_id, BatchRecord* records, Py_ssize_t n,
                           const PutFields* fields, PutPlace* place) except -1:
        """Append a batch to one queue from raw buffers (``put_messages``' body, and the send lane's):
        consecutive queue offsets, back to back in one CommitLog file, all stored or none; its
        PutStatus, where its first message went in ``place`` (``place.total``: the whole batch), each
        record's size in ``records[i].size``. Nothing waits for the disk here, as in ``put_raw``."""
        cdef Py_ssize_t i, total = 0, topic_len, entries = 0
        cdef const unsigned char* topic_ptr
        cdef int status = PUT_OK
        cdef ConsumeQueue queue
        cdef MappedFile mf
        cdef int64_t store_timestamp, phy_offset, queue_offset, first_offset
        cdef unsigned char* p
        cdef BatchRecord* record
        cdef PropertySpans spans
        if not self._writable or self.lease_expired():
            return SERVICE_NOT_AVAILABLE
        topic_ptr = <const unsigned char*>PyUnicode_AsUTF8AndSize(topic, &topic_len)
        if n == 0 or topic_len > TOPIC_MAX_BYTES or topic_len == 0 or queue_id < 0:
            return MESSAGE_ILLEGAL
        for i in range(n):
            record = &records[i]
            if record.props_len > PROPERTIES_MAX_BYTES:
                return PROPERTIES_SIZE_EXCEEDED
            record.size = REC_FIXED_OVERHEAD + record.body_len + topic_len + record.props_len
            if record.size > self.max_message_size:
                return MESSAGE_ILLEGAL
            total += record.size
        if total > self.max_message_size:
            return MESSAGE_ILLEGAL
        for i in range(n):  # before the lock: its holders (the HA thread's reads) wait less
            records[i].crc = body_crc_of(records[i].body, records[i].body_len)
        self._lock()
        try:
            queue = self._find_or_create_queue(topic, queue_id)
            if queue is None:
                return MESSAGE_ILLEGAL
            self._reserve_queue(queue, n, &status)
            if status != PUT_OK:
                return status
            mf = self.commit_log.writable_file(total, &status)
            if mf is None:
                return status
            for i in range(n):
                scan_properties(records[i].props, records[i].props_len, &spans)
                entries += index_entries_bound(spans.uniq_key_len, spans.keys_len)
            self._reserve_index(entries, &status)
            if status != PUT_OK:
                return status
            store_timestamp = now_ms()
            first_offset = mf.file_from_offset + mf.wrote_position
            queue_offset = queue.next_queue_offset
            for i in range(n):
                record = &records[i]
                phy_offset = mf.file_from_offset + mf.wrote_position
                p = mf.base + mf.wrote_position
                write_record(p, <int32_t>record.size, record.crc, queue_id, record.flag, queue_offset + i,
                             phy_offset, fields.sys_flag,
                             fields.born_timestamp if fields.born_timestamp else store_timestamp,
                             fields.born_host, fields.born_port, store_timestamp, self.store_ip, self.store_port, 0, 0,
                             record.body, record.body_len, topic_ptr, topic_len, record.props, record.props_len)
                record_appended(mf, record.size, store_timestamp)
                self._dispatch(p, phy_offset, <int32_t>record.size, queue, NULL)
            self.last_store_timestamp = store_timestamp
        finally:
            self._unlock()
        place.phy_offset = first_offset
        place.queue_offset = queue_offset
        place.store_timestamp = store_timestamp
        place.total = total
        if not self._completes_commits:  # else put_messages wakes them once the put is published
            self._wake_replication()
        return PUT_OK

    def put_messages(self, str topic, int queue_id, list messages, *, int sys_flag=0,
                     int64_t born_timestamp=0, uint32_t born_host=0, int born_port=0, callback=None):
        """Append a batch to one queue: consecutive queue offsets, back to back in one CommitLog file.

        ``messages`` is a list of ``(body, properties, flag)`` tuples (properties encoded bytes or a
        dict). All are stored or none (a batch that cannot fit a file is MESSAGE_ILLEGAL).
        Completion as for ``put_message``.
        """
        cdef Py_ssize_t n = len(messages), i
        cdef int status
        cdef int64_t offset
        cdef PutPlace place
        cdef PutFields fields
        cdef BatchRecord* records
        cdef list kept = []  # the bytes the records point into, alive until the put is done
        cdef list offsets
        if not self._writable or self.lease_expired():
            return put_failure(SERVICE_NOT_AVAILABLE)
        if n == 0:
            return put_failure(MESSAGE_ILLEGAL)
        memset(&fields, 0, sizeof(fields))
        fields.sys_flag = sys_flag
        fields.born_timestamp = born_timestamp
        fields.born_host = born_host
        fields.born_port = born_port
        records = <BatchRecord*>PyMem_Malloc(n * sizeof(BatchRecord))
        if records == NULL:
            raise MemoryError()
        try:
            for i in range(n):
                body, props, flag = messages[i]
                body = bytes(body) if not PyBytes_CheckExact(body) else body
                props = encoded_properties(props)
                kept.append(body)
                kept.append(props)
                records[i].body = <const unsigned char*>PyBytes_AS_STRING(body)
                records[i].body_len = PyBytes_GET_SIZE(body)
                records[i].props = <const unsigned char*>PyBytes_AS_STRING(props)
                records[i].props_len = PyBytes_GET_SIZE(props)
                records[i].flag = flag
            status = self.put_batch_raw(topic, queue_id, records, n, &fields, &place)
            if status != PUT_OK:
                return put_failure(status)
            offsets = []
            offset = place.phy_offset
            for i in range(n):
                offsets.append(offset)
                offset += records[i].size
        finally:
            PyMem_Free(records)
        return self._stored(&place, <int>n, offsets, callback)
