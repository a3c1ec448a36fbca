"""The broker's request processors, one module per area (RocketMQ's *Processor classes).

Each is a class built with the BrokerController; ``handlers()`` maps request codes to
``handler(channel, request) -> RemotingCommand | None`` (None: answered later, or oneway).

    send_back   CONSUMER_SEND_MSG_BACK (36): %RETRY%<group>, delays, %DLQ%<group>
    query       QUERY_MESSAGE (12, by key), VIEW_MESSAGE_BY_ID (33)
    lock        LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42)
    admin       what rmq-admin (and RocketMQ's mqadmin) asks a broker: topic configs and stats,
                consume stats, offset reset, topic deletion, connections, runtime info
    request     header fields, JSON bodies, refusals as responses (shared by all of them)
"""
