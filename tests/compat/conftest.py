"""Real third-party RocketMQ clients, installed by the tests themselves into a cache in the checkout.

- npm ``ali-ons@3.12.0``: the pure JavaScript 4.x client (SEND_MESSAGE_V2, needs topics to exist).
- PyPI ``rocketmq==0.4.4``: a Python wrapper over the C++ client (SEND_MESSAGE, falls back to TBW102
  for unknown topics). It installs a top-level package named ``rocketmq`` and writes logs under
  ``$HOME/logs``, so it lives in its own virtual environment and runs with HOME pointed at a temp dir.

Both are installed once per cache (``.cache/compat`` in the checkout, git-ignored) and reused.
A missing ``npm`` or an unreachable registry fails these tests with the reason: they are not skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from collections import Counter
from pathlib import Path

import pytest

ALI_ONS_VERSION = "3.12.0"
ROCKETMQ_PY_VERSION = "0.4.4"
CLIENTS = Path(__file__).parent / "clients"
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "compat"
INSTALL_TIMEOUT = 600


def _run_install(args: list[str], what: str, **kwargs) -> None:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, **kwargs)
    except FileNotFoundError as e:
        pytest.fail(f"cannot install {what}: {e.filename} is not installed")
    if done.returncode != 0:
        pytest.fail(f"installing {what} failed ({' '.join(args)}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


@pytest.fixture(scope="session")
def ali_ons() -> Path:
    """A directory whose node_modules holds ali-ons (run node scripts with NODE_PATH set to it)."""
    prefix = CACHE / f"ali-ons-{ALI_ONS_VERSION}"
    package_json = prefix / "node_modules" / "ali-ons" / "package.json"
    if not package_json.exists() or json.loads(package_json.read_text())["version"] != ALI_ONS_VERSION:
        prefix.mkdir(parents=True, exist_ok=True)
        _run_install(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix),
                      f"ali-ons@{ALI_ONS_VERSION}"], f"ali-ons@{ALI_ONS_VERSION}")
    return prefix / "node_modules"


@pytest.fixture(scope="session")
def rocketmq_python() -> Path:
    """The python executable of a virtual environment holding rocketmq==0.4.4."""
    env_dir = CACHE / f"venv-rocketmq-{ROCKETMQ_PY_VERSION}"
    python = env_dir / "bin" / "python"
    marker = env_dir / "installed"
    if not marker.exists():
        shutil.rmtree(env_dir, ignore_errors=True)
        venv.EnvBuilder(with_pip=True).create(env_dir)
        _run_install([str(python), "-m", "pip", "install", "--quiet", f"rocketmq=={ROCKETMQ_PY_VERSION}"],
                     f"rocketmq=={ROCKETMQ_PY_VERSION}")
        marker.write_text(ROCKETMQ_PY_VERSION)
    return python


class ClientRunner:
    """Runs the scripts in ``clients/`` and parses their JSON-lines output."""

    def __init__(self, ali_ons: Path, rocketmq_python: Path, home: Path):
        self.ali_ons = ali_ons
        self.rocketmq_python = rocketmq_python
        self.home = home

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["NODE_PATH"] = str(self.ali_ons)
        env["HOME"] = str(self.home)  # the C++ client writes $HOME/logs
        env.pop("PYTHONPATH", None)  # the client venv must not see rmq
        return env

    def command(self, script: str, *args: str) -> list[str]:
        path = CLIENTS / script
        interpreter = "node" if script.endswith(".js") else str(self.rocketmq_python)
        return [interpreter, str(path), *map(str, args)]

    def run(self, script: str, *args: str, timeout: float = 120) -> list[dict]:
        done = subprocess.run(self.command(script, *args), capture_output=True, text=True, timeout=timeout,
                              env=self._env(), cwd=self.home)
        if done.returncode != 0:
            raise AssertionError(f"{script} exited {done.returncode}:\n{done.stderr[-3000:]}")
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    def start(self, script: str, *args: str) -> subprocess.Popen:
        return subprocess.Popen(self.command(script, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=self._env(), cwd=self.home)

    @staticmethod
    def wait_all(procs: dict[str, subprocess.Popen], timeout: float = 120) -> dict[str, list[dict]]:
        """Wait for scripts started with ``start``; their JSON lines by name."""
        results = {}
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{err[-3000:]}"
            results[name] = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        return results


def bodies(lines: list[dict]) -> Counter:
    """How often each message body was delivered."""
    return Counter(line["body"] for line in lines if "body" in line)


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return home


@pytest.fixture
def clients(ali_ons: Path, rocketmq_python: Path, tmp_path: Path) -> ClientRunner:
    return ClientRunner(ali_ons, rocketmq_python, _home(tmp_path))


@pytest.fixture
def ons_clients(ali_ons: Path, tmp_path: Path) -> ClientRunner:
    """A runner of the ali-ons scripts only: the rocketmq venv is neither needed nor installed."""
    return ClientRunner(ali_ons, Path(sys.executable), _home(tmp_path))


class RunningBroker:
    """An ``rmq-broker`` process with its embedded name server, as the README starts it."""

    def __init__(self, proc: subprocess.Popen, settings: dict[str, str]):
        self.proc = proc
        self.settings = settings
        self.addr = f"127.0.0.1:{settings['listenPort']}"
        self.namesrv = f"127.0.0.1:{settings['namesrvListenPort']}"

    def create_topic(self, topic: str, queues: int = 4) -> None:
        """UPDATE_AND_CREATE_TOPIC, as ``rmq-admin topic create`` sends it (ali-ons needs topics to exist)."""
        from rmq.net import RemotingClient, RemotingCommand
        from rmq.protocol.codes import RequestCode, ResponseCode

        request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False})
        with RemotingClient() as client:
            answer = client.invoke_sync(self.addr, request, 5.0)
        assert answer.code == ResponseCode.SUCCESS, answer.remark


@pytest.fixture
def rmq_broker(spawn, store_dir: Path) -> RunningBroker:
    from tests.broker.broker_helpers import start_process
    from tests.broker.conftest import broker_settings

    settings = broker_settings(store_dir)
    proc, _ = start_process(spawn, settings)
    return RunningBroker(proc, settings)
