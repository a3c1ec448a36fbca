"""POP consumption on the 4.x remoting codes (docs/pop.md), against an in-process broker: what a
consumer sees of invisibility, acks, revive, attempts, the DLQ, FIFO, filters, long polls and bad
requests. The revive service runs every 100 ms here and invisible times are 0.3-1 s."""

from __future__ import annotations

import threading

import pytest

from rmq.broker.subscription_group import SubscriptionGroupConfig
from rmq.protocol.codes import ResponseCode
from rmq.protocol.message import MessageProperty, dlq_topic
from rmq.protocol.pop import PROPERTY_POP_CK, ExtraInfo, pop_retry_topic
from tests.helpers import wait_until
from tests.helpers.broker import assert_still_serving, create_topic, messages_in, put
from tests.helpers.pop import Popper, ack_request, change_request, changed, pop_request
from tests.helpers.requests import call

TOPIC = "PopTopic"
GROUP = "PopGroup"
FAST_REVIVE = {"reviveInterval": "100", "reviveQueueNum": "2"}


@pytest.fixture
def pop_broker(start_broker):
    broker = start_broker(**FAST_REVIVE)
    create_topic(broker, TOPIC, 2)
    return broker


@pytest.fixture
def popper(pop_broker, client) -> Popper:
    return Popper(client, pop_broker.broker_addr, TOPIC, GROUP)


def bodies(messages) -> list[bytes]:
    return sorted(m.body for m in messages)


def test_popped_messages_are_invisible_to_the_next_pop_and_carry_their_extra_info(pop_broker, popper):
    for i in range(6):
        put(pop_broker, TOPIC, b"m%d" % i, queue_id=i % 2)
    first = popper.pop(max_msgs=4)
    second = popper.pop(max_msgs=32)
    assert len(first) == 4
    assert bodies(first + second) == [b"m%d" % i for i in range(6)]  # each once, across both queues
    assert popper.pop() == []
    info = ExtraInfo.decode(first[0].properties[PROPERTY_POP_CK])
    assert (info.queue_id, info.msg_queue_offset, info.broker_name) == (
        first[0].queue_id,
        first[0].queue_offset,
        pop_broker.config.broker_name,
    )


def test_acked_messages_never_come_back_and_unacked_come_back_with_one_more_attempt(pop_broker, popper):
    put(pop_broker, TOPIC, b"acked")
    put(pop_broker, TOPIC, b"dropped")
    popped = {m.body: m for m in popper.pop(invisible_ms=500)}
    assert popper.ack(popped[b"acked"]).code == ResponseCode.SUCCESS
    wait_until(lambda: pop_broker.pop_service.in_flight(GROUP) == 1, 5, "one message in flight")
    back = wait_until(lambda: popper.pop(invisible_ms=60_000), 5, "the unacked message came back")
    assert bodies(back) == [b"dropped"]
    assert back[0].reconsume_times == 1
    assert back[0].topic == TOPIC  # the retry topic's message comes with the topic popped
    assert ExtraInfo.decode(back[0].properties[PROPERTY_POP_CK]).retry == "1"
    assert popper.ack(back[0]).code == ResponseCode.SUCCESS  # an ack of the retried copy works too
    assert messages_in(pop_broker, pop_retry_topic(TOPIC, GROUP))[0].body == b"dropped"


def test_change_invisible_time_keeps_a_message_hidden_longer_and_its_new_extra_info_acks_it(pop_broker, popper):
    put(pop_broker, TOPIC, b"slow")
    [message] = popper.pop(invisible_ms=300)
    answer = popper.change(message, 60_000)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert int(answer.ext_fields["invisibleTime"]) == 60_000
    threading.Event().wait(0.8)  # past the first invisible time and several revive rounds
    assert popper.pop() == []
    assert call(popper.client, popper.addr, ack_request(changed(message, answer), TOPIC, GROUP)).code == 0


