"""Acceptance (issue 24, item 4): two broker sets behind one name server, each serving gRPC: broker-c
(harness.CONTROLLER_MODE_BROKER) a master and its slave in controller mode (one controller,
docs/controller.md), broker-b a master.
Apache's 5.x Python client, given both sets' endpoints, sends to and receives from both (QueryRoute
names each broker's own endpoint). Then broker-c's master is SIGKILLed with messages popped from it
and not acked; the controller elects the slave, which serves sends and receives: its revive service
takes over the checkpoints it replicated, so what was popped and not acked comes back (attempt 2)
and nothing acked does. Every client run is a new client process, whose first QueryRoute follows
the name server at once (a running client asks again only every 30 s).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rmq.perf.procs import broker_settings, start_broker_process
from tests.helpers import harness, wait_for_port, wait_until
from tests.helpers.grpc_clients import GRPC_PORT_KEY, GRPC_START_TIMEOUT, acked_bodies, delivered, endpoint, with_grpc
from tests.helpers.processes import CLUSTER_BROKER_SETTINGS, max_offsets
from tests.helpers.requests import update_topic_request

pytestmark = [pytest.mark.compat, pytest.mark.slow]

TOPIC = "Py5TwoSets"
GROUP = "py5-two-sets"
COUNT = 16
# of the second batch, how many stored on each set are popped and never acked before the kill
# (py5_simple_consume's leave_first): chosen by where they are stored, so that broker-c's master
# holds some whatever way the client spread its sends
LEFT_ON_C, LEFT_ON_B = 3, 2
# seconds a popped message stays invisible: longer than the consumer runs after popping it (a few
# seconds; up to 9 seen on a loaded machine), so it comes back only from the revive of whichever
# broker holds its checkpoint, after the kill
INVISIBLE = 12


def start_two_sets(spawn, root: Path) -> tuple[harness.ControllerModeSet, dict[str, str], str]:
    """broker-c (master and slave in controller mode, both in the sync state set) and broker-b, TOPIC
    on both sets; (broker-c's set, broker-b's settings and remoting address)."""
    cluster = harness.ControllerModeSet(spawn, root, brokers=2)
    for settings in cluster.settings.values():
        with_grpc(settings)
    try:
        return _start(cluster, spawn, root)
    except BaseException:
        cluster.close()
        raise


def _start(
    cluster: harness.ControllerModeSet, spawn, root: Path
) -> tuple[harness.ControllerModeSet, dict[str, str], str]:
    cluster.start()
    other = with_grpc(broker_settings(root / "broker-b", **CLUSTER_BROKER_SETTINGS, brokerName="broker-b"))
    del other["namesrvListenPort"]
    (root / "broker-b").mkdir()
    _, other_addr = start_broker_process(spawn, other, cluster.namesrv_addr, extra_args=("--log-level", "WARNING"))
    for settings in (*cluster.settings.values(), other):
        wait_for_port(int(settings[GRPC_PORT_KEY]), None, "a broker's gRPC endpoint", GRPC_START_TIMEOUT)
    master = cluster.master()
    assert master is not None
    for addr in (cluster.addr(master), other_addr):
        assert cluster.client.invoke_sync(addr, update_topic_request(TOPIC), 5).code == 0
    slave = next(name for name in ("b0", "b1") if name != master)
    wait_until(
        lambda: max_offsets(cluster.client, cluster.addr(slave), TOPIC), 10, f"{TOPIC} copied to the slave {slave}", 0.1
    )
    cluster.wait_in_sync(15)
    return cluster, other, other_addr


def on(cluster: harness.ControllerModeSet, addr: str) -> int:
    """Messages of TOPIC stored on the broker at ``addr`` (0 when it does not know the topic)."""
    return sum(max_offsets(cluster.client, addr, TOPIC).values())


def test_a_5x_client_uses_both_broker_sets_and_the_elected_slave_serves_once_a_master_is_killed(
    grpc_clients, spawn, tmp_path: Path
):
    cluster, other, other_addr = start_two_sets(spawn, tmp_path)
    try:
        master = cluster.master()
        assert master is not None
        slave = next(name for name in ("b0", "b1") if name != master)
        # the client's access points: any endpoint answers QueryRoute for the whole cluster
        endpoints = f"{endpoint(other)};{endpoint(cluster.settings[master])}"

        first = grpc_clients.produce(endpoints, TOPIC, COUNT, prefix="one")
        on_a, on_b = on(cluster, cluster.addr(master)), on(cluster, other_addr)
        assert on_a and on_b and on_a + on_b == COUNT, f"sends not spread over both sets: a {on_a}, b {on_b}"
        got = grpc_clients.simple_consume(endpoints, TOPIC, GROUP, COUNT, idle=8)
        assert Counter(acked_bodies(got)) == Counter(s["body"] for s in first)

        second = grpc_clients.produce(endpoints, TOPIC, COUNT, prefix="two")
        on_c = {m.body.decode() for m in harness.pull_all(cluster.client, cluster.addr(master), TOPIC)}
        bodies = sorted(s["body"] for s in second)
        chosen = [b for b in bodies if b in on_c][:LEFT_ON_C] + [b for b in bodies if b not in on_c][:LEFT_ON_B]
        # the run ends once every message was acked or left (not when the others were acked:
        # a left one not received yet would come back first-delivered after the kill)
        got = grpc_clients.simple_consume(
            endpoints, TOPIC, GROUP, COUNT, idle=8, invisible=INVISIBLE, leave_first=chosen, count_left=True
        )
        left = {line["body"] for line in got if "left" in line}
        acked = Counter(acked_bodies(got))
        rest = {s["body"] for s in second} - left
        assert set(acked) <= rest and max(acked.values(), default=1) == 1, acked
        # a receive the loaded machine answered past the client's deadline hid its messages from
        # the client until their invisible time: they come back with the left ones (first
        # delivered then, a left one among them included)
        missing = rest - set(acked)
        on_a = on(cluster, cluster.addr(master))
        # the pops' checkpoints and acks are on the slave before the kill
        end = cluster.runtime(master)["commitLogMaxOffset"]
        wait_until(lambda: cluster.runtime(slave)["commitLogMaxOffset"] == end, 10, f"{slave} caught up", 0.05)
        stored_on_a = {m.body.decode() for m in harness.pull_all(cluster.client, cluster.addr(slave), TOPIC)}
        assert left & stored_on_a, "no unacked message popped from broker-c's master: its slave would revive none"
        cluster.kill(master)
        assert cluster.new_master(master) == slave

        third = grpc_clients.produce(endpoints, TOPIC, COUNT, prefix="three")
        assert on(cluster, cluster.addr(slave)) > on_a, "the elected slave took no send"
        # the left ones come back once their invisible time passed: the wait covers it, and ends
        # as soon as everything came
        expected = left | missing | {s["body"] for s in third}
        got = grpc_clients.simple_consume(endpoints, TOPIC, GROUP, len(expected), idle=INVISIBLE + 4)
        acked = Counter(acked_bodies(got))
        # every message sent is received once by either set, none acked before the kill comes back
        assert acked == Counter(expected), acked
        assert {line["body"]: line["attempt"] for line in delivered(got) if line["body"] in left} == dict.fromkeys(
            left, 2
        )
    finally:
        cluster.close()
