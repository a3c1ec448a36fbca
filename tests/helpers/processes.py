"""The end-to-end tests' processes: a Cluster (an ``rmq-namesrv`` and an ``rmq-broker``) and a
BrokerPair (a master and its slave), started with ``rmq.perf.procs`` (the starters rmq-perf and
perf/ use too, imported here for the tests that start processes of their own), and what
perf/harness.py has for them (floods, a steady sender).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from rmq.net import RemotingClient, RemotingCommand
from rmq.perf.procs import (
    LOOPBACK,
    broker_settings,
    start_broker_process,
    start_namesrv,
    wait_until,
)
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.java_json import loads_mq_tables
from rmq.protocol.message import retry_topic
from rmq.protocol.record import StoredMessage
from tests.helpers import harness
from tests.helpers.requests import call, offset_request, pull_request, records, update_topic_request

raise_open_file_limit = harness.raise_open_file_limit
flood_connections = harness.flood_connections
process_status = harness.process_status
FloodReport = harness.FloodReport
SteadySender = harness.SteadySender
CLUSTER_BROKER_SETTINGS = harness.CLUSTER_BROKER_SETTINGS
SLAVE_SYNC_INTERVAL = harness.SLAVE_SYNC_INTERVAL


def pause_process(pid: int, timeout: float = 5.0) -> None:
    """SIGSTOP ``pid`` and wait until every thread of it has stopped. The signal lands when a
    thread of the process takes it, on a busy machine milliseconds later, and the others run on
    meanwhile: a slave paused so acks what it is sent in that time."""
    os.kill(pid, signal.SIGSTOP)

    def stopped() -> bool:
        tasks = Path(f"/proc/{pid}/task")
        # the state follows the command name, which may hold spaces and parentheses
        return all((t / "stat").read_text().rpartition(") ")[2][:1] in "tT" for t in tasks.iterdir())

    wait_until(stopped, timeout, f"process {pid} stopped")


class Cluster:
    """One ``rmq-namesrv`` and one ``rmq-broker`` process; ``restart_broker`` keeps the store and
    the port. ``client`` is a started RemotingClient for requests built by hand."""

    def __init__(self, spawn, store: Path, credentials: tuple[str, str] | None = None):
        """``credentials``: what ``client`` signs with (a broker with aclEnable)."""
        self.spawn = spawn
        self.store = store
        self.client = RemotingClient(credentials=credentials)
        self.namesrv_proc: subprocess.Popen | None = None
        self.broker_proc: subprocess.Popen | None = None
        self.settings = broker_settings(store, **CLUSTER_BROKER_SETTINGS)
        del self.settings["namesrvListenPort"]  # it has a name server of its own: nothing embedded
        self.broker_port = int(self.settings["listenPort"])
        self.broker_addr = f"{LOOPBACK}:{self.broker_port}"
        self.namesrv_addr = ""

    def start(self, *namesrv_args: str, **namesrv_popen) -> Cluster:
        """``namesrv_args``, ``namesrv_popen``: options and process arguments of the name server."""
        self.client.start()
        self.namesrv_proc, self.namesrv_addr = start_namesrv(self.spawn, *namesrv_args, **namesrv_popen)
        self.start_broker()
        return self

    def close(self) -> None:
        self.client.shutdown()

    def start_broker(self) -> None:
        self.broker_proc, self.broker_addr = start_broker_process(
            self.spawn, self.settings, self.namesrv_addr, extra_args=("--log-level", "WARNING")
        )
        self.broker_port = int(self.settings["listenPort"])  # another one if it was taken

    def kill_broker(self) -> None:
        self.broker_proc.send_signal(signal.SIGKILL)
        self.broker_proc.wait(10)

    def restart_broker(self) -> None:
        if self.broker_proc.poll() is None:
            self.broker_proc.send_signal(signal.SIGTERM)
            self.broker_proc.wait(10)
        self.start_broker()

    def call(self, request: RemotingCommand) -> RemotingCommand:
        return call(self.client, self.broker_addr, request)

    def create_topic(self, topic: str, queues: int = 4, order: bool = False) -> str:
        """UPDATE_AND_CREATE_TOPIC, as ``rmq-admin topic create`` sends it."""
        answer = self.call(update_topic_request(topic, queues, order))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        return topic

    def max_offsets(self, topic: str) -> dict[int, int]:
        """queue id -> max offset of each queue of ``topic`` (empty when the topic does not exist)."""
        answer = self.call(RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}))
        if answer.code == ResponseCode.TOPIC_NOT_EXIST:
            return {}
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        table = loads_mq_tables(answer.body)["offsetTable"]
        return {mq.queue_id: int(stats["maxOffset"]) for mq, stats in table.items()}

    def messages(self, topic: str) -> list[StoredMessage]:
        """Every stored message of ``topic`` (system topics too), read by pulls, queue by queue."""
        found: list[StoredMessage] = []
        for queue_id, max_offset in sorted(self.max_offsets(topic).items()):
            offset = 0
            while offset < max_offset:
                answer = self.call(pull_request(topic, queue_id, offset, max_msgs=1000))
                if answer.code != ResponseCode.SUCCESS:
                    break
                found += records(answer.body)
                offset = int(answer.ext_fields["nextBeginOffset"])
        return found

    def lag(self, group: str, *topics: str, subscription: str = "*") -> dict[tuple[str, int], tuple[int, int]]:
        """(topic, queue) -> (committed, max offset) of every queue of ``topics`` (with ``subscription``)
        and of the group's %RETRY% topic where a pull from ``group``'s committed offset still finds a
        message; empty once the group consumed and committed all it subscribes to."""
        behind = {}
        for topic, expression in [*((t, subscription) for t in topics), (retry_topic(group), "*")]:
            for queue_id, max_offset in self.max_offsets(topic).items():
                answer = self.call(offset_request(RequestCode.QUERY_CONSUMER_OFFSET, topic, queue_id, group))
                committed = int(answer.ext_fields["offset"]) if answer.code == ResponseCode.SUCCESS else -1
                pulled = self.call(
                    pull_request(topic, queue_id, max(committed, 0), group=group, subscription=expression)
                )
                nothing_new = pulled.code == ResponseCode.PULL_NOT_FOUND or (
                    # nothing of the subscription up to the end
                    pulled.code == ResponseCode.PULL_RETRY_IMMEDIATELY
                    and int(pulled.ext_fields["nextBeginOffset"]) >= max_offset
                )
                if committed < 0 or not nothing_new:
                    behind[(topic, queue_id)] = (committed, max_offset)
        return behind

    def wait_caught_up(self, group: str, *topics: str, subscription: str = "*", timeout: float = 30.0) -> None:
        """Until ``group`` has consumed and committed all of ``topics`` it subscribes to: then, with
        nothing new sent, none of its consumers has anything left to be given."""
        wait_until(
            lambda: not self.lag(group, *topics, subscription=subscription),
            timeout,
            lambda: (
                f"group {group} committed all of {', '.join(topics)} (behind, (topic, queue): "
                f"(committed, max)): {self.lag(group, *topics, subscription=subscription)}"
            ),
        )


def max_offsets(client: RemotingClient, addr: str, topic: str) -> dict[int, int]:
    """queue id -> max offset of each queue of ``topic`` on the broker at ``addr`` ({}: it has no
    such topic)."""
    answer = call(client, addr, RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}))
    if answer.code != ResponseCode.SUCCESS:
        return {}
    table = loads_mq_tables(answer.body)["offsetTable"]
    return {mq.queue_id: int(stats["maxOffset"]) for mq, stats in table.items()}


class BrokerPair:
    """An ``rmq-namesrv`` process with a master and a SLAVE-role broker process of one brokerName,
    each with a store of its own; ``kill_master`` / ``start_master`` keep the master's store and
    port. Extra settings of the master (``master``) and the slave (``slave``) go on top."""

    def __init__(self, spawn, root: Path, master: dict[str, str] | None = None, slave: dict[str, str] | None = None):
        self.spawn = spawn
        self.client = RemotingClient()
        self.namesrv_proc: subprocess.Popen | None = None
        self.namesrv_addr = ""
        self.master_proc: subprocess.Popen | None = None
        self.slave_proc: subprocess.Popen | None = None
        self.master_settings = self._settings(root / "master", master or {})
        self.slave_settings = self._settings(root / "slave", {"brokerRole": "SLAVE", "brokerId": "1", **(slave or {})})
        self.master_addr = f"{LOOPBACK}:{self.master_settings['listenPort']}"
        self.slave_addr = f"{LOOPBACK}:{self.slave_settings['listenPort']}"

    @staticmethod
    def _settings(store: Path, extra: dict[str, str]) -> dict[str, str]:
        store.mkdir(parents=True, exist_ok=True)
        settings = broker_settings(store, **CLUSTER_BROKER_SETTINGS, **extra)
        del settings["namesrvListenPort"]
        return settings

    def start(self) -> BrokerPair:
        self.client.start()
        self.namesrv_proc, self.namesrv_addr = start_namesrv(self.spawn)
        self.start_master()
        self.start_slave()
        return self

    def start_slave(self) -> None:
        self.slave_proc, self.slave_addr = start_broker_process(
            self.spawn, self.slave_settings, self.namesrv_addr, extra_args=("--log-level", "WARNING")
        )

    def start_master(self) -> None:
        self.master_proc, self.master_addr = start_broker_process(
            self.spawn, self.master_settings, self.namesrv_addr, extra_args=("--log-level", "WARNING")
        )

    def kill_master(self) -> None:
        self.master_proc.send_signal(signal.SIGKILL)
        self.master_proc.wait(10)

    def close(self) -> None:
        self.client.shutdown()

    def call(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        return call(self.client, addr, request)

    def get_all(self, addr: str, code: int) -> dict:
        """The JSON body of a GET_ALL_* request (topics, consumer offsets, delay offsets, groups)."""
        answer = self.call(addr, RemotingCommand.request(code, {}))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        return json.loads(bytes(answer.body))

    def committed(self, addr: str, topic: str, queue_id: int, group: str) -> int:
        answer = self.call(addr, offset_request(RequestCode.QUERY_CONSUMER_OFFSET, topic, queue_id, group))
        return int(answer.ext_fields["offset"]) if answer.code == ResponseCode.SUCCESS else -1

    def commit(self, addr: str, topic: str, queue_id: int, group: str, offset: int) -> None:
        request = offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, topic, queue_id, group, commitOffset=offset)
        answer = self.call(addr, request)
        assert answer.code == ResponseCode.SUCCESS, answer.remark

    def max_offsets(self, addr: str, topic: str) -> dict[int, int]:
        """queue id -> max offset of each queue of ``topic`` on one of the two brokers."""
        return max_offsets(self.client, addr, topic)

    def has_topic(self, addr: str, topic: str) -> bool:
        return topic in self.get_all(addr, RequestCode.GET_ALL_TOPIC_CONFIG)["topicConfigTable"]

    def create_topic(self, topic: str, queues: int = 4, timeout: float = 15.0) -> str:
        """UPDATE_AND_CREATE_TOPIC on the master, then until the slave's copy of the topics has it
        (its metadata sync runs every 10 s)."""
        assert self.call(self.master_addr, update_topic_request(topic, queues)).code == ResponseCode.SUCCESS
        wait_until(lambda: self.has_topic(self.slave_addr, topic), timeout, f"topic {topic} copied to the slave")
        return topic

    def wait_replicated(self, topic: str, timeout: float = 10.0) -> dict[int, int]:
        """Until the slave's queues of ``topic`` end where the master's do; those ends."""
        ends = self.max_offsets(self.master_addr, topic)
        wait_until(lambda: self.max_offsets(self.slave_addr, topic) == ends, timeout, f"{topic} replicated")
        return ends

    def wait_committed(self, addr: str, topic: str, group: str, ends: dict[int, int], timeout: float) -> None:
        """Until ``group``'s offsets on ``addr`` are ``ends`` (queue id -> offset)."""
        wait_until(
            lambda: all(self.committed(addr, topic, q, group) == end for q, end in ends.items()),
            timeout,
            lambda: (
                f"{group}'s offsets on {addr} at {ends} "
                f"(they are { ({q: self.committed(addr, topic, q, group) for q in ends}) })"
            ),
        )

    def master_returns_with(self, topic: str, group: str, ends: dict[int, int]) -> None:
        """``group``'s offsets ``ends`` committed on the slave while the master was down; then the
        master back (same store and ports) until it has them too (the slave hands them over)."""
        self.wait_committed(self.slave_addr, topic, group, ends, 10)
        self.start_master()  # routed again once this returns
        self.wait_committed(self.master_addr, topic, group, ends, SLAVE_SYNC_INTERVAL + 5)
