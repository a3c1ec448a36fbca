# cython: boundscheck=True, wraparound=False, cdivision=True, auto_pickle=False
"""The broker's compiled send lane: SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE, from a
frame's bytes to its answer's bytes with no Python object per message, for the common case only. Whatever it does not
serve goes to ``rmq.broker.processor.send`` unchanged, and the two are one semantics: a send the
lane serves gets the answer, and leaves the stored bytes, the processor would (the differential test
``tests/broker/test_send_lane.py`` holds them together).

The frame it reads (docs/protocol.md#frame; the header a JSON object)::

    offset  size  field
    0       4     total_length, 4       header_length (serialize type 0: JSON), both read by the decoder
    8       H     {"code":10|310|320, "opaque":N, "flag":N, "version":N, "language":"S", "remark":"S"|null,
                   "extFields":{<send_header.py's fields, long names or V2 letters>: "S", ...}, ...}
    8+H     B     the message body, stored as it came; a batch's (code 320, or 310 with m=true) is
                  rmq.protocol.batch's records, each stored as one message with the header's
                  properties appended to its own:

    offset  size  field (per record, big-endian; the BATCH_* constants below)
    0       4     total     20 + bodyLen + 2 + propsLen, or 0 (not checked)
    4       4     magic     not read
    8       4     bodyCRC   not read (the store computes its own)
    12      4     flag      the message's user flag
    16      4     bodyLen   int32 >= 0
    20      L     body
    20+L    2     propsLen  int16 >= 0
    22+L    P     properties

and the answer it writes (what the processor's RemotingCommand encodes to, byte for byte)::

    0       4     total_length = 4 + H'
    4       4     H'
    8       H'    {"code":0,"language":"PYTHON","version":399,"opaque":N,"flag":1,
                   "extFields":{"msgId":"<32 hex>","queueId":"Q","queueOffset":"N"}}

(a batch's msgId: its messages' ids joined by commas; queueOffset: its first message's)

The lane leaves a frame to the processor (returns 0 before it changed anything) when the header is
anything but plain JSON the lane reads as orjson and ``rmq.protocol.headers.send_header`` do (an
escape above ASCII, a raw byte above 0x7F, a duplicate key, a number that is no plain int, a field
``send_header`` would refuse), when the send is unusual (a batch, a retry topic, a negative queue
id, properties marking a transaction, a delay level or a timer, properties or a body past their
limits; a batch body the processor would refuse, or one whose messages' properties, with the
header's appended, would be), when the broker is not in the plain case (a slave, fenced, disk full,
a topic the processor has not yet checked under the current topic table version, a topic with
attributes (its message type is checked), sends waiting for
the disk or a slave past the processor's busy bounds, a batch that would wait), or when the store
refuses the put (nothing stored: the processor repeats it and answers the refusal).

Under SYNC_FLUSH and SYNC_MASTER a single send waits, as the processor's do: the lane puts it,
encodes its answer at once into ``_Deferred``'s buffer and leaves the wait to the store
(``StoreCore.defer_put``, a C ring merged in offset order with the processor's waiting puts); when
the round or the slave's ack covers it, the store calls ``_Deferred.complete`` and the answers go
to each connection as one run of bytes (``connect``'s ``deliver``). Another outcome than PUT_OK is
encoded as the processor encodes it (``rmq.broker.processor.send.put_reply``).
Bound checks stay on (``boundscheck``); every index into the header is checked against its length.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.ref cimport Py_INCREF, Py_XDECREF, PyObject
from libc.stdint cimport INT64_MAX, INT64_MIN, int16_t, int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcmp, memcpy, memset

from rmq.store._commit_log cimport PUT_OK
from rmq.includes.endian cimport load_be16, load_be32, store_be32, store_be64
from rmq.store._store cimport BatchRecord, CommitSink, PutFields, PutPlace, StoreCore
from rmq.net._codec cimport FastLane
from rmq.protocol._record cimport MSGID_BYTES, TOPIC_MAX_BYTES
from rmq.includes.decimal cimport MAX_DECIMAL, put_decimal

from rmq.broker.processor.send import put_reply as _put_reply
from rmq.net import frame as _frame
from rmq.net.codec import encode_into as _encode_into
from rmq.protocol import batch as _batch
from rmq.protocol import headers as _headers
from rmq.protocol import message as _message
from rmq.protocol import send_header as _send_header
from rmq.protocol import transaction as _transaction
from rmq.protocol.codes import RequestCode as _RequestCode
from rmq.protocol.codes import ResponseCode as _ResponseCode

cdef extern from "string.h":
    void* memmem(const void* haystack, size_t haystacklen, const void* needle, size_t needlelen) nogil

cdef extern from "Python.h":
    object PyUnicode_DecodeASCII(const char* s, Py_ssize_t size, const char* errors)
    object PyByteArray_FromStringAndSize(const char* s, Py_ssize_t size)


# The header fields, by position in send_header.py's FIELDS (LONG_KEYS[i] / SHORT_KEYS[i]).
cdef enum:
    F_GROUP = 0
    F_TOPIC = 1
    F_DEFAULT_TOPIC = 2
    F_QUEUE_NUMS = 3
    F_QUEUE_ID = 4
    F_SYS_FLAG = 5
    F_BORN_TIMESTAMP = 6
    F_FLAG = 7
    F_PROPERTIES = 8
    F_RECONSUME_TIMES = 9
    F_UNIT_MODE = 10
    F_MAX_RECONSUME_TIMES = 11
    F_BATCH = 12
    N_FIELDS = 13
    N_SEND_CODES = 3
    TOPIC_CACHE_SLOTS = 64
    # a batch body's record (rmq.protocol.batch): total, magic, bodyCRC, flag, bodyLen, body, propsLen, props
    BATCH_TOTAL = 0
    BATCH_FLAG = 12
    BATCH_BODY_LEN = 16
    BATCH_BODY = 20
    BATCH_PROPS_LEN_SIZE = 2
    PROPERTY_SEPARATOR = 2

assert len(_send_header.LONG_KEYS) == len(_send_header.SHORT_KEYS) == N_FIELDS, "send_header.py's fields changed: so must the lane"
assert (_batch.RECORD_HEAD.size, _batch.PROPS_LEN.size) == (BATCH_BODY, BATCH_PROPS_LEN_SIZE), "rmq.protocol.batch changed: so must the lane"
assert _message.PROPERTY_SEPARATOR == chr(PROPERTY_SEPARATOR)

cdef int SEND_MESSAGE = _RequestCode.SEND_MESSAGE
cdef int SEND_MESSAGE_V2 = _RequestCode.SEND_MESSAGE_V2
cdef int SEND_BATCH_MESSAGE = _RequestCode.SEND_BATCH_MESSAGE
cdef int PULL_MESSAGE = _RequestCode.PULL_MESSAGE
cdef int SEND_CODES[N_SEND_CODES]
SEND_CODES[:] = [SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE]
cdef int FLAG_ONEWAY = _frame.FLAG_ONEWAY
cdef int FLAG_RESPONSE = _frame.FLAG_RESPONSE
cdef Py_ssize_t PROPERTIES_MAX = _message.PROPERTIES_MAX_LENGTH
cdef int DEFAULT_QUEUE_NUMS = _headers.DEFAULT_TOPIC_QUEUE_NUMS

# The names the lane compares raw key bytes with (kept alive here, read through C pointers). The V2
# letters first: every key of a V2 header is one, and each key is looked for from the start.
cdef list _NAMES = [name.encode("ascii") for name in _send_header.SHORT_KEYS + _send_header.LONG_KEYS]
cdef const char* FIELD_NAMES[2 * N_FIELDS]  # the V2 letters, then the long names
cdef Py_ssize_t FIELD_LENGTHS[2 * N_FIELDS]


cdef void _bind_names():
    cdef Py_ssize_t i
    cdef bytes name
    for i in range(2 * N_FIELDS):
        name = _NAMES[i]
        FIELD_NAMES[i] = PyBytes_AS_STRING(name)
        FIELD_LENGTHS[i] = PyBytes_GET_SIZE(name)


_bind_names()

# What makes a send unusual (the processor's own tests of its properties, on the same bytes).
cdef bytes DELAY_MARK = (_message.MessageProperty.DELAY_TIME_LEVEL + _message.NAME_VALUE_SEPARATOR).encode()
cdef bytes TIMER_MARK = _message.TIMER_PROPERTY_MARK.encode()
cdef bytes PREPARED = _transaction.PREPARED_MARK.encode()
cdef bytes RETRY_PREFIX = _message.RETRY_GROUP_TOPIC_PREFIX.encode()
# a send that does not wait for the disk or a slave under SYNC_FLUSH / SYNC_MASTER (the processor's test)
cdef bytes NO_WAIT_MARK = (_message.MessageProperty.WAIT_STORE_MSG_OK + _message.NAME_VALUE_SEPARATOR + "false").encode()
cdef const char* DELAY_MARK_PTR = DELAY_MARK
cdef Py_ssize_t DELAY_MARK_LEN = len(DELAY_MARK)
cdef const char* TIMER_MARK_PTR = TIMER_MARK
cdef Py_ssize_t TIMER_MARK_LEN = len(TIMER_MARK)
cdef const char* PREPARED_PTR = PREPARED
cdef Py_ssize_t PREPARED_LEN = len(PREPARED)

# The answer's constant parts (RemotingCommand.response_to's header, as rmq.net._codec writes it).
cdef bytes ANSWER_HEAD = b'{"code":%d,"language":"%s","version":%d,"opaque":' % (
    _ResponseCode.SUCCESS, _frame.LANGUAGE.encode(), _frame.VERSION)
cdef bytes ANSWER_FLAG = b',"flag":%d,"extFields":{"msgId":"' % FLAG_RESPONSE
cdef bytes ANSWER_QUEUE_ID = b'","queueId":"'
cdef bytes ANSWER_QUEUE_OFFSET = b'","queueOffset":"'
cdef bytes ANSWER_END = b'"}}'
cdef char* HEX_DIGITS = b"0123456789ABCDEF"


cdef struct SendFields:
    int code
    int opaque
    int flag
    Span long_fields[N_FIELDS]
    Span short_fields[N_FIELDS]
    # resolved, as send_header resolves them
    const unsigned char* topic
    Py_ssize_t topic_len
    int queue_id
    int sys_flag
    int64_t born_timestamp
    int message_flag
    int reconsume_times
    int queue_nums
    bint has_max_reconsume_times
    int max_reconsume_times
    bint batch
    Span properties


# -- the JSON header --------------------------------------------------------------------------

cdef int _scan_header(const unsigned char* p, Py_ssize_t n, SendFields* f) noexcept nogil:
    """Read the header JSON into ``f`` (the shared scanner, _send_lane.pxd's _scan_request, over
    both spellings): 1, or 0 when the lane leaves the frame."""
    cdef RequestHead head
    cdef Span spans[2 * N_FIELDS]
    memset(f, 0, sizeof(SendFields))
    if not _scan_request(p, n, SEND_CODES, N_SEND_CODES, FIELD_NAMES, FIELD_LENGTHS, 2 * N_FIELDS, spans, &head):
        return 0
    f.code = head.code
    f.opaque = head.opaque
    f.flag = head.flag
    memcpy(f.short_fields, spans, N_FIELDS * sizeof(Span))
    memcpy(f.long_fields, spans + N_FIELDS, N_FIELDS * sizeof(Span))
    return 1


cdef int _resolve(const unsigned char* header, Py_ssize_t header_len, SendFields* f) noexcept nogil:
    """The send's fields as ``rmq.protocol.headers.send_header`` reads them: 1, or 0 when the lane
    leaves the frame (anything send_header refuses included)."""
    cdef Span* fields
    cdef int64_t value
    if not _scan_header(header, header_len, f):
        return 0
    if f.code == SEND_MESSAGE:
        fields = f.long_fields
    elif f.code == SEND_MESSAGE_V2 or f.code == SEND_BATCH_MESSAGE:
        fields = f.short_fields
        # long names under a V2 code (some clients send them): the spelling that names the topic
        if fields[F_TOPIC].start == NULL and f.long_fields[F_TOPIC].start != NULL:
            fields = f.long_fields
    else:
        return 0
    if fields[F_TOPIC].start == NULL or fields[F_TOPIC].length == 0 or fields[F_TOPIC].escaped:
        return 0
    f.topic = fields[F_TOPIC].start
    f.topic_len = fields[F_TOPIC].length
    if not _field_int(&fields[F_QUEUE_ID], INT32_MIN, INT32_MAX, True, 0, &value):
        return 0
    f.queue_id = <int>value
    if not _field_int(&fields[F_SYS_FLAG], INT32_MIN, INT32_MAX, False, 0, &value):
        return 0
    f.sys_flag = <int>value
    if not _field_int(&fields[F_BORN_TIMESTAMP], INT64_MIN, INT64_MAX, False, 0, &f.born_timestamp):
        return 0
    if not _field_int(&fields[F_FLAG], INT32_MIN, INT32_MAX, False, 0, &value):
        return 0
    f.message_flag = <int>value
    if not _field_int(&fields[F_RECONSUME_TIMES], INT32_MIN, INT32_MAX, False, 0, &value):
        return 0
    f.reconsume_times = <int>value
    if not _field_int(&fields[F_QUEUE_NUMS], INT32_MIN, INT32_MAX, False, DEFAULT_QUEUE_NUMS, &value):
        return 0
    f.queue_nums = <int>value
    f.has_max_reconsume_times = fields[F_MAX_RECONSUME_TIMES].start != NULL and fields[F_MAX_RECONSUME_TIMES].length
    if not _field_int(&fields[F_MAX_RECONSUME_TIMES], INT32_MIN, INT32_MAX, False, 0, &value):
        return 0
    f.max_reconsume_times = <int>value
    f.batch = f.code == SEND_BATCH_MESSAGE or (fields[F_BATCH].start != NULL and fields[F_BATCH].length == 4 and not fields[F_BATCH].escaped
               and memcmp(fields[F_BATCH].start, b"true", 4) == 0)
    if fields[F_BATCH].start != NULL and fields[F_BATCH].escaped:
        return 0  # "tru\u0065": rare enough to leave
    f.properties = fields[F_PROPERTIES]
    if f.properties.start == NULL:
        f.properties.length = 0
        f.properties.escaped = False
    return 1


# -- the batch body ---------------------------------------------------------------------------

cdef Py_ssize_t _walk_batch(const unsigned char* p, Py_ssize_t size, BatchRecord* out) noexcept nogil:
    """The records of a batch body into ``out`` (when not NULL): their count, or -1 when
    ``rmq.protocol.batch.decode_batch`` refuses the body (a record that overruns it, sizes that do
    not add up, no record at all). Every length is checked against what is left of the body."""
    cdef Py_ssize_t pos = 0, count = 0, props_at, end
    cdef int32_t total, body_len
    cdef int16_t props_len
    while pos < size:
        if size - pos < BATCH_BODY:
            return -1
        total = load_be32(p + pos + BATCH_TOTAL)
        body_len = load_be32(p + pos + BATCH_BODY_LEN)
        if body_len < 0 or size - pos - BATCH_BODY - BATCH_PROPS_LEN_SIZE < body_len:
            return -1
        props_at = pos + BATCH_BODY + body_len
        props_len = <int16_t>load_be16(p + props_at)
        end = props_at + BATCH_PROPS_LEN_SIZE + props_len
        if props_len < 0 or end > size or (total != 0 and total != end - pos):
            return -1
        if out != NULL:
            out[count].body = p + pos + BATCH_BODY
            out[count].body_len = body_len
            out[count].props = p + props_at + BATCH_PROPS_LEN_SIZE
            out[count].props_len = props_len
            out[count].flag = load_be32(p + pos + BATCH_FLAG)
        count += 1
        pos = end
    return count if count else -1


cdef inline bint _refused_properties(const unsigned char* props, Py_ssize_t length) noexcept nogil:
    """Properties the lane leaves to the processor: past their limit, or marking a transaction, a
    delay level or a timer (the processor's own tests, on the same bytes)."""
    return (length > PROPERTIES_MAX
            or memmem(props, length, PREPARED_PTR, PREPARED_LEN) != NULL
            or memmem(props, length, TIMER_MARK_PTR, TIMER_MARK_LEN) != NULL
            or memmem(props, length, DELAY_MARK_PTR, DELAY_MARK_LEN) != NULL)


cdef void* _reserve(void** buffer, Py_ssize_t* size, Py_ssize_t need) except NULL:
    """``buffer`` (malloc'ed, ``size`` bytes) grown to at least ``need`` bytes."""
    cdef void* grown
    if need < 1:
        need = 1
    if need > size[0]:
        grown = realloc(buffer[0], need)
        if grown == NULL:
            raise MemoryError()
        buffer[0] = grown
        size[0] = need
    return buffer[0]


# -- the answer -------------------------------------------------------------------------------

cdef inline char* _put_bytes(char* p, bytes text) noexcept:
    cdef Py_ssize_t n = PyBytes_GET_SIZE(text)
    memcpy(p, PyBytes_AS_STRING(text), n)
    return p + n



cdef int _put_other_answer(bytearray out, int opaque, int status, uint32_t ip, int32_t port, int queue_id,
                           int64_t phy_offset, int64_t queue_offset) except -1:
    """Append the answer to a send whose put ended ``status`` (not PUT_OK: rare), as the processor
    encodes it."""
    cdef char msg_id[2 * MSGID_BYTES]
    _put_msg_id(msg_id, ip, port, phy_offset)
    _encode_into(out, _put_reply(opaque, status, PyUnicode_DecodeASCII(msg_id, 2 * MSGID_BYTES, NULL),
                                 queue_id, queue_offset))
    return 0


cdef char* _put_msg_id(char* p, uint32_t ip, int32_t port, int64_t offset) noexcept nogil:
    """The broker msgId (offsetMsgId): 32 uppercase hex of store IPv4, int32 port, int64 offset
    (rmq.protocol._record's encode_msg_id_c, written in place)."""
    cdef unsigned char raw[MSGID_BYTES]
    cdef int i
    store_be32(raw, <int32_t>ip)
    store_be32(raw + 4, port)
    store_be64(raw + 8, offset)
    for i in range(MSGID_BYTES):
        p[2 * i] = HEX_DIGITS[raw[i] >> 4]
        p[2 * i + 1] = HEX_DIGITS[raw[i] & 15]
    return p + 2 * MSGID_BYTES


# -- the lane ---------------------------------------------------------------------------------

cdef class _Peer:
    """A connection's born host and port (what the processor's ``_born_host`` makes of its address),
    the address the processors log, and where its answers completed later go (``deliver(frames)``)."""


# A send stored and not yet answered (SYNC_FLUSH / SYNC_MASTER): its answer's bytes wait in
# _Deferred.answers (``length`` of them; 0: a oneway send), the rest re-encodes any other outcome.
cdef struct DeferredAnswer:
    PyObject* peer  # a reference held while it waits
    Py_ssize_t length
    int opaque
    int queue_id
    int64_t phy_offset
    int64_t queue_offset


cdef class _Deferred(CommitSink):
    """The lane's sends waiting for the group commit, in put order: their answers encoded at put
    time into one buffer, and written, when the store completes them (``complete``, in put order),
    as one run per connection (``round_done``). No Python object per send."""

    cdef StoreCore _store
    cdef DeferredAnswer* _ring
    cdef Py_ssize_t _head
    cdef Py_ssize_t _len
    cdef Py_ssize_t _cap
    cdef bytearray answers
    # answers[:_done] belong to sends completed in this pass; answers[_run_start:_done] to _run_peer
    cdef Py_ssize_t _done
    cdef Py_ssize_t _run_start
    cdef _Peer _run_peer

    def __cinit__(self, StoreCore store not None):
        self._store = store
        self.answers = bytearray()

    def __dealloc__(self):
        while self._len:
            Py_XDECREF(self._ring[self._head].peer)
            self._head = (self._head + 1) % self._cap
            self._len -= 1
        PyMem_Free(self._ring)

    cdef int reserve(self) except -1:
        """Room for one more in the ring: what may fail happens before the store's ring grows, so
        that the two rings stay one to one."""
        cdef DeferredAnswer* grown
        cdef Py_ssize_t cap
        if self._len == self._cap:
            cap = max(64, 2 * self._cap)
            grown = <DeferredAnswer*>PyMem_Realloc(self._ring, cap * sizeof(DeferredAnswer))
            if grown == NULL:
                raise MemoryError()
            if self._head:  # the ring wrapped: its head's run moves to the block's new end
                memcpy(grown + self._head + cap - self._cap, grown + self._head,
                       (self._cap - self._head) * sizeof(DeferredAnswer))
                self._head += cap - self._cap
            self._ring = grown
            self._cap = cap
        return 0

    cdef void add(self, _Peer peer, int opaque, int queue_id, const PutPlace* place, Py_ssize_t length) noexcept:
        """After ``reserve``: the answer of the put the store has just deferred."""
        cdef DeferredAnswer* a = &self._ring[(self._head + self._len) % self._cap]
        Py_INCREF(peer)
        a.peer = <PyObject*>peer
        a.length = length
        a.opaque = opaque
        a.queue_id = queue_id
        a.phy_offset = place.phy_offset
        a.queue_offset = place.queue_offset
        self._len += 1

    cdef int _deliver_run(self) except -1:
        cdef _Peer peer = self._run_peer
        cdef Py_ssize_t n = self._done - self._run_start
        self._run_peer = None
        if n and peer.deliver is not None:
            peer.deliver(PyByteArray_FromStringAndSize(PyByteArray_AS_STRING(self.answers) + self._run_start, n))
        self._run_start = self._done
        return 0

    cdef int complete(self, int status) except -1:
        cdef DeferredAnswer a = self._ring[self._head]
        cdef _Peer peer = <_Peer>a.peer
        cdef bytearray other
        self._head = (self._head + 1) % self._cap
        self._len -= 1
        Py_XDECREF(a.peer)  # the local ``peer`` holds its own reference
        if self._run_peer is not peer:
            self._deliver_run()
            self._run_peer = peer
        if status == PUT_OK or a.length == 0:
            self._done += a.length
            return 0
        # another outcome (FLUSH_DISK_TIMEOUT ...): the run so far, then this answer re-encoded
        self._deliver_run()
        self._done += a.length
        self._run_start = self._done
        other = bytearray()
        _put_other_answer(other, a.opaque, status, self._store.store_ip, self._store.store_port, a.queue_id,
                          a.phy_offset, a.queue_offset)
        if peer.deliver is not None:
            peer.deliver(other)
        return 0

    cdef int round_done(self) except -1:
        self._deliver_run()
        del self.answers[:self._done]
        self._done = self._run_start = 0
        return 0


cdef class _Topic:
    """A topic the processor checked writeable under topic table version ``version``."""
    cdef bytes name
    cdef str topic
    cdef int write_queue_nums
    cdef int read_queue_nums


cdef inline uint32_t _fnv1a(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    cdef uint32_t h = 2166136261u
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ s[i]) * 16777619u
    return h


cdef class SendLane(FastLane):
    """The send lane of one broker: its store, the send processor whose checks it shares (its
    cache of writeable topics, its born hosts), the pull hold it wakes. Loop thread only."""

    cdef StoreCore _store
    cdef object _processor
    cdef object _topics
    cdef object _hold
    cdef bint _open
    # SYNC_FLUSH / SYNC_MASTER: sends wait, their answers deferred; the round kicker, the busy bounds
    cdef bint _waits
    cdef _Deferred _deferred
    cdef object _request_round
    cdef double _disk_busy_limit
    cdef Py_ssize_t _queue_capacity
    cdef int64_t _version
    cdef list _slots
    cdef unsigned char* _scratch
    cdef Py_ssize_t _scratch_size
    # a batch's records, and their properties with the header's appended (when it has some)
    cdef BatchRecord* _records
    cdef Py_ssize_t _records_size
    cdef unsigned char* _joined
    cdef Py_ssize_t _joined_size
    cdef readonly uint64_t served
    cdef readonly uint64_t left
    # the pull lane (rmq.broker._pull_lane) the decoder's one lane hands PULL_MESSAGE frames to
    cdef public FastLane pull_lane

    def __init__(self, StoreCore store not None, processor, topics, hold):
        """``processor``: the broker's SendProcessor; ``topics``: its TopicConfigManager; ``hold``:
        its PullRequestHoldService."""
        self._store = store
        self._processor = processor
        self._topics = topics
        self._hold = hold
        self._version = -1
        self._slots = [None] * TOPIC_CACHE_SLOTS
        self._deferred = _Deferred(store)
        self.role_changed()

    def __dealloc__(self):
        free(self._scratch)
        free(self._records)
        free(self._joined)

    def role_changed(self):
        """Read the processor's role again (its ``role_changed``): the lane serves sends on a
        master; under SYNC_FLUSH / SYNC_MASTER their answers wait for the group commit, as the
        processor's do (the broker completes puts on its loop and kicks the rounds)."""
        processor = self._processor
        self._waits = processor.waits
        self._request_round = processor._request_flush_round
        self._disk_busy_limit = processor.disk_busy_limit
        self._queue_capacity = processor.queue_capacity
        self._open = not processor.slave and (not self._waits or self._request_round is not None)

    def connect(self, str remote_address, deliver=None):
        """What the lane keeps of a connection; ``deliver(frames)`` queues answers the lane
        completes later (a bytearray of whole frames), on the loop thread."""
        cdef _Peer peer = _Peer.__new__(_Peer)
        peer.host, peer.port = self._processor._born_host(remote_address)
        peer.address = remote_address
        peer.deliver = deliver
        return peer

    cdef _Topic _topic(self, const unsigned char* name, Py_ssize_t length):
        """The processor's check of this topic, if it made one under the current table version."""
        cdef int64_t version = self._topics.data_version.counter
        cdef _Topic entry
        cdef Py_ssize_t slot = _fnv1a(name, length) % TOPIC_CACHE_SLOTS
        if version != self._version:
            self._version = version
            self._slots = [None] * TOPIC_CACHE_SLOTS
        entry = <_Topic>self._slots[slot]
        if (entry is not None and PyBytes_GET_SIZE(entry.name) == length
                and memcmp(PyBytes_AS_STRING(entry.name), name, length) == 0):
            return entry
        processor = self._processor
        if processor._topics_version != version:
            return None
        topic = PyUnicode_DecodeASCII(<const char*>name, length, NULL)
        config = processor._writable_topics.get(topic)
        # a topic with attributes (message.type) has its sends' types checked: the processor's
        if config is None or config.attributes:
            return None
        entry = _Topic.__new__(_Topic)
        entry.name = topic.encode("ascii")
        entry.topic = topic
        entry.write_queue_nums = config.write_queue_nums
        entry.read_queue_nums = config.read_queue_nums
        self._slots[slot] = entry
        return entry

    cdef const unsigned char* _unescaped(self, const Span* span, Py_ssize_t* length) except NULL:
        if not span.escaped:
            length[0] = span.length
            return span.start if span.start != NULL else <const unsigned char*>b""
        _reserve(<void**>&self._scratch, &self._scratch_size, span.length)
        length[0] = _unescape(span.start, span.length, self._scratch)
        return self._scratch

    cdef int serve(self, object peer, const unsigned char* header, Py_ssize_t header_len,
                   const unsigned char* body, Py_ssize_t body_len, bytearray out) except -1:
        cdef SendFields f
        cdef StoreCore store = self._store
        cdef _Topic topic
        cdef const unsigned char* props
        cdef Py_ssize_t props_len, count = 0, start
        cdef _Deferred deferred
        cdef PutPlace place
        cdef PutFields fields
        cdef int status
        cdef bint wait = False
        if self.pull_lane is not None and _header_code(header, header_len) == PULL_MESSAGE:
            return self.pull_lane.serve(peer, header, header_len, body, body_len, out)
        if not self._open or peer is None or store.fenced or store.disk_full or store.slave or store.lease_expired():
            self.left += 1
            return 0
        if self._waits and (store.commit_queue_size >= self._queue_capacity
                            or store.disk_wait_seconds > self._disk_busy_limit):
            self.left += 1
            return 0  # the processor refuses it SYSTEM_BUSY
        if not _resolve(header, header_len, &f) or f.flag & FLAG_RESPONSE:
            self.left += 1
            return 0
        if (f.queue_id < 0 or f.topic_len > TOPIC_MAX_BYTES or (body_len > store.max_message_size and not f.batch)
                or (f.topic_len >= PyBytes_GET_SIZE(RETRY_PREFIX)
                    and memcmp(f.topic, PyBytes_AS_STRING(RETRY_PREFIX), PyBytes_GET_SIZE(RETRY_PREFIX)) == 0)):
            self.left += 1
            return 0
        topic = self._topic(f.topic, f.topic_len)
        if topic is None or (f.queue_id >= topic.write_queue_nums and f.queue_id >= topic.read_queue_nums):
            self.left += 1
            return 0
        props = self._unescaped(&f.properties, &props_len)
        if _refused_properties(props, props_len):  # a batch's: appended to each of its messages'
            self.left += 1
            return 0
        if self._waits:
            wait = memmem(props, props_len, PyBytes_AS_STRING(NO_WAIT_MARK), PyBytes_GET_SIZE(NO_WAIT_MARK)) == NULL
            if wait and f.batch:
                self.left += 1
                return 0  # a batch that waits: the processor's (its late answers name every message)
        fields.sys_flag = f.sys_flag
        fields.born_timestamp = f.born_timestamp
        fields.flag = f.message_flag
        fields.reconsume_times = f.reconsume_times
        fields.born_host = (<_Peer>peer).host
        fields.born_port = (<_Peer>peer).port
        fields.prepared_tx_offset = 0
        if f.batch:
            count = self._batch(props, props_len, body, body_len)
            status = store.put_batch_raw(topic.topic, f.queue_id, self._records, count, &fields,
                                         &place) if count > 0 else -1
        else:
            status = store.put_raw(topic.topic, f.queue_id, body, body_len, props, props_len, &fields, &place)
        if status != PUT_OK:
            self.left += 1
            return 0  # nothing stored: the processor puts it again and answers what the store says
        self.served += 1
        if self._hold.has_parked:
            self._hold.notify_message_arriving(topic.topic, f.queue_id)
        if self._waits:
            self._request_round()  # a flush round after this iteration's puts, new bytes for the slaves
            if wait:
                deferred = self._deferred
                deferred.reserve()
                start = PyByteArray_GET_SIZE(deferred.answers)
                if not f.flag & FLAG_ONEWAY:
                    self._answer(deferred.answers, f.opaque, f.queue_id, &place, NULL, 0)
                if store.defer_put(deferred, &place, &status):
                    deferred.add(<_Peer>peer, f.opaque, f.queue_id, &place,
                                 PyByteArray_GET_SIZE(deferred.answers) - start)
                    return 1
                PyByteArray_Resize(deferred.answers, start)  # answered now after all
            else:
                store.publish_raw(&place)
        if f.flag & FLAG_ONEWAY:
            return 1
        if status == PUT_OK:
            self._answer(out, f.opaque, f.queue_id, &place, self._records if f.batch else NULL, count)
        else:  # SLAVE_NOT_AVAILABLE (a single send: a batch that waits is left): stored, no slave in sync
            _put_other_answer(out, f.opaque, status, store.store_ip, store.store_port, f.queue_id,
                              place.phy_offset, place.queue_offset)
        return 1

    cdef Py_ssize_t _batch(self, const unsigned char* extra, Py_ssize_t extra_len, const unsigned char* body,
                           Py_ssize_t body_len) except -2:
        """A batch body's messages into ``_records``, ``extra`` (the header's properties) appended to
        each one's as the processor appends them: how many, or -1 when the lane leaves the batch (a
        body the processor refuses, or a message's properties the lane leaves)."""
        cdef Py_ssize_t count = _walk_batch(body, body_len, NULL), i, joined = 0, bodies = 0
        cdef BatchRecord* record
        cdef unsigned char* p
        if count < 0:
            return -1
        _reserve(<void**>&self._records, &self._records_size, count * sizeof(BatchRecord))
        _walk_batch(body, body_len, self._records)
        for i in range(count):
            bodies += self._records[i].body_len
            joined += self._records[i].props_len + 1 + extra_len
        if bodies > self._store.max_message_size:
            return -1
        if extra_len:
            p = <unsigned char*>_reserve(<void**>&self._joined, &self._joined_size, joined)
            for i in range(count):
                record = &self._records[i]
                memcpy(p, record.props, record.props_len)
                joined = record.props_len
                if joined and p[joined - 1] != PROPERTY_SEPARATOR:
                    p[joined] = PROPERTY_SEPARATOR
                    joined += 1
                memcpy(p + joined, extra, extra_len)
                record.props = p
                record.props_len = joined + extra_len
                p += record.props_len
        for i in range(count):
            if _refused_properties(self._records[i].props, self._records[i].props_len):
                return -1
        return count

    cdef int _answer(self, bytearray out, int opaque, int queue_id, const PutPlace* place,
                     const BatchRecord* records, Py_ssize_t count) except -1:
        """The SUCCESS answer of a put (of ``count`` messages of ``records``, a batch's, back to back
        from ``place.phy_offset``), appended to ``out``."""
        cdef StoreCore store = self._store
        cdef Py_ssize_t start = PyByteArray_GET_SIZE(out), length, i
        cdef int64_t offset = place.phy_offset
        cdef char* p
        cdef char* begin
        length = (8 + PyBytes_GET_SIZE(ANSWER_HEAD) + PyBytes_GET_SIZE(ANSWER_FLAG)
                  + (2 * MSGID_BYTES + 1) * (count if records != NULL else 1)
                  + PyBytes_GET_SIZE(ANSWER_QUEUE_ID) + PyBytes_GET_SIZE(ANSWER_QUEUE_OFFSET)
                  + PyBytes_GET_SIZE(ANSWER_END) + 3 * MAX_DECIMAL)
        PyByteArray_Resize(out, start + length)
        begin = PyByteArray_AS_STRING(out) + start
        p = _put_bytes(begin + 8, ANSWER_HEAD)
        p = put_decimal(p, opaque)
        p = _put_bytes(p, ANSWER_FLAG)
        p = _put_msg_id(p, store.store_ip, store.store_port, offset)
        if records != NULL:
            for i in range(1, count):
                offset += records[i - 1].size
                p[0] = c','
                p = _put_msg_id(p + 1, store.store_ip, store.store_port, offset)
        p = _put_bytes(p, ANSWER_QUEUE_ID)
        p = put_decimal(p, queue_id)
        p = _put_bytes(p, ANSWER_QUEUE_OFFSET)
        p = put_decimal(p, place.queue_offset)
        p = _put_bytes(p, ANSWER_END)
        length = p - begin
        store_be32(<unsigned char*>begin, <int32_t>(length - 4))
        store_be32(<unsigned char*>begin + 4, <int32_t>(length - 8))
        PyByteArray_Resize(out, start + length)
        return 0


def scan_send_header(header):
    """What the lane reads of a send's JSON header (bytes), for tests: None when it would leave the
    frame to the processor, else the fields as ``rmq.protocol.headers.send_header`` names them."""
    cdef SendFields f
    cdef bytes raw = bytes(header)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(raw)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(raw)
    cdef bytes props
    if not _resolve(p, n, &f):
        return None
    if f.properties.escaped:
        buffer = bytearray(f.properties.length)
        props = bytes(buffer[:_unescape(f.properties.start, f.properties.length,
                                        <unsigned char*>PyByteArray_AS_STRING(buffer))])
    else:
        props = (<const char*>f.properties.start)[:f.properties.length] if f.properties.length else b""
    return {
        "code": f.code,
        "opaque": f.opaque,
        "flag": f.flag,
        "topic": (<const char*>f.topic)[:f.topic_len].decode("ascii"),
        "queue_id": f.queue_id,
        "sys_flag": f.sys_flag,
        "born_timestamp": f.born_timestamp,
        "message_flag": f.message_flag,
        "properties": props.decode("ascii"),
        "reconsume_times": f.reconsume_times,
        "default_topic_queue_nums": f.queue_nums,
        "max_reconsume_times": f.max_reconsume_times if f.has_max_reconsume_times else None,
        "batch": bool(f.batch),
    }


def scan_batch(body):
    """What the lane reads of a batch body (bytes), for tests: None when it would leave the batch to
    the processor for its body, else ``rmq.protocol.batch.decode_batch``'s ``(body, properties,
    flag)`` list."""
    cdef bytes raw = bytes(body)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(raw)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(raw), count = _walk_batch(p, n, NULL), i
    cdef BatchRecord* records
    if count < 0:
        return None
    buffer = bytearray(count * sizeof(BatchRecord))
    records = <BatchRecord*>PyByteArray_AS_STRING(buffer)
    _walk_batch(p, n, records)
    return [((<const char*>records[i].body)[:records[i].body_len],
             (<const char*>records[i].props)[:records[i].props_len], records[i].flag) for i in range(count)]
