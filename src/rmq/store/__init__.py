"""The message store: CommitLog, ConsumeQueues and IndexFile on disk (docs/store-format.md).

    from rmq.store import MessageStore, MessageStoreConfig
    with MessageStore(MessageStoreConfig(store_path_root_dir="/tmp/store")) as store:
        r = store.put_message("TopicA", 0, b"body", b"TAGS\\x01a\\x02")
        got = store.get_message("group", "TopicA", 0, 0, 32)

The records it stores are read with ``rmq.protocol.record`` (``decode_record``, msgIds).
"""

from rmq.store._store import GetMessageResult, PutMessageResult, TagFilter
from rmq.store.config import FlushDiskType, MessageStoreConfig
from rmq.store.message_store import MessageStore, QueryMessageResult, new_store
from rmq.store.status import GetMessageStatus, PutMessageStatus

__all__ = [
    "FlushDiskType",
    "GetMessageResult",
    "GetMessageStatus",
    "MessageStore",
    "MessageStoreConfig",
    "PutMessageResult",
    "PutMessageStatus",
    "QueryMessageResult",
    "TagFilter",
    "new_store",
]
