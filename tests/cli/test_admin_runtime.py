"""``rmq-admin``'s who-is-connected and figures commands (mqadmin's producerConnection,
consumerStatus, queryMsgById -g/-d and -s, statsAll, clusterRT, queryMsgByOffset, printMsg)
against real rmq-namesrv and rmq-broker processes, with the SDK's producers and consumers online."""

from __future__ import annotations

import json
import threading

from click.testing import CliRunner

from rmq.cli.admin import main
from rmq.client import ConsumeConcurrentlyStatus, Message, Producer, PushConsumer
from rmq.net import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.java_json import loads_mq_tables
from rmq.protocol.message import retry_topic
from tests.helpers import wait_until

TOPIC = "RuntimeTopic"
PRODUCER_GROUP = "RuntimeProducers"
GROUP = "RuntimeConsumers"
# a body the listener fails (RECONSUME_LATER) when it is handed to it directly
REFUSED = b"refuse me"
# the fields of 4.x's bodies (remoting/protocol/body/*.java of apache/rocketmq), which mqadmin reads
CONNECTION_FIELDS = {"clientId", "clientAddr", "language", "version"}
PROCESS_QUEUE_INFO_FIELDS = {
    "commitOffset",
    "cachedMsgMinOffset",
    "cachedMsgMaxOffset",
    "cachedMsgCount",
    "cachedMsgSizeInMiB",
    "transactionMsgMinOffset",
    "transactionMsgMaxOffset",
    "transactionMsgCount",
    "locked",
    "tryUnlockTimes",
    "lastLockTimestamp",
    "droped",
    "lastPullTimestamp",
    "lastConsumeTimestamp",
}
# ConsumerRunningInfo's, less mqPopTable and userConsumerInfo (empty for a 4.x push consumer too)
CONSUMER_RUNNING_INFO_FIELDS = {"properties", "subscriptionSet", "mqTable", "statusTable", "jstack"}
CONSUME_STATS_LIST_FIELDS = {"brokerAddr", "totalDiff", "totalInflightDiff", "consumeStatsList"}
CONSUME_MESSAGE_DIRECTLY_RESULT_FIELDS = {"order", "autoCommit", "consumeResult", "remark", "spentTimeMills"}


def admin(cluster, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, [*args, "-n", cluster.namesrv_addr])
    return result.exit_code, result.output


def admin_json(cluster, *args: str):
    code, out = admin(cluster, *args, "--json")
    assert code == 0, out
    return json.loads(out)


class Online:
    """A producer and a push consumer of TOPIC, the consumer's listener recording every body."""

    def __init__(self, namesrv: str):
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()
        self.producer = Producer(PRODUCER_GROUP, namesrv, instance_name="runtime-p").start()
        # offsets committed often: statsAll's accumulation reads the committed ones
        self.consumer = PushConsumer(
            GROUP,
            namesrv,
            instance_name="runtime-c",
            consume_from_where="FIRST_OFFSET",
            persist_consumer_offset_interval=0.2,
        )
        self.consumer.subscribe(TOPIC, "*")
        self.consumer.register_listener(self.listener)

    def listener(self, msgs):
        with self.lock:
            self.bodies += [m.body for m in msgs]
        if any(m.body == REFUSED for m in msgs):
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def received(self, body: bytes) -> int:
        with self.lock:
            return self.bodies.count(body)

    def send_then_consume(self, messages: list[Message]) -> list:
        """Send ``messages``, start the consumer and wait until it consumed each of them."""
        sent = [self.producer.send(m) for m in messages]
        self.consumer.start()
        wait_until(lambda: all(self.received(m.body) for m in messages), 10, "every message consumed")
        return sent

    def close(self) -> None:
        self.consumer.shutdown()
        self.producer.shutdown()


