"""Data that crosses the wire, shared by clients, brokers and name servers (RocketMQ's
``common.protocol``): message queues and lock bodies, heartbeats and subscriptions, topic routes,
and the JSON dialect Java peers write. Nothing here depends on the store, the broker or the client.
"""
