"""The compiled load generator (``rmq.perf._loadgen``) and its Python twin (``rmq.perf.load._drive``)
drive a real broker and a real redis-server alike: the same messages sent and acknowledged at a
held rate, failures counted under the same codes, latencies in rmq.perf.histogram's buckets."""

from __future__ import annotations

import shutil
import socket
import time

import numpy as np
import pytest

from rmq.net.codec import RemotingCommand, decode_frames, encode
from rmq.perf import _loadgen, histogram
from rmq.perf.load import (
    ENGINES,
    FAIL_CONNECTION,
    FAIL_RECORDS,
    FAIL_TIMEOUT,
    IntervalReport,
    LoadSpec,
    RmqDriver,
    RmqPullDriver,
    run_load,
)
from rmq.perf.peers import REDIS_STREAM, PeerServer
from rmq.perf.producer import make_cell, run_producer
from rmq.perf.remoting import OPAQUE_BASE, OPAQUE_SPAN
from rmq.protocol.codes import ResponseCode
from tests.helpers import LOOPBACK

TOPIC = "LoadgenTopic"
RATE = 1000
SECONDS = 0.5
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")


def held(system: str, port: int, engine: str, **load) -> LoadSpec:
    """RATE msgs/s of 100-byte bodies for SECONDS, one interval."""
    return LoadSpec(
        system, LOOPBACK, port, TOPIC, size=100, rate=RATE, duration=SECONDS, interval=SECONDS, engine=engine, **load
    )


def run(spec: LoadSpec) -> IntervalReport:
    return run_load(spec, lambda report, t_start, t_end: None)


def redis_call(port: int, *args: bytes) -> bytes:
    """One RESP command, its raw reply (a few bytes: enough for XLEN and SET)."""
    with socket.create_connection((LOOPBACK, port), timeout=5) as sock:
        sock.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
        return sock.recv(4096)


def test_the_compiled_loop_buckets_latencies_as_the_histogram_does():
    assert _loadgen.LAYOUT == {
        "PRECISION_BITS": histogram.PRECISION_BITS,
        "SUB_BUCKETS": histogram.SUB_BUCKETS,
        "MAX_EXPONENT": histogram.MAX_EXPONENT,
        "N_BUCKETS": histogram.N_BUCKETS,
    }
    powers = [1 << e for e in range(40)]
    values = sorted({-5, 0, 1, 31, 32, 33, 63, 64, 1000, 123_456_789, *powers, *(p - 1 for p in powers)})
    values += np.random.default_rng(7).integers(0, 1 << 38, 2000).tolist()
    assert [_loadgen.bucket_index(v) for v in values] == histogram.index_of(values).tolist()


def read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the connection closed early"
        data += chunk
    return data


def test_the_compiled_loop_sends_the_python_drivers_frames_and_reads_answers_split_anywhere():
    spec = LoadSpec("rmq", LOOPBACK, 0, TOPIC, size=10, in_flight=3, queues=2)
    python_frames, opaques = RmqDriver(spec, 0).requests(3)
    templates, opaque_at, born_at = zip(*RmqDriver(spec, 0).compiled_requests(), strict=True)
    counts = np.zeros(histogram.N_BUCKETS, dtype=np.int64)
    with socket.create_server((LOOPBACK, 0)) as server, socket.create_connection(server.getsockname()) as client:
        broker, _ = server.accept()
        client.setblocking(False)
        now = time.monotonic()
        loop = _loadgen.Loop(
            client.fileno(), _loadgen.REMOTING, list(templates), list(opaque_at), list(born_at), 3, 0.0, 1, 0, now,
            now, now + 30, 1.0, counts, OPAQUE_BASE, OPAQUE_SPAN,
        )  # fmt: skip
        assert loop.run(time.monotonic() + 0.05) == _loadgen.INTERVAL_END
        sent = decode_frames(read_exactly(broker, len(python_frames)))
        # the Python driver's requests, opaques included; only the born timestamps differ (now, in ms)
        assert [r.opaque for r in sent] == opaques
        for ours, theirs in zip(sent, decode_frames(python_frames), strict=True):
            assert abs(int(ours.ext_fields.pop("g")) - int(theirs.ext_fields.pop("g"))) < 60_000
            assert (ours.code, ours.ext_fields, ours.body) == (theirs.code, theirs.ext_fields, theirs.body)
        stray = RemotingCommand.response_to(sent[2], ResponseCode.SUCCESS)
        stray.opaque = 7  # nothing of ours: ignored
        answers = b"".join(
            encode(answer)
            for answer in (
                RemotingCommand.response_to(sent[0], ResponseCode.SUCCESS),
                RemotingCommand.response_to(sent[1], ResponseCode.SYSTEM_ERROR, "refused"),
                stray,
            )
        )
        for piece in (answers[:3], answers[3:50], answers[50:]):  # a prefix, a header, the rest cut apart
            broker.sendall(piece)
            assert loop.run(time.monotonic() + 0.05) == _loadgen.INTERVAL_END
        sent_n, acked, failures, lost, _late = loop.take()
        assert (acked, failures, lost, int(counts.sum())) == (1, {str(ResponseCode.SYSTEM_ERROR): 1}, 0, 1)
        # two answered, two more sent in their place: three outstanding, one of them the first burst's
        assert loop.outstanding == 3 and sent_n == 5
        broker.close()


