"""Byte layouts of the store's own files, mirrored once from ``rmq/store/_store.pxd`` for Python code.
(The CommitLog record and the msgId, which clients read too, are ``rmq.protocol.layout``'s.)

    ConsumeQueue entry (20 bytes): 0 int64 commitLogOffset | 8 int32 size | 12 int64 tagsCode
    checkpoint (4 KiB): 0 physicMsgTimestamp | 8 logicsMsgTimestamp | 16 indexMsgTimestamp (int64)

tests/store/test_layout.py checks every value against the compiled ``LAYOUT``.
"""

from __future__ import annotations

import struct

CQ_COMMITLOG_OFFSET = 0
CQ_SIZE = 8
CQ_TAGS_CODE = 12
CQ_STORE_UNIT_SIZE = 20
CQ_BLANK_SIZE = 0x7FFFFFFF

CHECKPOINT_PHYSIC_TIMESTAMP = 0
CHECKPOINT_LOGICS_TIMESTAMP = 8
CHECKPOINT_INDEX_TIMESTAMP = 16
CHECKPOINT_FILE_SIZE = 4096

CQ_ENTRY = struct.Struct(">qiq")
