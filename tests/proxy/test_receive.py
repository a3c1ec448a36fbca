"""A 5.x consumer's calls against a real broker's gRPC endpoint (the generated stub, as the 5.x
clients send them): QueryAssignment, ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue. The broker revives every 100 ms and long polls are at least 200 ms
here (grpcClientConsumerMinLongPollingTimeoutMillis), so an empty receive is quick; invisible
durations keep the proxy's 10 s minimum, and redelivery comes from ChangeInvisibleDuration, whose
minimum is 0 as in RocketMQ."""

from __future__ import annotations

import hashlib
import threading
import time
import zlib

import pytest
from google.protobuf.duration_pb2 import Duration

from rmq.broker.subscription_group import SubscriptionGroupConfig
from rmq.broker.topic_config import TopicConfig
from rmq.protocol.grpc.v2.definition_pb2 import Code
from rmq.protocol.message import MessageProperty, MessageSysFlag, dlq_topic
from rmq.protocol.pop import PROPERTY_POP_CK
from tests.helpers import wait_until
from tests.helpers.broker import messages_in, put
from tests.helpers.grpc import definition, messaging_stub, metadata, resource, service

TOPIC = "RecvTopic"
GROUP = "RecvGroup"
FAST = {
    "reviveInterval": "100",
    "reviveQueueNum": "2",
    "grpcClientConsumerMinLongPollingTimeoutMillis": "200",
}


@pytest.fixture
def startup(start_grpc_broker):
    started = start_grpc_broker(**FAST)
    started.controller.topic_config_manager.update_topic_config(TopicConfig(TOPIC, 2, 2))
    return started


@pytest.fixture
def broker(startup):
    return startup.controller


@pytest.fixture
def stub(startup):
    with messaging_stub(startup.proxy.port) as stub:
        yield stub


def ms(value: int) -> Duration:
    duration = Duration()
    duration.FromMilliseconds(value)
    return duration


def receive(
    stub,
    *,
    topic: str = TOPIC,
    group: str = GROUP,
    batch: int = 32,
    invisible_ms: int = 10_000,
    poll_ms: int = 200,
    queue_id: int = -1,
    expression: definition.FilterExpression | None = None,
    timeout: float = 10,
    **credentials: str,
):
    """The answers of one ReceiveMessage: (status, messages, the stream's last answer)."""
    request = service.ReceiveMessageRequest(
        group=resource(group),
        message_queue=definition.MessageQueue(
            topic=resource(topic), id=queue_id, broker=definition.Broker(name="broker-a")
        ),
        batch_size=batch,
        invisible_duration=ms(invisible_ms),
        long_polling_timeout=ms(poll_ms),
        filter_expression=expression or definition.FilterExpression(type=definition.TAG, expression="*"),
    )
    answers = list(stub.ReceiveMessage(request, metadata=metadata(**credentials), timeout=timeout))
    statuses = [a.status for a in answers if a.HasField("status")]
    assert len(statuses) == 1, answers
    assert answers[0].HasField("status") and answers[-1].HasField("delivery_timestamp")
    return statuses[0], [a.message for a in answers if a.HasField("message")], answers[-1]


def ack(stub, message, *, topic: str = TOPIC, group: str = GROUP, handle: str | None = None, **credentials: str):
    entry = service.AckMessageEntry(
        message_id=message.system_properties.message_id,
        receipt_handle=message.system_properties.receipt_handle if handle is None else handle,
    )
    request = service.AckMessageRequest(group=resource(group), topic=resource(topic), entries=[entry])
    return stub.AckMessage(request, metadata=metadata(**credentials), timeout=5)


def change(stub, message, invisible_ms: int, *, handle: str | None = None):
    request = service.ChangeInvisibleDurationRequest(
        group=resource(GROUP),
        topic=resource(TOPIC),
        receipt_handle=message.system_properties.receipt_handle if handle is None else handle,
        invisible_duration=ms(invisible_ms),
        message_id=message.system_properties.message_id,
    )
    return stub.ChangeInvisibleDuration(request, metadata=metadata(), timeout=5)


def query_assignment(stub, topic: str = TOPIC, group: str = GROUP, **credentials: str):
    request = service.QueryAssignmentRequest(topic=resource(topic), group=resource(group))
    return stub.QueryAssignment(request, metadata=metadata(**credentials), timeout=5)


