# cython: cdivision=True, auto_pickle=False
# The compiled store's facade: StoreCore puts records into the CommitLog, dispatches them to their
# ConsumeQueue and the index, and reads them back. Each part of the store is a room of its own
# (see _store.pxd for the list); a put goes through them in this order:
#
#   put_message(topic, queue_id, body, properties)
#     |  check limits, BODYCRC                             rmq.protocol._record
#     |  ---------------------------------------- put lock ----------------------------------------
#     |  ConsumeQueue.reserve (files exist first)          rmq.store._consume_queue
#     |  CommitLog.writable_file (roll over: EOF marker)   rmq.store._commit_log  over  rmq.store._mapped_file
#     |  write_record at the file's end, record_appended     rmq.store._commit_log
#     |  dispatch: ConsumeQueue.put_entry, IndexService.build_index        rmq.store._index
#     |  ---------------------------------------- put lock ----------------------------------------
#     v  SYNC_FLUSH: GroupCommit.publish_put               rmq.store._group_commit
#        PutMessageResult (pending until complete_commits calls its callback)
#
# Concurrency: one put lock serialises writers (puts, truncation, file deletion) and readers that
# walk mapped memory (gets). Flush threads never take it: the ASYNC_FLUSH one reads positions under
# the GIL and releases the GIL only around msync; the SYNC_FLUSH group commit's never holds the GIL
# and sees only what the put path publishes under a C mutex (rmq.store._group_commit). Mapped memory
# stays valid while any memoryview handed out still references its mmap object (rmq.store._mapped_file).
import logging
from collections import deque
import os

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyObject_GetBuffer, PyBuffer_Release
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.errno cimport EINTR, EIO, errno
from posix.fcntl cimport O_CLOEXEC, O_WRONLY, open as c_open
from posix.unistd cimport close as c_close, pwrite, write as c_write
from libc.stdint cimport INT64_MAX, int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy, memmove, memset, strerror
from posix.time cimport CLOCK_MONOTONIC, CLOCK_REALTIME, clock_gettime, timespec
from posix.unistd cimport usleep

from rmq.includes.endian cimport load_be32, load_be64
from rmq.includes.hash cimport java_string_hash
from rmq.store._commit_log cimport (CREATE_MAPPED_FILE_FAILED, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, MESSAGE_ILLEGAL,
                              PROPERTIES_SIZE_EXCEEDED,
                              PUT_OK, SERVICE_NOT_AVAILABLE, SLAVE_NOT_AVAILABLE, CommitLog, record_appended)
from rmq.store._consume_queue cimport CQ_BLANK_SIZE, CQ_COMMITLOG_OFFSET, CQ_SIZE, CQ_STORE_UNIT_SIZE, CQ_TAGS_CODE
from rmq.store._consume_queue cimport ConsumeQueue, StoreCheckpoint
from rmq.store._group_commit cimport REPLICA_NOT_AVAILABLE, REPLICA_WAIT, GroupCommit, GroupCommitState
from rmq.store._ha_stream cimport HAStream, wake_on_put
from rmq.store._index cimport IndexService, index_entries_bound
from rmq.store._mapped_file cimport MappedFile
from rmq.protocol._record cimport (BLANK_MAGIC_CODE, CHECK_BAD_MAGIC, CHECK_BAD_OFFSET, CHECK_EMPTY, CHECK_END_OF_FILE,
                                   END_FILE_MIN_BLANK_LENGTH,
                                   MESSAGE_MAGIC_CODE, PROPERTIES_MAX_BYTES, REC_FIXED_OVERHEAD, REC_MAGIC,
                                   REC_QUEUEID, REC_QUEUEOFFSET, REC_STORETIMESTAMP, REC_TOTALSIZE, TOPIC_MAX_BYTES,
                                   body_crc_of, check_record_c, encode_msg_id_c, record_properties, write_record)

import rmq.store._consume_queue as _consume_queue
import rmq.store._mapped_file as _mapped_file
from rmq.errors import StoreError
from rmq.protocol import _record
from rmq.protocol import message as _message
from rmq.protocol.message import encode_properties, topic_error

log = logging.getLogger("rmq.store")

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)

