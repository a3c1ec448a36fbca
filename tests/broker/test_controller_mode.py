"""Controller mode (issue 27), real processes: an ``rmq-controller``, an ``rmq-namesrv`` and a broker
set of three brokers in controller mode (``harness.ControllerModeSet``, small timeouts). No operator
acts: the controller elects, the brokers follow (``rmq.broker.replicas``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rmq.broker.config import load_broker_config
from rmq.broker.controller import BrokerController
from rmq.errors import ConfigError
from rmq.net import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.controller import ReplicaInfo
from rmq.protocol.route import MASTER_ID
from rmq.settings import CONTROLLER_SETTINGS, SETTINGS
from tests.helpers import harness, wait_until
from tests.helpers.broker import broker_settings

Sender = harness.Sender
BROKER = harness.CONTROLLER_MODE_BROKER


def controller_id(root: Path, name: str) -> int:
    return json.loads((root / name / "controller.json").read_text())["brokerId"]


@pytest.mark.slow
def test_a_killed_master_is_replaced_by_a_slave_and_rejoins_as_its_slave(spawn, tmp_path: Path):
    """Three brokers register: one is master, the others its slaves, each under an id of the
    controller's. The master is SIGKILLed with sends in flight: a slave becomes master in the next
    epoch and takes sends, holding every acknowledged message; the old master restarted keeps its id
    and rejoins as a slave, its log byte-identical to the new master's."""
    cluster = harness.ControllerModeSet(spawn, tmp_path).start()
    try:
        old = cluster.master()
        assert old is not None
        ids = {name: controller_id(tmp_path, name) for name in cluster.settings}
        assert sorted(ids.values()) == [1, 2, 3]
        assert cluster.routes() == {
            MASTER_ID: cluster.addr(old),
            **{ids[name]: cluster.addr(name) for name in cluster.settings if name != old},
        }
        cluster.create_topic()
        wait_until(lambda: cluster.send(old, b"probe").code == ResponseCode.SUCCESS, 10, "a first send acked")
        old_epoch = int(cluster.runtime(old)["epoch"])
        # only a slave of the sync state set may be elected: a master killed before its slaves joined
        # it leaves the set without one (by design), which the controller now finds at once
        cluster.wait_in_sync(10)

        sender = Sender(cluster.client, cluster.addr(old), 1_000_000).start()
        try:
            wait_until(lambda: len(sender.acked) >= 200, 20, "200 sends acked by the master")
            cluster.kill(old)
        finally:
            sender.stop()
        new = cluster.new_master(old)
        assert int(cluster.runtime(new)["epoch"]) > old_epoch
        wait_until(lambda: cluster.send(new, b"after").code == ResponseCode.SUCCESS, 10, "the new master takes sends")
        missing = set(sender.acked) - cluster.bodies_on(new)
        assert not missing, f"{len(missing)} acknowledged messages not on the new master, e.g. {sorted(missing)[:3]}"

        cluster.start_broker(old)
        wait_until(lambda: cluster.routes().get(ids[old]) == cluster.addr(old), 20, f"{old} routed as a slave")
        assert cluster.master() == new
        cluster.wait_converged()

        # caught up, it is in the sync state set again; an operator's promote goes through the controller
        assert cluster.admin is not None
        cluster.wait_in_sync(10)
        # and so its master's ha-status says: each slave under its id, in sync, in the set
        admin = cluster.admin
        slaves = sorted(ids[name] for name in cluster.settings if name != new)
        wait_until(
            lambda: admin.ha_status(BROKER)[1].sync_state_set == sorted(ids.values()),
            10,
            "the master holding the sync state set of every broker",
        )
        status = admin.ha_status(BROKER)[1]
        assert sorted((s.broker_id, s.in_sync, s.in_sync_state_set) for s in status.slaves) == [
            (broker_id, True, True) for broker_id in slaves
        ]
        epoch = int(cluster.runtime(new)["epoch"])
        promotion = cluster.admin.promote(BROKER, ids[old])
        assert (promotion.addr, promotion.epoch) == (cluster.addr(old), epoch + 1)
        assert cluster.new_master(new) == old
        wait_until(lambda: cluster.send(old, b"again").code == ResponseCode.SUCCESS, 10, "the promoted one takes sends")
    finally:
        cluster.close()


