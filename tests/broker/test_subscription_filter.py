"""Subscription expressions compiled off the event loop, bounded, through a live broker
(rmq.broker.subscription_filter, rmq.protocol.sql92's bounds); and what a flood of bad or unknown
requests leaves in the log and the metrics."""

from __future__ import annotations

import logging
import urllib.request

import orjson

from rmq.broker.subscription_filter import NOT_BUILT, FilterCache
from rmq.net import RemotingClient, RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.sql92 import MAX_EXPRESSION_LENGTH, MAX_NESTING_DEPTH, SHOWN_PREFIX
from tests.helpers import LOOPBACK, free_port, wait_until
from tests.helpers.broker import assert_still_serving, create_topic, put
from tests.helpers.requests import TIMEOUT, call, heartbeat_request, pull_request, records

TOPIC = "Filtered"
# a refusal's remark: the shown prefix and a sentence, never the expression
SHORT_REMARK = SHOWN_PREFIX + 300


def sql_pull(sql: str) -> RemotingCommand:
    return pull_request(TOPIC, 0, 0, subscription=sql, expression_type="SQL92")


def check_client_config(sql: str) -> RemotingCommand:
    body = {
        "clientId": "c1",
        "group": "G",
        "subscriptionData": {"topic": TOPIC, "subString": sql, "expressionType": "SQL92"},
    }
    return RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, orjson.dumps(body))


def or_chain(terms: int) -> str:
    return " OR ".join(f"n = {i}" for i in range(terms))


def answered_first(broker, client: RemotingClient, slow: RemotingCommand) -> tuple[RemotingCommand, list[str]]:
    """Send ``slow`` and, once the broker holds it for its compile, another client's pull: the
    answer to ``slow`` and the order the two answers came in."""
    answered: list[str] = []
    with RemotingClient() as other:
        for c in (client, other):  # both connected
            assert call(c, broker.broker_addr, pull_request(TOPIC, 0, 0)).code == ResponseCode.PULL_NOT_FOUND
        slow_answer = client.invoke_async(broker.broker_addr, slow, TIMEOUT)
        slow_answer.add_done_callback(lambda _f: answered.append("slow"))
        wait_until(lambda: broker.subscription_filters.waiting_characters, TIMEOUT, "the slow request read")
        quick = other.invoke_async(broker.broker_addr, pull_request(TOPIC, 0, 0), TIMEOUT)
        quick.add_done_callback(lambda _f: answered.append("other client"))
        assert quick.result(TIMEOUT).code == ResponseCode.PULL_NOT_FOUND
        return slow_answer.result(TIMEOUT), answered