def bodies(messages) -> list[bytes]:
    return sorted(m.body for m in messages)


def test_received_messages_carry_what_the_5x_clients_read_and_are_invisible_until_acked(broker, stub):
    put(broker, TOPIC, b"first", 0, TAGS="TagA", KEYS="k1 k2", UNIQ_KEY="ID-1", colour="blue")
    put(broker, TOPIC, b"second", 1)
    found, messages, last = receive(stub)
    assert found.code == Code.OK
    assert bodies(messages) == [b"first", b"second"]
    first = next(m for m in messages if m.body == b"first")
    system = first.system_properties
    assert first.topic.name == TOPIC
    assert (system.message_id, system.tag, list(system.keys)) == ("ID-1", "TagA", ["k1", "k2"])
    assert dict(first.user_properties) == {"colour": "blue"}  # system keys stay out
    assert system.body_digest.type == definition.MD5
    assert system.body_digest.checksum == hashlib.md5(b"first").hexdigest().upper()
    assert system.body_encoding == definition.IDENTITY and system.message_type == definition.NORMAL
    assert system.delivery_attempt == 1 and system.queue_id == 0 and system.queue_offset == 0
    assert system.invisible_duration.ToMilliseconds() == 10_000
    # the receipt handle is the POP_CK the broker handed out, with the message's CommitLog offset
    stored = messages_in(broker, TOPIC, 0)[0]
    assert system.receipt_handle.rpartition(" ")[2] == str(stored.physical_offset)
    assert system.store_timestamp.ToMilliseconds() == stored.store_timestamp
    assert last.delivery_timestamp.ToMilliseconds() > 0

    nothing, none, _ = receive(stub)
    assert (nothing.code, none) == (Code.MESSAGE_NOT_FOUND, [])  # 40401: invisible while not acked
    answer = ack(stub, first)
    assert answer.status.code == Code.OK and answer.entries[0].status.code == Code.OK


def test_an_unacked_message_comes_back_with_delivery_attempt_2_an_acked_one_never(broker, stub):
    put(broker, TOPIC, b"acked")
    put(broker, TOPIC, b"dropped")
    _, messages, _ = receive(stub)
    by_body = {m.body: m for m in messages}
    assert ack(stub, by_body[b"acked"]).status.code == Code.OK
    # RocketMQ's ChangeInvisibleDuration has no minimum: 300 ms brings the message back soon
    changed = change(stub, by_body[b"dropped"], 300)
    assert changed.status.code == Code.OK
    assert changed.receipt_handle and changed.receipt_handle != by_body[b"dropped"].system_properties.receipt_handle

    def again():
        return receive(stub, poll_ms=1000)[1]

    back = wait_until(again, 10, "the unacked message came back")
    assert bodies(back) == [b"dropped"]
    assert back[0].system_properties.delivery_attempt == 2
    assert back[0].topic.name == TOPIC  # popped from the group's retry topic, shown as the topic asked for
    assert ack(stub, back[0]).status.code == Code.OK
    assert receive(stub)[0].code == Code.MESSAGE_NOT_FOUND


def test_change_invisible_duration_0_is_a_nack_the_message_comes_back_at_once(broker, stub):
    put(broker, TOPIC, b"nacked")
    _, [message], _ = receive(stub)  # invisible for 10 s
    changed = change(stub, message, 0)
    assert changed.status.code == Code.OK, changed.status.message
    back = wait_until(lambda: receive(stub, poll_ms=1000)[1], 3, "the nacked message back")
    assert bodies(back) == [b"nacked"] and back[0].system_properties.delivery_attempt == 2


def test_the_new_receipt_handle_of_a_change_acks_the_message(broker, stub):
    put(broker, TOPIC, b"kept")
    _, [message], _ = receive(stub)
    changed = change(stub, message, 1000)
    assert changed.status.code == Code.OK
    assert ack(stub, message, handle=changed.receipt_handle).status.code == Code.OK
    # acked under its new handle: it does not come back when its new invisible time ends
    assert receive(stub, poll_ms=2500)[0].code == Code.MESSAGE_NOT_FOUND


