"""Which brokers are alive, as this controller heard them (RocketMQ 5.x's DefaultBrokerHeartbeatManager).

Not replicated: a broker heartbeats to every controller (BROKER_HEARTBEAT), so each member knows on
its own, and a new leader knows at once. A broker is alive while its last heartbeat (or registration)
is younger than the timeout it announced (``heartbeatTimeoutMills``). What an election weighs (epoch,
max offset, electionPriority) comes with each heartbeat.

A controller that has just started has heard nobody yet: until it has run for the longest timeout
its brokers announced, it does not call a master dead
(``may_judge``), or a restarted leader would elect while the master's first heartbeat is on its way.

Called on the event loop thread only (requests, the scan); no lock.
"""

from __future__ import annotations

import time

from rmq.protocol.controller import HEARTBEAT_TIMEOUT_MILLIS_DEFAULT, BrokerHeartbeat

BrokerKey = tuple[str, str, int]


class BrokerLiveTable:
    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        self._started = clock()
        #: (cluster, broker name, broker id) -> (last heard, its heartbeat)
        self._live: dict[BrokerKey, tuple[float, BrokerHeartbeat]] = {}

    def on_heartbeat(self, heartbeat: BrokerHeartbeat) -> None:
        key = (heartbeat.cluster_name, heartbeat.broker_name, heartbeat.broker_id)
        self._live[key] = (self._clock(), heartbeat)

    def on_register(self, cluster_name: str, broker_name: str, broker_id: int, address: str) -> None:
        """A registration is a sign of life: it refreshes the broker's last heartbeat (keeping what
        that said), or stands for one with HEARTBEAT_TIMEOUT_MILLIS_DEFAULT until the first comes."""
        key = (cluster_name, broker_name, broker_id)
        entry = self._live.get(key)
        heartbeat = (
            entry[1]
            if entry is not None and entry[1].broker_addr == address
            else BrokerHeartbeat(
                cluster_name, broker_name, address, broker_id, 0, 0, 0, HEARTBEAT_TIMEOUT_MILLIS_DEFAULT
            )
        )
        self._live[key] = (self._clock(), heartbeat)

    def is_alive(self, cluster_name: str, broker_name: str, broker_id: int) -> bool:
        entry = self._live.get((cluster_name, broker_name, broker_id))
        if entry is None:
            return False
        heard, heartbeat = entry
        return self._clock() - heard <= heartbeat.heartbeat_timeout_millis / 1000

    def heartbeat(self, cluster_name: str, broker_name: str, broker_id: int) -> BrokerHeartbeat | None:
        entry = self._live.get((cluster_name, broker_name, broker_id))
        return None if entry is None else entry[1]

    def may_judge(self) -> bool:
        """Whether this controller has run long enough to take silence for death: the longest
        timeout its brokers announced, HEARTBEAT_TIMEOUT_MILLIS_DEFAULT before any did."""
        timeouts = [hb.heartbeat_timeout_millis for _, hb in self._live.values()]
        longest = max(timeouts) if timeouts else HEARTBEAT_TIMEOUT_MILLIS_DEFAULT
        return self._clock() - self._started >= longest / 1000
