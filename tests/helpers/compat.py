"""Real third-party RocketMQ clients, found where ``.ci/install-peers`` put them, and a runner of their
scripts (``tests/compat/clients``).

- npm ``ali-ons@3.12.0``: the pure JavaScript 4.x client (SEND_MESSAGE_V2, needs topics to exist).
- PyPI ``rocketmq==0.4.4``: a Python wrapper over the C++ client (SEND_MESSAGE, falls back to TBW102
  for unknown topics). It lives in its own virtual environment and writes logs under ``$HOME/logs``,
  so it runs with HOME pointed at a temp dir. Its C API has no transactional producer;
  ``clients/cpp_transaction_shim.cpp`` (built here with g++) reaches the one inside its librocketmq.so.
- Debian's ``liblz4-java`` and ``libzstd-jni-java``: the Java libraries RocketMQ 5.x's LZ4 and ZSTD
  body codecs stream through, run by ``JavaCodecs.java`` with the machine's JDK.

``.ci/run`` installs them all before the tests (versions and places are the script's); a local run
that finds one missing runs the script for it. A peer that cannot be installed (no ``npm``, a
registry out of reach) fails its tests with the script's reason: they are not skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
SCRIPTS = CHECKOUT / "tests" / "compat" / "clients"
CACHE = CHECKOUT / ".cache" / "compat"
INSTALL_PEERS = CHECKOUT / ".ci" / "install-peers"
PEERS_MANIFEST = CACHE / "peers.json"
INSTALL_TIMEOUT = 900


def _installed(name: str) -> dict | None:
    """The manifest's entry of ``name``, if the script as it is now installed it and it is still there."""
    try:
        entry = json.loads(PEERS_MANIFEST.read_text()).get(name)
    except (FileNotFoundError, ValueError):
        return None
    digest = hashlib.sha256(INSTALL_PEERS.read_bytes()).hexdigest()[:16]
    if entry is None or entry.get("installed_by") != digest or not all(map(os.path.exists, entry["paths"])):
        return None
    return entry


