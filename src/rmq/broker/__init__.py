"""The broker: serves producers and consumers over the store.

Running parts:

    controller           BrokerController: store, managers, processors, server, timers, registration
    processor/           the request processors, one module per area (PROCESSORS lists them)
    long_polling         pulls parked until a message arrives (PullRequestHoldService)
    namesrv_api          REGISTER_BROKER / UNREGISTER_BROKER to every name server
    schedule             ScheduleMessageService: delayed messages delivered when due (master only)

Pure bookkeeping, no sockets and no store, one role per module (the wire bodies they read, such
as heartbeats and subscriptions, are ``rmq.protocol``'s):

    config               BrokerConfig, broker.conf parsing, --set overrides
    config_manager       config/*.json: atomic persist, .bak fallback, DataVersion
    topic_config         TopicConfigManager: system topics, TBW102 auto-creation (topics.json)
    consumer_offset      ConsumerOffsetManager (consumerOffset.json)
    subscription_group   SubscriptionGroupManager (subscriptionGroup.json)
    delay                delay levels, DelayOffsetManager (delayOffset.json)
    client_channel       ClientChannelInfo, the 120 s client expiry
    consumer_manager     online consumers by group, membership-change signals
    producer_manager     online producers by group (transaction checks)
    client_manager       heartbeats in, groups to notify out; channel close and expiry
    rebalance_lock       LOCK_BATCH_MQ / UNLOCK_BATCH_MQ queue locks
"""