def compiled_pull_loop(spec: LoadSpec, fd: int, counts: np.ndarray) -> _loadgen.Loop:
    """A closed loop of ``spec``'s pulls on ``fd``, recording from now."""
    driver = RmqPullDriver(spec, 0)
    templates, opaque_at, born_at = zip(*driver.compiled_requests(), strict=True)
    walk = driver.compiled_walk()
    assert walk is not None
    now = time.monotonic()
    return _loadgen.Loop(
        fd, _loadgen.REMOTING, list(templates), list(opaque_at), list(born_at), spec.in_flight, 0.0, spec.batch, 0,
        now, now, now + 30, 1.0, counts, OPAQUE_BASE, OPAQUE_SPAN, *walk,
    )  # fmt: skip


def records(*sizes: int) -> bytes:
    """A pull's body of records of these totalSizes (only their size fields are read)."""
    return b"".join(size.to_bytes(4, "big") + bytes(max(size - 4, 0)) for size in sizes)


def test_the_compiled_loop_walks_queues_and_counts_pulled_records_as_the_python_pull_driver():
    # queue 0 walks 0, 40, 80, ... 920 and wraps (offsets of 1 to 3 digits: the frame grows), queue 1
    # of 50 messages stays at 0
    spec = LoadSpec(
        "rmq-pull", LOOPBACK, 0, TOPIC, batch=40, in_flight=31, queues=2, options={"max_offsets": [1000, 50]}
    )
    python_frames, opaques = RmqPullDriver(spec, 0).requests(31)
    counts = np.zeros(histogram.N_BUCKETS, dtype=np.int64)
    with socket.create_server((LOOPBACK, 0)) as server, socket.create_connection(server.getsockname()) as client:
        broker, _ = server.accept()
        client.setblocking(False)
        loop = compiled_pull_loop(spec, client.fileno(), counts)
        assert loop.run(time.monotonic() + 0.05) == _loadgen.INTERVAL_END
        pulls = decode_frames(read_exactly(broker, len(python_frames)))
        assert python_frames == b"".join(encode(p) for p in pulls)  # byte for byte the Python driver's
        assert [p.opaque for p in pulls] == opaques
        assert [p.ext_fields["queueOffset"] for p in pulls[1::2]] == [str(40 * k) for k in range(15)]
        assert {p.ext_fields["queueOffset"] for p in pulls[0::2]} == {"0"}

        def answer(pull: RemotingCommand, code: int, body: bytes = b"") -> bytes:
            reply = RemotingCommand.response_to(pull, code)
            reply.ext_fields = {"nextBeginOffset": "40", "minOffset": "0", "maxOffset": "1000"}
            reply.body = body
            return encode(reply)

        answers = b"".join(
            (
                answer(pulls[0], ResponseCode.SUCCESS, records(120, 130, 4)),  # 3 messages
                answer(pulls[1], ResponseCode.SUCCESS, records(120, 130) + b"\0\0"),  # a torn record
                answer(pulls[2], ResponseCode.SUCCESS, records(120, 3)),  # a size under its own field
                answer(pulls[3], ResponseCode.PULL_NOT_FOUND),
                answer(pulls[4], ResponseCode.SUCCESS, records(*[200] * 40)),
            )
        )
        for piece in (answers[:5], answers[5:300], answers[300:]):
            broker.sendall(piece)
            assert loop.run(time.monotonic() + 0.05) == _loadgen.INTERVAL_END
        _sent, acked, failures, lost, _late = loop.take()
        broker.close()
    python = RmqPullDriver(spec, 0)
    python.requests(31)
    twin = python.feed(answers)
    assert twin == [
        (opaques[0], None, 3),
        (opaques[1], FAIL_RECORDS, 40),
        (opaques[2], FAIL_RECORDS, 40),
        (opaques[3], str(ResponseCode.PULL_NOT_FOUND), 40),
        (opaques[4], None, 40),
    ]
    assert (acked, lost, int(counts.sum())) == (43, 0, 43)
    assert failures == {FAIL_RECORDS: 80, str(ResponseCode.PULL_NOT_FOUND): 40}


