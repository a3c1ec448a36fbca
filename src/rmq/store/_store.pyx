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
# the store core: one class to its callers, a chain of classes inside, one per section of it, each
# the base of the next, so that a section calls only its own methods and those of the sections
# before it:
#
#   _StoreState         here                      the rooms, the role, the put lock
#   _StoreQueues        _store_queues.pxi         ConsumeQueues; dispatch to them and the index
#   _StoreReplication   _store_replication.pxi    a master's CommitLog read, a slave's appended
#   _StoreGroupCommit   _store_group_commit.pxi   flushing; puts that wait for the disk or a slave
#   _StorePuts          _store_puts.pxi           put_message, put_messages, and the lanes' raw puts
#   _StoreGets          _store_gets.pxi           get_message, the lanes' get_into, reads by offset
#   _StoreRecovery      _store_recovery.pxi       recovery's scan, truncation
#   StoreCore           here                      the constructor: the one class callers see
#
# Cython's include works at module level only, so a section cannot be included into one class
# body; as a chain it costs nothing: the attributes of all are fixed offsets in one object, and a
# cdef method is called through one vtable, as it was when StoreCore was one class.

cdef class _StoreState:
    """What every section reads: the rooms, the role (running, slave, fenced, disk full), the put lock."""

    def __cinit__(self):
        # before __init__: a subclass may ask for commit_event_fd first
        self._group_commit = GroupCommit()

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

    def set_master_lease(self, double until):
        """Controller mode (rmq.broker.replicas): take puts only until ``until``, seconds on
        CLOCK_BOOTTIME (``time.clock_gettime(time.CLOCK_BOOTTIME)``), after which the controllers
        may have replaced this master; 0: no lease (any other mode)."""
        self._lease_until_ns = <int64_t>(until * 1e9) if until > 0 else 0

    @property
    def master_lease_expired(self):
        """A master lease is set and has run out: puts are refused until it is renewed."""
        return self.lease_expired()

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
        if self.closed:
            # every reader and writer of mapped memory comes through here: after close() none
            # may go on to a file whose mapping is gone
            raise StoreError(f"store {self.store_path} is shut down")
        self._busy = True
        return 0

    cdef void _unlock(self) noexcept:
        self._busy = False


include "_store_queues.pxi"
include "_store_replication.pxi"
include "_store_group_commit.pxi"
include "_store_puts.pxi"
include "_store_gets.pxi"
include "_store_recovery.pxi"


cdef class StoreCore(_StoreRecovery):
    """CommitLog + ConsumeQueues + dispatch to the IndexService. The hot put/get paths live here;
    rmq.store.MessageStore adds lifecycle, recovery orchestration, flush services and retention."""

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

    def close(self):
        """Shutdown's last step, once every thread that reads or writes the files has stopped and
        everything is flushed: unmap and close every CommitLog and ConsumeQueue file, the file a
        slave appends through and the group commit's eventfd. Puts answer SERVICE_NOT_AVAILABLE
        from then on and whatever else would read or write the store raises StoreError, rather
        than reaching memory that was unmapped. Idempotent."""
        cdef ConsumeQueue queue
        if self.closed:
            return
        self._lock()
        try:
            self.set_running(False)
            self.close_replica_file()
            self.commit_log.close()
            for queues in self.consume_queue_table.values():
                for queue in (<dict>queues).values():
                    queue.close()
            self._group_commit.close()
            self.closed = True
        finally:
            self._unlock()