def test_forward_to_dead_letter_queue_puts_the_message_in_the_groups_dlq_and_acks_it(broker, stub):
    put(broker, TOPIC, b"poison", UNIQ_KEY="POISON-1")
    _, [message], _ = receive(stub)
    # a second to live: were it not acked with the forward, it would be back within the poll below
    handle = change(stub, message, 1000).receipt_handle
    request = service.ForwardMessageToDeadLetterQueueRequest(
        group=resource(GROUP),
        topic=resource(TOPIC),
        receipt_handle=handle,
        message_id=message.system_properties.message_id,
        delivery_attempt=1,
        max_delivery_attempts=16,
    )
    answer = stub.ForwardMessageToDeadLetterQueue(request, metadata=metadata(), timeout=5)
    assert answer.status.code == Code.OK, answer.status
    dead = wait_until(lambda: messages_in(broker, dlq_topic(GROUP)), 5, "the message is in the DLQ")
    assert [m.body for m in dead] == [b"poison"]
    assert dead[0].properties[MessageProperty.UNIQ_KEY] == "POISON-1"
    assert receive(stub, poll_ms=2500)[0].code == Code.MESSAGE_NOT_FOUND


def test_past_the_groups_max_attempts_a_received_message_goes_to_the_dlq(broker, stub):
    broker.subscription_group_manager.update_subscription_group_config(
        SubscriptionGroupConfig(GROUP, retry_max_times=0)
    )
    put(broker, TOPIC, b"once")
    _, [message], _ = receive(stub)
    assert change(stub, message, 100).status.code == Code.OK
    # its second delivery would pass max attempts (retryMaxTimes 0 + 1): the broker or the proxy
    # dead-letters it instead of handing it out
    dead = wait_until(lambda: messages_in(broker, dlq_topic(GROUP)), 10, "the message is in the DLQ")
    assert [m.body for m in dead] == [b"once"]
    assert receive(stub)[0].code == Code.MESSAGE_NOT_FOUND


def test_fifo_group_receives_a_message_group_in_order_the_next_after_the_previous_ack(broker, stub):
    broker.subscription_group_manager.update_subscription_group_config(
        SubscriptionGroupConfig(GROUP, consume_message_orderly=True)
    )
    for i in range(3):
        put(broker, TOPIC, b"o%d" % i, 0, __SHARDINGKEY="order-1")
    _, first, _ = receive(stub, batch=1)
    assert [m.body for m in first] == [b"o0"]
    assert first[0].system_properties.message_group == "order-1"
    assert first[0].system_properties.message_type == definition.FIFO
    assert receive(stub, batch=1)[0].code == Code.MESSAGE_NOT_FOUND  # o1 waits for o0's ack
    assert ack(stub, first[0]).status.code == Code.OK
    assert [m.body for m in receive(stub, batch=1)[1]] == [b"o1"]


def test_tag_and_sql92_filters_receive_only_what_matches(start_grpc_broker):
    started = start_grpc_broker(enablePropertyFilter="true", **FAST)
    broker = started.controller
    broker.topic_config_manager.update_topic_config(TopicConfig(TOPIC, 1, 1))
    put(broker, TOPIC, b"a", TAGS="TagA", region="eu")
    put(broker, TOPIC, b"b", TAGS="TagB", region="us")
    put(broker, TOPIC, b"c", TAGS="TagC", region="eu")
    with messaging_stub(started.proxy.port) as stub:
        tags = definition.FilterExpression(type=definition.TAG, expression="TagA || TagB")
        assert bodies(receive(stub, group="TagGroup", expression=tags)[1]) == [b"a", b"b"]
        sql = definition.FilterExpression(type=definition.SQL, expression="region = 'eu'")
        assert bodies(receive(stub, group="SqlGroup", expression=sql)[1]) == [b"a", b"c"]
        bad = definition.FilterExpression(type=definition.SQL, expression="region = = 'eu'")
        refused, none, _ = receive(stub, group="SqlGroup", expression=bad)
    assert refused.code == Code.ILLEGAL_FILTER_EXPRESSION and none == []


