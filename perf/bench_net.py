"""Remoting benchmarks: frame decode+encode in-process, and GET_ROUTEINFO_BY_TOPIC round trips
over loopback from one client to a real ``rmq-namesrv`` process, with 1 and with 64 requests in flight.

    PYTHONPATH=src python perf/bench_net.py [--seconds 2] [--repeat 5]

Each figure is the median of ``--repeat`` runs. A broker registration (one topic, 4 queues) is sent
first, so every request assembles and encodes the ~300-byte route of docs/nameserver.md#routes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

from rmq.net import _codec, codec_py
from rmq.net.client import RemotingClient
from rmq.net.codec import RemotingCommand
from rmq.perf.procs import Processes, start_namesrv
from rmq.protocol.codes import RequestCode, ResponseCode

ROUTE_BODY = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
    b'"perm":6,"readQueueNums":4,"writeQueueNums":4,"topicSysFlag":0}]}'
)
FRAMES_PER_BATCH = 64
TOPIC = "BenchTopic"


def register_broker(client: RemotingClient, addr: str) -> None:
    body = json.dumps(
        {
            "topicConfigSerializeWrapper": {
                "topicConfigTable": {
                    TOPIC: {
                        "topicName": TOPIC,
                        "readQueueNums": 4,
                        "writeQueueNums": 4,
                        "perm": 6,
                        "topicFilterType": "SINGLE_TAG",
                        "topicSysFlag": 0,
                        "order": False,
                    }
                },
                "dataVersion": {"timestamp": 0, "counter": 1},
            },
            "filterServerList": [],
        }
    ).encode()
    request = RemotingCommand.request(
        RequestCode.REGISTER_BROKER,
        ext_fields={
            "brokerName": "broker-a",
            "brokerAddr": "127.0.0.1:10911",
            "clusterName": "DefaultCluster",
            "haServerAddr": "127.0.0.1:10912",
            "brokerId": "0",
            "compressed": "false",
        },
        body=body,
    )
    answer = client.invoke_sync(addr, request, 3.0)
    assert answer.code == ResponseCode.SUCCESS, answer.remark


def codec_frames_per_second(impl, seconds: float) -> float:
    """Decode a batch of request frames, answer each and encode the answers, as a server does."""
    request = impl.RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
    stream = impl.encode(request) * FRAMES_PER_BATCH
    frames = 0
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        out = bytearray()
        for cmd in impl.FrameDecoder().feed(stream):
            impl.encode_into(out, impl.RemotingCommand.response_to(cmd, 0, body=ROUTE_BODY))
        frames += FRAMES_PER_BATCH
    return frames / (time.perf_counter() - started)


def route_request() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})


def round_trips_per_second(client: RemotingClient, addr: str, in_flight: int, seconds: float) -> float:
    if in_flight == 1:
        count = 0
        deadline = time.perf_counter() + seconds
        started = time.perf_counter()
        while time.perf_counter() < deadline:
            answer = client.invoke_sync(addr, route_request(), 3.0)
            if answer.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"route request failed: {answer.code} {answer.remark}")
            count += 1
        return count / (time.perf_counter() - started)
    # Keep ``in_flight`` requests outstanding: each answer (on the loop thread) sends the next.
    done = threading.Event()
    state = {"answered": 0, "stop": False}
    deadline = time.perf_counter() + seconds

    def on_answer(response, error):
        if error is not None:
            raise error
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"route request failed: {response.code} {response.remark}")
        state["answered"] += 1
        if state["answered"] % 256 == 0 and time.perf_counter() >= deadline:
            state["stop"] = True
        if state["stop"]:
            state["in_flight"] -= 1
            if state["in_flight"] == 0:
                done.set()
            return
        client.invoke_callback(addr, route_request(), 3.0, on_answer)

    state["in_flight"] = in_flight
    started = time.perf_counter()
    for _ in range(in_flight):
        client.invoke_callback(addr, route_request(), 3.0, on_answer)
    done.wait()
    return state["answered"] / (time.perf_counter() - started)


def median_of(repeat: int, fn, *args) -> float:
    """The median of `repeat` calls of fn(*args); arguments, not a closure, so a loop can pass its variables."""
    return statistics.median(fn(*args) for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one run")
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (the median is printed)")
    args = parser.parse_args()

    for impl in (codec_py, _codec):
        rate = median_of(args.repeat, codec_frames_per_second, impl, args.seconds)
        print(f"codec {impl.__name__:16s} decode+encode: {rate:12,.0f} frames/s")

    processes = Processes()
    try:
        _, addr = start_namesrv(processes.spawn, "--log-level", "WARNING")
        with RemotingClient() as client:
            register_broker(client, addr)
            for in_flight in (1, 64):
                rate = median_of(args.repeat, round_trips_per_second, client, addr, in_flight, args.seconds)
                print(f"GET_ROUTEINFO round trips, {in_flight:2d} in flight: {rate:12,.0f} requests/s")
    finally:
        processes.stop_all()


if __name__ == "__main__":
    main()
