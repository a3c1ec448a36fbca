"""PyPI rocketmq==0.4.4 (Python over the C++ RocketMQ client) against rmq-broker (issue 4, acceptance 1)."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.compat.conftest import bodies

pytestmark = [pytest.mark.compat, pytest.mark.slow]

COUNT = 1000


def test_unknown_topic_is_auto_created_then_two_groups_and_a_tag_group(clients, rmq_broker):
    # No topic created: the C++ client falls back to TBW102 and the broker creates it.
    sent = clients.run("cpp_produce.py", rmq_broker.namesrv, "CppAuto", "cpp-producer", COUNT, "TagA,TagB")
    assert len(sent) == COUNT and {s["status"] for s in sent} == {0}  # SendStatus.OK
    assert len({s["msgId"] for s in sent}) == COUNT

    expected = {f"cpp-body-{i}" for i in range(COUNT)}
    procs = {
        "cpp-g1": clients.start("cpp_consume.py", rmq_broker.namesrv, "CppAuto", "cpp-g1", "*", COUNT, 15),
        "cpp-g2": clients.start("cpp_consume.py", rmq_broker.namesrv, "CppAuto", "cpp-g2", "*", COUNT, 15),
        "cpp-tag": clients.start("cpp_consume.py", rmq_broker.namesrv, "CppAuto", "cpp-tag", "TagB", COUNT // 2, 15),
    }
    results = clients.wait_all(procs)

    for group in ("cpp-g1", "cpp-g2"):
        got = bodies(results[group])
        assert set(got) == expected, f"{group} missed {len(expected - set(got))} messages"
        assert max(got.values()) == 1, f"{group} got duplicates in a clean run"
    tagged = results["cpp-tag"]
    assert {m["tags"] for m in tagged} == {"TagB"}
    assert set(bodies(tagged)) == {f"cpp-body-{i}" for i in range(1, COUNT, 2)}
    seven = next(m for m in results["cpp-g1"] if m["body"] == "cpp-body-7")
    assert seven["keys"] == "cpp-key-7"


def test_consumer_restarted_resumes_from_committed_offset(clients, rmq_broker):
    half = COUNT // 2
    clients.run("cpp_produce.py", rmq_broker.namesrv, "CppResume", "cpp-producer", half, "TagA", "a")
    # a new group of the C++ client starts "from the last offset": it sees the first half only thanks
    # to the broker answering offset 0 for a new group while the queue still holds offset 0
    first = clients.run("cpp_consume.py", rmq_broker.namesrv, "CppResume", "cpp-resume", "*", half, 15)
    assert set(bodies(first)) == {f"a-body-{i}" for i in range(half)}
    clients.run("cpp_produce.py", rmq_broker.namesrv, "CppResume", "cpp-producer", half, "TagA", "b")
    second = clients.run("cpp_consume.py", rmq_broker.namesrv, "CppResume", "cpp-resume", "*", half, 8)
    assert bodies(second) == Counter({f"b-body-{i}": 1 for i in range(half)})
