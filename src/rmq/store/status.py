"""Outcomes of a put and of a get, with RocketMQ's names and order (values are the compiled core's codes)."""

from __future__ import annotations

import enum


class PutMessageStatus(enum.IntEnum):
    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPPED_FILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGECACHE_BUSY = 8
    UNKNOWN_ERROR = 9


class GetMessageStatus(enum.IntEnum):
    FOUND = 0
    NO_MATCHED_MESSAGE = 1
    MESSAGE_WAS_REMOVING = 2
    OFFSET_FOUND_NULL = 3
    OFFSET_OVERFLOW_BADLY = 4
    OFFSET_OVERFLOW_ONE = 5
    OFFSET_TOO_SMALL = 6
    NO_MATCHED_LOGIC_QUEUE = 7
    NO_MESSAGE_IN_QUEUE = 8
