"""Acceptance 2 of issue 13: a real RocketMQ client's transactional producer (the C++ core bundled in
PyPI rocketmq==0.4.4, through ``clients/cpp_transaction_shim.cpp``) commits, rolls back, and answers
the broker's checks against rmq processes; our SDK consumes exactly the committed messages."""

from __future__ import annotations

import pytest

from rmq.client import PushConsumer
from rmq.protocol.message import TRANS_HALF_TOPIC, MessageProperty
from tests.helpers import wait_until
from tests.helpers.compat import ClientRunner, build_cpp_transaction_shim

pytestmark = [pytest.mark.compat, pytest.mark.slow]


def test_cpp_transactional_producer_commits_rolls_back_and_answers_checks(tx_cluster, rocketmq_python, tmp_path):
    shim = build_cpp_transaction_shim(rocketmq_python)
    topic = tx_cluster.create_topic("CppTx", queues=2)
    runner = ClientRunner(tmp_path / "home", python=rocketmq_python)
    plan = ["c-commit=COMMIT", "c-rollback=ROLLBACK", "c-later=UNKNOWN/COMMIT", "c-later-no=UNKNOWN/ROLLBACK"]
    events = runner.start_until_closed(
        "cpp_transaction.py", shim, tx_cluster.namesrv_addr, topic, "cpp-tx-group", *plan
    )
    received: list[bytes] = []
    consumer = PushConsumer("cpp-tx-readers", tx_cluster.namesrv_addr, consume_from_where="FIRST_OFFSET")
    consumer.subscribe(topic)
    consumer.register_listener(lambda msgs: received.extend(m.body for m in msgs))
    try:
        with consumer:
            wait_until(lambda: len(events.of("sent")) == 4, 60, lambda: f"the C++ producer sent: {events.lines}")
            assert all(e["ok"] for e in events.of("sent")), events.lines
            wait_until(
                lambda: sorted(received) == [b"c-commit", b"c-later"],
                30,
                lambda: f"consumed {received}, {events.lines}",
            )
            wait_until(lambda: {e["check"] for e in events.of("check")} >= {"c-later", "c-later-no"}, 10, "checks")
    finally:
        err = events.close()
    assert sorted(received) == [b"c-commit", b"c-later"], err[-2000:]
    assert events.proc.returncode == 0 and events.of("done"), err[-2000:]
    # the broker's view: every body was a half message (the checked ones put back), the committed
    # ones are in the topic once
    assert {m.body for m in tx_cluster.messages(TRANS_HALF_TOPIC)} == {p.split("=")[0].encode() for p in plan}
    stored = {m.body: m for m in tx_cluster.messages(topic)}
    assert sorted(stored) == [b"c-commit", b"c-later"]
    executed = {e["execute"]: e["uniqKey"] for e in events.of("execute")}
    assert stored[b"c-commit"].properties[MessageProperty.UNIQ_KEY] == executed["c-commit"]
    assert stored[b"c-later"].keys == ["key-c-later"]
    checked = {e["check"] for e in events.of("check")}
    assert "c-commit" not in checked and "c-rollback" not in checked
