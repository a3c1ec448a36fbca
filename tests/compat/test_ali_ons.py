"""npm ali-ons@3.12.0 (pure JavaScript RocketMQ 4.x client) against rmq-broker (issue 4, acceptance 1)."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.compat.conftest import bodies

pytestmark = [pytest.mark.compat, pytest.mark.slow]

COUNT = 1000


def test_send_1000_then_two_groups_each_get_all_and_a_tag_group_only_its_tag(clients, rmq_broker):
    rmq_broker.create_topic("OnsTopic")
    sent = clients.run("ons_produce.js", rmq_broker.namesrv, "OnsTopic", "ons-producer", COUNT, "TagA,TagB")
    assert len(sent) == COUNT and {s["status"] for s in sent} == {"SEND_OK"}
    assert len({s["msgId"] for s in sent}) == COUNT

    expected = {f"ons-body-{i}" for i in range(COUNT)}
    groups = {
        "ons-g1": clients.start("ons_consume.js", rmq_broker.namesrv, "OnsTopic", "ons-g1", "*", COUNT, 15000),
        "ons-g2": clients.start("ons_consume.js", rmq_broker.namesrv, "OnsTopic", "ons-g2", "*", COUNT, 15000),
        "ons-tag": clients.start("ons_consume.js", rmq_broker.namesrv, "OnsTopic", "ons-tag", "TagA", COUNT // 2,
                                 15000),
    }
    results = clients.wait_all(groups)

    for group in ("ons-g1", "ons-g2"):
        got = bodies(results[group])
        assert set(got) == expected, f"{group} missed {len(expected - set(got))} messages"
        assert max(got.values()) == 1, f"{group} got duplicates in a clean run"
    tagged = results["ons-tag"]
    assert {m["tags"] for m in tagged} == {"TagA"}
    assert set(bodies(tagged)) == {f"ons-body-{i}" for i in range(0, COUNT, 2)}
    # keys and ids survive the round trip
    first = next(m for m in results["ons-g1"] if m["body"] == "ons-body-7")
    assert first["keys"] in ("ons-key-7", ["ons-key-7"])
    assert first["msgId"] in {s["msgId"] for s in sent}


def test_consumer_restarted_resumes_from_committed_offset(clients, rmq_broker):
    half = COUNT // 2
    rmq_broker.create_topic("OnsResume")
    clients.run("ons_produce.js", rmq_broker.namesrv, "OnsResume", "ons-producer", half, "TagA", "a")
    first = clients.run("ons_consume.js", rmq_broker.namesrv, "OnsResume", "ons-resume", "*", half, 15000)
    assert set(bodies(first)) == {f"a-body-{i}" for i in range(half)}
    clients.run("ons_produce.js", rmq_broker.namesrv, "OnsResume", "ons-producer", half, "TagA", "b")
    # The group starts from the first offset only when it has none: with its offsets committed,
    # the restarted consumer gets the second half and nothing of the first.
    second = clients.run("ons_consume.js", rmq_broker.namesrv, "OnsResume", "ons-resume", "*", half, 8000)
    assert bodies(second) == Counter({f"b-body-{i}": 1 for i in range(half)})
