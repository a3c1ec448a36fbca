"""rmq-admin's replication views against a real master and slave (processes): ``cluster list`` shows
both with role, epoch, max offset and lag; ``broker ha-status`` what the master knows of its slave,
which shows a stalled slave falling behind."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmq.cli.admin import main
from rmq.net import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers import wait_until
from tests.helpers.processes import BrokerPair
from tests.helpers.requests import send_request

TOPIC = "HaStatus"


def admin(pair: BrokerPair, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, [*args, "-n", pair.namesrv_addr])
    return result.exit_code, result.output


def admin_json(pair: BrokerPair, *args: str):
    code, output = admin(pair, *args, "--json")
    assert code == 0, output
    return json.loads(output)


def send(pair: BrokerPair, count: int) -> None:
    for i in range(count):
        answer = pair.call(pair.master_addr, send_request(TOPIC, b"x" * 500 + b"%d" % i))
        assert answer.code == ResponseCode.SUCCESS, answer.remark


@pytest.fixture
def pair(spawn, tmp_path: Path):
    pair = BrokerPair(spawn, tmp_path).start()
    try:
        yield pair
    finally:
        pair.close()


@pytest.mark.slow
def test_cluster_list_and_ha_status_of_a_master_and_its_slave(pair):
    pair.create_topic(TOPIC, 2)
    send(pair, 20)
    pair.wait_replicated(TOPIC)

    master, slave = admin_json(pair, "cluster", "list")
    assert (master["brokerId"], master["addr"], master["role"]) == (0, pair.master_addr, "ASYNC_MASTER")
    assert (slave["brokerId"], slave["addr"], slave["role"]) == (1, pair.slave_addr, "SLAVE")
    assert master["maxOffset"] > 0 and master["lagBytes"] is None
    assert slave["maxOffset"] == master["maxOffset"] and slave["lagBytes"] == 0
    # the master's first term, and the slave holds its master's epoch table
    assert (master["epoch"], master["runtime"]["epoch"]) == (1, "1")
    assert slave["epoch"] == 1
    code, out = admin(pair, "cluster", "list")
    assert code == 0
    header, *lines = out.splitlines()
    assert header.split()[:8] == ["Cluster", "Broker", "BID", "Address", "Role", "Epoch", "Max", "Offset"]
    assert "SLAVE" in lines[1] and pair.slave_addr in lines[1]

    status = admin_json(pair, "broker", "ha-status", "broker-a")
    assert status["masterAddr"] == pair.master_addr
    (connection,) = status["slaves"]
    assert connection["ackedOffset"] == status["masterMaxOffset"] == master["maxOffset"]
    assert connection["lagBytes"] == 0 and connection["lagMs"] == 0
    assert connection["connectedSince"] > 0
    code, out = admin(pair, "broker", "ha-status", "broker-a")
    assert code == 0 and f"master {pair.master_addr} of broker-a" in out and connection["address"] in out

    # a stalled slave (SIGSTOP) keeps its connection and falls behind, in bytes and in time
    os.kill(pair.slave_proc.pid, signal.SIGSTOP)
    try:
        # SIGSTOP lands asynchronously, and a report the slave sent just before may still be read:
        # take the acked offset once the slave is stopped and its last report is in
        wait_until(lambda: _state(pair.slave_proc.pid) == "T", 10, "the slave stopped")
        acked = _settled_ack(pair)
        send(pair, 20)
        wait_until(
            lambda: admin_json(pair, "broker", "ha-status", "broker-a")["slaves"][0]["lagMs"] >= 200, 10, "lag in ms"
        )
        status = admin_json(pair, "broker", "ha-status", "broker-a")
        (connection,) = status["slaves"]
        assert connection["ackedOffset"] == acked
        assert connection["lagBytes"] == status["masterMaxOffset"] - acked > 20 * 500
    finally:
        os.kill(pair.slave_proc.pid, signal.SIGCONT)
    wait_until(
        lambda: admin_json(pair, "broker", "ha-status", "broker-a")["slaves"][0]["lagBytes"] == 0, 10, "caught up"
    )

    # only a master tracks slaves: the slave refuses, and an unknown broker name is an error
    answer = pair.call(pair.slave_addr, RemotingCommand.request(RequestCode.GET_HA_STATUS, {}))
    assert answer.code == ResponseCode.SYSTEM_ERROR and "not a master" in answer.remark
    code, out = admin(pair, "broker", "ha-status", "broker-x")
    assert code == 1 and "broker-x" in out


def _state(pid: int) -> str:
    """A process's state letter from /proc (``T``: stopped)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def _settled_ack(pair) -> int:
    """The stopped slave's acked offset once two reads half a second apart agree."""
    seen: list[int] = []

    def settled() -> bool:
        seen.append(admin_json(pair, "broker", "ha-status", "broker-a")["slaves"][0]["ackedOffset"])
        if len(seen) >= 2 and seen[-1] == seen[-2]:
            return True
        time.sleep(0.5)
        return False

    wait_until(settled, 10, "the stopped slave's last ack read")
    return seen[-1]
