"""``rmq-broker`` as a process (with its embedded name server, as the README starts it): a clean
SIGTERM exit, no acknowledged message lost to SIGKILL under SYNC_FLUSH, and the test harness's
restart on fresh ports of a broker whose port was taken before it bound it."""

from __future__ import annotations

import signal
import socket
import threading

import pytest

from rmq.net import RemotingClient, RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers import LOOPBACK, free_port, wait_until
from tests.helpers.broker import broker_settings
from tests.helpers.processes import start_broker_process
from tests.helpers.requests import call, pull_request, records, send_request

pytestmark = pytest.mark.slow


def test_sigterm_exits_cleanly_and_saves_offsets(spawn, store_dir):
    settings = broker_settings(store_dir)
    proc, addr = start_broker_process(spawn, settings)
    with RemotingClient() as client:
        assert call(client, addr, send_request("Clean", b"x")).code == ResponseCode.SUCCESS
        commit = RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "G", "topic": "Clean", "queueId": 0, "commitOffset": 1},
        )
        assert call(client, addr, commit).code == ResponseCode.SUCCESS
    assert (store_dir / "abort").exists()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0
    assert not (store_dir / "abort").exists()
    assert '"Clean@G"' in (store_dir / "config" / "consumerOffset.json").read_text()
    assert (store_dir / "logs" / "broker.log").read_text().count("stopped") >= 1


def test_sigkill_under_sync_flush_keeps_every_acknowledged_message(spawn, store_dir):
    settings = broker_settings(store_dir, flushDiskType="SYNC_FLUSH", flushConsumerOffsetInterval="300")
    proc, addr = start_broker_process(spawn, settings)
    acked: list[tuple[int, int, bytes]] = []
    stop = threading.Event()
    in_flight = threading.Semaphore(8)

    with RemotingClient() as client:
        assert call(client, addr, send_request("Durable", b"first")).code == ResponseCode.SUCCESS
        commit = RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "G", "topic": "Durable", "queueId": 0, "commitOffset": 1},
        )
        assert call(client, addr, commit).code == ResponseCode.SUCCESS

        def sender():
            n = 0
            while not stop.is_set():
                if not in_flight.acquire(timeout=0.5):
                    continue
                body = b"m-%d" % n
                n += 1

                def done(response, error, body=body):
                    in_flight.release()
                    if error is None and response.code == ResponseCode.SUCCESS:
                        acked.append(
                            (int(response.ext_fields["queueId"]), int(response.ext_fields["queueOffset"]), body)
                        )

                try:
                    client.invoke_callback(addr, send_request("Durable", body, queue_id=n % 4), 3.0, done)
                except Exception:
                    in_flight.release()

        thread = threading.Thread(target=sender)
        thread.start()
        offsets = store_dir / "config" / "consumerOffset.json"
        wait_until(
            lambda: offsets.exists() and '"Durable@G"' in offsets.read_text(),
            10,
            "the committed offset persisted (every 300 ms)",
        )
        wait_until(lambda: len(acked) > 50, 20, "50 sends acknowledged")  # and sends keep going
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        stop.set()
        thread.join(10)
    assert len(acked) > 50
    assert (store_dir / "abort").exists()

    proc, addr = start_broker_process(spawn, settings)
    with RemotingClient() as client:
        stored = set()
        for queue_id in range(4):
            offset = 0
            while True:
                r = call(client, addr, pull_request("Durable", queue_id, offset))
                if r.code != ResponseCode.SUCCESS:
                    break
                stored.update(m.body for m in records(r.body))
                offset = int(r.ext_fields["nextBeginOffset"])
        missing = [body for _, _, body in acked if body not in stored]
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:3]}"
        query = RemotingCommand.request(
            RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "Durable", "queueId": 0}
        )
        assert call(client, addr, query).ext_fields["offset"] == "1"


@pytest.mark.parametrize("key", ["listenPort", "grpcServerPort"])
def test_a_port_taken_before_the_broker_binds_it_is_replaced(spawn, store_dir, key):
    # what parallel test runs do to each other: free_port() said free, then someone else bound it
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind((LOOPBACK, 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        settings = broker_settings(store_dir, enableGrpc="true", grpcServerPort=str(free_port()))
        settings[key] = str(taken)
        proc, addr = start_broker_process(spawn, settings)
        assert addr == f"{LOOPBACK}:{settings['listenPort']}" and settings[key] != str(taken)
        assert "Address already in use" in (store_dir / "logs" / "broker.log").read_text()
        with RemotingClient() as client:
            assert call(client, addr, send_request("Moved", b"x")).code == ResponseCode.SUCCESS