def test_both_engines_pull_the_same_full_batches_from_a_broker(cluster):
    cluster.create_topic(TOPIC, queues=2)
    run(LoadSpec("rmq", LOOPBACK, cluster.broker_port, TOPIC, size=100, batch=32, in_flight=4, queues=2, duration=0.2,
                 interval=0.2))  # fmt: skip
    max_offsets = cluster.max_offsets(TOPIC)
    assert min(max_offsets.values()) >= 64, max_offsets
    for engine in ENGINES:
        spec = held("rmq-pull", cluster.broker_port, engine, batch=32, in_flight=4, queues=2)
        spec.options["max_offsets"] = [max_offsets[0], max_offsets[1]]
        total = run(spec)
        # every pull asks for 32 of a queue that holds them: each answer carries all 32
        assert total.failed == {} and total.sent == total.acked == total.histogram.total, (engine, total)
        assert 0 < total.acked <= RATE * SECONDS + 32 and total.acked % 32 == 0, (engine, total.acked)


def test_both_engines_send_and_acknowledge_the_same_messages_to_a_broker(cluster):
    cluster.create_topic(TOPIC)
    summaries = {}
    for engine in ENGINES:
        # batches of 4 at a held rate: each engine sends every request due, 4 messages each
        spec = held("rmq", cluster.broker_port, engine, batch=4, in_flight=8, workers=2)
        summaries[engine] = run_producer(spec, make_cell(spec, "ASYNC_FLUSH", "standalone"), None)
    for engine, s in summaries.items():
        assert s["failed"] == {} and s["sent"] == s["acked"], (engine, s["sent"], s["acked"], s["failed"])
        # never more than the rate (the request due at the end itself may go out or not: the sum of
        # the periods is not exact); fewer when a machine busy with other work stalls the broker
        assert 0 < s["acked"] <= RATE * SECONDS + 4 and s["acked"] % 4 == 0, (engine, s["acked"])
        assert histogram.Histogram.from_json(s["latency"]).total == s["acked"]
        assert s["generator"]["engine"] == engine and s["generator"]["cpu_us_per_msg"] > 0, s["generator"]
    # what they say was acknowledged is what the broker stored
    assert sum(cluster.max_offsets(TOPIC).values()) == sum(s["acked"] for s in summaries.values())


def test_both_engines_count_a_broker_refusal_under_its_response_code(cluster):
    cluster.create_topic(TOPIC, queues=4)
    acked = 0
    for engine in ENGINES:
        # frames aimed at 8 queues in turn: those at queues 4-7 of a topic of 4 are refused
        total = run(held("rmq", cluster.broker_port, engine, in_flight=4, queues=8))
        refused = str(ResponseCode.SYSTEM_ERROR)
        assert set(total.failed) == {refused} and abs(total.failed[refused] - total.acked) <= 4, (engine, total)
        assert total.sent == total.acked + total.failed[refused] and total.histogram.total == total.acked
        acked += total.acked
    assert sum(cluster.max_offsets(TOPIC).values()) == acked


@needs_redis
def test_both_engines_send_and_acknowledge_the_same_xadds_to_redis():
    with PeerServer("redis", "ASYNC_FLUSH") as server:
        acked = {}
        for engine in ENGINES:
            total = run(held("redis", server.port, engine, in_flight=16))
            assert total.failed == {} and total.sent == total.acked == total.histogram.total, (engine, total)
            assert 0 < total.acked <= RATE * SECONDS + 1, (engine, total.acked)
            acked[engine] = total.acked
        assert redis_call(server.port, b"XLEN", REDIS_STREAM) == b":%d\r\n" % sum(acked.values())


@needs_redis
def test_both_engines_count_a_redis_error_reply_under_its_message():
    with PeerServer("redis", "ASYNC_FLUSH") as server:
        assert redis_call(server.port, b"SET", REDIS_STREAM, b"not a stream") == b"+OK\r\n"
        failed = {}
        for engine in ENGINES:
            total = run(held("redis", server.port, engine, in_flight=4))
            assert total.acked == 0 and sum(total.failed.values()) == total.sent > 0, (engine, total)
            failed[engine] = set(total.failed)
        assert failed["c"] == failed["python"] == {"error:WRONGTYPE Operation against a key holdin"}


@needs_redis
def test_both_engines_count_the_requests_a_lost_connection_took_with_it():
    for engine in ENGINES:
        with PeerServer("redis", "ASYNC_FLUSH") as server:

            def kill_the_server() -> None:
                time.sleep(0.2)
                assert server.proc is not None
                server.proc.kill()

            spec = held("redis", server.port, engine, in_flight=4)
            total = run_load(spec, lambda report, t_start, t_end: None, kill_the_server)
        # answered before, then the connection's end: no answer waited for in vain until the drain timeout
        assert total.acked > 0 and FAIL_CONNECTION in total.failed, (engine, total)
        assert set(total.failed) <= {FAIL_CONNECTION, FAIL_TIMEOUT}, (engine, total.failed)
