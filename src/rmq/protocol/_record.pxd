# The CommitLog record codec, compiled: what rmq.store._store cimports to write and read records (the
# layout table opens _record.pyx; record_py.py is the pure twin; rmq.protocol.layout mirrors every
# constant here for Python, and tests/protocol/test_record.py checks they agree).
#
#   offset size  field                      offset size  field
#        0    4   1 TOTALSIZE                   56    8  11 STORETIMESTAMP
#        4    4   2 MAGIC 0xDAA320A7            64    8  12 STOREHOST (4 ip + int32 port)
#        8    4   3 BODYCRC                     72    4  13 RECONSUMETIMES
#       12    4   4 QUEUEID                     76    8  14 PREPARED_TX_OFFSET
#       16    4   5 FLAG                        84    4  15 BODYLEN, then the body at 88
#       20    8   6 QUEUEOFFSET               88+b    1  16 TOPICLEN, then the topic
#       28    8   7 PHYSICALOFFSET          89+b+t    2  17 PROPLEN, then the properties
#       36    4   8 SYSFLAG
#       40    8   9 BORNTIMESTAMP
#       48    8  10 BORNHOST (4 ip + int32 port)
#
# The writers and readers of the put and get paths are ``cdef inline`` here, so they compile into
# the store's own code (a call across extension modules would go through a function pointer).
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

from rmq.includes.endian cimport load_be16, load_be32, store_be16, store_be32, store_be64


cdef extern from *:
    """
    #define RMQ_MESSAGE_MAGIC_CODE 0xDAA320A7u
    #define RMQ_BLANK_MAGIC_CODE 0xCBD43194u
    """
    const uint32_t MESSAGE_MAGIC_CODE "RMQ_MESSAGE_MAGIC_CODE"
    const uint32_t BLANK_MAGIC_CODE "RMQ_BLANK_MAGIC_CODE"


cdef enum RecordLayout:
    REC_TOTALSIZE = 0
    REC_MAGIC = 4
    REC_BODYCRC = 8
    REC_QUEUEID = 12
    REC_FLAG = 16
    REC_QUEUEOFFSET = 20
    REC_PHYSICALOFFSET = 28
    REC_SYSFLAG = 36
    REC_BORNTIMESTAMP = 40
    REC_BORNHOST = 48
    REC_STORETIMESTAMP = 56
    REC_STOREHOST = 64
    REC_RECONSUMETIMES = 72
    REC_PREPARED_TX_OFFSET = 76
    REC_BODYLEN = 84
    REC_BODY = 88
    # fixed bytes of a record: everything but body, topic and properties
    REC_FIXED_OVERHEAD = 91
    # the end-of-file marker: int32 remaining + int32 BLANK_MAGIC_CODE
    END_FILE_MIN_BLANK_LENGTH = 8
    TOPIC_MAX_BYTES = 127
    PROPERTIES_MAX_BYTES = 32767


# Offset msgId, 16 bytes written as 32 uppercase hex: store IPv4 | int32 store port | int64 offset
cdef enum MsgIdLayout:
    MSGID_STORE_IP = 0
    MSGID_STORE_PORT = 4
    MSGID_PHY_OFFSET = 8
    MSGID_BYTES = 16


# Outcomes of check_record (a positive value is the size of a valid record).
cdef enum RecordCheck:
    CHECK_END_OF_FILE = 0      # the EOF marker: the rest of this file is blank
    CHECK_EMPTY = -1           # zeros: nothing was ever written here
    CHECK_TRUNCATED = -2       # the header claims more bytes than the file holds
    CHECK_BAD_MAGIC = -3
    CHECK_BAD_LENGTHS = -4     # body/topic/properties lengths do not add up to TOTALSIZE
    CHECK_BAD_OFFSET = -5      # PHYSICALOFFSET is not where the record sits (a stale record)
    CHECK_BAD_CRC = -6


# ISA-L's crc32, when its extension module exports the C function (bound by _record.pyx at import)
ctypedef uint32_t (*crc32_fn)(uint32_t init, const unsigned char* buf, uint64_t length) noexcept nogil
cdef crc32_fn isal_crc32

# BODYCRC by a Python call, where isal_crc32 is NULL (another isal build)
cdef uint32_t body_crc_py(const unsigned char* body, Py_ssize_t n) except? 0xFFFFFFFF

# Size of the valid record at p, or a RecordCheck outcome (<= 0)
cdef Py_ssize_t check_record_c(const unsigned char* p, Py_ssize_t avail, int64_t expected_offset,
                               bint check_crc) except? -100

# The broker msgId of a record stored at ``offset`` by ip:port
cdef str encode_msg_id_c(uint32_t ip, int32_t port, int64_t offset)


