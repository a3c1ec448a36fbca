"""TLS on the event loop (rmq.net.tls): a server in permissive mode serves TLS and plain clients on
one port, in enforcing mode only TLS; large frames both ways; a client that does not trust the
server's certificate gets an error naming it, and the server goes on."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest

from rmq.errors import RemotingError
from rmq.net import RemotingClient
from rmq.net.codec import RemotingCommand
from rmq.net.server import RemotingServer
from rmq.net.tls import TlsServerOptions, server_context
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.tls import TlsMode
from tests.helpers import LOOPBACK
from tests.helpers.frames import RawConnection, route_request_frame
from tests.helpers.tls import make_certificate


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    return make_certificate(tmp_path_factory.mktemp("tls"))


def echo(channel, request):
    return RemotingCommand.response_to(
        request, ResponseCode.SUCCESS, ext_fields=dict(request.ext_fields), body=request.body
    )


@contextlib.contextmanager
def tls_server(certificate, mode: TlsMode) -> Iterator[RemotingServer]:
    """A server answering SEND_MESSAGE with the request's fields and body, serving TLS in ``mode``."""
    context = server_context(str(certificate.cert), str(certificate.key))
    server = RemotingServer(LOOPBACK, 0, tls=TlsServerOptions(context, mode))
    server.register_processor(RequestCode.SEND_MESSAGE, echo)
    server.start()
    try:
        yield server
    finally:
        server.shutdown()


def assert_closed_by_server(sock: socket.socket) -> None:
    """The server closes the connection: an end of stream (after an alert, maybe), or a reset when
    it closed with bytes unread."""
    sock.settimeout(5)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass


def ask(client: RemotingClient, server: RemotingServer, body: bytes = b"hello") -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "T"}, body)
    return client.invoke_sync(server.address, request, timeout=10)


def test_permissive_serves_tls_and_plain_clients_on_one_port(certificate):
    with tls_server(certificate, TlsMode.PERMISSIVE) as server:
        with RemotingClient(tls=certificate.client_context()) as tls_client, RemotingClient() as plain_client:
            for client in (tls_client, plain_client, tls_client):
                answer = ask(client, server)
                assert (answer.code, answer.body, answer.ext_fields) == (0, b"hello", {"topic": "T"})
            assert sorted(channel.is_tls for channel in server.channels) == [False, True]


def test_enforcing_closes_a_plain_connection_and_serves_tls(certificate):
    with tls_server(certificate, TlsMode.ENFORCING) as server:
        with RemotingClient() as plain_client:
            with pytest.raises(RemotingError):
                ask(plain_client, server)
        with RawConnection(server.port) as conn:
            conn.send(route_request_frame(1))
            assert_closed_by_server(conn.sock)
        with RemotingClient(tls=certificate.client_context()) as tls_client:
            assert ask(tls_client, server).code == ResponseCode.SUCCESS


def test_large_frames_and_many_in_flight_cross_tls_intact(certificate):
    with tls_server(certificate, TlsMode.ENFORCING) as server:
        with RemotingClient(tls=certificate.client_context()) as client:
            bodies = [bytes([i]) * (3 * 1024 * 1024 + i) for i in range(4)]
            futures = [
                client.invoke_async(server.address, RemotingCommand.request(RequestCode.SEND_MESSAGE, {}, b), 30)
                for b in bodies
            ]
            assert [f.result(40).body for f in futures] == bodies


def test_an_untrusted_certificate_is_an_error_naming_it_and_the_server_goes_on(certificate, tmp_path):
    with tls_server(certificate, TlsMode.ENFORCING) as server:
        stranger = make_certificate(tmp_path / "other")
        with RemotingClient(tls=stranger.client_context()) as client:
            with pytest.raises(RemotingError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
                ask(client, server)
        # garbage that starts like a handshake
        with socket.create_connection((LOOPBACK, server.port), timeout=5) as raw:
            raw.sendall(b"\x16\x03\x01\x00\x05hello" * 4)
            assert_closed_by_server(raw)
        with RemotingClient(tls=certificate.client_context()) as client:
            assert ask(client, server).code == ResponseCode.SUCCESS


def test_a_client_trusting_the_systems_cas_refuses_a_self_signed_server_until_the_system_trusts_it(
    certificate, monkeypatch
):
    with tls_server(certificate, TlsMode.PERMISSIVE) as server:
        with RemotingClient(tls=True) as client:
            with pytest.raises(RemotingError, match="certificate"):
                ask(client, server)
        # the same certificate made the system's CA file: the refusal was about trust, and tls=True
        # reads the system's CAs (OpenSSL takes SSL_CERT_FILE when a context loads them)
        monkeypatch.setenv("SSL_CERT_FILE", str(certificate.cert))
        with RemotingClient(tls=True) as client:
            assert ask(client, server).body == b"hello"