def test_a_long_expression_compiles_off_the_loop_while_another_client_is_served(start_broker, client):
    broker = start_broker(enablePropertyFilter="true")
    create_topic(broker, TOPIC)
    # as long as allowed, refused only at its end: the broker tokenizes and parses all of it first
    chain = or_chain(MAX_EXPRESSION_LENGTH // 12)
    expression = chain[: MAX_EXPRESSION_LENGTH - 10] + " AND AND"
    r, answered = answered_first(broker, client, sql_pull(expression))
    assert answered == ["other client", "slow"]
    assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert f"({len(expression)} characters)" in r.remark and "unexpected 'AND'" in r.remark
    assert len(r.remark) < SHORT_REMARK


def test_a_big_heartbeat_is_parsed_off_the_loop_while_another_client_is_served(start_broker, client):
    broker = start_broker()
    create_topic(broker, TOPIC)
    tags = " || ".join(f"Tag{i}" for i in range(50_000))  # 600 KB: its tags hashed one by one
    r, answered = answered_first(broker, client, heartbeat_request("c1", "BigGroup", TOPIC, sub=tags))
    assert answered == ["other client", "slow"]
    assert r.code == ResponseCode.SUCCESS, r.remark
    subscription = broker.client_manager.consumers.find_subscription_data("BigGroup", TOPIC)
    assert subscription is not None and len(subscription.tags_set) == 50_000


def test_an_expression_over_the_length_bound_is_refused_at_once(start_broker, client):
    broker = start_broker(enablePropertyFilter="true")
    create_topic(broker, TOPIC)
    expression = "a = '" + "x" * (1200 * 1024) + "'"  # valid, but 1.2 MB
    for request in (sql_pull(expression), check_client_config(expression)):
        r = call(client, broker.broker_addr, request)
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED, r.remark
        assert f"longer than the maximum of {MAX_EXPRESSION_LENGTH} characters" in r.remark
        assert f"({len(expression)} characters)" in r.remark and len(r.remark) < SHORT_REMARK
    assert not broker.subscription_filters.cache  # nothing of it kept
    assert_still_serving(broker, client)


def test_ten_thousand_nested_parentheses_are_refused_without_a_traceback(start_broker, client, caplog):
    broker = start_broker(enablePropertyFilter="true")
    create_topic(broker, TOPIC)
    expression = "(" * 10_000 + "a = 1" + ")" * 10_000
    with caplog.at_level(logging.DEBUG, logger="rmq"):
        for request in (sql_pull(expression), check_client_config(expression)):
            r = call(client, broker.broker_addr, request)
            assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED, r.remark
            assert f"nested deeper than the maximum of {MAX_NESTING_DEPTH} levels" in r.remark
            assert len(r.remark) < SHORT_REMARK
    assert not [record for record in caplog.records if record.exc_info], "a traceback was logged"
    assert all(len(record.getMessage()) < SHORT_REMARK + 200 for record in caplog.records)
    assert_still_serving(broker, client)


def test_a_long_or_chain_filters_a_pull(start_broker, client):
    broker = start_broker(enablePropertyFilter="true")
    create_topic(broker, TOPIC)
    for n in (5, 7000, 2999):
        put(broker, TOPIC, b"%d" % n, n=str(n))
    chain = or_chain(3000)  # nested binary ORs this long overflow Python's stack
    for request in (check_client_config(chain), sql_pull(chain)):
        r = call(client, broker.broker_addr, request)
        assert r.code == ResponseCode.SUCCESS, r.remark
    assert [m.body for m in records(r.body)] == [b"5", b"2999"]


def test_a_thousand_identical_bad_requests_log_a_few_lines(start_broker, client, caplog):
    broker = start_broker(enablePropertyFilter="true")
    create_topic(broker, TOPIC)
    bad = [check_client_config("a >> 1") for _ in range(1000)]
    unknown = [RemotingCommand.request(50_000 + i, {}) for i in range(1000)]
    with caplog.at_level(logging.DEBUG, logger="rmq"):
        answers = [client.invoke_async(broker.broker_addr, request, TIMEOUT) for request in bad + unknown]
        codes = {answer.result(TIMEOUT).code for answer in answers}
    assert codes == {ResponseCode.SUBSCRIPTION_PARSE_FAILED, ResponseCode.REQUEST_CODE_NOT_SUPPORTED}
    refused = [r for r in caplog.records if "refused request code" in r.getMessage()]
    unsupported = [r for r in caplog.records if "not supported" in r.getMessage()]
    # a line per kind and client, then one per 10 s
    assert len(refused) == 1 and len(unsupported) == 1, (len(refused), len(unsupported))


def test_made_up_request_codes_share_one_metrics_label(start_broker, client):
    port = free_port()
    broker = start_broker(
        metricsExporterType="PROM", metricsPromExporterHost=LOOPBACK, metricsPromExporterPort=str(port)
    )
    answers = [
        client.invoke_async(broker.broker_addr, RemotingCommand.request(50_000 + i, {}), TIMEOUT) for i in range(1000)
    ]
    assert {answer.result(TIMEOUT).code for answer in answers} == {ResponseCode.REQUEST_CODE_NOT_SUPPORTED}
    assert_still_serving(broker, client)
    with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/metrics", timeout=TIMEOUT) as scrape:
        lines = [line for line in scrape.read().decode().splitlines() if line.startswith("rocketmq_rpc_latency_count")]
    unknown = [line for line in lines if 'request_code="unknown"' in line]
    assert len(unknown) == 1 and unknown[0].endswith(" 1000.0"), unknown
    assert len(lines) <= 3, lines  # the send that checked the broker serves, and its topic's creation


def test_the_filter_cache_is_bounded_by_bytes_and_keeps_what_was_used_last():
    cache = FilterCache(max_bytes=50_000)
    keys = [(TOPIC, "SQL92", f"n = {i} AND " + "x" * 90) for i in range(5)]  # ~10 KB each: 4 fit
    for key in keys[:4]:
        cache.put(key, None)
    assert cache.get(keys[0]) is None  # used: now the most recent
    cache.put(keys[4], None)
    assert cache.get(keys[1]) is NOT_BUILT and len(cache) == 4 and cache.bytes <= cache.max_bytes
    assert all(cache.get(key) is None for key in (keys[0], keys[2], keys[3], keys[4]))
    cache.put((TOPIC, "SQL92", "y" * 1000), None)  # alone above the bound: not kept, nothing evicted
    assert len(cache) == 4