def test_who_is_connected_and_what_a_consumer_holds(cluster):
    cluster.create_topic(TOPIC, queues=2)
    online = Online(cluster.namesrv_addr)
    try:
        sent = online.send_then_consume([Message(TOPIC, b"m-%d" % i, keys=f"k{i}") for i in range(6)])
        client_id = online.consumer.instance.client_id

        # producer connections: the one producer, as GET_PRODUCER_CONNECTION_LIST lists it (a
        # producer's heartbeat reaches a broker within 30 s of its first send; this one at once)
        online.producer.instance.send_heartbeat_to_all()
        producers = admin_json(cluster, "producer", "connections", PRODUCER_GROUP)
        assert [p["clientId"] for p in producers] == [online.producer.instance.client_id]
        assert set(producers[0]) == CONNECTION_FIELDS
        assert producers[0]["language"] == "PYTHON" and producers[0]["clientAddr"].startswith("127.0.0.1:")
        code, out = admin(cluster, "producer", "connections", "NobodysGroup")
        assert code == 3 and "NobodysGroup" in out

        # running info, asked of the consumer itself through the broker: subscriptions, its queues
        # and their committed offsets (the consumer commits what it consumed)
        wait_until(
            lambda: (
                sum(
                    q["commitOffset"]
                    for q in admin_json(cluster, "consumer", "running-info", GROUP)[client_id]["mqTable"]
                    if q["topic"] == TOPIC
                )
                == 6
            ),
            10,
            "the running info's commit offsets cover the 6 consumed messages",
        )
        info = admin_json(cluster, "consumer", "running-info", GROUP, "--client-id", client_id, "--jstack")[client_id]
        assert set(info) == CONSUMER_RUNNING_INFO_FIELDS
        assert {s["topic"] for s in info["subscriptionSet"]} == {TOPIC, retry_topic(GROUP)}
        assert all(set(q) == PROCESS_QUEUE_INFO_FIELDS | {"topic", "brokerName", "queueId"} for q in info["mqTable"])
        assert {(q["topic"], q["queueId"]) for q in info["mqTable"] if q["topic"] == TOPIC} == {(TOPIC, 0), (TOPIC, 1)}
        assert info["properties"]["consumerGroup"] == GROUP
        assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert info["properties"]["messageModel"] == "CLUSTERING"
        assert "credentials" not in info["properties"]
        assert "rmq-consume-" + GROUP in info["jstack"]  # the consumer's threads, by name
        code, out = admin(cluster, "consumer", "running-info", GROUP, "--client-id", "10.9.9.9@nobody")
        assert code == 3 and "not online" in out

        # consume directly: the listener gets the stored message again, and says how it went
        code, out = admin(
            cluster, "message", "consume-directly", sent[2].msg_id, "-t", TOPIC, "-g", GROUP, "--client-id", client_id
        )
        assert code == 0 and "CR_SUCCESS" in out, out
        assert online.received(b"m-2") == 2
        refused = online.producer.send(Message(TOPIC, REFUSED))
        wait_until(lambda: online.received(REFUSED) >= 1, 10, "the refused message consumed")
        seen = online.received(REFUSED)
        code, out = admin(
            cluster, "message", "consume-directly", refused.offset_msg_id, "-t", TOPIC, "-g", GROUP,
            "--client-id", client_id, "--json",
        )  # fmt: skip
        assert code == 1 and json.loads(out)["consumeResult"] == "CR_LATER", out
        assert set(json.loads(out)) == CONSUME_MESSAGE_DIRECTLY_RESULT_FIELDS
        assert online.received(REFUSED) >= seen + 1

        # resend: a new stored message with the same body, keys and client id, consumed again
        resent = admin_json(cluster, "message", "resend", sent[4].msg_id, "-t", TOPIC)
        assert resent["sendStatus"] == "SEND_OK" and resent["msgId"] == sent[4].msg_id
        assert resent["offsetMsgId"] != sent[4].offset_msg_id
        wait_until(lambda: online.received(b"m-4") >= 2, 10, "the resent message consumed")
        stored = admin_json(cluster, "message", "id", resent["offsetMsgId"])
        assert stored["body"] == "m-4" and stored["keys"] == ["k4"]
    finally:
        online.close()