cdef enum:
    # a get scans at most this many ConsumeQueue entries when a filter rejects them (RocketMQ: 16000 bytes)
    MAX_FILTER_SCAN_ENTRIES = 800
    # entries of a TagFilter compared in C; more fall back to a Python set
    TAG_FILTER_MAX_CODES = 32
    # complete_round_here leaves a round of more waiting puts to the flush thread: while its msync
    # runs, the loop reads and puts the next requests of a deep pipeline, so rounds stay big (made
    # inline, each read got its own round: 0.67x the sends at 64 in flight on tmpfs, docs/sync-flush.md)
    INLINE_ROUND_MAX_PUTS = 16

# rmq.store._store's Python API is older than its rooms: what they export is re-exported here. (A class
# cimported from a room is a C-level name here, so its Python name is bound through globals().)
LAYOUT = {**_record.LAYOUT, **_consume_queue.LAYOUT}
CRC_NATIVE = _record.CRC_NATIVE
globals().update(MappedFile=_mapped_file.MappedFile, MappedFileQueue=_mapped_file.MappedFileQueue,
                 ConsumeQueue=_consume_queue.ConsumeQueue, StoreCheckpoint=_consume_queue.StoreCheckpoint)

# Status enum members by code, bound on first use (rmq.store imports this module first).
cdef tuple _PUT_STATUS = None
cdef tuple _GET_STATUS = None


cdef _bind_status_enums():
    global _PUT_STATUS, _GET_STATUS
    from rmq.store.status import GetMessageStatus, PutMessageStatus
    _PUT_STATUS = tuple(PutMessageStatus)
    _GET_STATUS = tuple(GetMessageStatus)


cdef bytes _SCHEDULE_TOPIC = _message.SCHEDULE_TOPIC.encode()


# ---------------------------------------------------------------------------------------------
# small helpers

cdef inline int64_t now_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef inline double monotonic() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef inline void scan_properties(const unsigned char* p, Py_ssize_t n, PropertySpans* out) noexcept nogil:
    """One pass over k\\x01v\\x02 pairs, remembering TAGS, KEYS, UNIQ_KEY and DELAY."""
    cdef Py_ssize_t i = 0, key_start, key_len, value_start
    out.tags_len = out.keys_len = out.uniq_key_len = out.delay_len = 0
    out.tags = out.keys = out.uniq_key = out.delay = NULL
    while i < n:
        key_start = i
        while i < n and p[i] != 1 and p[i] != 2:
            i += 1
        if i >= n or p[i] == 2:
            i += 1      # a key without a value: skip it
            continue
        key_len = i - key_start
        i += 1
        value_start = i
        while i < n and p[i] != 2:
            i += 1
        if key_len == 4 and memcmp(p + key_start, b"TAGS", 4) == 0:
            out.tags = p + value_start
            out.tags_len = i - value_start
        elif key_len == 4 and memcmp(p + key_start, b"KEYS", 4) == 0:
            out.keys = p + value_start
            out.keys_len = i - value_start
        elif key_len == 8 and memcmp(p + key_start, b"UNIQ_KEY", 8) == 0:
            out.uniq_key = p + value_start
            out.uniq_key_len = i - value_start
        elif key_len == 5 and memcmp(p + key_start, b"DELAY", 5) == 0:
            out.delay = p + value_start
            out.delay_len = i - value_start
        i += 1


# ---------------------------------------------------------------------------------------------
# results and filters

