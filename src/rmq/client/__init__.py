"""The client SDK: producers and consumers as RocketMQ users know them (issue 5).

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
"""

from rmq.client.allocate import allocate_average, allocate_average_by_circle
from rmq.client.message import Message, MessageExt, MessageQueue
from rmq.client.producer import Producer, select_by_hash
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

__all__ = [
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyStatus",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "Producer",
    "PullResult",
    "PullStatus",
    "SendResult",
    "SendStatus",
    "allocate_average",
    "allocate_average_by_circle",
    "select_by_hash",
]
