"""Topic routes from the name server, and the queue lists producers and consumers derive from them.

A GET_ROUTEINFO_BY_TOPIC body (docs/nameserver.md#routes)::

    {"brokerDatas": [{"brokerAddrs": {"0": "127.0.0.1:10911"}, "brokerName": "broker-a",
                      "cluster": "DefaultCluster"}],
     "queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 4,
                     "writeQueueNums": 4, "topicSysFlag": 0}], "filterServerTable": {}}

Java name servers write the brokerAddrs ids unquoted (``{0:"..."}``); both forms are read.
Producers write only to masters (id 0) of writable queue data; consumers read every readable queue.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

from rmq.errors import ClientError
from rmq.protocol.java_json import loads_java_json
from rmq.protocol.message_queue import MessageQueue
from rmq.protocol.perm import is_readable, is_writeable, perm_to_string
from rmq.protocol.route import MASTER_ID, BrokerData, QueueData


def master_addr(broker: BrokerData) -> str | None:
    return broker.broker_addrs.get(MASTER_ID)


@dataclass(frozen=True)
class TopicRouteData:
    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]

    @classmethod
    def from_json(cls, body: bytes | str) -> TopicRouteData:
        try:
            obj = loads_java_json(body.decode() if isinstance(body, (bytes, bytearray)) else body)
            queue_datas = tuple(
                QueueData(
                    str(q["brokerName"]),
                    int(q["readQueueNums"]),
                    int(q["writeQueueNums"]),
                    int(q["perm"]),
                    int(q.get("topicSysFlag", 0)),
                )
                for q in obj.get("queueDatas") or []
            )
            broker_datas = tuple(
                BrokerData(
                    str(b.get("cluster", "")),
                    str(b["brokerName"]),
                    {int(k): str(v) for k, v in (b.get("brokerAddrs") or {}).items()},
                )
                for b in obj.get("brokerDatas") or []
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ClientError(f"malformed topic route from the name server: {type(exc).__name__}: {exc}") from None
        return cls(queue_datas, broker_datas)

    def broker(self, broker_name: str) -> BrokerData | None:
        for b in self.broker_datas:
            if b.broker_name == broker_name:
                return b
        return None


@dataclass
class TopicPublishInfo:
    """The write queues of a topic's masters, and the round-robin cursor over them."""

    topic: str
    message_queues: list[MessageQueue]
    order_topic: bool = False
    _counter: Iterator[int] = field(default_factory=itertools.count, repr=False)

    @classmethod
    def from_route(cls, topic: str, route: TopicRouteData) -> TopicPublishInfo:
        queues: list[MessageQueue] = []
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if not is_writeable(qd.perm):
                continue
            broker = route.broker(qd.broker_name)
            if broker is None or master_addr(broker) is None:
                continue
            queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
        return cls(topic, queues)

    @property
    def ok(self) -> bool:
        return bool(self.message_queues)

    def next_index(self) -> int:
        return next(self._counter)

    def select_one(self, last_broker_name: str | None = None) -> MessageQueue:
        """Round robin, avoiding ``last_broker_name`` (the broker the previous try failed on)
        while another broker has queues."""
        queues = self.message_queues
        if not queues:
            raise ClientError(f"topic {self.topic!r} has no writable queue")
        if last_broker_name is not None:
            for _ in range(len(queues)):
                mq = queues[self.next_index() % len(queues)]
                if mq.broker_name != last_broker_name:
                    return mq
        return queues[self.next_index() % len(queues)]

    def write_queue_nums(self, broker_name: str) -> int:
        return sum(1 for mq in self.message_queues if mq.broker_name == broker_name)


def why_unwritable(route: TopicRouteData) -> str:
    """Why ``from_route`` found no queue to send to in a route that has the topic: per broker
    name, no master registered (it died or stopped; its slaves may still be routed) or queues
    that do not take writes."""
    reasons = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        broker = route.broker(qd.broker_name)
        if broker is None or master_addr(broker) is None:
            slaves = ", ".join(f"{i} at {a}" for i, a in sorted(broker.broker_addrs.items())) if broker else ""
            reason = f"broker {qd.broker_name!r} has no master alive"
            if slaves:
                reason += f" (slaves: {slaves}; sends resume when its master is back or a slave is promoted)"
            reasons.append(reason)
        elif not is_writeable(qd.perm):
            reasons.append(f"broker {qd.broker_name!r} takes no writes of it (perm {perm_to_string(qd.perm)})")
        elif qd.write_queue_nums <= 0:
            reasons.append(f"broker {qd.broker_name!r} has 0 write queues of it")
    return "; ".join(reasons) or "the route lists no queue"


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """The queues a consumer of ``topic`` reads: every readable queue, sorted."""
    return sorted(
        MessageQueue(topic, qd.broker_name, i)
        for qd in route.queue_datas
        if is_readable(qd.perm)
        for i in range(qd.read_queue_nums)
    )