def test_figures_and_messages_by_offset_and_range(cluster):
    cluster.create_topic(TOPIC, queues=1)
    online = Online(cluster.namesrv_addr)
    try:
        sent = online.send_then_consume([Message(TOPIC, b"f-%d" % i, tags=f"T{i % 2}") for i in range(8)])

        # statsAll: the topic's 8 puts and the group's 8 gets, from VIEW_BROKER_STATS_DATA
        def group_row():
            rows = admin_json(cluster, "cluster", "stats-all", "-t", TOPIC)
            return next((r for r in rows if r["group"] == GROUP), None)

        wait_until(lambda: (row := group_row()) is not None and row["out_msg_24h"] == 8, 10, "the group's gets")
        row = group_row()
        assert row["in_msg_24h"] == 8 and row["in_tps"] > 0 and row["out_tps"] > 0
        wait_until(lambda: group_row()["accumulation"] == 0, 10, "the group's lag back to 0")
        code, out = admin(cluster, "cluster", "stats-all", "-t", TOPIC)
        assert code == 0 and GROUP in out

        # brokerConsumeStats: every group's queues on the broker, the group's caught up on TOPIC
        stats = admin_json(cluster, "broker", "consume-stats", "broker-a")
        mine = [q for q in stats["queues"] if q["group"] == GROUP and q["topic"] == TOPIC]
        assert [(q["queueId"], q["brokerOffset"], q["consumerOffset"], q["lag"]) for q in mine] == [(0, 8, 8, 0)]
        assert stats["brokerAddr"] == cluster.broker_addr and stats["totalDiff"] >= 0
        answer = cluster.call(RemotingCommand.request(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"}))
        assert set(loads_mq_tables(answer.body)) == CONSUME_STATS_LIST_FIELDS

        # queryMsgByOffset: the message at offset 5 of queue 0
        found = admin_json(cluster, "message", "by-offset", TOPIC, "broker-a", "0", "5")
        assert found["body"] == "f-5" and found["msgId"] == sent[5].offset_msg_id
        code, out = admin(cluster, "message", "by-offset", TOPIC, "broker-a", "0", "99")
        assert code == 3 and "offset 99" in out

        # printMsg: an offset range of one queue, then a time range of the topic
        printed = admin_json(
            cluster, "message", "print", TOPIC, "--broker", "broker-a", "--queue", "0", "--from-offset", "2",
            "--to-offset", "5",
        )  # fmt: skip
        assert [m["body"] for m in printed] == ["f-2", "f-3", "f-4"]
        stored_at = [m["storeTimestamp"] for m in admin_json(cluster, "message", "print", TOPIC)]
        assert len(stored_at) == 8
        later = admin_json(cluster, "message", "print", TOPIC, "--begin", str(stored_at[6]))
        assert [m["body"] for m in later][-2:] == ["f-6", "f-7"]
        assert all(m["storeTimestamp"] >= stored_at[6] for m in later)
        code, out = admin(cluster, "message", "print", TOPIC, "--from-offset", "2")
        assert code == 2 and "--broker and --queue" in out

        # clusterRT: the broker's own topic takes the test messages
        rt = admin_json(cluster, "cluster", "rt", "-a", "4", "-s", "64")
        assert [(r["broker_name"], r["success_count"], r["fail_count"]) for r in rt] == [("broker-a", 4, 0)]
        assert rt[0]["rt_ms"] > 0
        code, out = admin(cluster, "cluster", "rt", "-c", "NoSuchCluster")
        assert code == 1 and "NoSuchCluster" in out
    finally:
        online.close()


def test_bad_requests_get_a_clear_refusal_and_the_broker_goes_on(cluster):
    cluster.create_topic(TOPIC, queues=1)
    cases = [
        (RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "NO_SUCH_STATS", "statsKey": TOPIC}, "TOPIC_PUT_NUMS"),
        (RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS", "statsKey": "NeverSeen"}, "not exist"),
        (RequestCode.CONSUME_MESSAGE_DIRECTLY, {"consumerGroup": GROUP, "clientId": "c", "msgId": "zz"}, "32 hex"),
        (RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": GROUP, "clientId": "c"}, "not online"),
        (RequestCode.GET_PRODUCER_CONNECTION_LIST, {}, "producerGroup"),
    ]
    for code, ext, remark in cases:
        answer = cluster.call(RemotingCommand.request(code, ext))
        assert answer.code != ResponseCode.SUCCESS and remark in (answer.remark or ""), (code, answer.remark)
    assert cluster.call(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)).code == ResponseCode.SUCCESS
