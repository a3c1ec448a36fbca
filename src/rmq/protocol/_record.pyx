# cython: cdivision=True
# The CommitLog record codec, compiled: the twin of rmq.protocol.record_py (one API, the same tests)
# and the codec the store writes with (rmq.store._store cimports _record.pxd). docs/store-format.md#commitlog-record.
#
#   CommitLog record (v1, IPv4, big-endian; 91 bytes + body + topic + properties)
#   +------+------+------+------+------+----------+----------+------+----------+---------+
#   |1 TOT |2 MAG |3 CRC |4 QID |5 FLG |6 QOFFSET |7 PHYOFF  |8 SYS |9 BORN_TS |10 BHOST |
#   | i32  | i32  | i32  | i32  | i32  | i64      | i64      | i32  | i64      | 4+i32   |
#   0      4      8      12     16     20         28         36     40         48
#   +----------+---------+------+----------+---------------+--------------+--------------+
#   |11 STORE  |12 SHOST |13 RC |14 PREPTX |15 BODYLEN+body|16 TLEN+topic |17 PLEN+props |
#   | i64      | 4+i32   | i32  | i64      | i32 + b       | i8 + t       | i16 + p      |
#   56         64        72     76         84              88+b           89+b+t
#   End of file: [i32 remaining][i32 0xCBD43194]
#
#   msgId (16 bytes -> 32 hex): @0 store IPv4, @4 i32 store port, @8 i64 phy offset
#
# Named offsets are in _record.pxd; rmq.protocol.layout mirrors them for Python.
# Loading this module never loads the store: clients decode pulled records with it.
import socket

cimport cython
import isal.isal_zlib as _isal_zlib

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

from rmq.includes.endian cimport load_be16, load_be32, load_be64, store_be32, store_be64

from rmq.protocol import layout as _layout


cdef extern from "<dlfcn.h>" nogil:
    void* dlopen(const char* filename, int flags)
    void* dlsym(void* handle, const char* symbol)
    int RTLD_NOW
    int RTLD_NOLOAD

cdef extern from "Python.h":
    object PyMemoryView_FromMemory(char* mem, Py_ssize_t size, int flags)
    int PyBUF_READ


# Python-visible copy of the layout enums, compared with rmq.protocol.layout by the tests.
LAYOUT = {
    "MESSAGE_MAGIC_CODE": MESSAGE_MAGIC_CODE, "BLANK_MAGIC_CODE": BLANK_MAGIC_CODE,
    "REC_TOTALSIZE": REC_TOTALSIZE, "REC_MAGIC": REC_MAGIC, "REC_BODYCRC": REC_BODYCRC,
    "REC_QUEUEID": REC_QUEUEID, "REC_FLAG": REC_FLAG, "REC_QUEUEOFFSET": REC_QUEUEOFFSET,
    "REC_PHYSICALOFFSET": REC_PHYSICALOFFSET, "REC_SYSFLAG": REC_SYSFLAG,
    "REC_BORNTIMESTAMP": REC_BORNTIMESTAMP, "REC_BORNHOST": REC_BORNHOST,
    "REC_STORETIMESTAMP": REC_STORETIMESTAMP, "REC_STOREHOST": REC_STOREHOST,
    "REC_RECONSUMETIMES": REC_RECONSUMETIMES, "REC_PREPARED_TX_OFFSET": REC_PREPARED_TX_OFFSET,
    "REC_BODYLEN": REC_BODYLEN, "REC_BODY": REC_BODY, "REC_FIXED_OVERHEAD": REC_FIXED_OVERHEAD,
    "END_FILE_MIN_BLANK_LENGTH": END_FILE_MIN_BLANK_LENGTH, "TOPIC_MAX_BYTES": TOPIC_MAX_BYTES,
    "PROPERTIES_MAX_BYTES": PROPERTIES_MAX_BYTES,
    "MSGID_STORE_IP": MSGID_STORE_IP, "MSGID_STORE_PORT": MSGID_STORE_PORT,
    "MSGID_PHY_OFFSET": MSGID_PHY_OFFSET, "MSGID_BYTES": MSGID_BYTES,
    "CHECK_END_OF_FILE": CHECK_END_OF_FILE, "CHECK_EMPTY": CHECK_EMPTY, "CHECK_TRUNCATED": CHECK_TRUNCATED,
    "CHECK_BAD_MAGIC": CHECK_BAD_MAGIC, "CHECK_BAD_LENGTHS": CHECK_BAD_LENGTHS,
    "CHECK_BAD_OFFSET": CHECK_BAD_OFFSET, "CHECK_BAD_CRC": CHECK_BAD_CRC,
}