def test_change_invisible_time_0_is_a_nack_the_message_comes_back_at_the_next_revive_round(pop_broker, popper):
    put(pop_broker, TOPIC, b"nacked")
    [message] = popper.pop(invisible_ms=60_000)
    answer = popper.change(message, 0)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    # revive rounds every 100 ms: back long before its first 60 s of invisibility
    back = wait_until(lambda: popper.pop(invisible_ms=60_000), 3, "the nacked message back")
    assert bodies(back) == [b"nacked"] and back[0].reconsume_times == 1


def test_past_the_groups_retry_max_times_a_message_goes_to_the_dlq(pop_broker, popper):
    pop_broker.subscription_group_manager.update_subscription_group_config(
        SubscriptionGroupConfig(GROUP, retry_max_times=1)
    )
    put(pop_broker, TOPIC, b"poison")
    assert bodies(popper.pop(invisible_ms=300)) == [b"poison"]  # attempt 1
    again = wait_until(lambda: popper.pop(invisible_ms=300), 5, "attempt 2")
    assert again[0].reconsume_times == 1
    dead = wait_until(lambda: messages_in(pop_broker, dlq_topic(GROUP)), 5, "the message in the DLQ")
    assert dead[0].body == b"poison"
    assert dead[0].properties[MessageProperty.RETRY_TOPIC] == TOPIC
    threading.Event().wait(0.5)
    assert popper.pop() == []  # never a third attempt


def test_a_fifo_queue_gives_its_next_message_only_after_the_previous_is_acked(pop_broker, popper):
    for i in range(3):
        put(pop_broker, TOPIC, b"o%d" % i, queue_id=0)
    [first] = popper.pop(order=True, max_msgs=1, queue_id=0)
    assert first.body == b"o0"
    assert ExtraInfo.decode(first.properties[PROPERTY_POP_CK]).order
    assert popper.pop(order=True, max_msgs=1, queue_id=0) == []  # locked to o0
    assert popper.ack(first).code == ResponseCode.SUCCESS
    [second] = popper.pop(order=True, max_msgs=1, queue_id=0)
    assert second.body == b"o1"


def test_an_unacked_fifo_batch_comes_back_in_order_after_its_invisible_time(pop_broker, popper):
    for i in range(2):
        put(pop_broker, TOPIC, b"o%d" % i, queue_id=1)
    assert bodies(popper.pop(order=True, invisible_ms=300, queue_id=1)) == [b"o0", b"o1"]
    again = wait_until(lambda: popper.pop(order=True, queue_id=1), 5, "the batch again")
    assert [m.body for m in again] == [b"o0", b"o1"]
    assert again[0].reconsume_times == 1  # its second attempt


def test_tag_and_sql92_filters_pop_only_what_matches(start_broker, client):
    broker = start_broker(enablePropertyFilter="true", **FAST_REVIVE)
    create_topic(broker, TOPIC, 1)
    popper = Popper(client, broker.broker_addr, TOPIC, GROUP)
    put(broker, TOPIC, b"a", TAGS="A", color="red")
    put(broker, TOPIC, b"b", TAGS="B", color="blue")
    put(broker, TOPIC, b"c", TAGS="A", color="blue")
    assert bodies(popper.pop(exp="A", exp_type="TAG")) == [b"a", b"c"]
    sql = Popper(client, broker.broker_addr, TOPIC, "SqlGroup")
    assert bodies(sql.pop(exp="color = 'blue'", exp_type="SQL92")) == [b"b", b"c"]
    bad = call(client, broker.broker_addr, pop_request(TOPIC, "SqlGroup", exp="color = ", exp_type="SQL92"))
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


def test_a_long_poll_is_answered_by_the_next_message_and_times_out_empty(pop_broker, popper):
    got: list = []
    waiter = threading.Thread(target=lambda: got.extend(popper.pop(poll_ms=5000, timeout=10)))
    waiter.start()
    wait_until(lambda: pop_broker.pop_service.parked_count == 1, 5, "the pop parked")
    put(pop_broker, TOPIC, b"late", queue_id=1)
    waiter.join(5)
    assert bodies(got) == [b"late"]
    answer = call(popper.client, popper.addr, pop_request(TOPIC, GROUP, poll_ms=200))
    assert answer.code == ResponseCode.POLLING_TIMEOUT


