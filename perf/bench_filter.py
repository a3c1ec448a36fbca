"""Filtered pulls against a real ``rmq-broker`` process (enablePropertyFilter=true): a subscription
matching 10 % of a queue's messages by SQL92 (two clauses over properties, evaluated on the broker)
against one matching the same 10 % by tag (ConsumeQueue tags codes), and an unfiltered one.

    PYTHONPATH=src python perf/bench_filter.py [--messages 40000] [--seconds 3] [--repeat 3] [--json]

The queue holds ``--messages`` 1 KiB messages with properties ``region`` (``eu`` on every tenth,
``us`` otherwise), ``amount`` and a tag (``Hit`` on every tenth). One connection pulls 32 at a time,
each pull from where the last answer's nextBeginOffset says, wrapping at the end of the queue (a
pull that matched nothing in its scan answers PULL_RETRY_IMMEDIATELY and moves on). Figures: pulls/s,
messages delivered/s and ConsumeQueue entries walked/s, each the median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import statistics
import sys
import tempfile
import time

import orjson
from bench_broker import BODY, TOPIC, Pipeline, admin, start_broker
from report import JSON_HELP, Report

from rmq.net.codec import RemotingCommand, encode
from rmq.protocol.codes import RequestCode
from rmq.protocol.message import encode_properties

SUBSCRIPTIONS = {
    "all (TAG *)": ("TAG", "*"),
    "tag 10%": ("TAG", "Hit"),
    "SQL92 10%": ("SQL92", "region = 'eu' AND amount >= 0"),
}


def fill(port: int, count: int) -> None:
    """``count`` messages into queue 0 of TOPIC, 64 sends in flight."""
    frames = []
    for i in range(count):
        hit = i % 10 == 0
        props = {
            "TAGS": "Hit" if hit else "Miss",
            "region": "eu" if hit else "us",
            "amount": str(i % 1000),
            "UNIQ_KEY": f"0A00000100002A9F{i:016X}",
        }
        ext = {"a": "bench-producer", "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0"}
        ext.update(g=str(int(time.time() * 1000)), h="0", i=encode_properties(props).decode(), j="0", k="false")
        frames.append(encode(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, BODY)))
    pipe = Pipeline(port)
    try:
        for start in range(0, count, 64):
            batch = frames[start : start + 64]
            pipe.sock.sendall(b"".join(batch))
            answered = 0
            while answered < len(batch):
                answered += len(pipe._answers())
    finally:
        pipe.close()


def pull_frame(offset: int, expression_type: str, expression: str) -> bytes:
    ext = {
        "consumerGroup": "bench-filter",
        "topic": TOPIC,
        "queueId": "0",
        "queueOffset": str(offset),
        "maxMsgNums": "32",
        "sysFlag": "4",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": expression,
        "subVersion": "0",
        "expressionType": expression_type,
    }
    return encode(RemotingCommand.request(RequestCode.PULL_MESSAGE, ext))


def count_records(body: bytes) -> int:
    n, pos = 0, 0
    while pos + 4 <= len(body):
        pos += int.from_bytes(body[pos : pos + 4], "big")
        n += 1
    return n


def pull_run(port: int, expression_type: str, expression: str, seconds: float, max_offset: int) -> tuple[float, ...]:
    """(pulls/s, messages/s, entries walked/s) of one connection pulling in a loop."""
    pipe = Pipeline(port)
    pulls = messages = walked = 0
    offset = 0
    try:
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            pipe.sock.sendall(pull_frame(offset, expression_type, expression))
            answers = pipe._answers()
            while not answers:
                answers = pipe._answers()
            ((header, body),) = answers
            answer = orjson.loads(header)
            if answer["code"] not in (0, 20):
                raise RuntimeError(f"pull answered {answer['code']}: {answer.get('remark')}")
            next_offset = int(answer["extFields"]["nextBeginOffset"])
            pulls += 1
            messages += count_records(body) if answer["code"] == 0 else 0
            walked += next_offset - offset
            offset = next_offset if next_offset < max_offset else 0
        elapsed = time.perf_counter() - started
    finally:
        pipe.close()
    return pulls / elapsed, messages / elapsed, walked / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=40_000, help="messages in the queue")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (the median is printed)")
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    args = parser.parse_args()
    report = Report(args.json)
    root = tempfile.mkdtemp(prefix="rmq-bench-filter-")
    proc, port, _namesrv_port = start_broker(root, "ASYNC_FLUSH", enablePropertyFilter="true")
    try:
        fill(port, args.messages)
        answer = admin(port, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"}))
        max_offset = int(answer["extFields"]["offset"])
        report.line(
            f"{max_offset:,} 1 KiB messages in one queue, pulls of 32, {args.seconds:g} s runs, median of {args.repeat}"
        )
        runs: dict[str, list[tuple[float, ...]]] = {name: [] for name in SUBSCRIPTIONS}
        for _ in range(args.repeat):  # interleaved, so a drift of the machine hits all alike
            for name, (expression_type, expression) in SUBSCRIPTIONS.items():
                runs[name].append(pull_run(port, expression_type, expression, args.seconds, max_offset))
        for name, results in runs.items():
            pulls, msgs, walked = (statistics.median(r[i] for r in results) for i in range(3))
            report.figure(f"{name} pulls", pulls, "pulls/s")
            report.figure(f"{name} messages", msgs, "msgs/s")
            report.figure(f"{name} entries walked", walked, "entries/s")
            report.line(f"{name:12s}: {pulls:9,.0f} pulls/s {msgs:11,.0f} msgs/s {walked:12,.0f} entries walked/s")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        shutil.rmtree(root, ignore_errors=True)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
