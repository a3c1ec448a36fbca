"""A real RocketMQ 4.x client's SQL92 subscription against ``rmq-broker`` with enablePropertyFilter:
npm ali-ons@3.12.0 subscribes with ``{expressionType: 'SQL92', subString}`` (heartbeat and pulls
carry it) and receives exactly the messages whose properties match. The C++ core of PyPI
``rocketmq==0.4.4`` subscribes by tag only (its C API has no selector), so it has no case here."""

from __future__ import annotations

import pytest

from rmq.client import Message, Producer

pytestmark = [pytest.mark.compat, pytest.mark.slow]


def test_ali_ons_sql92_consumer_gets_exactly_the_matching_messages(ons_clients, filtering_cluster):
    cluster = filtering_cluster
    topic = cluster.create_topic("OnsSql")
    with Producer("ons-sql-p", cluster.namesrv_addr, instance_name="ons-sql-p") as producer:
        for i in range(40):
            region = ("eu", "us", "apac")[i % 3]
            producer.send(
                Message(topic, f"m{i}".encode(), tags="Order", properties={"amount": str(i * 10), "region": region})
            )
    expected = {f"m{i}" for i in range(40) if i * 10 > 150 and i % 3 != 1}

    got = ons_clients.run(
        "ons_consume.js",
        cluster.namesrv_addr,
        topic,
        "ons-sql-c",
        "SQL92:amount > 150 AND region IN ('eu', 'apac')",
        len(expected) + 1,  # one more than should come: the script waits out its idle time
        4000,
        timeout=60,
    )
    bodies = [line["body"] for line in got]
    assert sorted(bodies) == sorted(expected)
    assert all(line["properties"]["region"] != "us" for line in got)
