# cython: boundscheck=True, wraparound=False, cdivision=True, auto_pickle=False
"""The broker's compiled pull lane: PULL_MESSAGE, from a frame's bytes to its answer's bytes with no
Python object per message, for the common case only. Whatever it does not serve goes to
``rmq.broker.processor.pull`` unchanged, and the two are one semantics: a pull the lane serves gets
the answer, and commits the consumer offset, the processor would (the differential test
``tests/broker/test_pull_lane.py`` holds them together). The send lane, the one lane the frame
decoder offers every frame, hands it the frames of code PULL_MESSAGE.

The frame it reads (docs/protocol.md#pulls; the header a JSON object, the long names only)::

    offset  size  field
    0       4     total_length, 4       header_length (serialize type 0: JSON), both read by the decoder
    8       H     {"code":11, "opaque":N, "flag":N, "version":N, "language":"S", "remark":"S"|null,
                   "extFields":{<rmq.protocol.headers.PULL_KEYS>: "S", ...}, ...}

and the answer it writes (what the processor's ``pull_response`` encodes to, byte for byte)::

    0       4     total_length = 4 + H' + B
    4       4     H'
    8       H'    {"code":0,"language":"PYTHON","version":399,"opaque":N,"flag":1,
                   "extFields":{"nextBeginOffset":"N","minOffset":"N","maxOffset":"N",
                                "suggestWhichBrokerId":"N"}}
    8+H'    B     the records found, as stored, back to back (copied from the CommitLog mapping)

Per pull (not per message) the lane makes two calls into the processor: ``lane_filter`` (the
group, topic, queue and subscription checks and the tag filter, the very code ``_parse`` runs) and,
once the read found messages, ``lane_served`` (the offset commit, the stats, suggestWhichBrokerId).

The lane leaves a frame to the processor (returns 0 before it changed anything) when the header is
anything but plain JSON the lane reads as orjson and ``pull_header`` do (an escaped group, topic or
expression, a number that is no plain int, a field ``pull_header`` would refuse), for a oneway pull,
on a slave, when a check refuses the pull or its subscription is SQL92 or not yet built, and when
the read finds nothing to answer SUCCESS with (the processor parks it, corrects its offset or
answers it retry). Bound checks stay on (``boundscheck``); every index into the header is checked
against its length.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, int32_t, int64_t, uint64_t
from libc.string cimport memcpy, memmove

from rmq.includes.endian cimport store_be32
from rmq.store._store cimport FOUND, GetPlace, StoreCore
from rmq.includes.decimal cimport MAX_DECIMAL, put_decimal
from rmq.broker._send_lane cimport (RequestHead, Span, _Peer, _field_int, _scan_request)
from rmq.net._codec cimport FastLane

from rmq.net import frame as _frame
from rmq.protocol import headers as _headers
from rmq.protocol.codes import RequestCode as _RequestCode
from rmq.protocol.codes import ResponseCode as _ResponseCode

cdef extern from "Python.h":
    object PyUnicode_DecodeASCII(const char* s, Py_ssize_t size, const char* errors)


# The extFields the lane reads, by position in rmq.protocol.headers.PULL_KEYS.
cdef enum:
    P_GROUP = 0
    P_TOPIC = 1
    P_QUEUE_ID = 2
    P_QUEUE_OFFSET = 3
    P_MAX_MSG_NUMS = 4
    P_SYS_FLAG = 5
    P_COMMIT_OFFSET = 6
    P_SUSPEND = 7
    P_SUBSCRIPTION = 8
    P_EXPRESSION_TYPE = 9
    N_PULL_FIELDS = 10

assert len(_headers.PULL_KEYS) == N_PULL_FIELDS, "PULL_KEYS changed: so must the pull lane"

cdef int PULL_MESSAGE = _RequestCode.PULL_MESSAGE
cdef int FLAG_ONEWAY = _frame.FLAG_ONEWAY
cdef int FLAG_RESPONSE = _frame.FLAG_RESPONSE
cdef int DEFAULT_MAX_MSG_NUMS = _headers.DEFAULT_PULL_MAX_MSG_NUMS

cdef list _NAMES = [name.encode("ascii") for name in _headers.PULL_KEYS]
cdef const char* PULL_NAMES[N_PULL_FIELDS]
cdef Py_ssize_t PULL_LENGTHS[N_PULL_FIELDS]


cdef void _bind_names():
    cdef Py_ssize_t i
    cdef bytes name
    for i in range(N_PULL_FIELDS):
        name = _NAMES[i]
        PULL_NAMES[i] = PyBytes_AS_STRING(name)
        PULL_LENGTHS[i] = PyBytes_GET_SIZE(name)


_bind_names()

# The answer's constant parts (pull_response's RemotingCommand, as rmq.net._codec writes it).
cdef bytes ANSWER_HEAD = b'{"code":%d,"language":"%s","version":%d,"opaque":' % (
    _ResponseCode.SUCCESS, _frame.LANGUAGE.encode(), _frame.VERSION)
cdef bytes ANSWER_NEXT = b',"flag":%d,"extFields":{"nextBeginOffset":"' % FLAG_RESPONSE
cdef bytes ANSWER_MIN = b'","minOffset":"'
cdef bytes ANSWER_MAX = b'","maxOffset":"'
cdef bytes ANSWER_SUGGEST = b'","suggestWhichBrokerId":"'
cdef bytes ANSWER_END = b'"}}'
# the longest answer header: the constant parts and five decimals
cdef Py_ssize_t ANSWER_HEADER_MAX = (
    len(ANSWER_HEAD) + len(ANSWER_NEXT) + len(ANSWER_MIN) + len(ANSWER_MAX) + len(ANSWER_SUGGEST)
    + len(ANSWER_END) + 5 * MAX_DECIMAL)


cdef struct PullFields:
    RequestHead head
    Span fields[N_PULL_FIELDS]
    # resolved, as pull_header resolves them
    int queue_id
    int64_t queue_offset
    int max_msg_nums
    int sys_flag
    int64_t commit_offset


cdef int _resolve(const unsigned char* header, Py_ssize_t header_len, PullFields* f) noexcept nogil:
    """The pull's fields as ``rmq.protocol.headers.pull_header`` reads them: 1, or 0 when the lane
    leaves the frame (anything pull_header refuses included)."""
    cdef Span* fields = f.fields
    cdef int64_t value
    if not _scan_request(header, header_len, &PULL_MESSAGE, 1, PULL_NAMES, PULL_LENGTHS, N_PULL_FIELDS, fields, &f.head):
        return 0
    # the strings the lane hands to Python as they are on the wire: required, plain
    if (fields[P_GROUP].start == NULL or fields[P_GROUP].length == 0 or fields[P_GROUP].escaped
            or fields[P_TOPIC].start == NULL or fields[P_TOPIC].length == 0 or fields[P_TOPIC].escaped
            or fields[P_SUBSCRIPTION].escaped or fields[P_EXPRESSION_TYPE].escaped):
        return 0
    if not _field_int(&fields[P_QUEUE_ID], INT32_MIN, INT32_MAX, True, 0, &value):
        return 0
    f.queue_id = <int>value
    if not _field_int(&fields[P_QUEUE_OFFSET], INT64_MIN, INT64_MAX, True, 0, &f.queue_offset):
        return 0
    if not _field_int(&fields[P_MAX_MSG_NUMS], INT32_MIN, INT32_MAX, False, DEFAULT_MAX_MSG_NUMS, &value):
        return 0
    f.max_msg_nums = <int>value
    if not _field_int(&fields[P_SYS_FLAG], INT32_MIN, INT32_MAX, False, 0, &value):
        return 0
    f.sys_flag = <int>value
    if not _field_int(&fields[P_COMMIT_OFFSET], INT64_MIN, INT64_MAX, False, -1, &f.commit_offset):
        return 0
    if not _field_int(&fields[P_SUSPEND], INT64_MIN, INT64_MAX, False, 0, &value):
        return 0
    return 1


cdef inline object _text(const Span* span):
    """A plain span's str; None for an absent or empty one (``ext.get(name) or None``)."""
    if span.start == NULL or span.length == 0:
        return None
    return PyUnicode_DecodeASCII(<const char*>span.start, span.length, NULL)


