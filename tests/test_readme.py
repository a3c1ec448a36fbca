"""Every ```python snippet of the README runs as written (issue 26: the SDK's exited at once, with
nothing printed and a warning), each a script of its own against a real broker, with the name server
address changed as the README tells users to change it (another namesrvListenPort).

A snippet that prints says what a user should see: the checks below are on its output."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import rmq
from rmq.perf.procs import Processes
from tests.helpers import LOOPBACK
from tests.helpers.broker import broker_settings
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
    return SNIPPET.findall(README.read_text())


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
