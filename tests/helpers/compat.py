"""Real third-party RocketMQ clients, installed by the tests themselves into a cache in the checkout,
and a runner of their scripts (``tests/compat/clients``).

- npm ``ali-ons@3.12.0``: the pure JavaScript 4.x client (SEND_MESSAGE_V2, needs topics to exist).
- PyPI ``rocketmq==0.4.4``: a Python wrapper over the C++ client (SEND_MESSAGE, falls back to TBW102
  for unknown topics). It installs a top-level package named ``rocketmq`` and writes logs under
  ``$HOME/logs``, so it lives in its own virtual environment and runs with HOME pointed at a temp dir.
  Its C API has no transactional producer; ``clients/cpp_transaction_shim.cpp`` (built with g++)
  reaches the one inside its librocketmq.so.
- Debian's ``liblz4-java`` and ``libzstd-jni-java``: the Java libraries RocketMQ 5.x's LZ4 and ZSTD
  body codecs stream through, run by ``JavaCodecs.java`` with the machine's JDK (apt-get installs them).

Both are installed once per cache (``.cache/compat`` in the checkout, git-ignored) and reused.
A missing ``npm`` or an unreachable registry fails these tests with the reason: they are not skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import venv
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ALI_ONS_VERSION = "3.12.0"
ROCKETMQ_PY_VERSION = "0.4.4"
CHECKOUT = Path(__file__).resolve().parents[2]
SCRIPTS = CHECKOUT / "tests" / "compat" / "clients"
CACHE = CHECKOUT / ".cache" / "compat"
INSTALL_TIMEOUT = 600


def _run_install(args: list[str], what: str, **kwargs) -> None:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, **kwargs)
    except FileNotFoundError as e:
        pytest.fail(f"cannot install {what}: {e.filename} is not installed")
    if done.returncode != 0:
        pytest.fail(f"installing {what} failed ({' '.join(args)}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


def install_ali_ons() -> Path:
    """A directory whose node_modules holds ali-ons (node scripts run with NODE_PATH set to it)."""
    prefix = CACHE / f"ali-ons-{ALI_ONS_VERSION}"
    package_json = prefix / "node_modules" / "ali-ons" / "package.json"
    if not package_json.exists() or json.loads(package_json.read_text())["version"] != ALI_ONS_VERSION:
        prefix.mkdir(parents=True, exist_ok=True)
        _run_install(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix), f"ali-ons@{ALI_ONS_VERSION}"],
            f"ali-ons@{ALI_ONS_VERSION}",
        )
    return prefix / "node_modules"


JAVA_CODEC_JARS = (Path("/usr/share/java/lz4-java.jar"), Path("/usr/share/java/zstd-jni.jar"))
JAVA_NATIVE_LIBS = "/usr/lib/x86_64-linux-gnu/jni:/usr/lib/x86_64-linux-gnu"


def install_java_codecs() -> list[str]:
    """The command prefix that runs ``JavaCodecs.java`` (RocketMQ 5.x's LZ4/ZSTD streams)."""
    if not all(jar.exists() for jar in JAVA_CODEC_JARS):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        _run_install(["apt-get", "update", "-qq"], "Debian's package lists", env=env)
        _run_install(["apt-get", "install", "-y", "-qq", "liblz4-java", "libzstd-jni-java"], "lz4/zstd Java", env=env)
    classpath = ":".join(str(jar) for jar in JAVA_CODEC_JARS)
    return ["java", f"-Djava.library.path={JAVA_NATIVE_LIBS}", "-cp", classpath, str(SCRIPTS / "JavaCodecs.java")]


def install_rocketmq_python() -> Path:
    """The python executable of a virtual environment holding rocketmq==0.4.4."""
    env_dir = CACHE / f"venv-rocketmq-{ROCKETMQ_PY_VERSION}"
    python = env_dir / "bin" / "python"
    marker = env_dir / "installed"
    if not marker.exists():
        shutil.rmtree(env_dir, ignore_errors=True)
        venv.EnvBuilder(with_pip=True).create(env_dir)
        _run_install(
            [str(python), "-m", "pip", "install", "--quiet", f"rocketmq=={ROCKETMQ_PY_VERSION}"],
            f"rocketmq=={ROCKETMQ_PY_VERSION}",
        )
        marker.write_text(ROCKETMQ_PY_VERSION)
    return python


def build_cpp_transaction_shim(python: Path) -> Path:
    """``clients/cpp_transaction_shim.cpp`` compiled against the venv's librocketmq.so (g++; once per
    cache and source): the C++ client's TransactionMQProducer, which the package's C API leaves out."""
    source = SCRIPTS / "cpp_transaction_shim.cpp"
    library = next((python.parent.parent / "lib").glob("python*/site-packages/rocketmq/librocketmq.so"), None)
    if library is None:
        pytest.fail(f"no librocketmq.so in the rocketmq=={ROCKETMQ_PY_VERSION} environment {python.parent.parent}")
    digest = hashlib.sha256(source.read_bytes() + library.read_bytes()).hexdigest()[:16]
    shim = CACHE / f"cpp-transaction-shim-{digest}.so"
    if not shim.exists():
        lib_dir = str(library.parent)
        _run_install(
            ["g++", "-O1", "-shared", "-fPIC", "-D_GLIBCXX_USE_CXX11_ABI=0", str(source), "-L", lib_dir,
             "-lrocketmq", f"-Wl,-rpath,{lib_dir}", "-o", str(shim)],
            "the C++ client's transactional producer shim (g++)",
        )  # fmt: skip
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

    def _env(self) -> dict[str, str]:
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
            self.command(script, *args), capture_output=True, text=True, timeout=timeout, env=self._env(), cwd=self.home
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
            env=self._env(),
            cwd=self.home,
        )

    @staticmethod
    def wait_all(procs: dict[str, subprocess.Popen], timeout: float = 120) -> dict[str, list[dict]]:
        """Wait for scripts started with ``start``; their JSON lines by name."""
        results = {}
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{err[-3000:]}"
            results[name] = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        return results


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