@pytest.mark.slow
def test_a_killed_master_is_replaced_before_its_heartbeats_could_time_out(spawn, tmp_path: Path):
    """With RocketMQ's defaults (heartbeat timeout 10 s, a scan every 5 s) a SIGKILLed master is
    replaced at once: its connection to the controller closes with it, and the controller takes
    that for its death (RocketMQ's onBrokerChannelClose). The wait is bounded below the timeout."""
    timeout_ms = SETTINGS["controllerHeartBeatTimeoutMills"].default
    scan = {"scanNotActiveBrokerInterval": str(CONTROLLER_SETTINGS["scanNotActiveBrokerInterval"].default)}
    cluster = harness.ControllerModeSet(
        spawn, tmp_path, brokers=2, controller_settings=scan, controllerHeartBeatTimeoutMills=str(timeout_ms)
    ).start()
    try:
        old = cluster.master()
        assert old is not None
        cluster.wait_in_sync(10)

        cluster.kill(old)

        new = cluster.new_master(old, timeout=timeout_ms / 1000 * 0.8)
        cluster.create_topic()
        wait_until(lambda: cluster.send(new, b"after").code == ResponseCode.SUCCESS, 10, "the new master takes sends")
    finally:
        cluster.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    "credentials, extra",
    [
        (None, {}),
        (("rmq-cluster", "cluster-secret-0123456789"), {}),
        # the master alone acknowledges (RocketMQ's default inSyncReplicas=1): only its lease stops it
        (None, {"allAckInSyncStateSet": "false"}),
    ],
    ids=["open", "signed", "master-acks-alone"],
)
def test_a_paused_master_acknowledges_no_send_once_another_was_elected(spawn, tmp_path: Path, credentials, extra):
    """SIGSTOP the master past the heartbeat timeout: another is elected and routed (signed by the
    cluster account or, without one, as the controllers' newer epoch); SIGCONT: every send the old
    one answers from then on is refused (its master lease ran out while it was stopped), and it
    follows the new master as a slave."""
    cluster = harness.ControllerModeSet(spawn, tmp_path, credentials=credentials, **extra).start()
    try:
        old = cluster.master()
        assert old is not None
        cluster.create_topic()
        wait_until(lambda: cluster.send(old, b"probe").code == ResponseCode.SUCCESS, 10, "a first send acked")
        cluster.wait_in_sync(10)  # paused before its slaves joined its sync state set, it leaves none to elect
        if credentials:
            # a notice of a made-up master, not signed by the cluster account, moves nothing
            forged = ReplicaInfo(7, "127.0.0.1:1", 99, 99)
            notice = RemotingCommand.request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, forged.fields(), b"")
            assert cluster.client.invoke_sync(cluster.addr(old), notice, 5).code == ResponseCode.NO_PERMISSION
            assert cluster.send(old, b"still-master").code == ResponseCode.SUCCESS
        cluster.pause(old)
        new = cluster.new_master(old)
        wait_until(lambda: cluster.send(new, b"new").code == ResponseCode.SUCCESS, 10, "the new master takes sends")
        cluster.resume(old)
        answers = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and cluster.routes().get(MASTER_ID) == cluster.addr(new):
            answers.append(cluster.send(old, b"to-the-old-one-%d" % len(answers)).code)
            if old in [cluster.name_of(a) for i, a in cluster.routes().items() if i != MASTER_ID]:
                break
        assert answers and ResponseCode.SUCCESS not in answers, answers
        wait_until(
            lambda: cluster.addr(old) in [a for i, a in cluster.routes().items() if i != MASTER_ID],
            10,
            f"{old} routed as a slave of {new}",
        )
        assert not {b"to-the-old-one-%d" % i for i in range(len(answers))} & cluster.bodies_on(new)
    finally:
        cluster.close()


def test_a_controller_id_of_another_broker_set_stops_the_start(tmp_path: Path):
    """controller.json names another broker set: the broker does not start, saying which file."""
    settings = broker_settings(tmp_path, enableControllerMode="true", controllerAddr="127.0.0.1:9878")
    (tmp_path / "controller.json").write_text(
        json.dumps(
            {
                "clusterName": "DefaultCluster",
                "brokerName": "another-set",
                "brokerId": 2,
                "registerCheckCode": "127.0.0.1:10911;1",
                "applied": True,
            }
        )
    )
    with pytest.raises(ConfigError, match="controller.json holds broker id 2 of DefaultCluster/another-set"):
        BrokerController(*load_broker_config(None, settings))


@pytest.mark.slow
def test_with_two_of_three_controllers_gone_nothing_is_elected_and_the_master_keeps_taking_sends(spawn, tmp_path: Path):
    """Issue 27, acceptance 3: the controller leader and one more killed, the one left has no
    majority: nothing is elected (no split brain), and the master, its heartbeats still leaving on
    time (so its lease runs on), takes sends for several heartbeat timeouts, though no controller
    can confirm it."""
    cluster = harness.ControllerModeSet(spawn, tmp_path, controllers=3).start()
    try:
        master = cluster.master()
        assert master is not None
        cluster.create_topic()
        cluster.wait_in_sync(10)
        leader = cluster.controller_leader()
        for member in [leader, *(m for m in range(3) if m != leader)][:2]:
            cluster.controllers.kill(member)
        heartbeat_timeout = int(harness.CONTROLLER_MODE_BROKER_SETTINGS["controllerHeartBeatTimeoutMills"]) / 1000
        answers = []
        until = time.monotonic() + 3 * heartbeat_timeout
        while time.monotonic() < until:
            answers.append(cluster.send(master, b"no-majority-%d" % len(answers)).code)
            time.sleep(0.05)
        assert answers and set(answers) == {ResponseCode.SUCCESS}, answers
        assert cluster.routes()[MASTER_ID] == cluster.addr(master)
    finally:
        cluster.close()