cdef inline char* _put_bytes(char* p, bytes text) noexcept:
    cdef Py_ssize_t n = PyBytes_GET_SIZE(text)
    memcpy(p, PyBytes_AS_STRING(text), n)
    return p + n


cdef class PullLane(FastLane):
    """The pull lane of one broker: its store, and the pull processor whose checks, offset commits
    and stats it shares. Loop thread only."""

    cdef StoreCore _store
    cdef object _processor
    cdef bint _open
    cdef int _max_transfer_count
    cdef Py_ssize_t _max_transfer_bytes
    cdef readonly uint64_t served
    cdef readonly uint64_t left

    def __init__(self, StoreCore store not None, processor):
        """``processor``: the broker's PullProcessor."""
        self._store = store
        self._processor = processor
        self._max_transfer_count = processor.max_transfer_count
        self._max_transfer_bytes = processor.max_transfer_bytes
        self.role_changed()

    def role_changed(self):
        """Read the processor's role again: a slave's pulls (its offset corrections, its commits)
        are the processor's."""
        self._open = not self._processor.slave

    cdef int serve(self, object peer, const unsigned char* header, Py_ssize_t header_len,
                   const unsigned char* body, Py_ssize_t body_len, bytearray out) except -1:
        cdef PullFields f
        cdef GetPlace place
        cdef StoreCore store = self._store
        cdef Py_ssize_t start, body_start, header_length
        cdef int max_msgs
        cdef int64_t suggest
        cdef char* begin
        cdef char* p
        if not self._open or peer is None:
            self.left += 1
            return 0
        if not _resolve(header, header_len, &f) or f.head.flag & (FLAG_RESPONSE | FLAG_ONEWAY) or f.queue_offset < 0:
            self.left += 1
            return 0
        group = _text(&f.fields[P_GROUP])
        topic = _text(&f.fields[P_TOPIC])
        max_msgs = f.max_msg_nums
        if max_msgs < 1:
            max_msgs = 1
        elif max_msgs > self._max_transfer_count:
            max_msgs = self._max_transfer_count
        # the records go after room for the longest header, then move down to where it ends
        start = PyByteArray_GET_SIZE(out)
        body_start = start + 8 + ANSWER_HEADER_MAX
        try:
            checked = self._processor.lane_filter(group, topic, f.queue_id, f.sys_flag,
                                                  _text(&f.fields[P_SUBSCRIPTION]),
                                                  _text(&f.fields[P_EXPRESSION_TYPE]))
            if checked is None:
                self.left += 1
                return 0
            group_config, tag_filter = checked
            PyByteArray_Resize(out, body_start)
            store.get_into(topic, f.queue_id, f.queue_offset, max_msgs, self._max_transfer_bytes, tag_filter, None,
                           out, &place)
            if place.status != FOUND:
                PyByteArray_Resize(out, start)
                self.left += 1
                return 0
            suggest = <int64_t>self._processor.lane_served(group_config, group, topic, f.queue_id, f.sys_flag,
                                                  f.commit_offset, (<_Peer?>peer).address, place.count,
                                                  place.total_bytes, place.last_phy_offset)
        except Exception:
            # whatever failed fails again in the processor, which answers it as it answers errors
            PyByteArray_Resize(out, start)
            self.left += 1
            return 0
        self.served += 1
        begin = PyByteArray_AS_STRING(out) + start
        p = _put_bytes(begin + 8, ANSWER_HEAD)
        p = put_decimal(p, f.head.opaque)
        p = _put_bytes(p, ANSWER_NEXT)
        p = put_decimal(p, place.next_begin_offset)
        p = _put_bytes(p, ANSWER_MIN)
        p = put_decimal(p, place.min_offset)
        p = _put_bytes(p, ANSWER_MAX)
        p = put_decimal(p, place.max_offset)
        p = _put_bytes(p, ANSWER_SUGGEST)
        p = put_decimal(p, suggest)
        p = _put_bytes(p, ANSWER_END)
        header_length = p - (begin + 8)
        memmove(p, PyByteArray_AS_STRING(out) + body_start, place.total_bytes)
        store_be32(<unsigned char*>begin, <int32_t>(4 + header_length + place.total_bytes))
        store_be32(<unsigned char*>begin + 4, <int32_t>header_length)
        PyByteArray_Resize(out, start + 8 + header_length + place.total_bytes)
        return 1


def scan_pull_header(header):
    """What the lane reads of a pull's JSON header (bytes), for tests: None when it would leave the
    frame to the processor, else the fields as ``rmq.protocol.headers.PullHeader`` names them."""
    cdef PullFields f
    cdef bytes raw = bytes(header)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(raw)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(raw)
    cdef int64_t suspend = 0
    if not _resolve(p, n, &f):
        return None
    _field_int(&f.fields[P_SUSPEND], INT64_MIN, INT64_MAX, False, 0, &suspend)
    return {
        "code": f.head.code,
        "opaque": f.head.opaque,
        "flag": f.head.flag,
        "consumer_group": _text(&f.fields[P_GROUP]),
        "topic": _text(&f.fields[P_TOPIC]),
        "queue_id": f.queue_id,
        "queue_offset": f.queue_offset,
        "max_msg_nums": f.max_msg_nums,
        "sys_flag": f.sys_flag,
        "commit_offset": f.commit_offset,
        "suspend_timeout_millis": suspend,
        "subscription": _text(&f.fields[P_SUBSCRIPTION]),
        "expression_type": _text(&f.fields[P_EXPRESSION_TYPE]),
    }
