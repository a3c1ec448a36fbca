# cython: boundscheck=False, wraparound=False, cdivision=True, auto_pickle=False
"""A send request encoded straight to its frame, compiled: the twin of ``rmq.client.send_wire_py``
(one API, the same tests), whose docstring holds the frame's layout::

    [total_length i32][header_length i32]{"code":C,"language":"PYTHON","version":V,"opaque":O,
    "flag":0,"extFields":{FIXED,PER_MESSAGE,"e":"QUEUE_ID"}}[body]

Strings are escaped as orjson escapes them (the generic codec's writer): ``"`` and ``\\`` with a
backslash, \\b \\t \\n \\f \\r short, other bytes under 0x20 as \\u00xx, everything else (UTF-8 of
non-ASCII text included) as it is. Every write is bounded by a length computed first.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy
from rmq.includes.decimal cimport decimal_length, put_decimal

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL

from rmq.net import frame as _frame

cdef bytes _LANGUAGE = _frame.LANGUAGE.encode()
cdef int _VERSION = _frame.VERSION
cdef const char* _HEX = b"0123456789abcdef"

cdef enum:
    PREFIX_SIZE = 8


cdef inline Py_ssize_t _escaped_length(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i, length = n + 2
    cdef unsigned char c
    for i in range(n):
        c = s[i]
        if c == c'"' or c == c'\\' or c == 8 or c == 9 or c == 10 or c == 12 or c == 13:
            length += 1
        elif c < 0x20:
            length += 5
    return length


cdef inline char* _put_escaped(char* p, const unsigned char* s, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    cdef unsigned char c
    p[0] = c'"'
    p += 1
    for i in range(n):
        c = s[i]
        if c >= 0x20 and c != c'"' and c != c'\\':
            p[0] = <char>c
            p += 1
            continue
        p[0] = c'\\'
        if c == c'"' or c == c'\\':
            p[1] = <char>c
        elif c == 8:
            p[1] = c'b'
        elif c == 9:
            p[1] = c't'
        elif c == 10:
            p[1] = c'n'
        elif c == 12:
            p[1] = c'f'
        elif c == 13:
            p[1] = c'r'
        else:
            p[1] = c'u'
            p[2] = c'0'
            p[3] = c'0'
            p[4] = _HEX[c >> 4]
            p[5] = _HEX[c & 0xF]
            p += 6
            continue
        p += 2
    p[0] = c'"'
    return p + 1


cdef inline char* _put(char* p, const char* text, Py_ssize_t n) noexcept nogil:
    memcpy(p, text, n)
    return p + n



cdef inline void _put_be32(char* p, uint64_t value) noexcept nogil:
    p[0] = <char>((value >> 24) & 0xFF)
    p[1] = <char>((value >> 16) & 0xFF)
    p[2] = <char>((value >> 8) & 0xFF)
    p[3] = <char>(value & 0xFF)


def json_string(str text):
    """``text`` as a quoted JSON string, escaped as orjson escapes it."""
    cdef Py_ssize_t n
    cdef const unsigned char* s = <const unsigned char*>PyUnicode_AsUTF8AndSize(text, &n)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, _escaped_length(s, n))
    _put_escaped(PyBytes_AS_STRING(out), s, n)
    return out


def fixed_fields(str group, str default_topic, int default_topic_queue_nums, bint batch):
    """The members of a producer's send header that are the same for every one of its messages."""
    return b'"a":%s,"c":%s,"d":"%d","j":"0","k":"false","m":"%s"' % (
        json_string(group), json_string(default_topic), default_topic_queue_nums, b"true" if batch else b"false")


def message_fields(bytes fixed, str topic, int64_t sys_flag, int64_t born_timestamp, int64_t flag, str properties):
    """``fixed`` and the members of one message's send header, all but its queue id."""
    cdef Py_ssize_t topic_n, props_n
    cdef const unsigned char* topic_s = <const unsigned char*>PyUnicode_AsUTF8AndSize(topic, &topic_n)
    cdef const unsigned char* props_s = <const unsigned char*>PyUnicode_AsUTF8AndSize(properties, &props_n)
    cdef Py_ssize_t fixed_n = PyBytes_GET_SIZE(fixed)
    cdef Py_ssize_t length = (fixed_n + len(',"b":,"f":"","g":"","h":"","i":') + decimal_length(sys_flag)
                              + decimal_length(born_timestamp) + decimal_length(flag)
                              + _escaped_length(topic_s, topic_n) + _escaped_length(props_s, props_n))
    cdef bytes out = PyBytes_FromStringAndSize(NULL, length)
    cdef char* start = PyBytes_AS_STRING(out)
    cdef char* p = _put(start, PyBytes_AS_STRING(fixed), fixed_n)
    p = _put(p, b',"b":', 5)
    p = _put_escaped(p, topic_s, topic_n)
    p = _put(p, b',"f":"', 6)
    p = put_decimal(p, sys_flag)
    p = _put(p, b'","g":"', 7)
    p = put_decimal(p, born_timestamp)
    p = _put(p, b'","h":"', 7)
    p = put_decimal(p, flag)
    p = _put(p, b'","i":', 6)
    _put_escaped(p, props_s, props_n)
    return out


def send_frame(int code, int opaque, bytes fields, int queue_id, bytes body, bint with_body=True):
    """The whole frame of a send request: ``fields`` of ``message_fields``, the queue id of this try;
    without ``with_body``, all of it but the body's bytes (written after it by reference)."""
    cdef Py_ssize_t fields_n = PyBytes_GET_SIZE(fields)
    cdef Py_ssize_t body_n = PyBytes_GET_SIZE(body)
    cdef Py_ssize_t lang_n = PyBytes_GET_SIZE(_LANGUAGE)
    cdef Py_ssize_t header_n = (len('{"code":,"language":"","version":,"opaque":,"flag":0,"extFields":{,"e":""}}')
                                + decimal_length(code) + lang_n + decimal_length(_VERSION)
                                + decimal_length(opaque) + fields_n + decimal_length(queue_id))
    cdef bytes frame = PyBytes_FromStringAndSize(NULL, PREFIX_SIZE + header_n + (body_n if with_body else 0))
    cdef char* start = PyBytes_AS_STRING(frame)
    _put_be32(start, 4 + header_n + body_n)
    _put_be32(start + 4, header_n)
    cdef char* p = _put(start + PREFIX_SIZE, b'{"code":', 8)
    p = put_decimal(p, code)
    p = _put(p, b',"language":"', 13)
    p = _put(p, PyBytes_AS_STRING(_LANGUAGE), lang_n)
    p = _put(p, b'","version":', 12)
    p = put_decimal(p, _VERSION)
    p = _put(p, b',"opaque":', 10)
    p = put_decimal(p, opaque)
    p = _put(p, b',"flag":0,"extFields":{', 23)
    p = _put(p, PyBytes_AS_STRING(fields), fields_n)
    p = _put(p, b',"e":"', 6)
    p = put_decimal(p, queue_id)
    p = _put(p, b'"}}', 3)
    if with_body:
        memcpy(p, PyBytes_AS_STRING(body), body_n)
    return frame
