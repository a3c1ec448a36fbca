# cython: boundscheck=False, wraparound=False, cdivision=True, auto_pickle=False
"""Remoting frame codec, compiled: the twin of ``rmq.net.codec_py`` (one API, same tests).

Frame layout (docs/protocol.md#frame; every integer big-endian)::

    offset  size  field
    0       4     total_length    int32 = 4 + header_length + body_length (does not count itself)
    4       1     serialize_type  high byte of the int32 at 4: 0 = JSON, the only type read or written
    5       3     header_length   low 24 bits of the int32 at 4
    8       H     header          UTF-8 JSON object:
                                  {"code","language","version","opaque","flag","remark","extFields"}
    8+H     B     body            raw bytes (B = total_length - 4 - H)

    flag bit0 (FLAG_RESPONSE): a response, echoing the request's opaque
    flag bit1 (FLAG_ONEWAY):   a request that gets no answer

The hot path (framing, field extraction, all-string extFields, writing headers whose strings
need no JSON escaping, encoding into a bytearray) is C; anything unusual (mixed-type extFields,
strings to escape, bad input and its error message) goes to orjson and the helpers of codec_py, so
both implementations write, coerce and complain identically.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_Next
from cpython.object cimport PyObject
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memcpy
from cpython.pyport cimport PY_SSIZE_T_MAX

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object s)
    Py_ssize_t PyUnicode_GET_LENGTH(object s)
    const unsigned char* PyUnicode_1BYTE_DATA(object s)

import orjson

from rmq.errors import ProtocolError
from rmq.net import codec_py
from rmq.net.codec_py import next_opaque
from rmq.net.frame import FLAG_ONEWAY as _FLAG_ONEWAY
from rmq.net.frame import FLAG_RESPONSE as _FLAG_RESPONSE
from rmq.net.frame import LANGUAGE, MAX_FRAME_SIZE_DEFAULT, VERSION

cdef object _loads = orjson.loads
cdef object _dumps = orjson.dumps
cdef object _JSONDecodeError = orjson.JSONDecodeError
cdef int FLAG_RESPONSE = _FLAG_RESPONSE
cdef int FLAG_ONEWAY = _FLAG_ONEWAY
cdef int64_t INT32_MIN = -2147483648
cdef int64_t INT32_MAX = 2147483647
cdef str LANGUAGE_UNKNOWN = codec_py.LANGUAGE_UNKNOWN
cdef object REQUIRED = codec_py.REQUIRED
# Decimals of up to 18 digits fit an int64_t whatever they are.
cdef enum:
    MAX_PLAIN_DECIMAL_DIGITS = 18

# The layout enum of _codec.pxd, for the test that checks it against codec_py.
LAYOUT = {
    "TOTAL_LENGTH_SIZE": TOTAL_LENGTH_SIZE,
    "HEADER_LENGTH_SIZE": HEADER_LENGTH_SIZE,
    "PREFIX_SIZE": PREFIX_SIZE,
    "HEADER_LENGTH_MASK": HEADER_LENGTH_MASK,
    "SERIALIZE_TYPE_SHIFT": SERIALIZE_TYPE_SHIFT,
}


cdef inline uint32_t _read_u32(const unsigned char* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef inline void _write_u32(unsigned char* p, uint32_t v) noexcept nogil:
    p[0] = (v >> 24) & 0xFF
    p[1] = (v >> 16) & 0xFF
    p[2] = (v >> 8) & 0xFF
    p[3] = v & 0xFF


cdef class RemotingCommand:
    """One remoting request or response: the header fields plus a body.

    ``body`` is ``bytes`` or a list of buffers (written without copying, e.g. memoryviews of stored
    records). ``ext_fields`` maps strings to strings. ``cached_header`` (RocketMQ's cachedHeader) is
    the request's header as decoded by whoever read it first, never sent: on a broker, its ACL check
    and its processor read that one decode (``rmq.protocol.headers``).
    """

    def __init__(self, int code=0, *, language=LANGUAGE, int version=VERSION, int opaque=0, int flag=0,
                 remark=None, ext_fields=None, body=b""):
        self.code = code
        self.language = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = {} if ext_fields is None else ext_fields
        self.body = body

    @classmethod
    def request(cls, int code, ext_fields=None, body=b""):
        """A new request with a fresh opaque."""
        cdef RemotingCommand cmd = RemotingCommand.__new__(cls)
        cmd.code = code
        cmd.language = LANGUAGE
        cmd.version = VERSION
        cmd.opaque = next_opaque()
        cmd.flag = 0
        cmd.remark = None
        cmd.ext_fields = {} if ext_fields is None else ext_fields
        cmd.body = body
        return cmd

    @classmethod
    def response_to(cls, RemotingCommand request, int code, remark=None, ext_fields=None, body=b""):
        """The response to ``request``: same opaque, the response flag set."""
        cdef RemotingCommand cmd = RemotingCommand.__new__(cls)
        cmd.code = code
        cmd.language = LANGUAGE
        cmd.version = VERSION
        cmd.opaque = request.opaque
        cmd.flag = FLAG_RESPONSE
        cmd.remark = remark
        cmd.ext_fields = {} if ext_fields is None else ext_fields
        cmd.body = body
        return cmd

    def ext_int(self, name, default=REQUIRED):
        """The ext field ``name`` as ``int(value)``: ``default`` when it is missing or empty (without
        one: KeyError); ValueError when it is no integer."""
        ext = self.ext_fields
        value = (<dict>ext).get(name) if type(ext) is dict else ext.get(name)
        if value is None or value == "":
            if default is REQUIRED:
                raise KeyError(name)
            return default
        return _int_of(value)

    @property
    def is_response(self):
        return (self.flag & FLAG_RESPONSE) != 0

    @property
    def is_oneway(self):
        return (self.flag & FLAG_ONEWAY) != 0

    def __repr__(self):
        kind = "response" if self.flag & FLAG_RESPONSE else "request"
        return (
            f"<RemotingCommand {kind} code={self.code} opaque={self.opaque} flag={self.flag} "
            f"remark={self.remark!r} ext_fields={self.ext_fields!r} body={codec_py.body_parts(self.body)[1]} bytes>"
        )


cdef object _int_of(object value):
    """``int(value)``, parsed here when it is a plain decimal str (what every client sends)."""
    cdef const unsigned char* digits
    cdef Py_ssize_t i, length
    cdef int64_t number = 0
    if type(value) is str and PyUnicode_IS_ASCII(value):
        length = PyUnicode_GET_LENGTH(value)
        digits = PyUnicode_1BYTE_DATA(value)
        i = 1 if length and digits[0] == c'-' else 0
        if i < length <= MAX_PLAIN_DECIMAL_DIGITS + i:
            while i < length and c'0' <= digits[i] <= c'9':
                number = number * 10 + (digits[i] - c'0')
                i += 1
            if i == length:
                return -number if digits[0] == c'-' else number
    return int(value)  # signs, spaces, underscores, other digits, big numbers: as Python reads them


cdef inline int _header_int(dict header, str key, int default, bint required, int* out) except -1:
    value = header.get(key)
    cdef int64_t number
    if value is None and not required:
        out[0] = default
        return 0
    if type(value) is int:
        try:
            number = value
        except OverflowError:
            number = INT32_MAX + 1
        if INT32_MIN <= number <= INT32_MAX:
            out[0] = <int>number
            return 0
    codec_py.header_int(header, key, None)  # raises the ProtocolError that says what was wrong
    raise AssertionError(f"header {key!r} rejected without an error")


cdef RemotingCommand _command_from_header(dict header, bytes body):
    cdef RemotingCommand cmd = RemotingCommand.__new__(RemotingCommand)
    _header_int(header, "code", 0, True, &cmd.code)
    _header_int(header, "version", 0, False, &cmd.version)
    _header_int(header, "opaque", 0, False, &cmd.opaque)
    _header_int(header, "flag", 0, False, &cmd.flag)
    language = header.get("language", LANGUAGE_UNKNOWN)
    cmd.language = language if type(language) is str else str(language)
    remark = header.get("remark")
    cmd.remark = remark if remark is None or type(remark) is str else codec_py.text_or_none(remark)
    ext = header.get("extFields")
    if type(ext) is dict and _all_str_values(<dict>ext):
        cmd.ext_fields = ext
    else:
        cmd.ext_fields = codec_py.ext_fields_from_json(ext)
    cmd.body = body
    return cmd


cdef inline bint _all_str_values(dict d):
    for value in d.values():
        if type(value) is not str:
            return False
    return True


# -- the JSON header, written directly when every string in it is plain ---------------------------
#
# What orjson.dumps writes for the header dict, without building the dict: {"code":N,
# "language":"S","version":N,"opaque":N,"flag":N[,"remark":"S"],"extFields":{"K":"V",...}}, no
# spaces. Only for strings orjson writes as they are (_is_plain); anything else takes the dict.

cdef inline bint _is_plain(object text) noexcept:
    """A str orjson writes unchanged between quotes: ASCII without control characters, quote or backslash."""
    cdef const unsigned char* data
    cdef Py_ssize_t i
    if type(text) is not str or not PyUnicode_IS_ASCII(text):
        return False
    data = PyUnicode_1BYTE_DATA(text)
    for i in range(PyUnicode_GET_LENGTH(text)):
        if data[i] < 0x20 or data[i] == c'"' or data[i] == c'\\':
            return False
    return True


cdef inline Py_ssize_t _int_length(int value) noexcept:
    cdef uint64_t magnitude = <uint64_t>(-<int64_t>value) if value < 0 else <uint64_t>value
    cdef Py_ssize_t n = 2 if value < 0 else 1
    while magnitude >= 10:
        magnitude //= 10
        n += 1
    return n


cdef inline char* _put_int(char* p, int value) noexcept:
    cdef uint64_t magnitude = <uint64_t>(-<int64_t>value) if value < 0 else <uint64_t>value
    cdef Py_ssize_t n = _int_length(value)
    cdef char* end = p + n
    if value < 0:
        p[0] = c'-'
    p = end
    while True:
        p -= 1
        p[0] = <char>(c'0' + magnitude % 10)
        magnitude //= 10
        if magnitude == 0:
            return end


cdef inline char* _put_text(char* p, const char* text, Py_ssize_t n) noexcept:
    memcpy(p, text, n)
    return p + n


cdef inline char* _put_plain(char* p, object text) noexcept:
    """``"text"``; ``text`` passed _is_plain."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    p[0] = c'"'
    memcpy(p + 1, PyUnicode_1BYTE_DATA(text), n)
    p[n + 1] = c'"'
    return p + n + 2


cdef Py_ssize_t _plain_header_length(RemotingCommand cmd) noexcept:
    """The length of ``cmd``'s JSON header if every string in it is plain, else -1."""
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t n, fields = 0
    cdef PyObject* key
    cdef PyObject* value
    ext = cmd.ext_fields
    if not _is_plain(cmd.language) or type(ext) is not dict:
        return -1
    n = (len('{"code":,"language":"","version":,"opaque":,"flag":,"extFields":{}}')
         + _int_length(cmd.code) + PyUnicode_GET_LENGTH(cmd.language) + _int_length(cmd.version)
         + _int_length(cmd.opaque) + _int_length(cmd.flag))
    if cmd.remark is not None:
        if not _is_plain(cmd.remark):
            return -1
        n += len(',"remark":""') + PyUnicode_GET_LENGTH(cmd.remark)
    # (PyDict_Next's position counts deleted entries too: it is no field count)
    while PyDict_Next(ext, &pos, &key, &value):
        if not _is_plain(<object>key) or not _is_plain(<object>value):
            return -1
        n += len('"":"",') + PyUnicode_GET_LENGTH(<object>key) + PyUnicode_GET_LENGTH(<object>value)
        fields += 1
    if fields:
        n -= 1  # no comma after the last field
    return n


cdef char* _write_plain_header(RemotingCommand cmd, char* p) noexcept:
    """Write the header whose length _plain_header_length gave; the end of it."""
    cdef Py_ssize_t pos = 0
    cdef PyObject* key
    cdef PyObject* value
    cdef bint first = True
    p = _put_text(p, b'{"code":', 8)
    p = _put_int(p, cmd.code)
    p = _put_text(p, b',"language":', 12)
    p = _put_plain(p, cmd.language)
    p = _put_text(p, b',"version":', 11)
    p = _put_int(p, cmd.version)
    p = _put_text(p, b',"opaque":', 10)
    p = _put_int(p, cmd.opaque)
    p = _put_text(p, b',"flag":', 8)
    p = _put_int(p, cmd.flag)
    if cmd.remark is not None:
        p = _put_text(p, b',"remark":', 10)
        p = _put_plain(p, cmd.remark)
    p = _put_text(p, b',"extFields":{', 14)
    while PyDict_Next(cmd.ext_fields, &pos, &key, &value):
        if not first:
            p[0] = c','
            p += 1
        first = False
        p = _put_plain(p, <object>key)
        p[0] = c':'
        p = _put_plain(p + 1, <object>value)
    return _put_text(p, b'}}', 2)


cdef object _dumped_header(RemotingCommand cmd, Py_ssize_t* length):
    """None when ``cmd``'s header is plain and _write_header writes it directly, else the header
    dumped by orjson; its length in ``length[0]`` either way."""
    length[0] = _plain_header_length(cmd)
    if length[0] >= 0:
        return None
    header = _header_json(cmd)
    length[0] = PyBytes_GET_SIZE(header)
    return header


cdef inline void _write_header(RemotingCommand cmd, object dumped, char* dest) noexcept:
    if dumped is None:
        _write_plain_header(cmd, dest)
    else:
        memcpy(dest, PyBytes_AS_STRING(dumped), PyBytes_GET_SIZE(dumped))


cdef bytes _header_json(RemotingCommand cmd):
    cdef dict header = {
        "code": cmd.code,
        "language": cmd.language,
        "version": cmd.version,
        "opaque": cmd.opaque,
        "flag": cmd.flag,
    }
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    ext = cmd.ext_fields
    if ext is None:
        ext = {}
    elif type(ext) is not dict or not _all_str_values(<dict>ext):
        ext = codec_py.ext_fields_for_wire(ext)
    header["extFields"] = ext
    return _dumps(header)


cdef Py_ssize_t _body_size(object body) except -1:
    cdef Py_buffer view
    cdef Py_ssize_t size = 0
    if type(body) is bytes:
        return PyBytes_GET_SIZE(body)
    if body is None:
        return 0
    if isinstance(body, (list, tuple)):
        for part in body:
            size += _body_size(part)
        return size
    PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
    size = view.len
    PyBuffer_Release(&view)
    return size


cdef Py_ssize_t _copy_body(object body, char* dest) except -1:
    """Copy ``body`` (bytes, a buffer or a list of them) to ``dest``; the number of bytes copied."""
    cdef Py_buffer view
    cdef Py_ssize_t size = 0
    if type(body) is bytes:
        size = PyBytes_GET_SIZE(body)
        memcpy(dest, PyBytes_AS_STRING(body), size)
        return size
    if body is None:
        return 0
    if isinstance(body, (list, tuple)):
        for part in body:
            size += _copy_body(part, dest + size)
        return size
    PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
    try:
        memcpy(dest, view.buf, view.len)
        return view.len
    finally:
        PyBuffer_Release(&view)


cdef inline void _write_prefix(unsigned char* dest, Py_ssize_t header_length, Py_ssize_t body_length) noexcept nogil:
    _write_u32(dest, <uint32_t>(HEADER_LENGTH_SIZE + header_length + body_length))
    _write_u32(dest + TOTAL_LENGTH_SIZE, <uint32_t>header_length)


def encode_head(RemotingCommand cmd, body_length=None):
    """The length fields and JSON header of ``cmd``'s frame; its body is to be written right after."""
    cdef Py_ssize_t blen = _body_size(cmd.body) if body_length is None else body_length
    cdef Py_ssize_t hlen
    dumped = _dumped_header(cmd, &hlen)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, PREFIX_SIZE + hlen)
    cdef char* dest = PyBytes_AS_STRING(out)
    _write_prefix(<unsigned char*>dest, hlen, blen)
    _write_header(cmd, dumped, dest + PREFIX_SIZE)
    return out


