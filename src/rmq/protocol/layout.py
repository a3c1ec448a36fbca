"""Byte layouts of a stored CommitLog record and of a broker msgId, mirrored once from the compiled
record codec's ``.pxd`` for Python code (docs/store-format.md#commitlog-record). Clients decode pulled records with
them, the store writes them, admin tools read msgIds: one layout for all.

    CommitLog record (v1, IPv4, big-endian), fixed overhead 91 bytes
    offset  field                     offset  field
         0   1 TOTALSIZE   int32          56  11 STORETIMESTAMP    int64
         4   2 MAGIC       int32          64  12 STOREHOST         4 ip + int32 port
         8   3 BODYCRC     int32          72  13 RECONSUMETIMES    int32
        12   4 QUEUEID     int32          76  14 PREPARED_TX_OFFSET int64
        16   5 FLAG        int32          84  15 BODYLEN int32 + body (at 88)
        20   6 QUEUEOFFSET int64      88+b    16 TOPICLEN int8 + topic
        28   7 PHYSICALOFFSET int64   89+b+t  17 PROPLEN int16 + properties
        36   8 SYSFLAG     int32
        40   9 BORNTIMESTAMP int64
        48  10 BORNHOST    4 ip + int32 port
    End of file: [int32 remaining][int32 BLANK_MAGIC_CODE]

    msgId (16 bytes, 32 uppercase hex): 0 store IPv4 | 4 int32 store port | 8 int64 physical offset

A test checks every value against the compiled codec's ``LAYOUT``.
"""

from __future__ import annotations

import struct

from rmq.protocol.message import PROPERTIES_MAX_LENGTH, TOPIC_MAX_LENGTH

MESSAGE_MAGIC_CODE = 0xDAA320A7
BLANK_MAGIC_CODE = 0xCBD43194

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
REC_FIXED_OVERHEAD = 91
END_FILE_MIN_BLANK_LENGTH = 8
# the record keeps the topic behind an int8 length and the properties behind an int16 one
TOPIC_MAX_BYTES = TOPIC_MAX_LENGTH
PROPERTIES_MAX_BYTES = PROPERTIES_MAX_LENGTH

MSGID_STORE_IP = 0
MSGID_STORE_PORT = 4
MSGID_PHY_OFFSET = 8
MSGID_BYTES = 16

# What check_record says of the bytes at a position: a size > 0 is a valid record, these are not.
CHECK_END_OF_FILE = 0  # the EOF marker: the rest of this file is blank
CHECK_EMPTY = -1  # zeros: nothing was ever written here
CHECK_TRUNCATED = -2  # the header claims more bytes than there are
CHECK_BAD_MAGIC = -3
CHECK_BAD_LENGTHS = -4  # body/topic/properties lengths do not add up to TOTALSIZE
CHECK_BAD_OFFSET = -5  # PHYSICALOFFSET is not where the record sits (a stale record)
CHECK_BAD_CRC = -6

CHECK_RESULTS = {
    CHECK_END_OF_FILE: "end-of-file marker",
    CHECK_EMPTY: "empty",
    CHECK_TRUNCATED: "truncated",
    CHECK_BAD_MAGIC: "bad magic",
    CHECK_BAD_LENGTHS: "lengths do not add up",
    CHECK_BAD_OFFSET: "physical offset field does not match the position",
    CHECK_BAD_CRC: "body CRC mismatch",
}

# fields 1..14 + BODYLEN: everything before the body
RECORD_HEAD = struct.Struct(">iIiiiqqiq4siq4siiqi")
