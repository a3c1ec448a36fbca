"""Byte layouts of the store files, mirrored once from ``rmq/_store.pxd`` for Python code.

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

    ConsumeQueue entry (20 bytes): 0 int64 commitLogOffset | 8 int32 size | 12 int64 tagsCode
    checkpoint (4 KiB): 0 physicMsgTimestamp | 8 logicsMsgTimestamp | 16 indexMsgTimestamp (int64)
    msgId (16 bytes, 32 hex): 0 store IPv4 | 4 int32 store port | 8 int64 physical offset

tests/store/test_layout.py checks every value against the compiled ``rmq._store.LAYOUT``.
"""

from __future__ import annotations

import struct

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
TOPIC_MAX_BYTES = 127
PROPERTIES_MAX_BYTES = 32767

CQ_COMMITLOG_OFFSET = 0
CQ_SIZE = 8
CQ_TAGS_CODE = 12
CQ_STORE_UNIT_SIZE = 20
CQ_BLANK_SIZE = 0x7FFFFFFF

CHECKPOINT_PHYSIC_TIMESTAMP = 0
CHECKPOINT_LOGICS_TIMESTAMP = 8
CHECKPOINT_INDEX_TIMESTAMP = 16
CHECKPOINT_FILE_SIZE = 4096

MSGID_STORE_IP = 0
MSGID_STORE_PORT = 4
MSGID_PHY_OFFSET = 8
MSGID_BYTES = 16

# fields 1..14 + BODYLEN: everything before the body
RECORD_HEAD = struct.Struct(">iIiiiqqiq4siq4siiqi")
CQ_ENTRY = struct.Struct(">qiq")
