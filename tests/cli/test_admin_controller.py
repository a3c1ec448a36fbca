"""rmq-admin controller status and rmq-admin broker sync-state against a real rmq-controller."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from rmq.cli.admin import main
from rmq.perf.procs import LOOPBACK, free_port
from rmq.protocol.controller import SyncStateSet
from tests.helpers.controllers import Broker, ControllerGroup, expect, join_set


def admin(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_controller_status_and_a_broker_sets_sync_state(spawn, tmp_path: Path):
    group = ControllerGroup(spawn, tmp_path, size=1).start()
    brokers = [Broker(), Broker()]
    try:
        group.leader()
        first = join_set(group, 0, brokers)
        expect(group.call(0, brokers[0].alter(1, SyncStateSet(frozenset({1, 2}), first.sync_state_set_epoch))))
        gone = f"{LOOPBACK}:{free_port()}"
        both = f"{group.addresses[0]};{gone}"

        code, output = admin("controller", "status", "--controller", both, "--json", "--timeout", "1")
        assert code == 0, output
        up, down = json.loads(output)
        assert up["is_leader"] and up["leader_id"] == "n0" and up["term"] >= 1 and up["peers"] == group.peers
        assert down["address"] == gone and down["error"]

        code, output = admin("broker", "sync-state", "broker-a", "--controller", both)
        assert code == 0, output
        assert "master 1" in output and "master epoch 1" in output
        code, output = admin("broker", "sync-state", "broker-a", "--controller", group.addresses[0], "--json")
        state = json.loads(output)
        assert [(r["brokerId"], r["alive"]) for r in state["inSyncReplicas"]] == [(1, True), (2, True)]

        code, output = admin("broker", "sync-state", "broker-b", "--controller", group.addresses[0])
        assert code == 3 and "broker-b" in output, output
    finally:
        for broker in brokers:
            broker.close()
        group.close()
