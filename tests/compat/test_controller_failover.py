"""Acceptance 5 of issue 27: the real 4.x clients keep sending across an automatic failover. Real
processes: one controller (the Raft group is tested elsewhere), a name server and a broker set in
controller mode, SYNC_MASTER with two slaves and allAckInSyncStateSet=true
(``harness.ControllerModeSet``). A client sends steadily; the master is SIGKILLed; the controller
elects a slave and the same client process, never restarted, goes on sending to it. Then the
family's own consumer reads the new master (the old one stays down): every send the producer saw
acknowledged is there, or the test fails; a key stored twice (a client's retry of a send whose answer
was lost) is a duplicate, counted apart from losses. What each client does meanwhile is in
docs/clients.md."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass

import pytest

from rmq.net import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers import harness, wait_until
from tests.helpers.compat import ALI_ONS, ROCKETMQ_CPP, ClientRunner, FamilyClients, RunningScript

pytestmark = [pytest.mark.compat, pytest.mark.slow]

TOPIC = harness.TOPIC
PAUSE_MS = 20  # between two sends of a client
# sends the new master acknowledges before the test stops the client
ACKED_AFTER = 20
# ali-ons asks for routes every pollNameServerInteval, 30 s by default (as the Java client's
# pollNameServerInterval): until then every send goes to the dead master's address and fails.
ONS_OPTIONS = {"pollNameServerInteval": 500}
# The C++ client (1.2.x) asks for its topics' routes 3 s after it started, then every 30 s, with no
# setting to change that; its sends fail until then. Killed before its first poll, it finds the new
# master at that poll; a kill after it (a slow start) waits for the next one, at 33 s.
CPP_RESUME_S = 40


def millis() -> int:
    return int(time.time() * 1000)


def acked_after(sender: RunningScript, at: int) -> list[dict]:
    """The sends of a ``*_send_steadily`` script acknowledged after ``at`` (ms)."""
    return [s for s in sender.of("i") if s["ok"] and s["at"] > at]


@dataclass
class Outcome:
    acked: int
    failed: int
    resumed_after_s: float  # from the kill to the first send the new master acknowledged
    lost: list[str]  # keys acknowledged to the client and never consumed
    duplicates: dict[str, int]  # key -> the queue positions it was consumed from, when more than one


def broker_set(spawn, tmp_path) -> harness.ControllerModeSet:
    """Started, TOPIC on the master and copied to both slaves (the elected one must route it), both
    slaves in the sync state set (an acknowledged send is on any broker the controller may elect)."""
    cluster = harness.ControllerModeSet(spawn, tmp_path).start()
    cluster.create_topic()

    def topic_on(name: str) -> bool:
        request = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, {})
        answer = cluster.client.invoke_sync(cluster.addr(name), request, 5)
        return answer.code == ResponseCode.SUCCESS and TOPIC in json.loads(bytes(answer.body))["topicConfigTable"]

    slaves = [name for name in cluster.settings if name != cluster.master()]
    wait_until(lambda: all(map(topic_on, slaves)), 10, f"{TOPIC} copied to {slaves}", 0.1)
    cluster.wait_in_sync(15)
    return cluster


def send_across_failover(
    cluster: harness.ControllerModeSet, sender: RunningScript, acked_first: int, resume_s: float
) -> int:
    """``acked_first`` sends acknowledged, SIGKILL the master, until a slave is elected in a newer
    epoch and ACKED_AFTER sends were acknowledged after the kill (within ``resume_s`` of it), then
    stop the sender; the kill's wall-clock time (ms)."""
    try:
        killed_at = _kill_the_master(cluster, sender, acked_first, resume_s)
    finally:
        err = sender.close()
    assert sender.proc.returncode == 0 and sender.of("done"), err[-3000:]
    return killed_at


def _kill_the_master(
    cluster: harness.ControllerModeSet, sender: RunningScript, acked_first: int, resume_s: float
) -> int:
    old = cluster.master()
    assert old is not None
    old_epoch = int(cluster.runtime(old)["epoch"])
    wait_until(lambda: len(acked_after(sender, 0)) >= acked_first, 30, f"{acked_first} sends acknowledged", 0.02)
    killed_at = millis()
    cluster.kill(old)
    new = cluster.new_master(old)
    assert int(cluster.runtime(new)["epoch"]) > old_epoch
    wait_until(
        lambda: len(acked_after(sender, killed_at)) >= ACKED_AFTER,
        resume_s,
        lambda: f"{ACKED_AFTER} sends acknowledged by {new} after the kill (the last sends: {sender.of('i')[-3:]})",
        0.05,
    )
    return killed_at


def consume_all(cluster: harness.ControllerModeSet, clients: FamilyClients, group: str) -> list[dict]:
    """Every message of TOPIC on the routed master, read by the family's consumer."""
    assert cluster.admin is not None
    stored = sum(q.max_offset - q.min_offset for q in cluster.admin.topic_stats(TOPIC))
    return clients.consume(cluster.namesrv_addr, TOPIC, group, "*", stored, 5)


def outcome(sender: RunningScript, killed_at: int, clients: FamilyClients, consumed: list[dict]) -> Outcome:
    sends = sender.of("i")
    acked = {s["key"] for s in sends if s["ok"]}
    positions: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for line in consumed:  # a redelivery of one queue position is not a second copy
        positions[clients.family.keys(line["keys"])].add((int(line["queueId"]), int(line["queueOffset"])))
    return Outcome(
        acked=len(acked),
        failed=sum(not s["ok"] for s in sends),
        resumed_after_s=round((min(s["at"] for s in acked_after(sender, killed_at)) - killed_at) / 1000, 2),
        lost=sorted(acked - positions.keys()),
        duplicates={key: len(at) for key, at in positions.items() if len(at) > 1},
    )


def test_ali_ons_sends_on_to_the_elected_master(spawn, tmp_path, ons_clients: ClientRunner):
    cluster = broker_set(spawn, tmp_path)
    try:
        options = json.dumps(ONS_OPTIONS)
        sender = ons_clients.start_until_closed(
            "ons_send_steadily.js", cluster.namesrv_addr, TOPIC, "ons-fo-p", "ons", PAUSE_MS, options
        )
        killed_at = send_across_failover(cluster, sender, 30, 10)
        clients = FamilyClients(ALI_ONS, ons_clients)
        result = outcome(sender, killed_at, clients, consume_all(cluster, clients, "ons-fo-c"))
        print(f"ali-ons across the failover: {result}")
        assert not result.lost, result
        # ali-ons tries a send again only on another broker name, and the set is the topic's only
        # one: each send went out once, so a second copy would be the brokers' own
        assert not result.duplicates, result
    finally:
        cluster.close()


def test_the_cpp_client_sends_on_to_the_elected_master(spawn, tmp_path, rocketmq_python, home):
    cluster = broker_set(spawn, tmp_path)
    runner = ClientRunner(home, python=rocketmq_python)
    try:
        sender = runner.start_until_closed(
            "cpp_send_steadily.py", cluster.namesrv_addr, TOPIC, "cpp-fo-p", "cpp", PAUSE_MS
        )
        killed_at = send_across_failover(cluster, sender, 5, CPP_RESUME_S)
        clients = FamilyClients(ROCKETMQ_CPP, runner)
        result = outcome(sender, killed_at, clients, consume_all(cluster, clients, "cpp-fo-c"))
        print(f"the C++ client across the failover: {result}")
        # a send it timed out on may have been stored and taken by the elected slave, then tried
        # again (5 tries a send): its key stored twice is a duplicate, not a loss
        assert not result.lost, result
    finally:
        cluster.close()