def test_bad_pop_ack_and_change_requests_get_rocketmqs_codes_and_the_broker_goes_on(start_broker, client):
    broker = start_broker(autoCreateSubscriptionGroup="false", **FAST_REVIVE)
    create_topic(broker, TOPIC, 1)
    addr = broker.broker_addr
    unknown = call(client, addr, pop_request(TOPIC, "NoSuchGroup"))
    assert unknown.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST and "NoSuchGroup" in unknown.remark
    broker.subscription_group_manager.update_subscription_group_config(SubscriptionGroupConfig(GROUP))
    assert call(client, addr, pop_request(TOPIC, GROUP, invisible_ms=0)).code == ResponseCode.INVALID_PARAMETER
    assert call(client, addr, pop_request(TOPIC, GROUP, max_msgs=33)).code == ResponseCode.INVALID_PARAMETER
    assert call(client, addr, pop_request("NoSuchTopic", GROUP)).code == ResponseCode.TOPIC_NOT_EXIST
    assert call(client, addr, pop_request(TOPIC, GROUP, queue_id=5)).code == ResponseCode.INVALID_PARAMETER
    put(broker, TOPIC, b"x")
    [message] = Popper(client, addr, TOPIC, GROUP).pop()
    bad = call(client, addr, ack_request(message, TOPIC, GROUP, extra_info="not an extra info"))
    assert bad.code == ResponseCode.SYSTEM_ERROR and "extraInfo" in bad.remark
    far = call(client, addr, ack_request(message, TOPIC, GROUP, extra_info="0 1 2 77 0 b 0 0"))
    assert far.code == ResponseCode.MESSAGE_ILLEGAL  # a revive queue the broker does not have
    negative = call(client, addr, change_request(message, TOPIC, -1, GROUP))
    assert negative.code == ResponseCode.INVALID_PARAMETER and ">= 0" in negative.remark
    gone = message.__class__(**{**message.__dict__, "queue_offset": 99})
    assert call(client, addr, ack_request(gone, TOPIC, GROUP)).code == ResponseCode.NO_MESSAGE
    assert call(client, addr, ack_request(message, TOPIC, GROUP)).code == ResponseCode.SUCCESS
    assert_still_serving(broker, client)


def test_a_fifo_lock_outlives_a_restart_of_the_broker(start_broker, client):
    broker = start_broker(**FAST_REVIVE)
    create_topic(broker, TOPIC, 1)
    for i in range(2):
        put(broker, TOPIC, b"o%d" % i)
    [first] = Popper(client, broker.broker_addr, TOPIC, GROUP).pop(order=True, max_msgs=1)
    broker.shutdown()

    again = start_broker(**FAST_REVIVE)
    popper = Popper(client, again.broker_addr, TOPIC, GROUP)
    assert popper.pop(order=True, max_msgs=1) == []  # o0 is still out, invisible
    assert popper.ack(first).code == ResponseCode.SUCCESS
    assert [m.body for m in popper.pop(order=True, max_msgs=1)] == [b"o1"]


def test_a_pop_whose_checkpoint_cannot_be_stored_pops_nothing_and_loses_nothing(pop_broker, popper):
    put(pop_broker, TOPIC, b"kept")
    level = pop_broker.store.config.disk_space_warning_level_ratio
    pop_broker.store.config.disk_space_warning_level_ratio = 0.0  # every disk is "full": puts refused
    pop_broker.check_disk()
    try:
        answer = call(popper.client, popper.addr, pop_request(TOPIC, GROUP))
        assert answer.code == ResponseCode.POLLING_TIMEOUT and answer.remark == "checkpoint not stored"
    finally:
        pop_broker.store.config.disk_space_warning_level_ratio = level
        pop_broker.check_disk()
    assert bodies(popper.pop()) == [b"kept"]