def test_a_compressed_4x_body_reaches_the_5x_consumer_inflated(broker, stub):
    body = b"compress me " * 1000
    broker.put_inner(TOPIC, 0, zlib.compress(body), {}, sys_flag=MessageSysFlag.COMPRESSED)
    _, [message], _ = receive(stub)
    assert message.body == body and message.system_properties.body_encoding == definition.IDENTITY
    assert message.system_properties.body_digest.checksum == hashlib.md5(body).hexdigest().upper()


def test_a_long_poll_returns_when_a_message_arrives(broker, stub):
    threading.Timer(0.5, put, (broker, TOPIC, b"late")).start()
    started = time.monotonic()
    found, messages, _ = receive(stub, poll_ms=8000)
    assert found.code == Code.OK and bodies(messages) == [b"late"]
    assert time.monotonic() - started < 7  # answered by the message, not by the end of the poll


def test_what_a_receive_pops_after_its_client_went_away_comes_back_in_a_second(broker, stub):
    # the client gives up on a long poll; a message then arrives and the broker's parked pop takes it
    # for nobody: the proxy nacks it (1 s), or it would stay invisible for the receive's 10 s
    request = service.ReceiveMessageRequest(
        group=resource(GROUP),
        message_queue=definition.MessageQueue(topic=resource(TOPIC), id=-1),
        batch_size=1,
        invisible_duration=ms(10_000),
        long_polling_timeout=ms(8_000),
    )
    gone = stub.ReceiveMessage(request, metadata=metadata(), timeout=10)
    wait_until(lambda: broker.pop_service.parked_count == 1, 5, "the receive's pop is parked")
    gone.cancel()
    put(broker, TOPIC, b"orphan")
    found, messages, _ = receive(stub, poll_ms=4000)
    assert found.code == Code.OK and bodies(messages) == [b"orphan"]


def test_auto_renew_keeps_a_push_consumers_message_invisible_and_its_first_handle_acks_it(start_grpc_broker):
    # a 0.6 s invisible time renewed from 0.4 s before its end, checked every 0.1 s
    renew = {"defaultInvisibleTimeMills": "600", "renewAheadTimeMillis": "400", "renewSchedulePeriodMillis": "100"}
    started = start_grpc_broker(**FAST, **renew)
    started.controller.topic_config_manager.update_topic_config(TopicConfig(TOPIC, 1, 1))
    put(started.controller, TOPIC, b"slow")
    with messaging_stub(started.proxy.port) as stub:
        request = service.ReceiveMessageRequest(
            group=resource(GROUP),
            message_queue=definition.MessageQueue(topic=resource(TOPIC), id=-1),
            batch_size=1,
            auto_renew=True,  # what the push consumers send, with no invisible duration
            long_polling_timeout=ms(200),
        )
        [message] = [
            a.message for a in stub.ReceiveMessage(request, metadata=metadata(), timeout=5) if a.HasField("message")
        ]
        assert message.system_properties.invisible_duration.ToMilliseconds() == 600
        # twice past its first invisible time, still invisible: renewed
        assert receive(stub, poll_ms=1200)[0].code == Code.MESSAGE_NOT_FOUND
        # acked with the handle the client got, whose time is over: the proxy acks the renewed one
        assert ack(stub, message).status.code == Code.OK
        assert receive(stub, poll_ms=1000)[0].code == Code.MESSAGE_NOT_FOUND


def test_the_node_client_naming_queue_0_receives_from_every_queue(broker, stub):
    put(broker, TOPIC, b"q0", 0)
    put(broker, TOPIC, b"q1", 1)
    assert bodies(receive(stub, queue_id=0)[1]) == [b"q0", b"q1"]


@pytest.mark.parametrize(("invisible_ms", "word"), [(9_999, "small. min is 10000"), (12 * 3_600_000 + 1, "large")])
def test_an_invisible_duration_outside_the_proxys_bounds_is_illegal(broker, stub, invisible_ms, word):
    put(broker, TOPIC, b"kept")
    refused, none, _ = receive(stub, invisible_ms=invisible_ms)
    assert refused.code == Code.ILLEGAL_INVISIBLE_TIME and word in refused.message and none == []
    assert bodies(receive(stub)[1]) == [b"kept"]  # nothing was popped by the refused receive


