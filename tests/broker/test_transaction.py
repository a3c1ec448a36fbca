"""Transactional messages end to end, against real ``rmq-namesrv`` and ``rmq-broker`` processes: half
messages stay invisible, END_TRANSACTION commits or rolls back, the checker asks producers about
transactions left open, and all of it survives a SIGKILL of the broker."""

from __future__ import annotations

import time

import pytest

from rmq.client import LocalTransactionState, Message, PushConsumer, TransactionProducer
from rmq.client.admin_client import AdminClient
from rmq.errors import ResponseError
from rmq.net import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.message import (
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    MessageProperty,
    MessageSysFlag,
)
from rmq.protocol.record import decode_msg_id
from rmq.protocol.transaction import TRANSACTION_CHECK_GROUP, EndTransactionHeader, TransactionState
from tests.helpers import wait_until
from tests.helpers.processes import BrokerPair
from tests.helpers.requests import offset_request
from tests.helpers.transaction import FAST_CHECKS, Checks, bodies, start_tx_cluster, wait_checker_past

COMMIT, ROLLBACK, UNKNOWN = LocalTransactionState.COMMIT, LocalTransactionState.ROLLBACK, LocalTransactionState.UNKNOWN
CLIENT_TIMERS = {"heartbeat_broker_interval": 1.0, "poll_name_server_interval": 1.0}


def test_commit_is_delivered_once_rollback_never(tx_cluster):
    topic = tx_cluster.create_topic("TxOrders", queues=2)
    received: list[bytes] = []
    consumer = PushConsumer("tx-readers", tx_cluster.namesrv_addr, consume_from_where="FIRST_OFFSET", **CLIENT_TIMERS)
    consumer.subscribe(topic)
    consumer.register_listener(lambda msgs: received.extend(m.body for m in msgs))
    outcomes = {b"c1": COMMIT, b"r1": ROLLBACK, b"c2": COMMIT, b"r2": ROLLBACK}
    checks = Checks()
    with (
        consumer,
        TransactionProducer(
            "tx-orders", tx_cluster.namesrv_addr, execute=lambda msg, arg: outcomes[msg.body], check=checks
        ) as producer,
    ):
        results = {}
        for body in outcomes:
            results[body] = producer.send_message_in_transaction(
                Message(topic, body, tags="T", keys=f"key-{body.decode()}"), arg=None
            )
        assert {b: r.local_transaction_state for b, r in results.items()} == outcomes
        wait_until(lambda: sorted(received) == [b"c1", b"c2"], 20, lambda: f"the commits consumed: {received}")
        # the checker went through all four: each was ended (none checked), nothing more committed
        wait_checker_past(tx_cluster)
        assert checks.asked == []
        assert sorted(received) == [b"c1", b"c2"]
    assert bodies(tx_cluster, topic) == [b"c1", b"c2"]
    assert bodies(tx_cluster, TRANS_HALF_TOPIC) == sorted(outcomes)
    assert len(tx_cluster.messages(TRANS_OP_HALF_TOPIC)) == 4

    # the committed message is the producer's: its keys, UNIQ_KEY and properties; sysFlag COMMIT;
    # TRAN_MSG dropped, PGROUP kept, as RocketMQ 4.7+ leaves them; findable by the producer's msgId
    committed = {m.body: m for m in tx_cluster.messages(topic)}[b"c1"]
    assert committed.properties[MessageProperty.UNIQ_KEY] == results[b"c1"].msg_id
    assert committed.keys == ["key-c1"] and committed.tags == "T"
    assert committed.properties[MessageProperty.PRODUCER_GROUP] == "tx-orders"
    assert MessageProperty.TRANSACTION_PREPARED not in committed.properties
    assert MessageProperty.REAL_TOPIC not in committed.properties
    assert committed.sys_flag & MessageSysFlag.TRANSACTION_MASK == MessageSysFlag.TRANSACTION_COMMIT_TYPE
    half = {m.body: m for m in tx_cluster.messages(TRANS_HALF_TOPIC)}[b"c1"]
    assert committed.prepared_transaction_offset == half.physical_offset
    assert half.properties[MessageProperty.REAL_TOPIC] == topic
    assert half.sys_flag & MessageSysFlag.TRANSACTION_MASK == 0
    with AdminClient(tx_cluster.namesrv_addr) as admin:
        found = admin.find_message(results[b"c1"].msg_id, topic)
    assert found.body == b"c1" and found.topic == topic
    # op records: tag "d", body the half queue offset, as RocketMQ writes them
    ops = tx_cluster.messages(TRANS_OP_HALF_TOPIC)
    assert {m.tags for m in ops} == {"d"}
    assert sorted(int(m.body) for m in ops) == sorted(m.queue_offset for m in tx_cluster.messages(TRANS_HALF_TOPIC))


