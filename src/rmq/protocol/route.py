"""A topic's route as name servers answer GET_ROUTEINFO_BY_TOPIC (docs/nameserver.md#routes): which brokers
serve it (BrokerData: cluster, name, addresses by broker id) and with how many queues (QueueData)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# brokerId of the master of a brokerName; slaves have ids > 0.
MASTER_ID = 0


@dataclass
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        # Key order of Java's MapSortField encoding, which clients never rely on but people read.
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }


@dataclass
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }
