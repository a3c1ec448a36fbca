"""The message store: CommitLog, ConsumeQueues and IndexFile on disk (SPEC.md sections 5-7).

    from rmq.store import MessageStore, MessageStoreConfig
    with MessageStore(MessageStoreConfig(store_path_root_dir="/tmp/store")) as store:
        r = store.put_message("TopicA", 0, b"body", b"TAGS\\x01a\\x02")
        got = store.get_message("group", "TopicA", 0, 0, 32)
"""

from rmq._store import (GetMessageResult, PutMessageResult, TagFilter, check_record, decode_msg_id,
                        encode_msg_id, ipv4_to_int)
from rmq.store.config import FlushDiskType, MessageStoreConfig
from rmq.store.message_store import MessageStore, QueryMessageResult, new_store
from rmq.store.record import StoredMessage, decode_record
from rmq.store.status import GetMessageStatus, PutMessageStatus

__all__ = [
    "FlushDiskType", "GetMessageResult", "GetMessageStatus", "MessageStore", "MessageStoreConfig",
    "PutMessageResult", "PutMessageStatus", "QueryMessageResult", "StoredMessage", "TagFilter",
    "check_record", "decode_msg_id", "decode_record", "encode_msg_id", "ipv4_to_int", "new_store",
]
