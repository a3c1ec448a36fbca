"""RocketMQ 5.x's gRPC protocol (``apache.rocketmq.v2.MessagingService``): the classes generated from
Apache's ``.proto`` files (``v2``; see generate.py and proto/README.md), for the broker's gRPC
endpoint and for tests that speak it."""