# What each check outcome means: the codes are the C enum's, the words rmq.protocol.layout's.
CHECK_RESULTS = {code: _layout.CHECK_RESULTS[code] for code in (
    CHECK_END_OF_FILE, CHECK_EMPTY, CHECK_TRUNCATED, CHECK_BAD_MAGIC, CHECK_BAD_LENGTHS, CHECK_BAD_OFFSET,
    CHECK_BAD_CRC)}


# BODYCRC is ISA-L's crc32 (isal is a dependency). Its extension module exports the C function,
# so the store calls it directly: no Python call per record. If the symbol is not there (another
# isal build), the Python function is called instead; both give zlib's IEEE CRC-32.
cdef void _bind_isal_crc32():
    global isal_crc32
    cdef void* handle = dlopen(_isal_zlib.__file__.encode(), RTLD_NOW | RTLD_NOLOAD)
    if handle == NULL:
        return
    isal_crc32 = <crc32_fn>dlsym(handle, b"crc32_gzip_refl")
    if isal_crc32 != NULL and isal_crc32(0, <const unsigned char*>b"123456789", 9) != 0xCBF43926:
        isal_crc32 = NULL


_bind_isal_crc32()
# True when BODYCRC is computed by the C function (no Python call per record)
CRC_NATIVE = isal_crc32 != NULL


cdef uint32_t body_crc_py(const unsigned char* body, Py_ssize_t n) except? 0xFFFFFFFF:
    # a read-only memoryview over the bytes, used synchronously
    return (<uint32_t>_isal_zlib.crc32(PyMemoryView_FromMemory(<char*>body, n, PyBUF_READ))) & 0x7FFFFFFF


def body_crc(data):
    """BODYCRC of a body (any buffer): ``crc32(data) & 0x7FFFFFFF``."""
    cdef Py_buffer buf
    PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
    try:
        return body_crc_of(<const unsigned char*>buf.buf, buf.len)
    finally:
        PyBuffer_Release(&buf)


cdef Py_ssize_t check_record_c(const unsigned char* p, Py_ssize_t avail, int64_t expected_offset,
                               bint check_crc) except? -100:
    cdef int32_t total, body_len, topic_len, props_len
    cdef uint32_t magic
    if avail < END_FILE_MIN_BLANK_LENGTH:
        return CHECK_EMPTY
    total = load_be32(p + REC_TOTALSIZE)                                          # 1 TOTALSIZE
    magic = <uint32_t>load_be32(p + REC_MAGIC)                                    # 2 MAGIC
    if magic == BLANK_MAGIC_CODE and total == avail:
        return CHECK_END_OF_FILE
    if total == 0 and magic == 0:
        return CHECK_EMPTY
    if magic != MESSAGE_MAGIC_CODE:
        return CHECK_BAD_MAGIC
    if total < REC_FIXED_OVERHEAD or total > avail:
        return CHECK_TRUNCATED
    body_len = load_be32(p + REC_BODYLEN)                                         # 15 BODYLEN
    if body_len < 0 or REC_FIXED_OVERHEAD + body_len > total:
        return CHECK_BAD_LENGTHS
    topic_len = p[REC_BODY + body_len]                                            # 16 TOPICLEN
    if REC_FIXED_OVERHEAD + body_len + topic_len > total:
        return CHECK_BAD_LENGTHS
    props_len = load_be16(p + REC_BODY + body_len + 1 + topic_len)                # 17 PROPLEN
    if REC_FIXED_OVERHEAD + body_len + topic_len + props_len != total:
        return CHECK_BAD_LENGTHS
    if expected_offset >= 0 and load_be64(p + REC_PHYSICALOFFSET) != expected_offset:  # 7 PHYSICALOFFSET
        return CHECK_BAD_OFFSET
    if check_crc and body_crc_of(p + REC_BODY, body_len) != <uint32_t>load_be32(p + REC_BODYCRC):
        return CHECK_BAD_CRC                                                      # 3 BODYCRC
    return total


