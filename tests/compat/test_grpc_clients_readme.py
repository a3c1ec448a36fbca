"""The README's quick start of Apache's 5.x Python client runs as written: in the client's own
virtual environment, against an ``rmq-broker`` whose gRPC endpoint is on a free port (the snippet's
127.0.0.1:8081 changed to it) and whose TopicA the quick start's ``rmq-admin topic create`` made. It
prints the id it sent and the message it received, with nothing on stderr."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers.grpc_clients import README_ENDPOINT, readme_python_client_snippets

pytestmark = [pytest.mark.compat, pytest.mark.slow]

README = Path(__file__).resolve().parents[2] / "README.md"
SCRIPT_TIMEOUT = 60


def test_the_readme_quick_start_of_the_5x_python_client_runs_as_written(grpc_clients, grpc_cluster, tmp_path: Path):
    (snippet,) = readme_python_client_snippets(README)
    assert README_ENDPOINT in snippet
    grpc_cluster.create_topic("TopicA")
    script = tmp_path / "quick_start.py"
    script.write_text(snippet.replace(README_ENDPOINT, grpc_cluster.endpoint))
    runner = grpc_clients.runner
    done = subprocess.run(
        [str(runner.python), str(script)],
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT,
        env=runner.environment(),
        cwd=runner.home,
    )
    assert done.returncode == 0, f"exit {done.returncode}\nstderr:\n{done.stderr}"
    assert done.stderr == "", done.stderr
    sent = re.search(r"^sent (\S+)$", done.stdout, re.M)
    assert sent, done.stdout
    assert "received b'hello' attempt 1" in done.stdout.splitlines()
