"""The broker: serves producers and consumers over the store (issue 4).

Running parts:

    controller           BrokerController: store, managers, processors, server, timers, registration
    processor/           the request processors, one module per area (PROCESSORS lists them)
    long_polling         pulls parked until a message arrives (PullRequestHoldService)
    namesrv_api          REGISTER_BROKER / UNREGISTER_BROKER to every name server

Pure bookkeeping, no sockets and no store, one role per module:

    config               BrokerConfig, broker.conf parsing, --set overrides
    config_manager       config/*.json: atomic persist, .bak fallback, DataVersion
    topic_config         TopicConfigManager: system topics, TBW102 auto-creation (topics.json)
    consumer_offset      ConsumerOffsetManager (consumerOffset.json)
    subscription_group   SubscriptionGroupManager (subscriptionGroup.json)
    delay                delay levels, DelayOffsetManager (delayOffset.json)
    subscription         SubscriptionData: tag expressions, tagsCode and exact tag matching
    heartbeat            HEART_BEAT bodies, both enum spellings
    client_channel       ClientChannelInfo, the 120 s client expiry
    consumer_manager     online consumers by group, membership-change signals
    producer_manager     online producers by group (transaction checks)
    client_manager       heartbeats in, groups to notify out; channel close and expiry
    rebalance_lock       LOCK_BATCH_MQ / UNLOCK_BATCH_MQ queue locks
"""