def check_record(data, int64_t expected_offset=-1, bint check_crc=True):
    """Validate the stored record at the start of ``data`` (any buffer).

    Returns its size (> 0) when valid, else a check outcome <= 0 (see CHECK_RESULTS).
    ``expected_offset`` >= 0 also requires the PHYSICALOFFSET field to equal it.
    """
    cdef Py_buffer buf
    PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
    try:
        return check_record_c(<const unsigned char*>buf.buf, buf.len, expected_offset, check_crc)
    finally:
        PyBuffer_Release(&buf)


def ipv4_to_int(str ip):
    """'1.2.3.4' -> the IPv4 address as an unsigned 32-bit int (the byte order of the record)."""
    return int.from_bytes(socket.inet_aton(ip), "big")


def int_to_ipv4(uint32_t ip):
    return socket.inet_ntoa(ip.to_bytes(4, "big"))


cdef char* HEX_DIGITS = b"0123456789ABCDEF"


cdef str encode_msg_id_c(uint32_t ip, int32_t port, int64_t offset):
    cdef unsigned char raw[MSGID_BYTES]
    cdef char text[MSGID_BYTES * 2]
    cdef int i
    store_be32(raw + MSGID_STORE_IP, ip)
    store_be32(raw + MSGID_STORE_PORT, <uint32_t>port)
    store_be64(raw + MSGID_PHY_OFFSET, <uint64_t>offset)
    for i in range(MSGID_BYTES):
        text[2 * i] = HEX_DIGITS[raw[i] >> 4]
        text[2 * i + 1] = HEX_DIGITS[raw[i] & 15]
    return text[:MSGID_BYTES * 2].decode("ascii")


def encode_msg_id(str store_ip, int32_t store_port, int64_t phy_offset):
    """The broker msgId (offsetMsgId): 32 uppercase hex of store IPv4, int32 port, int64 offset."""
    return encode_msg_id_c(ipv4_to_int(store_ip), store_port, phy_offset)


def decode_msg_id(str msg_id):
    """Inverse of encode_msg_id: (store ip, store port, physical offset)."""
    if len(msg_id) != MSGID_BYTES * 2:
        raise ValueError(f"msgId {msg_id!r} has {len(msg_id)} characters, expected {MSGID_BYTES * 2} hex")
    raw = bytes.fromhex(msg_id)
    return (socket.inet_ntoa(raw[MSGID_STORE_IP:MSGID_STORE_IP + 4]),
            int.from_bytes(raw[MSGID_STORE_PORT:MSGID_STORE_PORT + 4], "big", signed=True),
            int.from_bytes(raw[MSGID_PHY_OFFSET:MSGID_PHY_OFFSET + 8], "big", signed=True))


# -- a pulled batch: every record's fields at once ------------------------------------------------

cdef extern from "Python.h":
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    object PyUnicode_FromFormat(const char* format, ...)

# the separators of the properties string (rmq.protocol.message's NAME_VALUE / PROPERTY_SEPARATOR)
cdef enum:
    NAME_VALUE_SEPARATOR = 1
    PROPERTY_SEPARATOR = 2


