"""SYNC_FLUSH rounds made by the event loop itself (syncFlushInlineMaxMicros) or by the flush thread:
the same answers either way, and a slow msync sends the rounds back to the flush thread, where a
stalled disk cannot stop the loop (docs/sync-flush.md, the adaptive flush)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from rmq.net.codec import RemotingCommand, encode
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers.broker import broker_settings, create_topic
from tests.helpers.frames import RawConnection
from tests.helpers.overload import build_stall_shim
from tests.helpers.processes import start_broker_process
from tests.helpers.requests import call, send_request, update_topic_request

# the rounds in a row that must be fast before the loop makes one itself (INLINE_AFTER_FAST_ROUNDS)
WARM_UP_ROUNDS = 16
# a bound no msync reaches, one a busy shared disk rarely reaches, and a stall well past that
UNREACHED_BOUND_US = 10_000_000
GENEROUS_BOUND_US = 100_000
STALL_SECONDS = 0.5
MAX_SENDS_UNTIL_THE_LOOP_ROUNDS = 200


def _send_frame(topic: str, opaque: int) -> bytes:
    request = send_request(topic, b"durable-%d" % opaque)
    request.opaque = opaque
    return encode(request)


def _send_one_by_one(connection: RawConnection, topic: str, opaques: range) -> None:
    for opaque in opaques:
        connection.send(_send_frame(topic, opaque))
        (answer,) = connection.read_commands(1)
        assert (answer.opaque, answer.code) == (opaque, ResponseCode.SUCCESS), answer.remark


@pytest.mark.parametrize("bound_us", ["0", str(UNREACHED_BOUND_US)], ids=["flush-thread", "loop"])
def test_sync_flush_sends_are_answered_once_durable_whoever_makes_the_round(start_broker, bound_us: str):
    broker = start_broker(flushDiskType="SYNC_FLUSH", syncFlushInlineMaxMicros=bound_us)
    create_topic(broker, "Durable")
    store = broker.store
    with RawConnection(broker.config.listen_port) as connection:
        _send_one_by_one(connection, "Durable", range(1, WARM_UP_ROUNDS + 10))
        for burst in range(3):  # pipelined: one round serves each burst, answers in send order
            opaques = range(100 * (burst + 1), 100 * (burst + 1) + 16)
            connection.send(b"".join(_send_frame("Durable", opaque) for opaque in opaques))
            answers = connection.read_commands(len(opaques))
            assert [(a.opaque, a.code) for a in answers] == [(o, ResponseCode.SUCCESS) for o in opaques]
            # an answer leaves once its round ended: everything stored before it is on disk
            assert store.commit_log.get_flushed_where() >= store.get_max_phy_offset()
    assert store.commit_queue_size == 0
    if bound_us == "0":
        assert store.group_commit_inline_rounds == 0
    else:
        assert store.group_commit_inline_rounds >= 3
    assert store.group_commit_flushes > store.group_commit_inline_rounds


def _rounds(client, addr: str) -> tuple[int, int]:
    answer = call(client, addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}))
    table = json.loads(answer.body)["table"]
    return int(table["flushInlineRounds"]), int(table["flushThreadRounds"])


def _send_until_the_loop_rounds(connection: RawConnection, client, addr: str, first: int, inline: int) -> int:
    """Sends one by one until the loop made more than ``inline`` rounds: how many it took. Bounded:
    a busy shared disk may now and then make an msync slower than the bound, which restarts the
    count of fast rounds (the test's subject)."""
    for sent in range(1, MAX_SENDS_UNTIL_THE_LOOP_ROUNDS + 1):
        _send_one_by_one(connection, "Slow", range(first + sent, first + sent + 1))
        if sent >= 2 and _rounds(client, addr)[0] > inline:
            return sent
    raise AssertionError(f"the loop made no round in {MAX_SENDS_UNTIL_THE_LOOP_ROUNDS} sends")


def test_a_slow_msync_sends_the_rounds_back_to_the_flush_thread(spawn, tmp_path: Path, client):
    """A disk whose msync stalls (an LD_PRELOAD shim) for longer than syncFlushInlineMaxMicros while
    the loop makes a round: the next rounds are the flush thread's, until enough fast ones passed."""
    shim = build_stall_shim(tmp_path)
    stall = tmp_path / "stall"
    settings = broker_settings(
        tmp_path / "store", flushDiskType="SYNC_FLUSH", syncFlushInlineMaxMicros=str(GENEROUS_BOUND_US)
    )
    _, addr = start_broker_process(
        spawn,
        settings,
        extra_args=("--log-level", "WARNING"),
        env={"LD_PRELOAD": str(shim), "RMQ_STALL_MSYNC": str(stall)},
    )
    assert call(client, addr, update_topic_request("Slow", queues=1)).code == ResponseCode.SUCCESS
    try:
        with RawConnection(int(settings["listenPort"])) as connection:
            sent = _send_until_the_loop_rounds(connection, client, addr, 1, 0)
            assert sent >= WARM_UP_ROUNDS + 1, "the flush thread made the first rounds"

            stall.touch()
            threading.Timer(STALL_SECONDS, stall.unlink).start()
            _send_one_by_one(connection, "Slow", range(1000, 1001))  # answered once the disk is back
            inline, thread = _rounds(client, addr)

            _send_one_by_one(connection, "Slow", range(2000, 2000 + WARM_UP_ROUNDS - 2))
            inline_after, thread_after = _rounds(client, addr)
            assert inline_after == inline and thread_after >= thread + WARM_UP_ROUNDS - 2, "the flush thread's rounds"

            sent = _send_until_the_loop_rounds(connection, client, addr, 3000, inline)
            assert sent >= 3, "the loop's again once enough rounds were fast"
    finally:
        stall.unlink(missing_ok=True)