def peer(name: str) -> dict:
    """Where ``.ci/install-peers`` put peer ``name`` (its manifest entry); not there, the script is
    run for it now, and fails the test with its output when it cannot install it."""
    entry = _installed(name)
    if entry is not None:
        return entry
    command = [sys.executable, str(INSTALL_PEERS), name]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(command)} took more than {INSTALL_TIMEOUT} s")
    entry = _installed(name)
    if entry is None:
        pytest.fail(f"{name} is not installed: {' '.join(command)} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return entry


def install_ali_ons() -> Path:
    """A directory whose node_modules holds ali-ons (node scripts run with NODE_PATH set to it)."""
    return Path(peer("ali-ons")["node_path"])


def install_java_codecs() -> list[str]:
    """The command prefix that runs ``JavaCodecs.java`` (RocketMQ 5.x's LZ4/ZSTD streams)."""
    codecs = peer("java-codecs")
    classpath = ":".join(codecs["jars"])
    return [
        codecs["java"],
        f"-Djava.library.path={codecs['library_path']}",
        "-cp",
        classpath,
        str(SCRIPTS / "JavaCodecs.java"),
    ]


def install_rocketmq_python() -> Path:
    """The python executable of a virtual environment holding rocketmq==0.4.4."""
    return Path(peer("rocketmq-python")["python"])


def build_cpp_transaction_shim(python: Path) -> Path:
    """``clients/cpp_transaction_shim.cpp`` compiled against the venv's librocketmq.so (g++; once per
    cache and source): the C++ client's TransactionMQProducer, which the package's C API leaves out."""
    source = SCRIPTS / "cpp_transaction_shim.cpp"
    library = next((python.parent.parent / "lib").glob("python*/site-packages/rocketmq/librocketmq.so"), None)
    if library is None:
        pytest.fail(f"no librocketmq.so in the rocketmq environment {python.parent.parent}")
    digest = hashlib.sha256(source.read_bytes() + library.read_bytes()).hexdigest()[:16]
    shim = CACHE / f"cpp-transaction-shim-{digest}.so"
    if not shim.exists():
        lib_dir = str(library.parent)
        args = [
            "g++", "-O1", "-shared", "-fPIC", "-D_GLIBCXX_USE_CXX11_ABI=0", str(source), "-L", lib_dir,
            "-lrocketmq", f"-Wl,-rpath,{lib_dir}", "-o", str(shim),
        ]  # fmt: skip
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
        except FileNotFoundError:
            pytest.fail("g++ is needed to build the C++ client's transactional producer shim")
        assert done.returncode == 0, f"building the C++ transaction shim failed:\n{done.stderr[-3000:]}"
    return shim


def _keys_as_text(keys) -> str:
    # ali-ons reports a message's keys as the list it was sent with
    return " ".join(keys) if isinstance(keys, list) else keys


@dataclass(frozen=True)
class ClientFamily:
    """One third-party client and what its scripts print, so one scenario runs against each."""

    name: str
    produce_script: str
    consume_script: str
    #: the "status" a produce script prints for a message the broker took
    send_ok: object
    #: the consume script's IDLE argument for one second
    idle_per_second: int
    #: True: a send to an unknown topic creates it through TBW102; False: the topic must exist
    creates_topics: bool
    #: the consume script's "keys" of a message, as one string
    keys: Callable[[object], str]

    def idle(self, seconds: float) -> int:
        return int(seconds * self.idle_per_second)


ALI_ONS = ClientFamily(
    "ali-ons",
    "ons_produce.js",
    "ons_consume.js",
    send_ok="SEND_OK",
    idle_per_second=1000,
    creates_topics=False,
    keys=_keys_as_text,
)
ROCKETMQ_CPP = ClientFamily(
    "rocketmq-cpp",
    "cpp_produce.py",
    "cpp_consume.py",
    send_ok=0,
    idle_per_second=1,
    creates_topics=True,
    keys=lambda keys: keys,
)
FAMILIES = (ALI_ONS, ROCKETMQ_CPP)


class ClientRunner:
    """Runs the scripts in ``tests/compat/clients`` and parses their JSON-lines output: node scripts
    with ali-ons on NODE_PATH, python ones in the rocketmq venv."""

    def __init__(self, home: Path, node_path: Path | None = None, python: Path | None = None):
        home.mkdir(parents=True, exist_ok=True)
        self.home = home
        self.node_path = node_path
        self.python = python
        #: more environment of the scripts (ACL_ACCESS_KEY / ACL_SECRET_KEY: they sign their requests)
        self.env: dict[str, str] = {}

    def environment(self) -> dict[str, str]:
        """The environment the scripts run in."""
        env = dict(os.environ)
        if self.node_path is not None:
            env["NODE_PATH"] = str(self.node_path)
        env["HOME"] = str(self.home)  # the C++ client writes $HOME/logs
        env.pop("PYTHONPATH", None)  # the client venv must not see rmq
        env.update(self.env)
        return env

    def command(self, script: str, *args: object) -> list[str]:
        interpreter = "node" if script.endswith(".js") else str(self.python)
        return [interpreter, str(SCRIPTS / script), *map(str, args)]

    def run(self, script: str, *args: object, timeout: float = 120) -> list[dict]:
        done = subprocess.run(
            self.command(script, *args),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.environment(),
            cwd=self.home,
        )
        if done.returncode != 0:
            raise AssertionError(f"{script} exited {done.returncode}:\n{done.stderr[-3000:]}")
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    def start(self, script: str, *args: object, stdin: int | None = None) -> subprocess.Popen:
        """``stdin=subprocess.PIPE`` for a script that runs until its standard input closes."""
        return subprocess.Popen(
            self.command(script, *args),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.environment(),
            cwd=self.home,
        )

    def start_until_closed(self, script: str, *args: object) -> RunningScript:
        """A script that runs until its standard input closes (``RunningScript.close``)."""
        return RunningScript(self.start(script, *args, stdin=subprocess.PIPE))

    @staticmethod
    def wait_all(procs: dict[str, subprocess.Popen], timeout: float = 120) -> dict[str, list[dict]]:
        """Wait for scripts started with ``start``; their JSON lines by name."""
        results = {}
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{err[-3000:]}"
            results[name] = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        return results


class RunningScript:
    """A client script that runs until its standard input closes; its JSON lines read on a thread as
    they come, so that a test can wait for them while it runs."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.lines: list[dict] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("{"):
                with self.lock:
                    self.lines.append(json.loads(line))

    def of(self, kind: str) -> list[dict]:
        """The lines so far that hold ``kind``."""
        with self.lock:
            return [e for e in self.lines if kind in e]

    def close(self) -> str:
        """Close the script's standard input (it shuts down); its standard error."""
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.thread.join(10)
        return self.proc.stderr.read()


class FamilyClients:
    """A family's producer and consumer scripts, through a ClientRunner."""

    def __init__(self, family: ClientFamily, runner: ClientRunner):
        self.family = family
        self.runner = runner

    def produce(
        self, namesrv: str, topic: str, group: str, count: int, tags_csv: str, prefix: str | None = None
    ) -> list[dict]:
        """Send ``count`` messages: message i has tag i % len(tags), key <prefix>-key-<i>, body
        <prefix>-body-<i> (prefix: the script's own by default)."""
        return self.runner.run(
            self.family.produce_script, namesrv, topic, group, count, tags_csv, *([prefix] if prefix else [])
        )

    def _consume_args(
        self, namesrv: str, topic: str, group: str, expression: str, count: int, idle_seconds: float
    ) -> tuple:
        return (self.family.consume_script, namesrv, topic, group, expression, count, self.family.idle(idle_seconds))

    def consume(
        self, namesrv: str, topic: str, group: str, expression: str, count: int, idle_seconds: float
    ) -> list[dict]:
        """Consume until ``count`` messages arrived or ``idle_seconds`` passed without one."""
        return self.runner.run(*self._consume_args(namesrv, topic, group, expression, count, idle_seconds))

    def start_consumer(
        self, namesrv: str, topic: str, group: str, expression: str, count: int, idle_seconds: float
    ) -> subprocess.Popen:
        return self.runner.start(*self._consume_args(namesrv, topic, group, expression, count, idle_seconds))


def bodies(lines: list[dict]) -> Counter:
    """How often each message body was delivered."""
    return Counter(line["body"] for line in lines if "body" in line)


@contextlib.contextmanager
def sdk_push_consumer(namesrv: str, topic: str, group: str, count: int, **options) -> Iterator[list]:
    """Our SDK's push consumer of a new ``group`` on ``topic`` (from the first offset; ``options``
    are PushConsumer's), started and waited for until ``count`` messages came: the context holds
    the list of what came while the consumer still runs; it stops at the end."""
    from rmq.client import PushConsumer

    received: list = []
    lock, done = threading.Lock(), threading.Event()

    def on_messages(msgs):
        with lock:
            received.extend(msgs)
            if len(received) >= count:
                done.set()

    consumer = PushConsumer(group, namesrv, **{"consume_from_where": "FIRST_OFFSET", "instance_name": group, **options})
    consumer.subscribe(topic, "*")
    consumer.register_listener(on_messages)
    with consumer:
        assert done.wait(20), f"{group} got {len(received)} of {count} messages"
        yield received