def encode_into(bytearray out, RemotingCommand cmd):
    """Append the whole frame of ``cmd`` (body copied) to ``out``; its length."""
    cdef Py_ssize_t blen = _body_size(cmd.body)
    cdef Py_ssize_t hlen
    dumped = _dumped_header(cmd, &hlen)
    cdef Py_ssize_t start = PyByteArray_GET_SIZE(out)
    PyByteArray_Resize(out, start + PREFIX_SIZE + hlen + blen)
    cdef char* dest = PyByteArray_AS_STRING(out) + start
    _write_prefix(<unsigned char*>dest, hlen, blen)
    _write_header(cmd, dumped, dest + PREFIX_SIZE)
    _copy_body(cmd.body, dest + PREFIX_SIZE + hlen)
    return PREFIX_SIZE + hlen + blen


def encode(RemotingCommand cmd):
    """The whole frame of ``cmd`` as one bytes object."""
    cdef Py_ssize_t blen = _body_size(cmd.body)
    cdef Py_ssize_t hlen
    dumped = _dumped_header(cmd, &hlen)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, PREFIX_SIZE + hlen + blen)
    cdef char* dest = PyBytes_AS_STRING(out)
    _write_prefix(<unsigned char*>dest, hlen, blen)
    _write_header(cmd, dumped, dest + PREFIX_SIZE)
    _copy_body(cmd.body, dest + PREFIX_SIZE + hlen)
    return out


