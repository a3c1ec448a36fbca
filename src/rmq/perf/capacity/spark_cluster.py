"""A Spark standalone cluster on this machine, from the pip-installed PySpark: a master and workers
started with ``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker`` on one
address (loopback by default), for ``rmq-capacity --master spark://...`` and the tests.

    rmq-capacity cluster up [--dir DIR] [--port 7077] [--webui-port 8080] [--workers 2] [--cores 1] [--memory 1g]
    rmq-capacity cluster status [--dir DIR]
    rmq-capacity cluster down [--dir DIR]

Everything lives in DIR: ``<role>.pid`` for each process (``down`` stops exactly those, and only
while their command line is still that Spark daemon's: a pid reused since is left alone),
``master-url``, ``logs/<role>.log``, ``work/`` (SPARK_WORKER_DIR: the executors' directories and
logs) and ``conf/spark-defaults.conf`` for the drivers (``SPARK_CONF_DIR=DIR/conf``): executors of
the workers' memory, and no job before every worker's executor registered, so that the work is
spread over all of them from the first stage.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from rmq.perf.procs import LOOPBACK, WaitTimeout, wait_until

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
DEFAULT_PORT = 7077  # Spark's own defaults
DEFAULT_WEBUI_PORT = 8080
START_TIMEOUT = 90.0  # a JVM on a busy two-core machine takes tens of seconds
STOP_TIMEOUT = 20.0
# the daemons only schedule: a small heap each (SPARK_DAEMON_MEMORY, Spark's default is 1g)
DAEMON_MEMORY = "256m"
ALIVE = "ALIVE"


def default_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"rmq-spark-cluster-{os.getuid()}"


def spark_home() -> Path:
    """The pip-installed PySpark's directory: its ``bin/spark-class`` and ``jars/``."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


class SparkClusterError(RuntimeError):
    """The cluster could not be started, or is not running: what and why, with the log to read."""


class SparkCluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each, their state in ``root``."""

    def __init__(
        self,
        root: Path,
        port: int = DEFAULT_PORT,
        webui_port: int = DEFAULT_WEBUI_PORT,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        host: str = LOOPBACK,
    ):
        self.root = Path(root)
        self.port = port
        self.webui_port = webui_port
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.host = host
        self._started: dict[str, subprocess.Popen[bytes]] = {}  # by this object, by role

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    @property
    def webui_url(self) -> str:
        """The master's web UI: the one ``up`` wrote down when there is one, else this object's."""
        path = self.root / "webui-url"
        return path.read_text().strip() if path.exists() else f"http://{self.host}:{self.webui_port}"

    @property
    def conf_dir(self) -> Path:
        return self.root / "conf"

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": self.host,
            "SPARK_WORKER_DIR": str(self.root / "work"),
            "SPARK_LOG_DIR": str(self.root / "logs"),
            "SPARK_PID_DIR": str(self.root),
            "SPARK_CONF_DIR": str(self.conf_dir),
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            # a port taken is an error, not a silent move to the next one (Spark's default, which
            # would leave the printed master URL wrong); no REST submission server, whose fixed
            # port 6066 would keep a second cluster on this machine from starting
            "SPARK_MASTER_OPTS": "-Dspark.port.maxRetries=0 -Dspark.master.rest.enabled=false",
        }

    def _spawn(self, role: str, *args: str) -> int:
        log = self.root / "logs" / f"{role}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                env=self._env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # outlives ``up``; ``down`` signals it by its pid file
            )
        (self.root / f"{role}.pid").write_text(f"{proc.pid}\n")
        self._started[role] = proc
        return proc.pid

    def start(self, timeout: float = START_TIMEOUT) -> SparkCluster:
        """Start the master, then the workers; return once every worker is ALIVE at the master.
        SparkClusterError (after stopping what started) when that does not happen in ``timeout``."""
        if self.running_pids():
            raise SparkClusterError(f"a cluster of {self.root} is running already ({self.master_url_file()})")
        for sub in ("logs", "work", "conf"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        memory_mb = _megabytes(self.memory)
        (self.conf_dir / "spark-defaults.conf").write_text(
            f"spark.master {self.master_url}\n"
            f"spark.executor.memory {memory_mb}m\n"
            f"spark.executor.cores {self.cores}\n"
            "spark.scheduler.minRegisteredResourcesRatio 1.0\n"
            "spark.scheduler.maxRegisteredResourcesWaitingTime 60s\n"
        )
        (self.root / "master-url").write_text(self.master_url + "\n")
        (self.root / "webui-url").write_text(f"http://{self.host}:{self.webui_port}\n")
        deadline = time.monotonic() + timeout
        try:
            self._spawn("master", MASTER_CLASS, "--host", self.host, "--port", str(self.port),
                        "--webui-port", str(self.webui_port))  # fmt: skip
            self._wait(self._master_alive, deadline, f"the master ALIVE at {self.master_url}", "master")
            for n in range(1, self.workers + 1):
                self._spawn(f"worker-{n}", WORKER_CLASS, "--host", self.host, "--cores", str(self.cores),
                            "--memory", self.memory, "--webui-port", "0", "--work-dir", str(self.root / "work"),
                            self.master_url)  # fmt: skip
            self._wait(
                lambda: len(self.alive_workers()) >= self.workers,
                deadline,
                f"{self.workers} worker(s) ALIVE at the master",
                "worker-1",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _master_alive(self) -> bool:
        master = self.master_json() or {}
        return master.get("status") == ALIVE and master.get("url") == self.master_url

    def _wait(self, predicate: Any, deadline: float, what: str, role: str) -> None:
        def check() -> bool:
            for dead in [role for role, proc in self._started.items() if proc.poll() is not None]:
                raise SparkClusterError(
                    f"the {dead} exited while waiting for {what}: {self._why(dead)}; see {self.log(dead)}"
                )
            return bool(predicate())

        try:
            wait_until(check, max(0.0, deadline - time.monotonic()), what, interval=0.25)
        except WaitTimeout as e:
            raise SparkClusterError(f"{e}; see {self.log(role)}") from None

    def _why(self, role: str) -> str:
        """The last exception its log names (a port taken, too little memory), or its exit."""
        try:
            lines = self.log(role).read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        errors = [line.strip() for line in lines if "Exception:" in line or "Error:" in line]
        return errors[-1][:300] if errors else "no exception logged"

    def log(self, role: str) -> Path:
        return self.root / "logs" / f"{role}.log"

    def master_url_file(self) -> str:
        path = self.root / "master-url"
        return path.read_text().strip() if path.exists() else self.master_url

    def pid_files(self) -> dict[str, int]:
        """role -> pid of every pid file in ``root``."""
        pids = {}
        for path in sorted(self.root.glob("*.pid")):
            try:
                pids[path.stem] = int(path.read_text().strip())
            except ValueError:
                continue
        return pids

    def running_pids(self) -> dict[str, int]:
        """The pid files' processes still running as the Spark daemon they were started as."""
        return {role: pid for role, pid in self.pid_files().items() if _is_spark_daemon(pid)}

    def stop(self, timeout: float = STOP_TIMEOUT) -> list[str]:
        """SIGTERM each process of a pid file still running as its daemon, SIGKILL those left after
        ``timeout``; the pid files go. The roles stopped."""
        # and what this object started, whatever /proc says of it (a failed start stops those)
        running = {**self.running_pids(), **{r: p.pid for r, p in self._started.items() if p.poll() is None}}
        for pid in running.values():
            _signal(pid, signal.SIGTERM)
        try:
            wait_until(lambda: not any(map(self._alive, running.items())), timeout, "the cluster stopped", 0.1)
        except WaitTimeout:
            for role, pid in running.items():
                if self._alive((role, pid)):
                    _signal(pid, signal.SIGKILL)
        for proc in self._started.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(STOP_TIMEOUT)  # reaped: no zombie left of what this object started
        for path in self.root.glob("*.pid"):  # unreadable ones too: they name nothing to stop
            path.unlink(missing_ok=True)
        return sorted(running)

    def _alive(self, role_pid: tuple[str, int]) -> bool:
        role, pid = role_pid
        proc = self._started.get(role)
        return proc.poll() is None if proc is not None and proc.pid == pid else _is_spark_daemon(pid)

    def master_json(self) -> dict[str, Any] | None:
        """The master web UI's ``/json/`` (status, workers, applications), None while it does not answer."""
        return _get_json(f"{self.webui_url}/json/")

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in (self.master_json() or {}).get("workers", []) if w.get("state") == ALIVE]


def worker_json(worker: dict[str, Any]) -> dict[str, Any] | None:
    """A worker's own ``/json/`` (its executors, running and finished), from the master's entry for it."""
    return _get_json(worker["webuiaddress"].rstrip("/") + "/json/")


def _get_json(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            result: dict[str, Any] = json.load(answer)
            return result
    except (OSError, urllib.error.URLError, ValueError):
        return None


def _is_spark_daemon(pid: int) -> bool:
    """Whether ``pid`` runs a Spark master or worker (``spark-class`` before its exec, java after)."""
    for _ in range(50):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            # empty: a zombie, or a process in the middle of exec; only the second is still running
            zombie = not cmdline and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z"
        except OSError:
            return False
        if cmdline:
            return any(arg.decode(errors="replace") in (MASTER_CLASS, WORKER_CLASS) for arg in cmdline.split(b"\0"))
        if zombie:
            return False
        time.sleep(0.01)
    return False


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _megabytes(memory: str) -> int:
    """Spark's memory strings (``512m``, ``1g``) in MiB."""
    units = {"m": 1, "g": 1024, "t": 1024 * 1024}
    text = memory.strip().lower()
    if not text or text[-1] not in units or not text[:-1].isdigit():
        raise SparkClusterError(f"memory {memory!r}: expected a Spark memory size like 512m or 1g")
    return int(text[:-1]) * units[text[-1]]
