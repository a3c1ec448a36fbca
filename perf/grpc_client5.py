"""One figure of Apache's 5.x Python client (rocketmq-python-client) against a gRPC endpoint, run by
perf/grpc_clients.py with the python of the client's own virtual environment (it cannot see rmq: the
client's top-level ``rocketmq`` package stands alone there). Prints one JSON line.

    python grpc_client5.py ENDPOINT TOPIC send SECONDS            sync sends, one at a time
    python grpc_client5.py ENDPOINT TOPIC send-async SECONDS IN_FLIGHT
    python grpc_client5.py ENDPOINT TOPIC open-loop SECONDS RATE   sends due every 1/RATE s (send_async),
                                                                   latency from each one's due time (ms,
                                                                   every one, sorted: "latencies_ms")
    python grpc_client5.py ENDPOINT TOPIC drain COUNT GROUP BATCH  SimpleConsumer receive + ack of each

Each is timed after a warm-up (routes, the channel, the Telemetry settings): send modes for SECONDS,
the drain from its first received message. ``requests``: the gRPC requests the figure made
(SendMessage, ReceiveMessage, AckMessage), for the broker's CPU per request; ``cpu_us``: this
process's CPU per message.
"""

import json
import sys
import threading
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

BODY = b"x" * 1024
#: a receive's invisible duration, seconds (the least the endpoint accepts is 10)
INVISIBLE = 30


def message(topic: str) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = BODY
    return msg


def send(producer: Producer, topic: str, seconds: float) -> dict:
    sent, started, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() < started + seconds:
        producer.send(message(topic))
        sent += 1
    return figures(sent, sent, started, cpu)


def send_async(producer: Producer, topic: str, seconds: float, in_flight: int) -> dict:
    slots = threading.Semaphore(in_flight)
    done, lock = [0], threading.Lock()

    def finished(_future) -> None:
        with lock:
            done[0] += 1
        slots.release()

    sent, started, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() < started + seconds:
        slots.acquire()
        producer.send_async(message(topic)).add_done_callback(finished)
        sent += 1
    for _ in range(in_flight):
        slots.acquire()
    return figures(done[0], sent, started, cpu)


def open_loop(producer: Producer, topic: str, seconds: float, rate: float) -> dict:
    """Sends due at a fixed rate; each latency from its due time (a late send is charged for it)."""
    latencies: list[float] = []
    lock = threading.Lock()
    pending = threading.Semaphore(0)
    count = int(seconds * rate)
    started, cpu = time.perf_counter(), time.process_time()

    def finished(due: float, future) -> None:
        latency = time.perf_counter() - due
        with lock:
            latencies.append(latency if future.exception() is None else float("inf"))
        pending.release()

    for n in range(count):
        due = started + n / rate
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        producer.send_async(message(topic)).add_done_callback(lambda f, due=due: finished(due, f))
    for _ in range(count):
        pending.acquire()
    result = figures(count, count, started, cpu)
    latencies.sort()
    failed = sum(1 for x in latencies if x == float("inf"))
    result.update(offered=rate, failed=failed, latencies_ms=[round(x * 1e3, 3) for x in latencies[: count - failed]])
    return result


def drain(config: ClientConfiguration, topic: str, count: int, group: str, batch: int) -> dict:
    consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=5)
    consumer.startup()
    try:
        got = requests = 0
        started = cpu = None
        deadline = time.perf_counter() + 300
        while got < count and time.perf_counter() < deadline:
            messages = consumer.receive(batch, INVISIBLE)
            if messages and started is None:
                started, cpu = time.perf_counter(), time.process_time()
            if started is not None:
                requests += 1 + len(messages or ())
            for msg in messages or ():
                consumer.ack(msg)
                got += 1
        return figures(got, requests, started, cpu)
    finally:
        consumer.shutdown()


def figures(messages: int, requests: int, started: float, cpu: float) -> dict:
    elapsed = time.perf_counter() - started
    return {
        "msgs_per_s": messages / elapsed,
        "messages": messages,
        "requests": requests,
        "seconds": elapsed,
        "cpu_us": (time.process_time() - cpu) * 1e6 / max(messages, 1),
    }


def main() -> None:
    endpoint, topic, mode = sys.argv[1:4]
    config = ClientConfiguration(endpoint, Credentials(), request_timeout=10)
    if mode == "drain":
        result = drain(config, topic, int(sys.argv[4]), sys.argv[5], int(sys.argv[6]))
    else:
        producer = Producer(config, (topic,))
        producer.startup()
        try:
            warm_up = send(producer, topic, 0.5)["requests"]
            seconds = float(sys.argv[4])
            if mode == "send":
                result = send(producer, topic, seconds)
            elif mode == "send-async":
                result = send_async(producer, topic, seconds, int(sys.argv[5]))
            else:
                result = open_loop(producer, topic, seconds, float(sys.argv[5]))
            result["requests"] += warm_up
        finally:
            producer.shutdown()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
