"""One story, told by each third-party client family against rmq processes: npm ali-ons@3.12.0 (pure
JavaScript) and PyPI rocketmq==0.4.4 (Python over the C++ client). Send N with tags and keys; two
groups each get every message exactly once; a tag group gets only its tag; a restarted consumer gets
only what came after its committed offset.

The families differ where RocketMQ clients do: ali-ons sends to existing topics only, the C++ client
sends an unknown topic's first message with TBW102 as its default topic and the broker creates it.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.helpers.compat import ClientRunner, bodies

pytestmark = [pytest.mark.compat, pytest.mark.slow]

COUNT = 1000


def make_topic(cluster, family_clients, topic: str) -> None:
    """Create ``topic`` for a family that needs it; for one that creates topics, make sure it does
    not exist yet, so that its sends are what creates it."""
    if family_clients.family.creates_topics:
        assert cluster.max_offsets(topic) == {}, f"{topic} exists before the first send"
    else:
        cluster.create_topic(topic)


def test_two_groups_each_get_every_message_once_and_a_tag_group_only_its_tag(family_clients, cluster):
    clients, family, namesrv = family_clients, family_clients.family, cluster.namesrv_addr
    topic = "CompatTopic"
    make_topic(cluster, clients, topic)
    sent = clients.produce(namesrv, topic, "compat-producer", COUNT, "TagA,TagB", "m")
    assert len(sent) == COUNT and {s["status"] for s in sent} == {family.send_ok}
    assert len({s["msgId"] for s in sent}) == COUNT
    assert sum(cluster.max_offsets(topic).values()) == COUNT

    expected = {f"m-body-{i}" for i in range(COUNT)}
    consumers = {
        "g1": clients.start_consumer(namesrv, topic, "compat-g1", "*", COUNT, idle_seconds=15),
        "g2": clients.start_consumer(namesrv, topic, "compat-g2", "*", COUNT, idle_seconds=15),
        "tag": clients.start_consumer(namesrv, topic, "compat-tag", "TagA", COUNT // 2, idle_seconds=15),
    }
    results = ClientRunner.wait_all(consumers)

    for group in ("g1", "g2"):
        got = bodies(results[group])
        assert set(got) == expected, f"{group} missed {len(expected - set(got))} messages"
        assert max(got.values()) == 1, f"{group} got duplicates in a clean run"
    tagged = results["tag"]
    assert {m["tags"] for m in tagged} == {"TagA"}
    assert set(bodies(tagged)) == {f"m-body-{i}" for i in range(0, COUNT, 2)}
    # keys and ids survive the round trip
    seven = next(m for m in results["g1"] if m["body"] == "m-body-7")
    assert family.keys(seven["keys"]) == "m-key-7"
    assert seven["msgId"] in {s["msgId"] for s in sent}


def test_a_restarted_consumer_resumes_from_its_committed_offset(family_clients, cluster):
    clients, namesrv = family_clients, cluster.namesrv_addr
    topic, group, half = "CompatResume", "compat-resume", COUNT // 2
    make_topic(cluster, clients, topic)
    clients.produce(namesrv, topic, "compat-producer", half, "TagA", "a")
    # A new group starts from the first offset only when it has none. (The C++ client's new group
    # starts "from the last offset": it sees the first half thanks to the broker answering offset 0
    # for a new group while the queue still holds offset 0.)
    first = clients.consume(namesrv, topic, group, "*", half, idle_seconds=15)
    assert set(bodies(first)) == {f"a-body-{i}" for i in range(half)}
    cluster.wait_caught_up(group, topic)
    clients.produce(namesrv, topic, "compat-producer", half, "TagA", "b")
    # with its offsets committed, the restarted consumer gets the second half and nothing of the first
    second = clients.consume(namesrv, topic, group, "*", half, idle_seconds=8)
    assert bodies(second) == Counter({f"b-body-{i}": 1 for i in range(half)})