def test_bad_names_and_receipt_handles_get_the_proxys_codes(broker, stub):
    assert receive(stub, topic="bad topic!")[0].code == Code.ILLEGAL_TOPIC
    assert receive(stub, group="bad group!")[0].code == Code.ILLEGAL_CONSUMER_GROUP
    assert receive(stub, topic="NeverCreated")[0].code == Code.TOPIC_NOT_FOUND
    put(broker, TOPIC, b"m")
    _, [message], _ = receive(stub)
    garbage = ack(stub, message, handle="not a handle")
    assert garbage.status.code == Code.INVALID_RECEIPT_HANDLE
    assert garbage.entries[0].status.code == Code.INVALID_RECEIPT_HANDLE
    assert "ckQueueOffset" in garbage.entries[0].status.message
    fields = message.system_properties.receipt_handle.split(" ")
    fields[1] = "1000"  # popped in 1970: its invisible time is long over
    expired = ack(stub, message, handle=" ".join(fields))
    assert expired.status.code == Code.INVALID_RECEIPT_HANDLE and "expired" in expired.entries[0].status.message
    assert change(stub, message, 1000, handle="x y z").status.code == Code.INVALID_RECEIPT_HANDLE
    assert ack(stub, message).status.code == Code.OK  # the real handle still works


def test_query_assignment_is_one_assignment_of_all_queues_or_each_queue_for_fifo(broker, stub, startup):
    answer = query_assignment(stub)
    assert answer.status.code == Code.OK
    [assignment] = answer.assignments
    queue = assignment.message_queue
    assert (queue.id, queue.permission, queue.broker.name, queue.broker.id) == (
        -1,
        definition.READ_WRITE,
        "broker-a",
        0,
    )
    assert queue.broker.endpoints.addresses[0].port == startup.proxy.port
    broker.subscription_group_manager.update_subscription_group_config(
        SubscriptionGroupConfig("FifoGroup", consume_message_orderly=True)
    )
    fifo = stub.QueryAssignment(
        service.QueryAssignmentRequest(topic=resource(TOPIC), group=resource("FifoGroup")),
        metadata=metadata(),
        timeout=5,
    )
    assert [a.message_queue.id for a in fifo.assignments] == [0, 1]
    missing = stub.QueryAssignment(
        service.QueryAssignmentRequest(topic=resource("NeverCreated"), group=resource(GROUP)),
        metadata=metadata(),
        timeout=5,
    )
    assert missing.status.code == Code.TOPIC_NOT_FOUND


def test_popped_message_pop_ck_is_not_a_user_property(broker, stub):
    put(broker, TOPIC, b"m")
    _, [message], _ = receive(stub)
    assert PROPERTY_POP_CK not in message.user_properties


ACL_RULES = """\
accounts:
  - accessKey: consumer-key
    secretKey: consumer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [RecvTopic=SUB]
    groupPerms: [RecvGroup=SUB]
"""
CONSUMER = {"access_key": "consumer-key", "secret_key": "consumer-secret"}


def test_with_acl_a_consumer_receives_and_acks_only_as_its_account_allows(start_grpc_broker, tmp_path):
    rules = tmp_path / "plain_acl.yml"
    rules.write_text(ACL_RULES)
    started = start_grpc_broker(aclEnable="true", aclConfigFile=str(rules), **FAST)
    broker = started.controller
    broker.topic_config_manager.update_topic_config(TopicConfig(TOPIC, 1, 1))
    put(broker, TOPIC, b"allowed")
    with messaging_stub(started.proxy.port) as stub:
        assert query_assignment(stub, **CONSUMER).status.code == Code.OK
        wrong = {"access_key": "consumer-key", "secret_key": "wrong"}
        assert query_assignment(stub, **wrong).status.code == Code.UNAUTHORIZED
        refused, none, _ = receive(stub, **wrong)
        assert refused.code == Code.UNAUTHORIZED and "Check signature failed" in refused.message and none == []
        other_group, _, _ = receive(stub, group="OtherGroup", **CONSUMER)
        assert other_group.code == Code.UNAUTHORIZED and "OtherGroup" in other_group.message
        _, [message], _ = receive(stub, **CONSUMER)
        assert ack(stub, message, **wrong).status.code == Code.UNAUTHORIZED
        assert ack(stub, message, **CONSUMER).status.code == Code.OK
