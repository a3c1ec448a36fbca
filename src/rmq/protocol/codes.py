"""Every remoting request code and response code (docs/protocol.md#request-codes), defined once.

Use these names everywhere; no literal code numbers elsewhere in rmq. The frame's own constants
(flag bits, serialize types, the version rmq reports) are ``rmq.net.frame``'s.
"""

from __future__ import annotations

from enum import IntEnum


class RequestCode(IntEnum):
    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    # Properties text of the settings to change live -> SUCCESS, or NO_PERMISSION naming why not
    UPDATE_BROKER_CONFIG = 25
    # {} -> the broker's settings as Properties text, and its config dataVersion ("version")
    GET_BROKER_CONFIG = 26
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    # a consumer asks whether a broker can filter by its subscription (Java's SQL92 consumers, at start)
    CHECK_CLIENT_CONFIG = 46
    # the name server's KV config (namespace, key -> value), e.g. ORDER_TOPIC_CONFIG for ordered topics
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    # {producerGroup} -> ProducerConnection: the group's online producers
    GET_PRODUCER_CONNECTION_LIST = 204
    # {brokerName} -> {wipeTopicCount}: the name server takes write permission off the broker's routes
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    RESET_CONSUMER_CLIENT_OFFSET = 220
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    # {consumerGroup, clientId, jstackEnable} -> ConsumerRunningInfo; the broker forwards it to that
    # client's connection and relays the client's answer (rmq.protocol.running_info)
    GET_CONSUMER_RUNNING_INFO = 307
    # {consumerGroup, clientId, msgId, ...} -> ConsumeMessageDirectlyResult, forwarded the same way
    # with the stored message as the body
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    # {statsName, statsKey} -> BrokerStatsData: a stat's sum and rate over the last minute, hour, day
    VIEW_BROKER_STATS_DATA = 315
    # {isOrder} -> ConsumeStatsList: every group's ConsumeStats on this broker (mqadmin brokerConsumeStats)
    GET_BROKER_CONSUME_STATS = 317
    SEND_BATCH_MESSAGE = 320
    QUERY_DATA_VERSION = 322
    # {brokerName} -> {addTopicCount}: gives it back (RocketMQ 4.9's)
    ADD_WRITE_PERM_OF_BROKER = 327
    # RocketMQ 5.x: one topic's config (GetTopicConfigRequestHeader {topic}), attributes included
    GET_TOPIC_CONFIG = 351
    # RocketMQ 5.x: one consumer group's config ({group}), for a 5.x client's settings
    GET_SUBSCRIPTIONGROUP_CONFIG = 352
    # RocketMQ 5.x controller mode (rmq.protocol.controller): a broker's heartbeat to every controller
    BROKER_HEARTBEAT = 904
    CONTROLLER_ALTER_SYNC_STATE_SET = 1001
    CONTROLLER_ELECT_MASTER = 1002
    CONTROLLER_REGISTER_BROKER = 1003
    CONTROLLER_GET_REPLICA_INFO = 1004
    CONTROLLER_GET_METADATA_INFO = 1005
    CONTROLLER_GET_SYNC_STATE_DATA = 1006
    # the controller tells a broker of its broker set's new master (or master epoch)
    NOTIFY_BROKER_ROLE_CHANGED = 1008
    CONTROLLER_GET_NEXT_BROKER_ID = 1012
    CONTROLLER_APPLY_BROKER_ID = 1013
    # RocketMQ 5.x POP consumption (rmq.protocol.pop, docs/pop.md)
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    BATCH_ACK_MESSAGE = 200151

    # rmq's own requests, with no RocketMQ counterpart (documented in the README's protocol section);
    # numbered from 9100, far from RocketMQ's codes.
    # {startOffset, endOffset, rangeSize} -> CommitLog digests (rmq.protocol.replica.CommitLogDigests)
    GET_COMMIT_LOG_DIGESTS = 9100
    # {} -> a master's replication per slave (rmq.protocol.replica.HAStatus)
    GET_HA_STATUS = 9101
    # {} -> the master's epoch table and max offset (rmq.protocol.replica.EpochTable); a slave asks
    # it before it replicates
    GET_EPOCH_TABLE = 9102
    # {role?} -> a slave becomes the master of its broker name with a new epoch ({epoch, startOffset})
    PROMOTE_TO_MASTER = 9103
    # {} -> the timer store's checkpoint (JSON, rmq.broker.timer); a slave copies its master's
    GET_TIMER_CHECKPOINT = 9104
    # {consumerGroup, topic?} -> a POP group's queues: offsets, invisible and acked messages
    # (PopConsumeStats, rmq.broker.processor.pop_admin)
    GET_POP_CONSUME_STATS = 9105


class ResponseCode(IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    # a request's value is out of what the broker accepts (POP's maxMsgNums > 32, queueId out of range)
    INVALID_PARAMETER = 29
    CONSUMER_NOT_ONLINE = 206
    # a client the broker forwarded a request to (GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY)
    # did not answer in time
    CONSUME_MSG_TIMEOUT = 207
    # POP: the popped message is not there any more (an ack of a checkpoint already revived or gone)
    NO_MESSAGE = 208
    # POP long polling: too many polls parked / the poll ended with nothing to pop
    POLLING_FULL = 209
    POLLING_TIMEOUT = 210
    # RocketMQ 5.x controller mode's code: a master's epoch is older than the routed master's. An rmq
    # name server answers it to a REGISTER_BROKER of a second, stale master of a broker name.
    CONTROLLER_FENCED_MASTER_EPOCH = 2000
    # the rest of controller mode's answers (rmq.protocol.controller), RocketMQ 5.x's numbers
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001
    CONTROLLER_INVALID_MASTER = 2002
    CONTROLLER_INVALID_REPLICAS = 2003
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010
    CONTROLLER_MASTER_STILL_EXIST = 2011
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013
    CONTROLLER_BROKER_ID_INVALID = 2014


# A producer treats these as "stored, but degraded" (docs/protocol.md#response-codes).
DEGRADED_SEND_CODES = frozenset(
    {ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT}
)
