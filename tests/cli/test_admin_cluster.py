"""rmq-admin against real rmq-namesrv and rmq-broker processes, human and --json output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from rmq.cli.admin import main
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers.processes import Cluster
from tests.helpers.requests import send_request


class AdminCli:
    """``rmq-admin`` (in-process, through click) against a cluster, and requests to its broker."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.broker_addr = cluster.broker_addr
        self.namesrv = cluster.namesrv_addr

    def admin(self, *args: str) -> tuple[int, str]:
        result = CliRunner().invoke(main, [*args, "-n", self.namesrv])
        return result.exit_code, result.output

    def admin_json(self, *args: str):
        code, output = self.admin(*args, "--json")
        assert code == 0, output
        return json.loads(output)

    def send(self, topic: str, body: bytes, queue_id: int, keys: str, uniq_key: str | None = None) -> str:
        properties = {"UNIQ_KEY": uniq_key} if uniq_key else None
        answer = self.cluster.call(
            send_request(
                topic,
                body,
                code=RequestCode.SEND_MESSAGE,
                queue_id=queue_id,
                tags="t",
                keys=keys,
                properties=properties,
            )
        )
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        return answer.ext_fields["msgId"]

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        ext = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset}
        answer = self.cluster.call(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext))
        assert answer.code == ResponseCode.SUCCESS, answer.remark


@pytest.fixture
def cli(cluster) -> AdminCli:
    return AdminCli(cluster)


def test_topic_lifecycle_progress_reset_and_lookup(cli):
    code, out = cli.admin("topic", "create", "TopicCli", "-q", "2")
    assert code == 0 and "created topic TopicCli (2 read / 2 write queues, perm RW-)" in out
    code, out = cli.admin("topic", "create", "TopicCli")
    assert code == 1 and "already exists" in out
    assert "TopicCli" in cli.admin("topic", "list")[1].split()
    assert "TopicCli" in cli.admin_json("topic", "list")
    route = cli.admin_json("topic", "route", "TopicCli")
    assert route["queueDatas"][0]["writeQueueNums"] == 2
    assert "broker-a" in cli.admin("topic", "route", "TopicCli")[1]

    client_ids = [f"7F000001{i:04X}0000000000000000{i:04X}" for i in range(3)]
    ids = [
        cli.send("TopicCli", f"body-{i}".encode(), 0, keys=f"order-{i % 2}", uniq_key=client_ids[i]) for i in range(3)
    ]
    status = cli.admin_json("topic", "status", "TopicCli")
    assert [(q["queueId"], q["minOffset"], q["maxOffset"]) for q in status] == [(0, 0, 3), (1, 0, 0)]
    code, out = cli.admin("topic", "status", "TopicCli")
    assert code == 0 and out.splitlines()[0].split() == [
        "Broker",
        "Queue",
        "Min",
        "Offset",
        "Max",
        "Offset",
        "Last",
        "Updated",
    ]

    code, out = cli.admin("message", "id", ids[1])
    assert code == 0 and "Topic:            TopicCli" in out and "body-1" in out
    shown = cli.admin_json("message", "id", ids[1])
    assert shown["body"] == "body-1" and shown["keys"] == ["order-1"] and shown["queueOffset"] == 1
    # the msgId a producer gets back is the client id: found through the index, with --topic
    shown = cli.admin_json("message", "id", client_ids[2], "--topic", "TopicCli")
    assert shown["body"] == "body-2" and shown["msgId"] == ids[2] and shown["uniqKey"] == client_ids[2]
    assert cli.admin_json("message", "id", ids[0], "-t", "TopicCli")["body"] == "body-0"
    code, out = cli.admin("message", "id", "7F000001FFFF0000000000000000FFFF", "--topic", "TopicCli")
    assert code == 3 and "no message of topic TopicCli has client message id" in out
    found = cli.admin_json("message", "key", "TopicCli", "order-0")
    assert sorted(m["msgId"] for m in found) == sorted([ids[0], ids[2]])
    code, out = cli.admin("message", "key", "TopicCli", "order-0")
    assert code == 0 and ids[0] in out and ids[2] in out
    code, out = cli.admin("message", "key", "TopicCli", "no-such-key")
    assert code == 3 and "no message of topic TopicCli" in out

    cli.commit_offset("GroupCli", "TopicCli", 0, 1)
    progress = cli.admin_json("consumer", "progress", "GroupCli")
    q0 = next(p for p in progress if p["queueId"] == 0)
    assert (q0["brokerOffset"], q0["consumerOffset"], q0["lag"]) == (3, 1, 2)
    code, out = cli.admin("consumer", "progress", "GroupCli")
    assert code == 0 and "Total lag: 2" in out

    reset = cli.admin_json("consumer", "reset-offset", "GroupCli", "TopicCli", "--timestamp", "0")
    assert [(r["queueId"], r["offset"]) for r in reset] == [(0, 0), (1, 0)]
    progress = cli.admin_json("consumer", "progress", "GroupCli")
    assert next(p for p in progress if p["queueId"] == 0)["lag"] == 3
    code, out = cli.admin("consumer", "reset-offset", "GroupCli", "TopicCli", "--timestamp", "latest")
    assert code == 0 and "New Offset" in out

    code, out = cli.admin("topic", "delete", "TopicCli")
    assert code == 0 and "deleted topic TopicCli" in out
    code, out = cli.admin("topic", "status", "TopicCli")
    assert code == 3 and "TOPIC_NOT_EXIST" in out


def test_cluster_list_and_unknown_things(cli):
    code, out = cli.admin("cluster", "list")
    assert code == 0 and "DefaultCluster" in out and cli.broker_addr in out and "rmq" in out
    (broker,) = cli.admin_json("cluster", "list")
    assert broker["brokerName"] == "broker-a" and broker["brokerId"] == 0
    code, out = cli.admin("topic", "route", "NoSuchTopic")
    assert code == 3 and out.startswith("rmq-admin: ") and "NoSuchTopic" in out
    code, out = cli.admin("topic", "update", "NoSuchTopic", "-q", "2")
    assert code == 3 and "topic create" in out
    code, out = cli.admin("consumer", "connections", "NobodyOnline")
    assert code == 3 and "CONSUMER_NOT_ONLINE" in out
    code, out = cli.admin("message", "id", "7F00000100002A9F00000000FFFFFFFF")
    assert code != 0


def test_python_dash_m_runs_the_command(cli):
    result = subprocess.run(
        [sys.executable, "-m", "rmq.cli.admin", "cluster", "list", "-n", cli.namesrv, "--json"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)[0]["addr"] == cli.broker_addr
