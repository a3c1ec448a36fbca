"""rmq-admin broker promote against real rmq-namesrv and rmq-broker processes: a slave made master,
human and --json output, and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from rmq.cli.admin import main
from rmq.protocol.codes import ResponseCode
from tests.helpers.failover import BROKER_NAME, FailoverPair
from tests.helpers.processes import start_namesrv


def admin(namesrv: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, [*args, "-n", namesrv])
    return result.exit_code, result.output


def test_promote_makes_the_slave_master_and_refuses_a_master(spawn, tmp_path: Path):
    pair = FailoverPair(spawn, tmp_path)
    try:
        pair.start("ASYNC_MASTER")
        a, b = pair.master, pair.slave
        assert pair.send(a, b"before") == ResponseCode.SUCCESS
        pair.wait_converged()
        code, output = admin(pair.namesrv_addr, "broker", "promote", BROKER_NAME, "--broker-id", "0")
        assert code == 2, output  # --broker-id is a slave's: 1 or more
        pair.procs[a].kill()
        pair.procs[a].wait(10)
        code, output = admin(
            pair.namesrv_addr, "broker", "promote", BROKER_NAME, "--broker-id", "1", "--role", "SYNC_MASTER", "--json"
        )
        assert code == 0, output
        promoted = json.loads(output)
        assert promoted["addr"] == pair.addr(b) and promoted["epoch"] == 2
        assert pair.runtime(b)["brokerRole"] == "SYNC_MASTER" and pair.runtime(b)["epoch"] == "2"
        # promoted again: it is a master now, and the name server knows no broker 1 any more
        code, output = admin(pair.namesrv_addr, "broker", "promote", BROKER_NAME, "--broker-id", "1")
        assert code == 1 and "no broker with id 1" in output, output
    finally:
        pair.close()


def test_a_slave_that_never_replicated_is_not_promoted(spawn, tmp_path: Path):
    """Its first term would be epoch 1, which the old master's log claims too."""
    pair = FailoverPair(spawn, tmp_path)
    try:
        pair.client.start()
        _, pair.namesrv_addr = start_namesrv(spawn)
        pair.start_broker(pair.slave, "SLAVE")
        code, output = admin(pair.namesrv_addr, "broker", "promote", BROKER_NAME, "--broker-id", "1")
        assert code == 1 and "never took its master's epoch table" in output, output
        assert pair.runtime(pair.slave)["brokerRole"] == "SLAVE"
    finally:
        pair.close()
