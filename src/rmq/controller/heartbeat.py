"""Which brokers are alive, as this controller heard them (RocketMQ 5.x's DefaultBrokerHeartbeatManager).

Not replicated: a broker heartbeats to every controller (BROKER_HEARTBEAT), so each member knows on
its own, and a new leader knows at once. A broker is alive while its last heartbeat (or registration)
is younger than the timeout it announced (``heartbeatTimeoutMills``). What an election weighs (epoch,
max offset, electionPriority) comes with each heartbeat.

A broker's heartbeats come over a kept connection: when the connection it last spoke over closes,
the broker is taken for gone at once, as if its heartbeats had timed out (RocketMQ's
onBrokerChannelClose). A SIGKILLed master's socket is closed by its kernel, so the leader can
elect in the moment instead of after controllerHeartBeatTimeoutMills and a scan. A broker that
reconnects has spoken over its new connection by the time the old one's close matters: only the
connection its last heartbeat or registration came over counts.

A controller that has just started has heard nobody yet: until it has run for the longest timeout
its brokers announced, it does not call a master dead
(``may_judge``), or a restarted leader would elect while the master's first heartbeat is on its way.
A closed connection is not silence but a sign of death, and counts at once.

Called on the event loop thread only (requests, the scan); no lock.
"""

from __future__ import annotations

import time
from typing import Any

from rmq.protocol.controller import HEARTBEAT_TIMEOUT_MILLIS_DEFAULT, BrokerHeartbeat

BrokerKey = tuple[str, str, int]


class BrokerLiveTable:
    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        self._started = clock()
        #: (cluster, broker name, broker id) -> (last heard, its heartbeat, the connection it came over)
        self._live: dict[BrokerKey, tuple[float, BrokerHeartbeat, Any]] = {}

    def on_heartbeat(self, heartbeat: BrokerHeartbeat, channel: Any = None) -> None:
        key = (heartbeat.cluster_name, heartbeat.broker_name, heartbeat.broker_id)
        self._live[key] = (self._clock(), heartbeat, channel)

    def on_register(
        self, cluster_name: str, broker_name: str, broker_id: int, address: str, channel: Any = None
    ) -> None:
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
        self._live[key] = (self._clock(), heartbeat, channel)

    def on_channel_closed(self, channel: Any) -> list[BrokerKey]:
        """The brokers whose last word came over ``channel``, now taken for gone (forgotten, as a
        broker never heard of); a broker that spoke over a newer connection since is not one of them."""
        gone = [key for key, (_, _, last) in self._live.items() if last is channel]
        for key in gone:
            del self._live[key]
        return gone

    def is_alive(self, cluster_name: str, broker_name: str, broker_id: int) -> bool:
        entry = self._live.get((cluster_name, broker_name, broker_id))
        if entry is None:
            return False
        heard, heartbeat, _ = entry
        return self._clock() - heard <= heartbeat.heartbeat_timeout_millis / 1000

    def heartbeat(self, cluster_name: str, broker_name: str, broker_id: int) -> BrokerHeartbeat | None:
        entry = self._live.get((cluster_name, broker_name, broker_id))
        return None if entry is None else entry[1]

    def may_judge(self) -> bool:
        """Whether this controller has run long enough to take silence for death: the longest
        timeout its brokers announced, HEARTBEAT_TIMEOUT_MILLIS_DEFAULT before any did."""
        timeouts = [hb.heartbeat_timeout_millis for _, hb, _ in self._live.values()]
        longest = max(timeouts) if timeouts else HEARTBEAT_TIMEOUT_MILLIS_DEFAULT
        return self._clock() - self._started >= longest / 1000
