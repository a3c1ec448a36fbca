# StoreCore's ConsumeQueues, and dispatch: what a stored record becomes in its ConsumeQueue and the
# index (RocketMQ's CommitLogDispatcher), for a put, a slave's replicated bytes and recovery alike
# (which is why dispatch sits here, before them in the chain). Included by _store.pyx, whose
# module-level names (the rooms it cimports, scan_properties, _SCHEDULE_TOPIC) it uses.

cdef class _StoreQueues(_StoreState):
    """The ConsumeQueue table (created on first put, or loaded at start) and the dispatch of records."""

    cdef ConsumeQueue _find_or_create_queue(self, str topic, int queue_id):
        queues = self.consume_queue_table.get(topic)
        if queues is not None:
            queue = (<dict>queues).get(queue_id)
            if queue is not None:
                return <ConsumeQueue>queue
        elif topic_error(topic) is not None:
            return None
        else:
            queues = self.consume_queue_table[topic] = {}
        queue = ConsumeQueue(topic, queue_id, os.path.join(self.store_path, "consumequeue"),
                             self.mapped_file_size_consume_queue)
        queues[queue_id] = queue
        return <ConsumeQueue>queue

    def load_consume_queues(self):
        """Map every ConsumeQueue found under consumequeue/<topic>/<queueId>/."""
        root = os.path.join(self.store_path, "consumequeue")
        if not os.path.isdir(root):
            return
        for topic in sorted(os.listdir(root)):
            if topic_error(topic) is not None or not os.path.isdir(os.path.join(root, topic)):
                log.warning("ignoring %s in %s: not a topic", topic, root)
                continue
            for qid in sorted(os.listdir(os.path.join(root, topic))):
                if not qid.isdigit():
                    log.warning("ignoring %s/%s in %s: not a queue id", topic, qid, root)
                    continue
                queue = self._find_or_create_queue(topic, int(qid))
                queue.load()

    def find_consume_queue(self, str topic, int queue_id):
        """The ConsumeQueue of (topic, queue_id), or None if nothing was ever stored there."""
        queues = self.consume_queue_table.get(topic)
        return queues.get(queue_id) if queues is not None else None

    def consume_queues(self):
        """Every ConsumeQueue, as a list."""
        return [q for queues in self.consume_queue_table.values() for q in queues.values()]

    # -- dispatch ---------------------------------------------------------------------------

    cdef int64_t _tags_code(self, const unsigned char* topic, Py_ssize_t topic_len,
                            PropertySpans* spans, int64_t store_timestamp) noexcept:
        cdef int64_t level = 0
        cdef Py_ssize_t i
        if (spans.delay_len > 0 and topic_len == len(_SCHEDULE_TOPIC)
                and memcmp(topic, <const char*>_SCHEDULE_TOPIC, topic_len) == 0):
            # a delayed message waits in SCHEDULE_TOPIC_XXXX: its tags code is the deliver time
            for i in range(spans.delay_len):
                if spans.delay[i] < 48 or spans.delay[i] > 57:
                    level = 0
                    break
                level = level * 10 + (spans.delay[i] - 48)
                if level > 1000:
                    break
            if level > 0:
                if level > len(self._delay_level_ms):
                    level = len(self._delay_level_ms)
                return store_timestamp + <int64_t>self._delay_level_ms[level - 1]
            return store_timestamp + 1000
        if spans.tags_len == 0:
            return 0
        return java_string_hash(spans.tags, spans.tags_len)

    cdef int _dispatch(self, const unsigned char* record, int64_t phy_offset, int32_t size,
                       ConsumeQueue queue, PropertySpans* spans) except -1:
        """Build the ConsumeQueue entry and the index entries of one stored record (``spans``: its
        properties scanned already, or NULL)."""
        cdef const unsigned char* props
        cdef const unsigned char* topic
        cdef Py_ssize_t props_len, topic_len
        cdef PropertySpans scanned
        cdef int64_t store_timestamp = load_be64(record + REC_STORETIMESTAMP)     # 11 STORETIMESTAMP
        record_properties(record, &props, &props_len, &topic, &topic_len)
        if spans == NULL:
            scan_properties(props, props_len, &scanned)
            spans = &scanned
        queue.put_entry(phy_offset, size, self._tags_code(topic, topic_len, spans, store_timestamp),
                        load_be64(record + REC_QUEUEOFFSET))                      # 6 QUEUEOFFSET
        if spans.uniq_key_len > 0 or spans.keys_len > 0:
            try:
                self.index_service.build_index(topic, topic_len, spans.uniq_key, spans.uniq_key_len,
                                               spans.keys, spans.keys_len, phy_offset, store_timestamp)
            except Exception:
                # puts reserve their index file first (_reserve_index): this is a message with more
                # keys than a file holds, or a re-dispatch; it stays stored and queued, unfindable by key
                log.exception("index build failed at offset %d", phy_offset)
        return 0