cdef class FastLane:
    """The base of a server's compiled fast lane (``FrameDecoder.feed``'s ``lane``): a request it
    serves makes no RemotingCommand. This base serves nothing."""

    def connect(self, str remote_address, deliver=None):
        """What the lane keeps of a connection (its ``peer``), once per connection; ``deliver(frames)``
        queues the answers the lane completes after the read."""
        return None

    cdef int serve(self, object peer, const unsigned char* header, Py_ssize_t header_len,
                   const unsigned char* body, Py_ssize_t body_len, bytearray out) except -1:
        return 0


cdef class FrameDecoder:
    """Cuts a byte stream into RemotingCommands.

    ``feed(data)`` returns the commands completed by ``data``; at most one incomplete frame stays
    buffered (never more than ``max_frame_size + 4`` bytes). A ProtocolError leaves the decoder
    failed: the stream cannot be trusted past it, so every later feed raises the same error.
    """

    def __init__(self, Py_ssize_t max_frame_size=MAX_FRAME_SIZE_DEFAULT):
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._error = None

    @property
    def buffered(self):
        """Bytes held back waiting for the rest of their frame."""
        return PyByteArray_GET_SIZE(self._buffer)

    def feed(self, data, FastLane lane=None, peer=None, bytearray out=None, Py_ssize_t out_limit=PY_SSIZE_T_MAX):
        """The commands completed by ``data``. With a ``lane``, each frame is offered to it first,
        until it leaves one to the processors, or ``out`` (where its answers go) grows past
        ``out_limit`` (the connection's output bound: what the processors would then hold back):
        the rest of the read is decoded in order, so that nothing the lane serves overtakes a
        request before it."""
        cdef list commands = []
        cdef Py_ssize_t consumed = 0
        cdef Py_buffer view
        if self._error is not None:
            raise self._error
        if lane is not None and out is None:
            raise ValueError("a lane needs an output bytearray for its answers")
        self._lane = lane
        self._lane_peer = peer
        self._lane_out = out
        self._lane_out_limit = out_limit
        try:
            if PyByteArray_GET_SIZE(self._buffer) == 0:
                # Common case: decode straight from the received bytes, keep only the tail.
                PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
                try:
                    self._decode(<const unsigned char*>view.buf, view.len, commands, &consumed)
                    if consumed < view.len:
                        self._buffer = bytearray((<const char*>view.buf)[consumed:view.len])
                finally:
                    PyBuffer_Release(&view)
            else:
                self._buffer += data
                self._decode(<const unsigned char*>PyByteArray_AS_STRING(self._buffer),
                             PyByteArray_GET_SIZE(self._buffer), commands, &consumed)
                del self._buffer[:consumed]
        except ProtocolError as exc:
            self._error = exc
            self._buffer = bytearray()
            raise
        finally:
            self._lane = None
            self._lane_peer = None
            self._lane_out = None
        return commands

    cdef int _decode(self, const unsigned char* data, Py_ssize_t length, list commands,
                     Py_ssize_t* consumed) except -1:
        cdef Py_ssize_t pos = 0
        cdef Py_ssize_t frame_end, header_length
        cdef uint32_t total_length, word
        cdef const unsigned char* frame
        cdef FastLane lane = self._lane
        while length - pos >= TOTAL_LENGTH_SIZE:
            frame = data + pos
            total_length = _read_u32(frame)
            if total_length > <uint32_t>self.max_frame_size or total_length < HEADER_LENGTH_SIZE:
                raise codec_py.frame_length_error(total_length, self.max_frame_size)
            frame_end = pos + TOTAL_LENGTH_SIZE + total_length
            if frame_end > length:
                break
            word = _read_u32(frame + TOTAL_LENGTH_SIZE)
            header_length = word & HEADER_LENGTH_MASK
            if (word >> SERIALIZE_TYPE_SHIFT) != 0 or header_length > total_length - HEADER_LENGTH_SIZE:
                raise codec_py.header_length_error(word, total_length)
            if lane is not None:
                if lane.serve(self._lane_peer, frame + PREFIX_SIZE, header_length,
                              frame + PREFIX_SIZE + header_length,
                              total_length - HEADER_LENGTH_SIZE - header_length, self._lane_out):
                    self.lane_served += 1
                    pos = frame_end
                    consumed[0] = pos
                    if PyByteArray_GET_SIZE(self._lane_out) > self._lane_out_limit:
                        lane = None
                    continue
                lane = None  # in order: the rest of this read goes to the processors
            header_bytes = PyBytes_FromStringAndSize(<const char*>frame + PREFIX_SIZE, header_length)
            try:
                header = _loads(header_bytes)
            except _JSONDecodeError:
                header = codec_py.parse_header(header_bytes)  # raises the ProtocolError
            if type(header) is not dict:
                codec_py.parse_header(header_bytes)
            body = PyBytes_FromStringAndSize(<const char*>frame + PREFIX_SIZE + header_length,
                                             total_length - HEADER_LENGTH_SIZE - header_length)
            commands.append(_command_from_header(<dict>header, body))
            pos = frame_end
            consumed[0] = pos
        return 0


def decode_frames(data, Py_ssize_t max_frame_size=MAX_FRAME_SIZE_DEFAULT):
    """Every command in ``data``, which must hold whole frames only."""
    decoder = FrameDecoder(max_frame_size)
    commands = decoder.feed(data)
    if decoder.buffered:
        raise ProtocolError(f"{decoder.buffered} bytes left after the last whole frame")
    return commands
