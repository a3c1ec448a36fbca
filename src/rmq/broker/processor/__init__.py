"""The broker's request processors, one module per area. Each is a class taking the controller,
with ``handlers() -> {request code: handler(channel, request)}``.

``PROCESSORS`` is the one list the controller registers, in order (a later class's handler for a
code replaces an earlier one's).
"""

from rmq.broker.processor.client_manage import ClientManageProcessor
from rmq.broker.processor.consumer_manage import ConsumerManageProcessor
from rmq.broker.processor.pull import PullProcessor
from rmq.broker.processor.queue_offset import QueueOffsetProcessor
from rmq.broker.processor.send import SendProcessor
from rmq.broker.processor.topic import TopicProcessor

PROCESSORS = [
    SendProcessor,
    PullProcessor,
    ConsumerManageProcessor,
    ClientManageProcessor,
    QueueOffsetProcessor,
    TopicProcessor,
]

__all__ = ["PROCESSORS"]