cdef inline uint32_t body_crc_of(const unsigned char* body, Py_ssize_t n) except? 0xFFFFFFFF:
    """BODYCRC: crc32(body) & 0x7FFFFFFF (zlib's IEEE CRC-32, as RocketMQ's UtilAll.crc32)."""
    if isal_crc32 != NULL:
        return isal_crc32(0, body, n) & 0x7FFFFFFF
    return body_crc_py(body, n)


cdef inline void record_properties(const unsigned char* record, const unsigned char** props,
                                   Py_ssize_t* props_len, const unsigned char** topic,
                                   Py_ssize_t* topic_len) noexcept nogil:
    """Where the topic and the properties of a (checked) record are."""
    cdef Py_ssize_t body_len = load_be32(record + REC_BODYLEN)                    # 15 BODYLEN
    cdef const unsigned char* p = record + REC_BODY + body_len
    topic_len[0] = p[0]                                                           # 16 TOPICLEN
    topic[0] = p + 1
    p += 1 + p[0]
    props_len[0] = load_be16(p)                                                   # 17 PROPLEN
    props[0] = p + 2


cdef inline void write_record(unsigned char* p, int32_t total, uint32_t body_crc, int32_t queue_id,
                              int32_t flag, int64_t queue_offset, int64_t phy_offset, int32_t sys_flag,
                              int64_t born_timestamp, uint32_t born_ip, int32_t born_port,
                              int64_t store_timestamp, uint32_t store_ip, int32_t store_port,
                              int32_t reconsume_times, int64_t prepared_tx_offset,
                              const unsigned char* body, Py_ssize_t body_len,
                              const unsigned char* topic, Py_ssize_t topic_len,
                              const unsigned char* props, Py_ssize_t props_len) noexcept nogil:
    """Lay out one record of ``total`` bytes at p (the caller checked the limits)."""
    store_be32(p + REC_TOTALSIZE, <uint32_t>total)                                # 1 TOTALSIZE
    store_be32(p + REC_MAGIC, MESSAGE_MAGIC_CODE)                                 # 2 MAGIC
    store_be32(p + REC_BODYCRC, body_crc)                                         # 3 BODYCRC
    store_be32(p + REC_QUEUEID, <uint32_t>queue_id)                               # 4 QUEUEID
    store_be32(p + REC_FLAG, <uint32_t>flag)                                      # 5 FLAG
    store_be64(p + REC_QUEUEOFFSET, <uint64_t>queue_offset)                       # 6 QUEUEOFFSET
    store_be64(p + REC_PHYSICALOFFSET, <uint64_t>phy_offset)                      # 7 PHYSICALOFFSET
    store_be32(p + REC_SYSFLAG, <uint32_t>sys_flag)                               # 8 SYSFLAG
    store_be64(p + REC_BORNTIMESTAMP, <uint64_t>born_timestamp)                   # 9 BORNTIMESTAMP
    store_be32(p + REC_BORNHOST, born_ip)                                         # 10 BORNHOST ip
    store_be32(p + REC_BORNHOST + 4, <uint32_t>born_port)                         #    + port
    store_be64(p + REC_STORETIMESTAMP, <uint64_t>store_timestamp)                 # 11 STORETIMESTAMP
    store_be32(p + REC_STOREHOST, store_ip)                                       # 12 STOREHOST ip
    store_be32(p + REC_STOREHOST + 4, <uint32_t>store_port)                       #    + port
    store_be32(p + REC_RECONSUMETIMES, <uint32_t>reconsume_times)                 # 13 RECONSUMETIMES
    store_be64(p + REC_PREPARED_TX_OFFSET, <uint64_t>prepared_tx_offset)          # 14 PREPARED_TX_OFFSET
    store_be32(p + REC_BODYLEN, <uint32_t>body_len)                               # 15 BODYLEN
    memcpy(p + REC_BODY, body, body_len)                                          #    + body
    p += REC_BODY + body_len
    p[0] = <uint8_t>topic_len                                                     # 16 TOPICLEN
    memcpy(p + 1, topic, topic_len)                                               #    + topic
    p += 1 + topic_len
    store_be16(p, <uint16_t>props_len)                                            # 17 PROPLEN
    memcpy(p + 2, props, props_len)                                               #    + properties


cdef inline void write_end_of_file(unsigned char* p, int32_t remaining) noexcept nogil:
    """The EOF marker: the ``remaining`` bytes of a file from p are blank (the next record did not fit)."""
    store_be32(p + REC_TOTALSIZE, <uint32_t>remaining)                            # 1 TOTALSIZE
    store_be32(p + REC_MAGIC, BLANK_MAGIC_CODE)                                   # 2 MAGIC (EOF)