@cython.freelist(256)
cdef class PutMessageResult:
    """Outcome of a put: status, where the record went, and (SYNC_FLUSH) whether a completion follows."""

    @property
    def status(self):
        if _PUT_STATUS is None:
            _bind_status_enums()
        return _PUT_STATUS[self.status_code]

    @property
    def ok(self):
        """Stored (PUT_OK, or stored but degraded as FLUSH_DISK_TIMEOUT ...)."""
        return self.status_code <= SLAVE_NOT_AVAILABLE

    @property
    def pending(self):
        """True until the group commit has called the completion given to the put."""
        return self._callback is not None

    @property
    def msg_id(self):
        """Broker msgId (offsetMsgId); comma-joined for a batch, as the SEND reply carries it."""
        if self.status_code > SLAVE_NOT_AVAILABLE:
            return None
        if self._offsets is None:
            return encode_msg_id_c(self._store_ip, self._store_port, self.wrote_offset)
        return ",".join([encode_msg_id_c(self._store_ip, self._store_port, o) for o in self._offsets])

    @property
    def msg_ids(self):
        if self.status_code > SLAVE_NOT_AVAILABLE:
            return []
        offsets = self._offsets if self._offsets is not None else [self.wrote_offset]
        return [encode_msg_id_c(self._store_ip, self._store_port, o) for o in offsets]

    @property
    def wrote_offsets(self):
        return list(self._offsets) if self._offsets is not None else [self.wrote_offset]

    def __repr__(self):
        return (f"<PutMessageResult {self.status.name} offset={self.wrote_offset} bytes={self.wrote_bytes} "
                f"queue_offset={self.queue_offset} msgs={self.msg_num}>")


cdef class CommitSink:
    """The base of what answers deferred puts (``StoreCore.defer_put``): the broker's send lane."""

    cdef int complete(self, int status) except -1:
        return 0

    cdef int round_done(self) except -1:
        return 0


cdef PutMessageResult put_failure(int status):
    cdef PutMessageResult r = PutMessageResult.__new__(PutMessageResult)
    r.status_code = status
    r.wrote_offset = -1
    r.queue_offset = -1
    return r


cdef inline bytes encoded_properties(properties):
    """A put's properties as record bytes: encoded ``k\\x01v\\x02`` bytes as they are, a dict encoded."""
    if PyBytes_CheckExact(properties):
        return <bytes>properties
    return encode_properties(properties) if properties is not None else b""


cdef void complete_put(PutMessageResult r, int status):
    """A waiting put is done: its status, then its callback (once; one that raises is logged)."""
    r.status_code = status
    callback = r._callback
    r._callback = None
    try:
        callback(r)
    except Exception:
        log.exception("put completion %r raised", callback)


cdef class GetMessageResult:
    """Outcome of a get: status, the stored records as zero-copy views, and where to go next."""

    @property
    def status(self):
        if _GET_STATUS is None:
            _bind_status_enums()
        return _GET_STATUS[self.status_code]

    @property
    def message_count(self):
        return len(self.messages)

    def __repr__(self):
        return (f"<GetMessageResult {self.status.name} msgs={len(self.messages)} next={self.next_begin_offset} "
                f"min={self.min_offset} max={self.max_offset}>")


