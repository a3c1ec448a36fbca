"""What TLS costs: 1 KiB sends and pulls against one real ``rmq-broker`` (tlsEnable, permissive: the
same port takes both), through rmq's own RemotingClient plain and with TLS, rounds alternating
(plain, TLS, plain, TLS, ...) so that a drift of the machine hits both alike.

    PYTHONPATH=src python perf/bench_tls.py [--seconds 3] [--repeat 3] [--in-flight 64]

Per figure the median over rounds and TLS/plain. A self-signed certificate is made with openssl.
"""

from __future__ import annotations

import argparse
import os
import shutil
import ssl
import statistics
import subprocess
import tempfile
import threading
import time

from bench_broker import QUEUES, TOPIC, start_broker

from rmq.net import RemotingClient, RemotingCommand
from rmq.perf.remoting import send_request
from rmq.protocol.codes import RequestCode, ResponseCode

BODY = b"x" * 1024
PULL_BATCH = 32


def certificate(directory: str) -> tuple[str, str]:
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=bench",
         "-keyout", key, "-out", cert],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def pipelined(client: RemotingClient, addr: str, make, in_flight: int, seconds: float, count) -> float:
    """Requests kept ``in_flight`` deep for ``seconds``; what ``count(answer)`` adds up, per second."""
    done = threading.Event()
    total = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def fire() -> None:
        client.invoke_callback(addr, make(), 30.0, on_answer)

    def on_answer(answer, error) -> None:
        if answer is not None:
            with lock:
                total[0] += count(answer)
        if time.monotonic() < deadline:
            fire()
        else:
            done.set()

    started = time.perf_counter()
    for _ in range(in_flight):
        fire()
    done.wait(seconds + 30)
    return total[0] / (time.perf_counter() - started)


def sends(client: RemotingClient, addr: str, in_flight: int, seconds: float) -> float:
    turn = [0]

    def make() -> RemotingCommand:
        turn[0] += 1
        return send_request(TOPIC, turn[0] % QUEUES, BODY)

    return pipelined(client, addr, make, in_flight, seconds, lambda a: 1 if a.code == ResponseCode.SUCCESS else 0)


def pulls(client: RemotingClient, addr: str, in_flight: int, seconds: float, ends: int) -> float:
    turn = [0]

    def make() -> RemotingCommand:
        turn[0] += 1
        q = turn[0] % QUEUES
        offset = (turn[0] // QUEUES * PULL_BATCH) % max(ends - PULL_BATCH, 1)
        ext = {"consumerGroup": "bench", "topic": TOPIC, "queueId": q, "queueOffset": offset, "maxMsgNums": PULL_BATCH,
               "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0,
               "expressionType": "TAG"}  # fmt: skip
        return RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)

    def count(answer: RemotingCommand) -> int:
        body = answer.body
        return len(body) // int.from_bytes(body[:4], "big") if answer.code == ResponseCode.SUCCESS and body else 0

    return pipelined(client, addr, make, in_flight, seconds, count)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--in-flight", type=int, default=64)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="rmq-bench-tls-")
    try:
        cert, key = certificate(work)
        proc, port, _ = start_broker(
            os.path.join(work, "store"),
            "ASYNC_FLUSH",
            tlsEnable="true",
            tlsServerCertPath=cert,
            tlsServerKeyPath=key,
        )
        addr = f"127.0.0.1:{port}"
        context = ssl.create_default_context(cafile=cert)
        context.check_hostname = False
        figures: dict[str, dict[str, list[float]]] = {
            "send": {"plain": [], "tls": []},
            "pull": {"plain": [], "tls": []},
        }
        try:
            for _ in range(args.repeat):
                for mode, tls in (("plain", False), ("tls", context)):
                    with RemotingClient(tls=tls) as client:
                        figures["send"][mode].append(sends(client, addr, args.in_flight, args.seconds))
            ends = 2000
            for _ in range(args.repeat):
                for mode, tls in (("plain", False), ("tls", context)):
                    with RemotingClient(tls=tls) as client:
                        figures["pull"][mode].append(pulls(client, addr, 16, args.seconds, ends))
        finally:
            proc.terminate()
            proc.wait(30)
        for what, unit in (("send", "1 KiB sends/s"), ("pull", "1 KiB messages pulled/s")):
            plain, tls_ = (statistics.median(figures[what][m]) for m in ("plain", "tls"))
            rounds = {m: [round(v) for v in figures[what][m]] for m in ("plain", "tls")}
            print(
                f"{unit:26} plain {plain:10,.0f}   TLS {tls_:10,.0f}   TLS/plain {tls_ / plain:.2f}   rounds {rounds}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
