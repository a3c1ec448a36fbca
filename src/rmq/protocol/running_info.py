"""What an admin asks of one client through a broker, and of a broker's figures, with 4.x's header
fields and JSON bodies (RocketMQ's remoting.protocol.body and .header classes of the same names):

    GET_PRODUCER_CONNECTION_LIST (204)  {producerGroup}
        -> ProducerConnection {"connectionSet":[{"clientId","clientAddr","language","version"}]}
    GET_CONSUMER_RUNNING_INFO (307)     {consumerGroup, clientId, jstackEnable}
        -> ConsumerRunningInfo {"properties":{name: str}, "subscriptionSet":[SubscriptionData],
           "mqTable":{{mq}: ProcessQueueInfo}, "statusTable":{topic: ConsumeStatus},
           "jstack"?: str}
    CONSUME_MESSAGE_DIRECTLY (309)      {consumerGroup, clientId, msgId, topic?, brokerName}
        + body: the stored record (the broker reads it by msgId and adds brokerName)
        -> ConsumeMessageDirectlyResult {"order","autoCommit","consumeResult":CMResult,"remark",
           "spentTimeMills"}
    VIEW_BROKER_STATS_DATA (315)        {statsName, statsKey}
        -> BrokerStatsData {"statsMinute"|"statsHour"|"statsDay": {"sum","tps","avgpt"}}
    GET_BROKER_CONSUME_STATS (317)      {isOrder}
        -> ConsumeStatsList {"brokerAddr","totalDiff","totalInflightDiff",
           "consumeStatsList":[{group: [ConsumeStats {"consumeTps","offsetTable":{{mq}: OffsetWrapper}}]}]}

307 and 309 are answered by the client: the broker finds the client's connection among the group's
and relays its answer (CONSUME_MSG_TIMEOUT when none comes in time).
"""

from __future__ import annotations

import enum

# header fields
PRODUCER_GROUP = "producerGroup"
CONSUMER_GROUP = "consumerGroup"
CLIENT_ID = "clientId"
JSTACK_ENABLE = "jstackEnable"
MSG_ID = "msgId"
TOPIC = "topic"
BROKER_NAME = "brokerName"
STATS_NAME = "statsName"
STATS_KEY = "statsKey"
IS_ORDER = "isOrder"

# ConsumerRunningInfo.properties keys the Java client sets (mqadmin consumerStatus reads them)
PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"


class CMResult(enum.Enum):
    """How a listener took a message handed to it directly (ConsumeMessageDirectlyResult.consumeResult)."""

    CR_SUCCESS = "CR_SUCCESS"
    CR_LATER = "CR_LATER"
    CR_ROLLBACK = "CR_ROLLBACK"
    CR_COMMIT = "CR_COMMIT"
    CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
    CR_RETURN_NULL = "CR_RETURN_NULL"


# VIEW_BROKER_STATS_DATA's stats names (RocketMQ's BrokerStatsManager): a topic's key is the topic,
# a group's ``topic@group``
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
STATS_WINDOWS = ("statsMinute", "statsHour", "statsDay")


def group_stats_key(topic: str, group: str) -> str:
    return f"{topic}@{group}"