cdef class TagFilter:
    """What a subscription accepts: tags codes checked on the ConsumeQueue entry, plus (optional)
    exact tag strings re-checked on the record (two tags can share a hash), plus (optional) a
    predicate over the record's properties (an SQL92 subscription's: ``of_properties``)."""
    cdef int64_t _codes[TAG_FILTER_MAX_CODES]
    cdef int _n_codes
    cdef readonly frozenset codes
    cdef readonly frozenset tags
    cdef readonly object properties_filter
    cdef list _tag_bytes
    cdef list _property_keys  # [(key as UTF-8, key)]: what properties_filter reads

    def __init__(self, codes=(), tags=None, properties_filter=None, property_names=()):
        # codes None: every tags code passes the first step (a properties filter decides)
        self.codes = frozenset(int(c) for c in codes) if codes is not None else None
        self.tags = frozenset(tags) if tags is not None else None
        self.properties_filter = properties_filter
        self._property_keys = [(name.encode(), name) for name in property_names]
        self._tag_bytes = [t.encode() for t in self.tags] if self.tags is not None else None
        self._n_codes = -1
        if self.codes is None:
            self._n_codes = -2
        elif len(self.codes) <= TAG_FILTER_MAX_CODES:
            self._n_codes = 0
            for c in self.codes:
                self._codes[self._n_codes] = c
                self._n_codes += 1

    @classmethod
    def of_tags(cls, tags, bint exact=True):
        """A filter accepting these tag strings (codes = Java String.hashCode of each)."""
        tags = [t for t in tags]
        codes = []
        for t in tags:
            data = t.encode()
            codes.append(java_string_hash(data, len(data)))
        return cls(codes, tags if exact else None)

    @classmethod
    def of_properties(cls, properties_filter, property_names):
        """A filter accepting the records for which ``properties_filter({name: value})`` is True,
        given those of ``property_names`` the record has (read in C from the mapped record, the
        others not decoded), before anything is copied into the answer."""
        return cls(None, None, properties_filter, property_names)

    cdef inline bint accepts_code(self, int64_t code):
        cdef int i
        if self._n_codes < 0:
            return self._n_codes == -2 or code in self.codes
        for i in range(self._n_codes):
            if self._codes[i] == code:
                return True
        return False

    cdef bint accepts_record(self, const unsigned char* record) except -1:
        cdef const unsigned char* props
        cdef const unsigned char* topic
        cdef Py_ssize_t props_len, topic_len
        cdef PropertySpans spans
        cdef bytes tag
        if self._tag_bytes is None and self.properties_filter is None:
            return True
        record_properties(record, &props, &props_len, &topic, &topic_len)
        if self.properties_filter is not None:
            return bool(self.properties_filter(self._read_properties(props, props_len)))
        scan_properties(props, props_len, &spans)
        for tag in self._tag_bytes:
            if len(tag) == spans.tags_len and memcmp(<const char*>tag, spans.tags, spans.tags_len) == 0:
                return True
        return False

    cdef dict _read_properties(self, const unsigned char* p, Py_ssize_t n):
        """{key: value} of the properties named in _property_keys, as decode_properties reads
        ``k\\x01v\\x02...``: an item without \\x01 is skipped, the last of a repeated key wins."""
        cdef dict found = {}
        cdef Py_ssize_t i = 0, key_start, key_len, value_start
        cdef bytes key
        while i < n:
            key_start = i
            while i < n and p[i] != 1 and p[i] != 2:
                i += 1
            if i >= n or p[i] == 2:
                i += 1
                continue
            key_len = i - key_start
            i += 1
            value_start = i
            while i < n and p[i] != 2:
                i += 1
            for key, name in self._property_keys:
                if PyBytes_GET_SIZE(key) == key_len and memcmp(PyBytes_AS_STRING(key), p + key_start, key_len) == 0:
                    found[name] = PyUnicode_DecodeUTF8(<const char*>p + value_start, i - value_start, "replace")
                    break
            i += 1
        return found

    def __repr__(self):
        if self.properties_filter is not None:
            return f"TagFilter(properties_filter={self.properties_filter!r})"
        return f"TagFilter(codes={set(self.codes)}, tags={set(self.tags) if self.tags is not None else None})"


# ---------------------------------------------------------------------------------------------
# the store core: puts, dispatch, gets, recovery

