"""Requests timed into RocketMQ 5.x's ``rocketmq_rpc_latency`` buckets: the one table the broker's
remoting server (rmq.broker.metrics) and the gRPC endpoint (rmq.proxy) both fill, and the broker's
Prometheus collector reads. Neutral, so the two roles share it without importing each other: the
command that starts both (rmq.cli.broker) hands the proxy's table to the collector.

A table is written by one thread (its owner's loop) and read by scrapes on another: a scrape copies
each row, so it may see a row a moment old, never a torn one that matters to a counter.
"""

from __future__ import annotations

import bisect
from typing import Any

# RocketMQ 5.x's buckets (RemotingMetricsManager's rpcCostTimeBuckets), ms
RPC_LATENCY_BOUNDS_MS = (1, 3, 5, 7, 10, 100, 1000)
# RocketMQ's protocol_type label values (RemotingMetricsConstant, ChannelProtocolType)
PROTOCOL_REMOTING = "remoting"
PROTOCOL_GRPC = "grpc_v2"


class LatencyTable:
    """Per key (request, response): counts per RPC_LATENCY_BOUNDS_MS bucket (the last one above them
    all), then the sum of ms. The caller bounds the keys (known codes only), so a client cannot grow
    the table."""

    __slots__ = ("table",)

    def __init__(self) -> None:
        self.table: dict[tuple[Any, Any], list[float]] = {}

    def observe_key(self, key: tuple[Any, Any], seconds: float) -> None:
        counts = self.table.get(key)
        if counts is None:
            counts = self.table[key] = [0] * (len(RPC_LATENCY_BOUNDS_MS) + 2)
        ms = seconds * 1000.0
        counts[bisect.bisect_left(RPC_LATENCY_BOUNDS_MS, ms)] += 1
        counts[-1] += ms

    def snapshot(self) -> list[tuple[tuple[Any, Any], list[float]]]:
        return [(key, list(counts)) for key, counts in list(self.table.items())]