cdef dict _properties_of(const unsigned char* p, Py_ssize_t n):
    """rmq.protocol.message.decode_properties of the bytes ``p[:n]``: pairs split on the separators
    (ASCII, so never inside a UTF-8 sequence), each side decoded with "replace", empty and
    separator-less items skipped, the last of a repeated name kept."""
    cdef dict result = {}
    cdef Py_ssize_t start = 0, i, sep
    while start < n:
        i = start
        sep = -1
        while i < n and p[i] != PROPERTY_SEPARATOR:
            if sep < 0 and p[i] == NAME_VALUE_SEPARATOR:
                sep = i
            i += 1
        if sep >= 0:
            result[PyUnicode_DecodeUTF8(<const char*>p + start, sep - start, b"replace")] = \
                PyUnicode_DecodeUTF8(<const char*>p + sep + 1, i - sep - 1, b"replace")
        start = i + 1
    return result


@cython.final
cdef class _LastHost:
    """The (ip text, port) of a host field, the same tuple again while the address repeats (the
    records of one answer come from one store host, and mostly one born host)."""
    cdef uint32_t ip
    cdef int32_t port
    cdef object value

    cdef object of(self, const unsigned char* p):
        cdef uint32_t ip = <uint32_t>load_be32(p)
        cdef int32_t port = load_be32(p + 4)
        if self.value is None or ip != self.ip or port != self.port:
            self.ip = ip
            self.port = port
            self.value = (PyUnicode_FromFormat(b"%d.%d.%d.%d", <int>(ip >> 24), <int>((ip >> 16) & 255),
                                               <int>((ip >> 8) & 255), <int>(ip & 255)), port)
        return self.value


def record_fields(data):
    """The fields of the stored records back to back in ``data`` (a PULL_MESSAGE answer's body), in
    StoredMessage's order, one tuple per record: ``(tuples, stop, outcome)``; ``stop`` is where the
    bytes stopped being whole records and ``outcome`` why (a CHECK_RESULTS code), or ``len(data)``
    and 1 when they all were. Every length is checked (check_record) before it is used."""
    cdef Py_buffer buf
    cdef list records = []
    cdef Py_ssize_t pos = 0, size, body_len
    cdef const unsigned char* p
    cdef const unsigned char* tail
    cdef int topic_len, props_len
    cdef _LastHost born = _LastHost()
    cdef _LastHost store = _LastHost()
    PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
    try:
        while pos < buf.len:
            p = <const unsigned char*>buf.buf + pos
            size = check_record_c(p, buf.len - pos, -1, False)
            if size <= 0:
                return records, pos, size
            body_len = load_be32(p + REC_BODYLEN)
            tail = p + REC_BODY + body_len
            topic_len = tail[0]
            props_len = load_be16(tail + 1 + topic_len)
            records.append((
                <int32_t>load_be32(p + REC_TOTALSIZE),                                    # 1
                <int32_t>load_be32(p + REC_BODYCRC),                                      # 3
                <int32_t>load_be32(p + REC_QUEUEID),                                      # 4
                <int32_t>load_be32(p + REC_FLAG),                                         # 5
                <int64_t>load_be64(p + REC_QUEUEOFFSET),                                  # 6
                <int64_t>load_be64(p + REC_PHYSICALOFFSET),                               # 7
                <int32_t>load_be32(p + REC_SYSFLAG),                                      # 8
                <int64_t>load_be64(p + REC_BORNTIMESTAMP),                                # 9
                born.of(p + REC_BORNHOST),                                                # 10
                <int64_t>load_be64(p + REC_STORETIMESTAMP),                               # 11
                store.of(p + REC_STOREHOST),                                              # 12
                <int32_t>load_be32(p + REC_RECONSUMETIMES),                               # 13
                <int64_t>load_be64(p + REC_PREPARED_TX_OFFSET),                           # 14
                (<const char*>p)[REC_BODY:REC_BODY + body_len],                           # 15
                PyUnicode_DecodeUTF8(<const char*>tail + 1, topic_len, b"replace"),       # 16
                _properties_of(tail + 3 + topic_len, props_len),                          # 17
            ))
            pos += size
        return records, pos, 1
    finally:
        PyBuffer_Release(&buf)
