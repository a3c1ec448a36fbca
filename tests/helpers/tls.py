"""A self-signed certificate for 127.0.0.1 made with the ``openssl`` command, and the client context
that trusts it."""

from __future__ import annotations

import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class TestCertificate:
    cert: Path
    key: Path

    def client_context(self) -> ssl.SSLContext:
        """Trusts this certificate only; host names are not checked (servers are addressed by IP)."""
        context = ssl.create_default_context(cafile=str(self.cert))
        context.check_hostname = False
        return context


def make_certificate(directory: Path) -> TestCertificate:
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "cert.pem", directory / "key.pem"
    args = [
        "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=rmq-test",
        "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert),
    ]  # fmt: skip
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        pytest.fail("the openssl command is needed to make a test certificate")
    assert done.returncode == 0, done.stderr
    return TestCertificate(cert, key)
