"""rmq-admin against a real rmq-broker process (embedded name server), human and --json output."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from rmq.cli.admin import main
from rmq.message import encode_properties
from rmq.net.client import RemotingClient
from rmq.net.codec import RemotingCommand
from rmq.net.codes import RequestCode, ResponseCode
from tests.conftest import free_port, wait_for_port

# the broker core lands on main separately; until then there is no rmq-broker to run
pytest.importorskip("rmq.broker.controller")

SMALL_FILES = ("mappedFileSizeCommitLog=4194304", "mappedFileSizeConsumeQueue=60000",
               "maxHashSlotNum=1024", "maxIndexNum=4096")


class Cluster:
    def __init__(self, broker_addr: str, namesrv: str):
        self.broker_addr = broker_addr
        self.namesrv = namesrv
        self.client = RemotingClient()

    def admin(self, *args: str) -> tuple[int, str]:
        result = CliRunner().invoke(main, [*args, "-n", self.namesrv])
        return result.exit_code, result.output

    def admin_json(self, *args: str):
        code, output = self.admin(*args, "--json")
        assert code == 0, output
        return json.loads(output)

    def send(self, topic: str, body: bytes, queue_id: int, **properties: str) -> str:
        ext = {"producerGroup": "P", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
               "queueId": queue_id, "sysFlag": 0, "bornTimestamp": int(time.time() * 1000), "flag": 0,
               "properties": encode_properties(properties).decode(), "reconsumeTimes": 0, "unitMode": False}
        answer = self.client.invoke_sync(self.broker_addr,
                                         RemotingCommand.request(RequestCode.SEND_MESSAGE, ext, body), 3.0)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        return answer.ext_fields["msgId"]

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        ext = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset}
        answer = self.client.invoke_sync(self.broker_addr,
                                         RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext), 3.0)
        assert answer.code == ResponseCode.SUCCESS, answer.remark


@pytest.fixture
def cluster(spawn, store_dir):
    port, namesrv_port = free_port(), free_port()
    settings = ["brokerIP1=127.0.0.1", f"listenPort={port}", f"namesrvListenPort={namesrv_port}",
                f"storePathRootDir={store_dir}", *SMALL_FILES]
    proc = spawn("-m", "rmq.cli.broker", *[a for s in settings for a in ("--set", s)],
                 stderr=subprocess.DEVNULL)
    wait_for_port(port, proc=proc)
    wait_for_port(namesrv_port, proc=proc)
    c = Cluster(f"127.0.0.1:{port}", f"127.0.0.1:{namesrv_port}")
    c.client.start()
    yield c
    c.client.shutdown()


def test_topic_lifecycle_progress_reset_and_lookup(cluster):
    code, out = cluster.admin("topic", "create", "TopicCli", "-q", "2")
    assert code == 0 and "created topic TopicCli (2 read / 2 write queues, perm RW-)" in out
    code, out = cluster.admin("topic", "create", "TopicCli")
    assert code == 1 and "already exists" in out
    assert "TopicCli" in cluster.admin("topic", "list")[1].split()
    assert "TopicCli" in cluster.admin_json("topic", "list")
    route = cluster.admin_json("topic", "route", "TopicCli")
    assert route["queueDatas"][0]["writeQueueNums"] == 2
    assert "broker-a" in cluster.admin("topic", "route", "TopicCli")[1]

    ids = [cluster.send("TopicCli", f"body-{i}".encode(), 0, KEYS=f"order-{i % 2}", TAGS="t") for i in range(3)]
    status = cluster.admin_json("topic", "status", "TopicCli")
    assert [(q["queueId"], q["minOffset"], q["maxOffset"]) for q in status] == [(0, 0, 3), (1, 0, 0)]
    code, out = cluster.admin("topic", "status", "TopicCli")
    assert code == 0 and out.splitlines()[0].split() == ["Broker", "Queue", "Min", "Offset", "Max", "Offset",
                                                          "Last", "Updated"]

    code, out = cluster.admin("message", "id", ids[1])
    assert code == 0 and "Topic:            TopicCli" in out and "body-1" in out
    shown = cluster.admin_json("message", "id", ids[1])
    assert shown["body"] == "body-1" and shown["keys"] == ["order-1"] and shown["queueOffset"] == 1
    found = cluster.admin_json("message", "key", "TopicCli", "order-0")
    assert sorted(m["msgId"] for m in found) == sorted([ids[0], ids[2]])
    code, out = cluster.admin("message", "key", "TopicCli", "order-0")
    assert code == 0 and ids[0] in out and ids[2] in out
    code, out = cluster.admin("message", "key", "TopicCli", "no-such-key")
    assert code == 3 and "no message of topic TopicCli" in out

    cluster.commit_offset("GroupCli", "TopicCli", 0, 1)
    progress = cluster.admin_json("consumer", "progress", "GroupCli")
    q0 = next(p for p in progress if p["queueId"] == 0)
    assert (q0["brokerOffset"], q0["consumerOffset"], q0["lag"]) == (3, 1, 2)
    code, out = cluster.admin("consumer", "progress", "GroupCli")
    assert code == 0 and "Total lag: 2" in out

    reset = cluster.admin_json("consumer", "reset-offset", "GroupCli", "TopicCli", "--timestamp", "0")
    assert [(r["queueId"], r["offset"]) for r in reset] == [(0, 0), (1, 0)]
    progress = cluster.admin_json("consumer", "progress", "GroupCli")
    assert next(p for p in progress if p["queueId"] == 0)["lag"] == 3
    code, out = cluster.admin("consumer", "reset-offset", "GroupCli", "TopicCli", "--timestamp", "latest")
    assert code == 0 and "New Offset" in out

    code, out = cluster.admin("topic", "delete", "TopicCli")
    assert code == 0 and "deleted topic TopicCli" in out
    code, out = cluster.admin("topic", "status", "TopicCli")
    assert code == 3 and "TOPIC_NOT_EXIST" in out


def test_cluster_list_and_unknown_things(cluster):
    code, out = cluster.admin("cluster", "list")
    assert code == 0 and "DefaultCluster" in out and cluster.broker_addr in out and "rmq" in out
    (broker,) = cluster.admin_json("cluster", "list")
    assert broker["brokerName"] == "broker-a" and broker["brokerId"] == 0
    code, out = cluster.admin("topic", "route", "NoSuchTopic")
    assert code == 3 and out.startswith("rmq-admin: ") and "NoSuchTopic" in out
    code, out = cluster.admin("topic", "update", "NoSuchTopic", "-q", "2")
    assert code == 3 and "topic create" in out
    code, out = cluster.admin("consumer", "connections", "NobodyOnline")
    assert code == 3 and "CONSUMER_NOT_ONLINE" in out
    code, out = cluster.admin("message", "id", "7F00000100002A9F00000000FFFFFFFF")
    assert code != 0


def test_python_dash_m_runs_the_command(cluster):
    result = subprocess.run([sys.executable, "-m", "rmq.cli.admin", "cluster", "list", "-n", cluster.namesrv,
                             "--json"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)[0]["addr"] == cluster.broker_addr
