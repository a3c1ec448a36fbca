"""The broker's request processors, one module per area. Each is a class taking the controller,
with ``handlers() -> {request code: handler(channel, request)}``.

    send            SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320)
    pull            PULL_MESSAGE (11), long polling
    consumer_manage, client_manage, queue_offset, topic: offsets, heartbeats, queue offsets, topics
    send_back       CONSUMER_SEND_MSG_BACK (36): %RETRY%<group>, delays, %DLQ%<group>
    end_transaction END_TRANSACTION (37): commit or roll back a half message
    query           QUERY_MESSAGE (12, by key), VIEW_MESSAGE_BY_ID (33)
    lock            LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42)
    admin_broker    what rmq-admin (and mqadmin) asks a broker: topic configs and stats, consume
                    stats, offset reset, topic deletion, connections, runtime info
    admin_clients   who is connected (producer connections, a consumer's running info, consume a
                    message directly on a client: the broker forwards those two) and
                    VIEW_BROKER_STATS_DATA's figures
    pop             POP_MESSAGE (200050), ACK_MESSAGE (200051), CHANGE_MESSAGE_INVISIBLETIME (200053)
    subscription_group  UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), DELETE_SUBSCRIPTIONGROUP (207)
    broker_config   GET_BROKER_CONFIG (26), UPDATE_BROKER_CONFIG (25): settings that change live
    pop_admin       rmq's own GET_POP_CONSUME_STATS (9105): a POP group's progress for rmq-admin
    replica         rmq's own replication requests: CommitLog digests for ha-verify
    base            header fields, refusals as responses (shared by all of them)

``PROCESSORS`` is the one list the controller registers, in order (a later class's handler for a
code replaces an earlier one's).
"""

from rmq.broker.processor.admin_broker import AdminBrokerProcessor
from rmq.broker.processor.admin_clients import ClientAdminProcessor
from rmq.broker.processor.broker_config import BrokerConfigProcessor
from rmq.broker.processor.client_manage import ClientManageProcessor
from rmq.broker.processor.consumer_manage import ConsumerManageProcessor
from rmq.broker.processor.end_transaction import EndTransactionProcessor
from rmq.broker.processor.lock import LockProcessor
from rmq.broker.processor.pop import PopProcessor
from rmq.broker.processor.pop_admin import PopAdminProcessor
from rmq.broker.processor.pull import PullProcessor
from rmq.broker.processor.query import QueryMessageProcessor
from rmq.broker.processor.queue_offset import QueueOffsetProcessor
from rmq.broker.processor.replica import ReplicaProcessor
from rmq.broker.processor.send import SendProcessor
from rmq.broker.processor.send_back import SendBackProcessor
from rmq.broker.processor.subscription_group import SubscriptionGroupProcessor
from rmq.broker.processor.topic import TopicProcessor

PROCESSORS = [
    SendProcessor,
    PullProcessor,
    ConsumerManageProcessor,
    ClientManageProcessor,
    QueueOffsetProcessor,
    TopicProcessor,
    SendBackProcessor,
    EndTransactionProcessor,
    QueryMessageProcessor,
    LockProcessor,
    AdminBrokerProcessor,
    ClientAdminProcessor,
    ReplicaProcessor,
    PopProcessor,
    PopAdminProcessor,
    SubscriptionGroupProcessor,
    BrokerConfigProcessor,
]

__all__ = ["PROCESSORS"]
