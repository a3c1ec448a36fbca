"""A self-signed certificate for 127.0.0.1 made with the ``openssl`` command, the client context
that trusts it, and a name server and broker process serving TLS with it."""

from __future__ import annotations

import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from rmq.perf.procs import Spawn, broker_settings, start_broker_process, start_namesrv


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


def start_tls_cluster(spawn: Spawn, root: Path) -> tuple[str, str, TestCertificate]:
    """rmq-namesrv serving TLS (permissive: the harness asks it in plain whether the broker registered)
    and an rmq-broker serving TLS only, with a certificate made under ``root``; (name server address,
    broker address, the certificate)."""
    certificate = make_certificate(root / "tls")
    _, namesrv = start_namesrv(spawn, "--tls-cert", str(certificate.cert), "--tls-key", str(certificate.key))
    store = root / "store"
    store.mkdir()
    settings = broker_settings(
        store,
        tlsEnable="true",
        tlsServerMode="enforcing",
        tlsServerCertPath=str(certificate.cert),
        tlsServerKeyPath=str(certificate.key),
    )
    del settings["namesrvListenPort"]
    _, broker = start_broker_process(spawn, settings, namesrv, extra_args=("--log-level", "WARNING"))
    return namesrv, broker, certificate