def test_unknown_is_checked_back_then_committed_or_rolled_back(tx_cluster):
    topic = tx_cluster.create_topic("TxUnknown", queues=1)
    checks = Checks({b"later-commit": COMMIT, b"later-rollback": ROLLBACK})

    def execute(msg, arg):
        if msg.body == b"raises":
            raise RuntimeError("the local transaction failed half way")
        return UNKNOWN

    with TransactionProducer("tx-unknown", tx_cluster.namesrv_addr, execute=execute, check=checks) as producer:
        sent = {}
        for body in (b"later-commit", b"later-rollback", b"raises"):
            sent[body] = producer.send_message_in_transaction(Message(topic, body))
            assert sent[body].local_transaction_state is UNKNOWN
        wait_until(lambda: bodies(tx_cluster, topic) == [b"later-commit"], 20, "the checked commit stored")
        # an exception in execute is UNKNOWN: it is checked too (the check says UNKNOWN: asked again)
        wait_until(lambda: checks.bodies().count(b"raises") >= 2, 20, "the failed one checked twice")
        # a round after each answered check reached its copy: ended, or it would be asked again
        answered = [m.queue_offset for m in checks.asked_messages() if m.body != b"raises"]
        wait_checker_past(tx_cluster, max(answered))
    assert bodies(tx_cluster, topic) == [b"later-commit"]
    asked = {m.body: m for _, m in checks.asked}
    assert set(asked) == {b"later-commit", b"later-rollback", b"raises"}
    # the checked message is the producer's, in its real topic, with its ids
    msg = asked[b"later-commit"]
    assert msg.topic == topic and msg.msg_id == sent[b"later-commit"].msg_id
    assert msg.get_property(MessageProperty.TRANSACTION_CHECK_TIMES) == "1"
    # answered once, each is asked once: nothing is checked after its END
    assert checks.bodies().count(b"later-commit") == 1 and checks.bodies().count(b"later-rollback") == 1


def test_check_immunity_time_is_honoured(tx_cluster):
    topic = tx_cluster.create_topic("TxImmune", queues=1)
    checks = Checks({b"immune": COMMIT, b"plain": COMMIT})
    with TransactionProducer(
        "tx-immune", tx_cluster.namesrv_addr, execute=lambda msg, arg: UNKNOWN, check=checks
    ) as producer:
        immune = Message(topic, b"immune")
        immune.put_property(MessageProperty.CHECK_IMMUNITY_TIME_IN_SECONDS, "4")
        sent_at = time.time()
        producer.send_message_in_transaction(immune)
        producer.send_message_in_transaction(Message(topic, b"plain"))
        wait_until(lambda: bodies(tx_cluster, topic) == [b"immune", b"plain"], 20, "both checked and committed")
    first_ask = {m.body: at for at, m in reversed(checks.asked)}
    assert first_ask[b"plain"] - sent_at < 4.0  # transactionTimeOut (1 s) and a round or two
    assert first_ask[b"immune"] - sent_at >= 4.0 - 0.05  # not before its immunity is over (clock skew)


def test_past_transaction_check_max_it_goes_to_trans_check_max_time_topic(spawn, tmp_path):
    tx_cluster = start_tx_cluster(spawn, tmp_path, transactionCheckMax="2")
    try:
        topic = tx_cluster.create_topic("TxForever", queues=1)
        checks = Checks()  # always UNKNOWN
        with TransactionProducer(
            "tx-forever", tx_cluster.namesrv_addr, execute=lambda msg, arg: UNKNOWN, check=checks
        ) as producer:
            result = producer.send_message_in_transaction(Message(topic, b"undecided", keys="k-undecided"))
            wait_until(lambda: tx_cluster.messages(TRANS_CHECK_MAX_TIME_TOPIC), 30, "the message given up")
            # and not put back: a copy would hold the checker short of the end of the half queue
            wait_checker_past(tx_cluster)
            assert checks.bodies() == [b"undecided", b"undecided"]  # transactionCheckMax checks, no more
        [given_up] = tx_cluster.messages(TRANS_CHECK_MAX_TIME_TOPIC)
        assert given_up.body == b"undecided" and given_up.uniq_key == result.msg_id
        assert given_up.properties[MessageProperty.REAL_TOPIC] == topic
        assert bodies(tx_cluster, topic) == []
    finally:
        tx_cluster.close()