cdef class StoreCore:
    """CommitLog + ConsumeQueues + dispatch to the IndexService. The hot put/get paths live here;
    rmq.store.MessageStore adds lifecycle, recovery orchestration, flush services and retention."""

    def __cinit__(self):
        # before __init__: a subclass may ask for commit_event_fd first
        self._group_commit = GroupCommit()

    def __dealloc__(self):
        PyMem_Free(self._deferred)

    def __init__(self, str store_path, *, Py_ssize_t mapped_file_size_commit_log,
                 Py_ssize_t mapped_file_size_consume_queue, int64_t max_message_size,
                 str store_ip, int32_t store_port, bint sync_flush, double sync_flush_timeout,
                 delay_level_ms, bint sync_master=False, double slave_timeout=3.0,
                 int64_t ha_max_gap_not_in_sync=256 * 1024 * 1024, bint slave=False):
        self.store_path = store_path
        self.commit_log = CommitLog(os.path.join(store_path, "commitlog"), mapped_file_size_commit_log,
                                    self._group_commit if sync_flush else None)
        self.consume_queue_table = {}
        self.mapped_file_size_consume_queue = mapped_file_size_consume_queue
        self.max_message_size = max_message_size
        self.store_ip = _record.ipv4_to_int(store_ip)
        self.store_port = store_port
        self.sync_flush = sync_flush
        self.sync_flush_timeout = sync_flush_timeout
        self.sync_master = sync_master and not slave
        self.slave_timeout = slave_timeout
        self.ha_max_gap_not_in_sync = ha_max_gap_not_in_sync
        self.slave = slave
        self._completes_commits = sync_flush or self.sync_master
        self._delay_level_ms = list(delay_level_ms)
        self._commit_requests = deque()
        self._kicks_rounds = False
        self.running = False
        self.last_store_timestamp = 0
        self._replica_fd = -1
        self._ha_wake_fd = -1

    def attach(self, IndexService index_service not None, StoreCheckpoint checkpoint not None):
        """Give the core its index and checkpoint (opened once the store's lock file is held)."""
        self.index_service = index_service
        self.checkpoint = checkpoint

    def set_running(self, bint running):
        """Accept puts (True) or answer them SERVICE_NOT_AVAILABLE (False). A slave never accepts
        puts from clients (RocketMQ: "message store is slave mode"): it only appends its master's
        bytes (``append_replica``)."""
        self.running = running
        self._writable = running and not self.slave and not self.fenced and not self.disk_full

    def become_master(self, bint sync_master):
        """A slave promoted to master (``rmq.broker.role``): puts from clients are accepted from the
        next ``set_running(True)`` on (once whoever answers them is ready for the new role); under
        ``sync_master`` they wait for a slave's ack, as a SYNC_MASTER's do."""
        self.slave = False
        self.sync_master = sync_master
        self._completes_commits = self.sync_flush or sync_master

    def become_slave(self):
        """A master demoted (``rmq.broker.role``; its puts refused since ``set_running(False)``, and
        no thread but the caller's may put): it only appends its new master's bytes from now on,
        dispatched from its own end on (its puts dispatched everything before)."""
        self._lock()
        try:
            self.slave = True
            self.sync_master = False
            self._completes_commits = self.sync_flush
            self._writable = False
            self.reput_offset = self.commit_log.get_max_offset()
        finally:
            self._unlock()

    def fence(self):
        """Refuse every put (SERVICE_NOT_AVAILABLE) until ``unfence``: another master of this broker
        name has a newer epoch, and writing here would fork the log."""
        self.fenced = True
        self._writable = False

    def unfence(self):
        """Take puts again: the newer master is gone from the routes (``rmq.broker.role``)."""
        self.fenced = False
        self._writable = self.running and not self.slave and not self.disk_full

    def mark_disk_full(self, bint full):
        """Refuse puts (SERVICE_NOT_AVAILABLE) while ``full``, RocketMQ's ``makeDiskFull`` /
        ``makeDiskOK``; returns whether the disk was full before."""
        cdef bint was = self.disk_full
        self.disk_full = full
        self._writable = self.running and not self.slave and not self.fenced and not full
        return was

    def acquire_put_lock(self):
        """Hold off puts and gets (retention deleting files). Pair with release_put_lock."""
        self._lock()

    def release_put_lock(self):
        self._unlock()

    cdef int _lock(self) except -1:
        # The GIL makes test-and-set of a plain flag atomic: no atomic instructions on the hot path.
        # Contention only happens while the holder is inside a call that released the GIL (mapping
        # a new file); the waiter then yields the GIL until the holder is done.
        while self._busy:
            with nogil:
                usleep(50)
        self._busy = True
        return 0

    cdef void _unlock(self) noexcept:
        self._busy = False

    # -- ConsumeQueues ----------------------------------------------------------------------

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

    # -- put ---------------------------------------------------------------------------------

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
        if not self._writable:
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
        if not self._writable:
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
        if not self._writable:
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
        if not self._writable:
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

    # -- flush -------------------------------------------------------------------------------

    def flush_commit_log(self, int least_pages=0):
        """msync the CommitLog (GIL released); returns the offset up to which it is durable."""
        self.commit_log.flush(least_pages)
        return self.commit_log.flushed_where

    # -- the SYNC_FLUSH group commit ------------------------------------------------------------

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

    # -- replication (rmq.store.ha): the master reads its CommitLog, a slave appends a copy --------

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

    # -- get ---------------------------------------------------------------------------------

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

    # -- recovery ----------------------------------------------------------------------------

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
