"""A broker process with tlsEnable: our SDK sends and consumes over TLS, rmq-admin talks TLS, and in
enforcing mode a plain client is turned away while the broker goes on."""

from __future__ import annotations

import threading

import pytest
from click.testing import CliRunner

from rmq.broker.config import load_broker_config
from rmq.cli.admin import main as admin_main
from rmq.client import Message, Producer, PushConsumer
from rmq.errors import ConfigError, RemotingError
from rmq.net import RemotingClient, RemotingCommand
from rmq.protocol.codes import RequestCode
from tests.helpers import wait_until
from tests.helpers.broker import broker_settings
from tests.helpers.requests import call
from tests.helpers.tls import start_tls_cluster


@pytest.fixture
def tls_cluster(spawn, tmp_path):
    """rmq-namesrv serving TLS (permissive) and a broker serving TLS only; (namesrv, broker, cert)."""
    return start_tls_cluster(spawn, tmp_path)


def test_the_sdk_sends_and_consumes_over_tls_and_a_plain_client_is_refused(tls_cluster):
    namesrv, broker, certificate = tls_cluster
    tls = certificate.client_context()
    code = CliRunner().invoke(
        admin_main, ["topic", "create", "Secret", "-n", namesrv, "--tls-ca", str(certificate.cert)]
    )
    assert code.exit_code == 0, code.output

    with Producer("tls-producer", namesrv, tls=tls) as producer:
        sent = [producer.send(Message("Secret", f"m-{i}".encode() * 100)) for i in range(30)]
    assert {r.status.name for r in sent} == {"SEND_OK"}

    got: list[bytes] = []
    lock = threading.Lock()

    def listener(msgs):
        with lock:
            got.extend(m.body for m in msgs)

    consumer = PushConsumer("tls-consumers", namesrv, tls=tls, consume_from_where="FIRST_OFFSET")
    consumer.subscribe("Secret", "*")
    consumer.register_listener(listener)
    with consumer.start():
        wait_until(lambda: len(got) >= 30, 20, "every message consumed over TLS")
    assert sorted(got) == sorted(f"m-{i}".encode() * 100 for i in range(30))

    with RemotingClient() as plain:
        with pytest.raises(RemotingError):
            call(plain, broker, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "Secret", "queueId": 0}))
    with RemotingClient(tls=tls) as client:  # the broker went on
        answer = call(
            client, broker, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "Secret", "queueId": 0})
        )
    assert answer.code == 0


def test_tls_settings_that_cannot_be_used_stop_the_broker_naming_them(tmp_path):
    with pytest.raises(ConfigError, match="tlsEnable=true needs tlsServerCertPath and tlsServerKeyPath"):
        load_broker_config(None, broker_settings(tmp_path, tlsEnable="true"))
    missing = str(tmp_path / "missing.pem")
    config, _ = load_broker_config(
        None, broker_settings(tmp_path, tlsEnable="true", tlsServerCertPath=missing, tlsServerKeyPath=missing)
    )
    with pytest.raises(ConfigError, match=f"cannot load tlsServerCertPath={missing}"):
        config.server_tls()
