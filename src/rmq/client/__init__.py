"""The client SDK: producers and consumers as RocketMQ users know them.

    from rmq.client import Message, Producer, PushConsumer, ConsumeConcurrentlyStatus

    with Producer("my-producers", namesrv_addr="127.0.0.1:9876") as producer:
        producer.send(Message("TopicTest", b"hello", tags="TagA"))

One module per role:

    message     Message, MessageExt, pulled-body decoding, batch encoding, validation
    msg_id      client-side message ids (UNIQ_KEY)
    results     SendResult/SendStatus, PullResult/PullStatus, listener statuses, consumer enums
    route       topic routes, publish queues, subscribe queues
    fault       latency fault tolerance for queue selection
    allocate    how a group shares queues ("average", "average_by_circle")
    api         the requests and their answers (RocketMQ's MQClientAPIImpl)
    scheduler   the timer thread of periodic jobs
    instance    what the clients of a process share (RocketMQ's MQClientInstance)
    producer    Producer
    transaction_producer  TransactionProducer: messages delivered only if a local transaction commits
    offset_store  consumer offsets on the broker (clustering) or in a local file (broadcasting)
    process_queue the messages of one queue between pull and commit
    consumer    what both consumers share: rebalance, long-polling pulls, offsets
    push_consumer PushConsumer (concurrent and orderly listeners)
    pull_consumer PullConsumer (lite pull: poll, commit, seek)
"""

from rmq.client.allocate import allocate_average, allocate_average_by_circle
from rmq.client.consumer import MessageSelector
from rmq.client.message import Message, MessageExt, MessageQueue
from rmq.client.producer import Producer, select_by_hash
from rmq.client.pull_consumer import PullConsumer
from rmq.client.push_consumer import PushConsumer
from rmq.client.results import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    MessageModel,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
)
from rmq.client.transaction_producer import LocalTransactionState, TransactionProducer, TransactionSendResult

__all__ = [
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyStatus",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "LocalTransactionState",
    "MessageSelector",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "PullResult",
    "PullStatus",
    "SendResult",
    "SendStatus",
    "TransactionProducer",
    "TransactionSendResult",
    "allocate_average",
    "allocate_average_by_circle",
    "select_by_hash",
]
