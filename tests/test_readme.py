"""Every ```python snippet of the README runs as written (issue 26: the SDK's exited at once, with
nothing printed and a warning), each a script of its own against a real broker, with the name server
address changed as the README tells users to change it (another namesrvListenPort).

A snippet that prints says what a user should see: the checks below are on its output."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import rmq
from rmq.client.admin_client import AdminClient
from rmq.perf.procs import Processes, wait_listening
from rmq.protocol.route import MASTER_ID
from tests.helpers import LOOPBACK, free_port, wait_until
from tests.helpers.broker import broker_settings
from tests.helpers.grpc_clients import PYTHON_CLIENT_SNIPPET
from tests.helpers.processes import start_broker_process
from tests.helpers.tls import make_certificate

README = Path(__file__).resolve().parents[1] / "README.md"
README_NAMESRV = "127.0.0.1:9876"
SNIPPET = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
# a snippet that waits for a message waits 30 s at most; one that hangs fails before the suite's timeout
SCRIPT_TIMEOUT = 60
# what each snippet prints (the start of a line each), by a line of it that names it
EXPECTED_OUTPUT = {
    "received = threading.Event()": ["sent SEND_OK", "received [b'hello']"],
    "TransactionProducer(": ["sent SEND_OK COMMIT"],
    "tls=context": ["sent SEND_OK"],
    "deliver_at=": ["sent SEND_OK"],
}


def snippets() -> list[str]:
    """The snippets of our SDK (the 5.x Python client's runs in its own environment:
    tests/compat/test_grpc_clients_readme.py)."""
    return [s for s in SNIPPET.findall(README.read_text()) if PYTHON_CLIENT_SNIPPET not in s]


@pytest.fixture(scope="module")
def readme_broker(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """A broker with its embedded name server on a free port (TLS taken, plain too, as tlsServerMode's
    default); (name server address, a directory holding ca.pem, the CA the TLS snippet names)."""
    root = tmp_path_factory.mktemp("readme")
    certificate = make_certificate(root / "tls")
    (root / "cwd").mkdir()
    (root / "cwd" / "ca.pem").write_bytes(certificate.cert.read_bytes())
    settings = broker_settings(
        root / "store",
        tlsEnable="true",
        tlsServerCertPath=str(certificate.cert),
        tlsServerKeyPath=str(certificate.key),
    )
    processes = Processes()
    try:
        start_broker_process(processes.spawn, settings)
        yield f"{LOOPBACK}:{settings['namesrvListenPort']}", root / "cwd"
    finally:
        processes.stop_all()


def test_the_readme_has_its_snippets():
    # the quick start says how to move the embedded name server (once only in rmq-broker -p)
    quick_start = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "namesrvListenPort=9877" in quick_start
    found = snippets()
    assert len(found) >= len(EXPECTED_OUTPUT)
    for marker in EXPECTED_OUTPUT:
        assert any(marker in snippet for snippet in found), f"no README snippet has {marker!r}"


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(snippets())))
def test_a_readme_snippet_runs_as_written(readme_broker, index):
    namesrv, cwd = readme_broker
    snippet = snippets()[index]
    script = cwd / f"snippet{index}.py"
    script.write_text(snippet.replace(README_NAMESRV, namesrv))
    # the scripts run elsewhere (beside ca.pem): rmq from where this test imported it, installed or not
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(rmq.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{snippet}\nstderr:\n{done.stderr}"
    # a newcomer sees warnings (Python's last-resort handler prints them): a snippet run right logs none
    assert done.stderr == "", f"{snippet}\nstderr:\n{done.stderr}"
    for marker, lines in EXPECTED_OUTPUT.items():
        if marker in snippet:
            for line in lines:
                assert any(printed.startswith(line) for printed in done.stdout.splitlines()), (
                    f"{snippet}\nprinted:\n{done.stdout}"
                )


# -- the controller-mode quick start (issue 27) --------------------------------------------------------

CONTROLLER_QUICK_START = "**Controller mode on one machine**"
# what its commands name, each replaced by one of the test's own
QUICK_START_PORTS = ("9876", "9880", "10911", "10921", "8081", "8091")
QUICK_START_STORE = "/tmp/rmq-ha"
# the roles' commands, as the test's spawn runs them (``python ARGS``)
MODULES = {"rmq-namesrv": ["-m", "rmq.cli.namesrv"], "rmq-broker": ["-m", "rmq.cli.broker"]}


def quick_start_commands() -> list[str]:
    """The shell commands of the README's controller-mode quick start, in order (its indented lines
    up to the paragraph on operating it)."""
    text = README.read_text().split(CONTROLLER_QUICK_START, 1)[1].split("\nOperating it:", 1)[0]
    return [line[4:] for line in text.splitlines() if line.startswith("    ")]


@pytest.mark.slow
def test_the_controller_mode_quick_start_runs_as_written(spawn, tmp_path: Path):
    """Its three commands start a name server with a controller and two brokers in controller mode;
    once sync-state shows both in sync a send is SEND_OK; the master SIGKILLed by its kill line, the
    other is elected at once (waited for less than the heartbeat timeout: the controller saw the
    connection close) and the send again is SEND_OK."""
    ports = {port: str(free_port()) for port in QUICK_START_PORTS}

    def ours(command: str) -> str:
        for port, free in ports.items():
            command = command.replace(port, free)
        return command.replace(QUICK_START_STORE, str(tmp_path))

    starts, (sync_state, send, kill, send_again) = quick_start_commands()[:3], quick_start_commands()[3:]
    assert [c.split()[0] for c in starts] == ["rmq-namesrv", "rmq-broker", "rmq-broker"] and send == send_again
    for number, command in enumerate(starts):
        program, *args = shlex.split(ours(command).removesuffix("&"))
        with open(tmp_path / f"{number}-{program}.log", "wb") as output:
            proc = spawn(*MODULES[program], *args, stderr=output)
        if program == "rmq-namesrv":
            wait_listening(proc, int(ports["9876"]), "rmq-namesrv")
    namesrv = f"{LOOPBACK}:{ports['9876']}"
    env = {**os.environ, "PYTHONPATH": str(Path(rmq.__file__).parents[1])}

    def run(command: str) -> str:
        """``command``'s output (python, or rmq-admin as ``python -m rmq.cli.admin``)."""
        program, *args = shlex.split(ours(command))
        argv = {"python": [], "rmq-admin": ["-m", "rmq.cli.admin"]}[program]
        done = subprocess.run(
            [sys.executable, *argv, *args], env=env, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def both_in_sync() -> bool:
        rows = run(sync_state).splitlines()[1:]  # a head line, then a table of the brokers
        return sum(1 for row in rows if row.split()[-2:] == ["yes", "yes"]) == 2

    with AdminClient(namesrv, timeout=2.0) as admin:

        def routes() -> dict[int, str]:
            try:
                return admin.broker_addrs("broker-a")
            except Exception:
                return {}

        wait_until(
            lambda: len(routes()) == 2 and MASTER_ID in routes(), 30, lambda: f"a master and a slave ({routes()})"
        )
        wait_until(both_in_sync, 20, lambda: f"both brokers in sync:\n{run(sync_state)}", 0.2)
        assert run(send) == "SEND_OK"
        master_port = routes()[MASTER_ID].rpartition(":")[2]
        (readme_port,) = [port for port in ("10911", "10921") if ports[port] == master_port]
        script = tmp_path / "kill.sh"  # run from a file: the line itself must not be in a process's arguments
        script.write_text(ours(kill.replace("10911", readme_port)) + "\n")
        subprocess.run(["bash", str(script)], check=True, timeout=10)
        wait_until(
            lambda: routes().get(MASTER_ID) not in (None, f"{LOOPBACK}:{master_port}"),
            8,
            lambda: f"the other broker routed as master ({routes()})",
        )
        assert run(send_again) == "SEND_OK"