def test_broker_sigkilled_between_half_and_end_recovers_the_outcome(tx_cluster):
    topic = tx_cluster.create_topic("TxCrash", queues=2)
    decided: dict[bytes, LocalTransactionState] = {}
    checks = Checks(decided)
    before = {b"done-before": COMMIT, b"dropped-before": ROLLBACK}
    with TransactionProducer(
        "tx-crash",
        tx_cluster.namesrv_addr,
        execute=lambda msg, arg: before.get(msg.body, UNKNOWN),
        check=checks,
        **CLIENT_TIMERS,
    ) as producer:
        for body in (b"done-before", b"dropped-before", b"open-commit", b"open-rollback"):
            producer.send_message_in_transaction(Message(topic, body))
        wait_until(lambda: bodies(tx_cluster, topic) == [b"done-before"], 10, "the first commit stored")
        tx_cluster.kill_broker()
        # the local transactions are decided while the broker is down; only a check can tell it
        decided.update({b"open-commit": COMMIT, b"open-rollback": ROLLBACK})
        tx_cluster.start_broker()
        wait_until(
            lambda: bodies(tx_cluster, topic) == [b"done-before", b"open-commit"],
            30,
            lambda: f"the open commit recovered by a check: {bodies(tx_cluster, topic)}",
        )
        wait_until(lambda: b"open-rollback" in checks.bodies(), 10, "the open rollback checked")
        # a round after both answers reached their copies: ended, or they would be asked again
        wait_checker_past(tx_cluster, max(m.queue_offset for m in checks.asked_messages()))
    assert bodies(tx_cluster, topic) == [b"done-before", b"open-commit"]
    assert b"done-before" not in checks.bodies() and b"dropped-before" not in checks.bodies()
    # the checker's progress is the consumer offsets of RocketMQ's system group
    answer = tx_cluster.call(
        offset_request(RequestCode.QUERY_CONSUMER_OFFSET, TRANS_HALF_TOPIC, 0, TRANSACTION_CHECK_GROUP)
    )
    assert answer.code == ResponseCode.SUCCESS and int(answer.ext_fields["offset"]) > 0


@pytest.mark.slow
def test_a_slave_holds_the_half_and_op_records_and_only_the_master_checks(spawn, tmp_path):
    pair = BrokerPair(spawn, tmp_path, master=FAST_CHECKS, slave={**FAST_CHECKS, "registerNameServerPeriod": "1000"})
    pair.start()
    try:
        topic = pair.create_topic("TxReplicated", queues=1)
        checks = Checks()  # UNKNOWN: asked again every round
        outcomes = {b"rep-commit": COMMIT, b"rep-rollback": ROLLBACK, b"rep-open": UNKNOWN}
        with TransactionProducer(
            "tx-replicated", pair.namesrv_addr, execute=lambda m, a: outcomes[m.body], check=checks, **CLIENT_TIMERS
        ) as producer:
            results = {body: producer.send_message_in_transaction(Message(topic, body)) for body in outcomes}
            for system_topic in (TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC):
                wait_until(
                    lambda t=system_topic: (
                        pair.max_offsets(pair.slave_addr, t) == pair.max_offsets(pair.master_addr, t)
                    ),
                    30,
                    f"{system_topic} replicated to the slave",
                )
            # END_TRANSACTION is for the master; the slave refuses it
            open_result = results[b"rep-open"]
            header = EndTransactionHeader(
                "tx-replicated",
                open_result.queue_offset,
                decode_msg_id(open_result.offset_msg_id)[2],
                TransactionState.COMMIT,
                msg_id=open_result.msg_id,
            )
            request = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext_fields())
            assert pair.call(pair.slave_addr, request).code == ResponseCode.SLAVE_NOT_AVAILABLE
            wait_until(lambda: len(checks.asked) >= 3, 20, "the open transaction checked three times")
        # the producer heartbeats both brokers, yet each check comes once: only the master checks
        times = [m.get_property(MessageProperty.TRANSACTION_CHECK_TIMES) for m in checks.asked_messages()]
        assert len(times) == len(set(times)), times
        assert pair.max_offsets(pair.slave_addr, topic) == {0: 1}
    finally:
        pair.close()


def test_a_timed_transactional_message_waits_for_its_time_from_the_commit(tx_cluster):
    topic = tx_cluster.create_topic("TxTimed", queues=1)
    with TransactionProducer("tx-timed", tx_cluster.namesrv_addr, execute=lambda m, a: COMMIT, check=Checks()) as p:
        timed = Message(topic, b"at-time")
        timed.put_property(MessageProperty.TIMER_DELAY_MS, "2000")
        p.send_message_in_transaction(timed)
        committed_at = time.monotonic()
        p.send_message_in_transaction(Message(topic, b"at-once"))
        wait_until(lambda: bodies(tx_cluster, topic) == [b"at-once"], 10, "the untimed one delivered")
        wait_until(lambda: bodies(tx_cluster, topic) == [b"at-once", b"at-time"], 15, "the timed one delivered")
    assert time.monotonic() - committed_at >= 2.0 - 0.1
    with TransactionProducer("tx-timed", tx_cluster.namesrv_addr, execute=lambda m, a: COMMIT, check=Checks()) as p:
        too_far = Message(topic, b"too-far")
        too_far.put_property(MessageProperty.TIMER_DELAY_SEC, str(10 * 24 * 3600))
        with pytest.raises(ResponseError, match="max delay"):
            p.send_message_in_transaction(too_far)
