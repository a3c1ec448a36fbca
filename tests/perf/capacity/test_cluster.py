"""rmq-capacity on a real Spark standalone cluster: a master and two workers of the pip-installed
PySpark started on free loopback ports by ``rmq-capacity cluster up`` (stopped by ``down``, which
leaves no process and no pid file), then ``rmq-capacity --master spark://...`` and ``spark-submit --master spark://...
spark/capacity.py`` against it, side by side (each application takes a core of each worker's two:
a driver spends most of its time starting JVMs and waiting on tasks). Each plans what local mode
plans, and the work ran in both workers' executors: the driver's event log says which executor ran
each task, each worker's own JSON which executors of the application it ran."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import pytest

from rmq.perf.capacity import cli
from rmq.perf.capacity.spark_cluster import START_TIMEOUT, SparkCluster, worker_json
from rmq.perf.procs import LOOPBACK, free_port
from tests.helpers.capacity import ROOT, SAMPLES
from tests.helpers.capacity import command_env as _env
from tests.helpers.perf_logs import stats_log_lines

WORKLOAD = {"peak_rate": 50_000, "avg_rate": 20_000, "size": 1024, "slo_p99_ms": 2, "retention_hours": 48}
FLAGS = ("--groups", "2", "--disk-bytes", "800g")


def _cluster_command(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "rmq.perf.capacity.cli", "cluster", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=START_TIMEOUT + 30, env=_env(), cwd=ROOT)


def _up(cluster: SparkCluster) -> SparkCluster:
    """``rmq-capacity cluster up``, as a user starts one: it prints the master URL once both
    workers are ALIVE, and ``status`` says so."""
    up = _cluster_command("up", "--dir", str(cluster.root), "--port", str(cluster.port), "--webui-port",
                          str(cluster.webui_port), "--workers", "2", "--cores", "2", "--memory", "1g")  # fmt: skip
    assert up.returncode == 0, up.stderr[-3000:]
    assert up.stdout == f"{cluster.master_url}\n"
    status = _cluster_command("status", "--dir", str(cluster.root))
    assert status.returncode == 0 and f"{cluster.master_url} ALIVE, 2 worker(s) ALIVE" in status.stdout
    return cluster


@pytest.fixture(scope="module")
def booting_cluster(tmp_path_factory) -> Iterator[tuple[SparkCluster, Future[SparkCluster]]]:
    """A master and two workers starting in the background (their JVMs take tens of seconds here)
    while local mode plans; ``cluster down`` stops them, whatever happened, and leaves nothing."""
    root = tmp_path_factory.mktemp("spark-cluster")
    cluster = SparkCluster(root, free_port(), free_port())
    with ThreadPoolExecutor(1, thread_name_prefix="spark-cluster-start") as pool:
        started = pool.submit(_up, cluster)
        try:
            yield cluster, started
        finally:
            wait([started])  # stop once ``up`` ended, however it ended (its error is the test's)
            down = _cluster_command("down", "--dir", str(root))
    assert down.returncode == 0, down.stderr
    assert not cluster.running_pids() and not cluster.pid_files()
    assert _cluster_command("status", "--dir", str(root)).returncode == 1


@pytest.fixture(scope="module")
def spark_cluster(booting_cluster, local_plan) -> SparkCluster:
    cluster, started = booting_cluster
    started.result(timeout=START_TIMEOUT + 30)
    with (cluster.conf_dir / "spark-defaults.conf").open("a") as conf:
        # an application of a core on each worker (spark.deploy.spreadOut), each worker's two cores
        # and its 1g shared by both drivers' executors
        conf.write(
            "spark.eventLog.enabled true\nspark.eventLog.compress false\n"
            "spark.driver.memory 512m\nspark.executor.memory 512m\nspark.executor.cores 1\nspark.cores.max 2\n"
        )
    return cluster


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    logs = tmp_path_factory.mktemp("logs")
    shutil.copytree(SAMPLES, logs, dirs_exist_ok=True)
    (logs / "store" / "logs").mkdir(parents=True)
    (logs / "store" / "logs" / "stats.log").write_text("".join(json.dumps(r) + "\n" for r in stats_log_lines()))
    (logs.parent / "workload.yaml").write_text("".join(f"{k}: {v}\n" for k, v in WORKLOAD.items()))
    return logs


@pytest.fixture(scope="module")
def local_plan(spark, logs) -> dict[str, Any]:
    """What local mode plans for the same logs and workload (in this process, local[1])."""
    flags = {"groups": 2, "disk_bytes": "800g"}
    workload = cli.load_workload(str(logs.parent / "workload.yaml"), flags)
    capacity = cli.plan_logs(spark, [str(logs)], workload, lambda _: None)
    return json.loads(json.dumps(capacity.to_json(), default=str))


@dataclasses.dataclass
class Driver:
    """A driver started on the cluster: its process, where it writes, its own event log directory."""

    process: subprocess.Popen[bytes]
    out: Path
    events: Path

    def finish(self) -> tuple[dict[str, Any], str]:
        """Its capacity.json and its application's id, once it exited 0."""
        self.process.wait(timeout=DRIVER_TIMEOUT)
        assert self.process.returncode == 0, (self.out.parent / "stderr").read_text()[-3000:]
        (app,) = self.events.iterdir()
        return json.loads((self.out / "capacity.json").read_text()), app.name.removeprefix("eventlog_v2_")


DRIVER_TIMEOUT = 400


