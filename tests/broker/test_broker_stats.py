"""VIEW_BROKER_STATS_DATA's figures (rmq.broker.broker_stats): a topic's puts and a group's gets
summed over the last minute, hour and day, on a real store, with a clock the test moves."""

from __future__ import annotations

from rmq.broker.broker_stats import BrokerStats
from rmq.broker.stats_log import GetCounts
from rmq.protocol.running_info import GROUP_GET_NUMS, TOPIC_PUT_NUMS, group_stats_key
from rmq.store import MessageStore
from tests.helpers.store import small_store_config

TOPIC = "StatsTopic"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_each_window_sums_what_came_within_it_and_nothing_from_before_the_start(store_dir):
    store = MessageStore(small_store_config(store_dir))
    store.start()
    try:
        for i in range(3):  # stored before the stats started: not counted
            store.put_message(TOPIC, 0, b"old %d" % i)
        clock, gets = Clock(), GetCounts()
        stats = BrokerStats(store, gets, clock)
        assert stats.view(TOPIC_PUT_NUMS, "NeverSeen") is None

        for i in range(5):
            store.put_message(TOPIC, i % 2, b"m %d" % i)
        gets.add("GroupA", TOPIC, 4, 400)
        clock.now += 10
        stats.sample()
        first = stats.view(TOPIC_PUT_NUMS, TOPIC)
        assert first is not None
        assert [first[w]["sum"] for w in ("statsMinute", "statsHour", "statsDay")] == [5, 5, 5]
        assert first["statsMinute"]["tps"] == 0.5  # 5 in the 10 s since the first sample

        # 70 s on, sampled every 10 s: the minute no longer holds the first 5, the hour and day do
        for _ in range(7):
            clock.now += 10
            stats.sample()
        store.put_message(TOPIC, 0, b"late")
        later = stats.view(TOPIC_PUT_NUMS, TOPIC)
        assert later is not None
        assert [later[w]["sum"] for w in ("statsMinute", "statsHour", "statsDay")] == [1, 6, 6]
        group = stats.view(GROUP_GET_NUMS, group_stats_key(TOPIC, "GroupA"))
        assert group is not None
        assert (group["statsMinute"]["sum"], group["statsHour"]["sum"]) == (0, 4)
    finally:
        store.shutdown()