@pytest.fixture(scope="module")
def drivers(spark_cluster, logs, tmp_path_factory) -> Iterator[dict[str, Driver]]:
    """``rmq-capacity --master`` and (when it is on PATH) ``spark-submit --master`` started together
    on the cluster, each with a conf directory of its own naming its own event log directory."""
    started: dict[str, Driver] = {}
    spark_submit = shutil.which("spark-submit")
    workload = ("--workload", str(logs.parent / "workload.yaml"), *FLAGS)
    commands = {"rmq-capacity": [sys.executable, "-m", "rmq.perf.capacity.cli", str(logs), "--master",
                                 spark_cluster.master_url]}  # fmt: skip
    if spark_submit is not None:
        commands["spark-submit"] = [spark_submit, "--master", spark_cluster.master_url, "spark/capacity.py", str(logs)]
    try:
        for name, command in commands.items():
            root = tmp_path_factory.mktemp(name)
            conf, events = root / "conf", root / "events"
            shutil.copytree(spark_cluster.conf_dir, conf)
            events.mkdir()
            with (conf / "spark-defaults.conf").open("a") as defaults:
                defaults.write(f"spark.eventLog.dir {events.as_uri()}\n")
            env = {**_env(), "SPARK_CONF_DIR": str(conf)}
            # its output to a file: a pipe nobody reads until its test runs would stop it once full
            with (root / "stderr").open("w") as stderr:
                process = subprocess.Popen([*command, "--out", str(root / "out"), *workload],
                                           stdout=subprocess.DEVNULL, stderr=stderr, env=env, cwd=ROOT)  # fmt: skip
            started[name] = Driver(process, root / "out", events)
        yield started
    finally:
        for driver in started.values():
            if driver.process.poll() is None:
                driver.process.kill()
            driver.process.wait()


def _tasks_by_worker(cluster: SparkCluster, events: Path, app_id: str) -> dict[str, int]:
    """Tasks each worker's executors of ``app_id`` ran: the event log's task ends by executor id, the
    workers' finished executors by worker."""
    tasks: Counter[str] = Counter()
    for path in events.glob(f"*{app_id}*/events_*"):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event["Event"] == "SparkListenerTaskEnd":
                tasks[event["Task Info"]["Executor ID"]] += 1
    by_worker = {}
    for worker in cluster.alive_workers():
        executors = (worker_json(worker) or {}).get("finishedexecutors", [])
        by_worker[worker["id"]] = sum(tasks[str(e["id"])] for e in executors if e["appid"] == app_id)
    return by_worker


def _same_plan(on_cluster: dict[str, Any], local: dict[str, Any]) -> None:
    assert on_cluster["plan"] == local["plan"]
    assert on_cluster["saturation"] == local["saturation"]
    rec = on_cluster["plan"]["recommended"]
    # the samples' ASYNC_FLUSH standalone carries 46K msgs/s within 2 ms at 1 KiB: 2 sets would do, but
    # 48 h of 20,000 msgs/s fill an 800 GiB disk past its 75 % level unless spread over 7
    assert (rec["mode"], rec["broker_sets"], rec["binding"]) == ("ASYNC_FLUSH standalone", 7, "disk")


@pytest.mark.slow
def test_rmq_capacity_on_the_cluster_plans_as_local_mode_in_both_workers_executors(spark_cluster, drivers, local_plan):
    driver = drivers["rmq-capacity"]
    on_cluster, app_id = driver.finish()
    _same_plan(on_cluster, local_plan)
    by_worker = _tasks_by_worker(spark_cluster, driver.events, app_id)
    assert len(by_worker) == 2 and all(by_worker.values()), by_worker


@pytest.mark.slow
def test_spark_submit_on_the_cluster_plans_as_local_mode_in_both_workers_executors(spark_cluster, drivers, local_plan):
    if "spark-submit" not in drivers:
        pytest.skip("spark-submit is not on PATH (pip install 'rmq[spark]' puts it there)")
    driver = drivers["spark-submit"]
    on_cluster, app_id = driver.finish()
    _same_plan(on_cluster, local_plan)
    by_worker = _tasks_by_worker(spark_cluster, driver.events, app_id)
    assert len(by_worker) == 2 and all(by_worker.values()), by_worker


def test_down_stops_only_what_a_pid_file_names_and_that_still_runs_as_a_spark_daemon(tmp_path):
    # a pid file left from a cluster long gone, its pid since reused by a process of someone else
    (tmp_path / "worker-1.pid").write_text(f"{os.getpid()}\n")
    (tmp_path / "master.pid").write_text("not a pid\n")
    status = _cluster_command("status", "--dir", str(tmp_path))
    assert status.returncode == 1 and "worker-1: pid" in status.stdout and "not running" in status.stderr
    down = _cluster_command("down", "--dir", str(tmp_path))
    assert down.returncode == 0 and down.stderr.strip() == "nothing was running"
    assert not list(tmp_path.glob("*.pid"))  # and this process, which one of them named, was left alone


def test_up_on_a_taken_port_says_so_and_leaves_nothing_running(tmp_path):
    port = free_port()
    with socket.socket() as taken:
        taken.bind((LOOPBACK, port))
        taken.listen()
        up = _cluster_command("up", "--dir", str(tmp_path), "--port", str(port), "--webui-port", str(free_port()))
    assert up.returncode == 1 and up.stdout == ""
    assert "Error: the master exited while waiting for the master ALIVE" in up.stderr
    assert "Address already in use" in up.stderr and "master.log" in up.stderr
    assert not SparkCluster(tmp_path).running_pids() and not list(tmp_path.glob("*.pid"))
