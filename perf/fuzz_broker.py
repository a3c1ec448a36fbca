"""Structure-aware frame fuzzer against a real ``rmq-broker`` process.

    PYTHONPATH=src python perf/fuzz_broker.py [--frames 1000000] [--workers 4] [--seed 1] [--json]
        [--namesrv-share 0.1] [--no-cluster-auth]

Worker processes each open connections to the broker and send frames built for every request code
of ``rmq.protocol.codes.RequestCode`` (those the broker serves and those it does not: a name
server's, the broker-to-client ones) and for unknown codes, from a template of the fields a client
sends with that code, then mutated:

- header fields: removed, added, or given another type (int, bool, null, list, object), a huge or
  negative number, an empty, very long or non-ASCII string; ``code``, ``flag`` (oneway, response),
  ``language``, ``version``, ``remark`` changed; ``extFields`` missing or not an object;
- bodies: random bytes; batch bodies (SEND_BATCH_MESSAGE) with wrong totals, body or property
  lengths, truncated; message properties with the separators 0x01 / 0x02 doubled, missing or
  misplaced; "compressed" sends whose body is not zlib; JSON bodies (heartbeats, locks) truncated or
  with fields of the wrong type;
- framing (the last frame of a connection): frame length or header length too small, too big or
  negative, the header's JSON cut or its bytes flipped, serialize type 1 (ROCKETMQ binary) and
  garbage; and connections of raw garbage.

A share of the connections (``--namesrv-share``) goes to the name server the broker embeds, with the
name server's own requests and forgeries among them: REGISTER_BROKER of the real broker's name and id
0 at a made-up address with a huge epoch, UNREGISTER_BROKER of the real broker, DELETE_TOPIC_IN_NAMESRV
of the control topic. The broker runs with cluster credentials (clusterAccessKey / clusterSecretKey,
unless ``--no-cluster-auth``), so none of these is signed and the name server must refuse every write.

Several frames are kept in flight per connection (one on a share of them: each frame a read of its
own, which the broker's compiled send lane reads whole), matched to answers by opaque. Beside the workers
a control client sends (SEND_MESSAGE_V2, recording acknowledgements), pulls them back and commits
consumer offsets, every ~20 ms; any error it meets is a failure (a SYSTEM_BUSY it retries, as
clients do, and counts). About once a second it also asks the name server for the control topic's
route: a route that is gone or names another master is a failure too. The broker's anonymous RSS
(RssAnon: its heap, without the CommitLog pages it mapped) is sampled each second. At the end the
broker is SIGKILLed and restarted on its store, and everything the control client got acknowledged
is pulled back (records CRC-checked).

Reported: frames per second; per outcome the count (answered, with which response code; connection
closed by the broker; no answer, as RocketMQ gives none: parked pulls, END_TRANSACTION; no answer in
time), oneway frames and frames flagged as responses expecting none and not counted; the broker's
RssAnon (first, max, last); the frames its compiled send lane served and left to the processors
(``send_lane``); the control client's sends, busy retries and errors; unexpected exceptions the
broker logged (a processor that failed instead of refusing); the recovery check.
Exit code 1 when the broker died, the control client met an error, an answer did not come, the
broker logged an unexpected exception, or the recovery check failed.

The topics and groups the fuzzer names come from small pools (and a few illegal names), apart from
the control client's, so that it neither deletes what the control client reads nor creates topics
without bound.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import random
import re
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

from harness import (
    bodies_in,
    offset_request,
    pull_request,
    records,
    send_request,
    update_topic_request,
)

from rmq.net import RemotingClient
from rmq.net.codec import FrameDecoder, RemotingCommand
from rmq.net.frame import MAX_FRAME_SIZE_DEFAULT
from rmq.perf.procs import LOOPBACK, Processes, broker_settings, start_broker_process
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.java_json import loads_java_json
from rmq.protocol.send_header import V2

CONTROL_TOPIC = "FuzzControlTopic"
BROKER_NAME = "broker-fuzz"
CLUSTER_ACCESS_KEY = "fuzz-cluster"
CLUSTER_SECRET_KEY = "fuzz-cluster-secret"
# What a name server serves (and a forger sends it), more of the writes than of the reads.
NAMESRV_CODES = [
    RequestCode.REGISTER_BROKER,
    RequestCode.REGISTER_BROKER,
    RequestCode.UNREGISTER_BROKER,
    RequestCode.DELETE_TOPIC_IN_NAMESRV,
    RequestCode.QUERY_DATA_VERSION,
    RequestCode.GET_ROUTEINFO_BY_TOPIC,
    RequestCode.GET_BROKER_CLUSTER_INFO,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    RequestCode.GET_TOPICS_BY_CLUSTER,
]
CONTROL_GROUP = "fuzz-control-group"
CONTROL_QUEUES = 4
TOPICS = ["FuzzTopic0", "FuzzTopic1", "FuzzTopic2", "TBW102", "%RETRY%FuzzGroup0", "SCHEDULE_TOPIC_XXXX"]
ILLEGAL_NAMES = ["", " ", "a b", "x" * 300, "\u00e9\u4e2d\u0000", "../../etc", "%DLQ%", "a,b;c|d"]
GROUPS = ["FuzzGroup0", "FuzzGroup1", "%RETRY%FuzzGroup0", "CID_RMQ_SYS_TRANS"]
WINDOW = 16  # frames in flight per connection
# The share of connections that wait for each answer before the next frame: each of their frames
# then starts a read, and the broker's compiled send lane reads every one (in a pipelined read it
# stops at the first frame it leaves to the processors, so it would meet few fuzzed sends).
ONE_AT_A_TIME_SHARE = 0.25
ANSWER_TIMEOUT = 10.0
# How many frames a connection carries before it is closed (connection churn is fuzzed too).
CONNECTION_FRAMES = (1, 400)
# RssAnon is the broker's own memory; VmRSS adds the CommitLog's mapped pages it touched (RssFile),
# which grow with the log and which the kernel takes back when it needs them.
RSS = re.compile(r"RssAnon:\s+(\d+) kB")
# Requests RocketMQ may leave unanswered: a pull parks until a message comes or its suspend time
# ends (any length a client asks for); END_TRANSACTION is sent oneway by clients, and the broker
# answers it only when it has something to say (EndTransactionProcessor returns null otherwise).
ANSWER_OPTIONAL = frozenset({RequestCode.PULL_MESSAGE, RequestCode.END_TRANSACTION})
# A refusal a client meets under load and retries (flow control), not an error.
BUSY_RETRIES = 20
FAILED = re.compile(r"processor for request code (\d+) from \S+ failed")


# ---------------------------------------------------------------------------------------------
# valid frames


def fuzz_topic(rng: random.Random) -> str:
    return rng.choice(TOPICS) if rng.random() < 0.95 else rng.choice(ILLEGAL_NAMES)


def fuzz_group(rng: random.Random) -> str:
    return rng.choice(GROUPS) if rng.random() < 0.95 else rng.choice(ILLEGAL_NAMES)


def fuzz_int(rng: random.Random, low: int = 0, high: int = 1000) -> int:
    return rng.randint(low, high)


def properties(rng: random.Random) -> str:
    """Message properties (name 0x01 value 0x02 ...), mostly well-formed, sometimes not."""
    pairs = [("TAGS", rng.choice(["TagA", "TagB", ""])), ("KEYS", f"k{rng.randint(0, 99)}")]
    if rng.random() < 0.2:
        pairs.append(("DELAY", str(rng.choice([0, 1, 3, 18, 19, -1, 2**40]))))
    if rng.random() < 0.1:
        pairs.append(("TRAN_MSG", "true"))
    if rng.random() < 0.1:
        pairs.append(("UNIQ_KEY", f"{rng.getrandbits(128):032X}"))
    text = "".join(f"{k}\x01{v}\x02" for k, v in pairs)
    if rng.random() < 0.3:
        text = mutate_separators(rng, text)
    return text


def mutate_separators(rng: random.Random, text: str) -> str:
    choice = rng.randrange(6)
    if choice == 0:
        return text.replace("\x01", "\x02", 1)
    if choice == 1:
        return text.replace("\x02", "\x01\x01")
    if choice == 2:
        return text.replace("\x01", "")
    if choice == 3:
        return "\x02\x01" * rng.randint(1, 50)
    if choice == 4:
        i = rng.randint(0, len(text))
        return text[:i] + rng.choice(["\x01", "\x02", "\x00", "\u00e9"]) + text[i:]
    return text + "K" * rng.randint(1, 40000) + "\x01v"


def body(rng: random.Random) -> bytes:
    n = rng.choice([0, 1, 16, 200, 1024, 5000]) if rng.random() < 0.99 else rng.randint(1 << 20, (4 << 20) + 10)
    return rng.randbytes(n)


def batch_body(rng: random.Random) -> bytes:
    """A SEND_BATCH_MESSAGE body: [total][magic][bodyCRC][flag][bodyLen] body [propsLen] props, per
    message; its lengths wrong or the whole cut, now and then."""
    out = bytearray()
    for _ in range(rng.randint(1, 8)):
        b = rng.randbytes(rng.choice([0, 10, 100, 1000]))
        p = properties(rng).encode("utf-8", "surrogatepass")[:30000]
        total = 20 + len(b) + 2 + len(p)
        fields = [total, 0, 0, 0, len(b)]
        if rng.random() < 0.2:
            fields[rng.randrange(5)] = rng.choice([-1, 0, 1, 2**31 - 1, -(2**31), total + 1, total - 1])
        plen = len(p) if rng.random() < 0.9 else rng.choice([-1, 0, 32767, len(p) + 5])
        out += struct.pack(">iiiii", *fields) + b + struct.pack(">h", plen) + p
    if rng.random() < 0.2:
        out = out[: rng.randint(0, len(out))]
    return bytes(out)


def json_body(rng: random.Random, value: object) -> bytes:
    data = json.dumps(value).encode()
    if rng.random() < 0.15:
        data = data[: rng.randint(0, len(data))]
    elif rng.random() < 0.1:
        data = rng.randbytes(rng.randint(0, 200))
    return data


def heartbeat_body(rng: random.Random) -> bytes:
    consumer = {
        "groupName": fuzz_group(rng),
        "consumeType": rng.choice(["CONSUME_PASSIVELY", "CONSUME_ACTIVELY", 0, 1, 7, "X", None]),
        "messageModel": rng.choice(["CLUSTERING", "BROADCASTING", 0, 1, 9, None]),
        "consumeFromWhere": rng.choice(["CONSUME_FROM_FIRST_OFFSET", 0, 4, 5, 99, "?"]),
        "subscriptionDataSet": [
            {
                "topic": fuzz_topic(rng),
                "subString": rng.choice(["*", "TagA || TagB", "", "a > 1", "||", None, 5]),
                "subVersion": rng.choice([1, -1, "x", None]),
                "tagsSet": rng.choice([[], ["TagA"], None, "x", [1, None]]),
                "expressionType": rng.choice(["TAG", "SQL92", "XYZ", None]),
            }
            for _ in range(rng.randint(0, 3))
        ],
    }
    value = {
        "clientID": f"fuzz@{rng.randint(0, 20)}",
        "consumerDataSet": [consumer] if rng.random() < 0.7 else rng.choice([[], None, [None], "x"]),
        "producerDataSet": [{"groupName": fuzz_group(rng)}],
    }
    return json_body(rng, value)


def lock_body(rng: random.Random) -> bytes:
    mq = {"topic": fuzz_topic(rng), "brokerName": rng.choice(["broker-a", "", None]), "queueId": fuzz_int(rng, -2, 9)}
    value = {"consumerGroup": fuzz_group(rng), "clientId": "fuzz@1", "mqSet": [mq] * rng.randint(0, 3)}
    return json_body(rng, value)


def template(rng: random.Random, code: int) -> tuple[dict, bytes]:
    """The extFields and body a client sends with ``code`` (a valid request, before mutation)."""
    topic, group, queue_id = fuzz_topic(rng), fuzz_group(rng), fuzz_int(rng, 0, 5)
    if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        batch = code == RequestCode.SEND_BATCH_MESSAGE or rng.random() < 0.05
        compressed = rng.random() < 0.05
        payload = batch_body(rng) if batch else body(rng)
        if compressed and rng.random() < 0.5:
            payload = zlib.compress(payload)
        ext = {
            "producerGroup": group,
            "topic": topic,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": 4,
            "queueId": queue_id,
            "sysFlag": 1 if compressed else 0,
            "bornTimestamp": int(time.time() * 1000),
            "flag": 0,
            "properties": properties(rng),
            "reconsumeTimes": 0,
            "unitMode": False,
            "maxReconsumeTimes": 16,
            "batch": batch,
        }
        if code != RequestCode.SEND_MESSAGE:
            ext = {V2.get(k, k): v for k, v in ext.items()}
        # every value a string, as a Java client's header is written (what the broker's compiled send
        # lane reads; the mutations give other types): unmutated, a send can meet the lane
        return {k: json.dumps(v) if isinstance(v, bool) else str(v) for k, v in ext.items()}, payload
    if code == RequestCode.PULL_MESSAGE:
        ext = dict(pull_request(topic, queue_id, fuzz_int(rng, 0, 50), group=group).ext_fields)
        ext["subscription"] = rng.choice(["*", "TagA || TagB", "TagA", "a > 1", "||", ""])
        ext["expressionType"] = rng.choice(["TAG", "SQL92", "??"])
        return ext, b""
    if code == RequestCode.HEART_BEAT:
        return {}, heartbeat_body(rng)
    if code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
        return {}, lock_body(rng)
    if code == RequestCode.UPDATE_AND_CREATE_TOPIC:
        ext = dict(update_topic_request(topic, rng.choice([1, 4, 8, 0, 1024])).ext_fields)
        return ext, b""
    common = {
        "topic": topic,
        "consumerGroup": group,
        "group": group,
        "queueId": queue_id,
        "commitOffset": fuzz_int(rng, 0, 100),
        "offset": rng.choice([0, fuzz_int(rng, 0, 1 << 20), 1 << 40]),
        "timestamp": int(time.time() * 1000) - fuzz_int(rng, 0, 10**6),
        "key": f"k{rng.randint(0, 99)}",
        "maxNum": fuzz_int(rng, 1, 64),
        "beginTimestamp": 0,
        "endTimestamp": int(time.time() * 1000),
        "clientID": "fuzz@1",
        "producerGroup": group,
        "delayLevel": fuzz_int(rng, -1, 20),
        "originTopic": topic,
        "originMsgId": f"{rng.getrandbits(128):032X}",
        "maxReconsumeTimes": 16,
        "tranStateTableOffset": fuzz_int(rng, 0, 100),
        "commitLogOffset": fuzz_int(rng, 0, 1 << 20),
        "commitOrRollback": rng.choice([0, 4, 8, 12]),
        "fromTransactionCheck": rng.random() < 0.5,
        "msgId": f"{rng.getrandbits(128):032X}",
        "isForce": rng.random() < 0.5,
        "startOffset": 0,
        "endOffset": fuzz_int(rng, 0, 1 << 22),
        "rangeSize": rng.choice([1 << 16, 1 << 20, 1]),
        "role": rng.choice(["SYNC_MASTER", "ASYNC_MASTER", "SLAVE"]),
        "namespace": "ns",
        "brokerName": "broker-a",
    }
    # a few of them: the processors take what they need and must refuse what is missing
    keys = rng.sample(sorted(common), rng.randint(0, len(common)))
    return {k: common[k] for k in keys}, b""


def namesrv_template(rng: random.Random, code: int) -> tuple[dict, bytes]:
    """What a forger sends a name server: the real broker's name, id 0, a made-up address, a huge
    epoch, the control topic; or a client's read."""
    topic = CONTROL_TOPIC if rng.random() < 0.5 else fuzz_topic(rng)
    ext: dict = {
        "clusterName": "DefaultCluster",
        "brokerName": BROKER_NAME if rng.random() < 0.8 else fuzz_group(rng),
        "brokerAddr": f"10.{rng.randint(0, 255)}.0.1:{rng.randint(1, 65535)}",
        "brokerId": rng.choice([0, 0, 0, 1, -1]),
        "haServerAddr": "10.0.0.1:10912",
        "epoch": rng.choice([2**31 - 1, 2, 10**6]),
        "topic": topic,
        "cluster": "DefaultCluster",
        "compressed": False,
    }
    data = b""
    if code == RequestCode.REGISTER_BROKER:
        table = {topic: {"topicName": topic, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}}
        data = json_body(rng, {"topicConfigSerializeWrapper": {"topicConfigTable": table, "dataVersion": {}}})
    elif code == RequestCode.QUERY_DATA_VERSION:
        data = json_body(rng, {"timestamp": 0, "counter": rng.randint(0, 9)})
    return ext, data


def request_codes() -> list[int]:
    # SEND_MESSAGE_V2 and PULL_MESSAGE are what clients send most: more of them
    codes = [int(c) for c in RequestCode]
    return codes + [RequestCode.SEND_MESSAGE_V2] * 6 + [RequestCode.PULL_MESSAGE] * 4 + [RequestCode.HEART_BEAT]


# ---------------------------------------------------------------------------------------------
# mutations


def odd_value(rng: random.Random) -> object:
    return rng.choice(
        [
            -1,
            -(2**31),
            2**31,
            2**63,
            -(2**63) - 1,
            10**30,
            0,
            1.5,
            1e308,
            True,
            None,
            [],
            [1, "x"],
            {},
            {"a": {"b": 1}},
            "",
            "x" * rng.choice([1000, 70000]),
            "\u00e9\u4e2d\U0001f600",
            "\x00\x01\x02",
            "-5",
            "12abc",
            " 7 ",
            "1e5",
            "0x10",
            "99999999999999999999999",
        ]
    )


def mutate_fields(rng: random.Random, ext: dict) -> dict:
    ext = dict(ext)
    for _ in range(rng.randint(1, 3)):
        choice = rng.randrange(4)
        if choice == 0 and ext:
            del ext[rng.choice(list(ext))]
        elif choice == 1:
            ext[rng.choice(["zz", "", "\u00e9", "x" * 500, "topic", "queueId"])] = odd_value(rng)
        elif ext:
            ext[rng.choice(list(ext))] = odd_value(rng)
    return ext


def mutate_body(rng: random.Random, data: bytes) -> bytes:
    choice = rng.randrange(4)
    if choice == 0 and data:
        i = rng.randrange(len(data))
        return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :]
    if choice == 1:
        return data[: rng.randint(0, len(data))]
    if choice == 2:
        return rng.randbytes(rng.randint(0, 300))
    return data + rng.randbytes(rng.randint(1, 100))


def header_of(code: int, opaque: int, ext: object, flag: int = 0) -> dict:
    return {"code": code, "language": "JAVA", "version": 401, "opaque": opaque, "flag": flag, "extFields": ext}


def unreadable_header(rng: random.Random, header: dict) -> dict:
    """A header the broker cannot read as a command: a field of the frame itself of the wrong type,
    missing, or out of range (it closes the connection, as a Java broker's decoder does)."""
    header = dict(header)
    key = rng.choice(["code", "version", "flag", "opaque", "extFields", "language"])
    if rng.random() < 0.3:
        header.pop(key, None)
    else:
        header[key] = rng.choice([odd_value(rng), "\ud800", 2**31, -(2**31) - 1, float("nan")])
    return header


def frame(header: dict, data: bytes, serialize_type: int = 0) -> bytes:
    head = json.dumps(header).encode("utf-8", "surrogatepass")
    return struct.pack(">ii", 4 + len(head) + len(data), (serialize_type << 24) | len(head)) + head + data


def broken_frame(rng: random.Random, good: bytes) -> bytes:
    """A frame whose framing is wrong: the last one a connection sends (what follows cannot be read)."""
    total, mark = struct.unpack_from(">ii", good)
    head_len = mark & 0xFFFFFF
    rest = good[8:]
    choice = rng.randrange(9)
    if choice == 0:  # a frame length too big, negative, or over the limit
        return (
            struct.pack(">ii", rng.choice([total + 100, -1, -(2**31), 2**31 - 1, MAX_FRAME_SIZE_DEFAULT + 1]), mark)
            + rest
        )
    if choice == 1:  # too small for what the header length says
        return struct.pack(">ii", rng.randint(0, max(0, head_len + 3)), mark) + rest
    if choice == 2:  # header length past the frame, zero, or over 24 bits
        bad = rng.choice([total, total + 1, 0, 0xFFFFFF])
        return struct.pack(">iI", total, (mark & 0xFF000000) | bad) + rest
    if choice == 3:  # serialize type ROCKETMQ (binary) or undefined
        return struct.pack(">iI", total, (rng.choice([1, 2, 255]) << 24) | head_len) + rest
    if choice == 4:  # the header cut short
        cut = rng.randint(0, head_len)
        head = rest[:cut]
        return struct.pack(">ii", 4 + len(head), len(head)) + head
    if choice == 5:  # a byte of the header flipped
        i = 8 + rng.randrange(max(1, head_len))
        if i >= len(good):
            return good[:8]
        return good[:i] + bytes([good[i] ^ 0xFF]) + good[i + 1 :]
    if choice == 6:  # a frame cut anywhere
        return good[: rng.randint(0, len(good) - 1)]
    if choice == 7:  # the header not an object
        head = json.dumps(rng.choice([[], 1, "x", None, [1, 2]])).encode()
        return struct.pack(">ii", 4 + len(head), len(head)) + head
    return rng.randbytes(rng.randint(1, 2000))  # garbage


# ---------------------------------------------------------------------------------------------
# workers


class Connection:
    def __init__(self, port: int):
        self.sock = socket.create_connection((LOOPBACK, port), timeout=5)
        self.sock.settimeout(ANSWER_TIMEOUT)
        self.decoder = FrameDecoder(max_frame_size=64 << 20)

    def close(self) -> None:
        self.sock.close()


def server_closed(sock: socket.socket, wait: float) -> bool:
    """Whether the broker closes ``sock`` (or resets it) within ``wait`` seconds."""
    end = time.monotonic() + wait
    # poll, not select: select() refuses a descriptor numbered 1024 or more
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    while True:
        left = end - time.monotonic()
        ready = poller.poll(max(0.0, left) * 1000)
        if not ready and left <= 0:
            return False
        if ready:
            try:
                if not sock.recv(65536):
                    return True
            except OSError:
                return True


def worker(
    port: int, namesrv_port: int, namesrv_share: float, frames: int, seed: int, results: multiprocessing.Queue
) -> None:
    rng = random.Random(seed)
    outcomes: collections.Counter = collections.Counter()
    by_code: collections.Counter = collections.Counter()
    slow: list[str] = []
    codes = request_codes()
    opaque = (seed % 20) * 100_000_000  # unique per connection, within 32 bits
    sent = 0
    doomed: list[tuple[float, socket.socket]] = []  # after a broken frame: closed by the broker?

    def settle(force: bool = False) -> None:
        now = time.monotonic()
        keep = []
        for since, sock in doomed:
            if force or now - since > 1.0:
                outcomes[
                    "broken frame: connection closed by the broker"
                    if server_closed(sock, 0.5 if force else 0)
                    else "broken frame: connection still open (waiting for the rest)"
                ] += 1
                sock.close()
            else:
                keep.append((since, sock))
        doomed[:] = keep

    while sent < frames:
        if rng.random() < 0.003:  # a connection of garbage
            sock = socket.create_connection((LOOPBACK, port), timeout=5)
            sock.sendall(rng.randbytes(rng.randint(1, 5000)))
            doomed.append((time.monotonic(), sock))
            sent += 1
            continue
        to_namesrv = rng.random() < namesrv_share
        conn = Connection(namesrv_port if to_namesrv else port)
        budget = rng.randint(*CONNECTION_FRAMES)
        window = 1 if rng.random() < ONE_AT_A_TIME_SHARE else WINDOW
        alive = True
        while alive and budget > 0 and sent < frames:
            expected: dict[int, int] = {}  # opaque -> code, answers expected
            batch = bytearray()
            for _ in range(min(window, budget, frames - sent)):
                if to_namesrv:
                    code = rng.choice(NAMESRV_CODES) if rng.random() < 0.9 else rng.choice(codes)
                    ext, data = namesrv_template(rng, code)
                else:
                    code = rng.choice(codes) if rng.random() < 0.97 else rng.randint(-5, 70000)
                    ext, data = template(rng, code)
                mutated = rng.random() < 0.7
                if mutated:
                    if rng.random() < 0.6:
                        ext = mutate_fields(rng, ext)
                    if rng.random() < 0.3:
                        data = mutate_body(rng, data)
                opaque += 1
                # a request mostly; oneway now and then; a "response" nobody asked for, rarely
                flag = 0 if rng.random() < 0.9 else rng.choice([2, 2, 1, 3])
                header = header_of(code, opaque, ext, flag)
                if rng.random() < 0.02:
                    header["remark"] = "r" * rng.randint(0, 5000)
                if rng.random() < 0.01:
                    del header["extFields"]
                if flag == 0:
                    expected[opaque] = code
                batch += frame(header, data)
                budget -= 1
                sent += 1
            try:
                conn.sock.sendall(batch)
            except OSError:
                outcomes["connection closed by the broker"] += 1
                alive = False
                break
            deadline = time.monotonic() + ANSWER_TIMEOUT
            pulls_parked = 0
            while expected and alive:
                waiting_only_for_optional = all(c in ANSWER_OPTIONAL for c in expected.values())
                if waiting_only_for_optional and time.monotonic() > deadline - ANSWER_TIMEOUT + 1.0:
                    pulls_parked = len(expected)
                    break
                conn.sock.settimeout(max(0.01, min(1.0, deadline - time.monotonic())))
                try:
                    data = conn.sock.recv(1 << 20)
                except TimeoutError:
                    if time.monotonic() < deadline:
                        continue
                    slow += [f"{code}" for code in expected.values()][:5]
                    outcomes["no answer in time"] += len(expected)
                    alive = False
                    break
                except OSError:
                    data = b""
                if not data:
                    outcomes["connection closed by the broker"] += 1
                    outcomes["answer lost when the broker closed"] += len(expected)
                    alive = False
                    break
                for answer in conn.decoder.feed(data):
                    if answer.opaque in expected and answer.flag & 1:
                        del expected[answer.opaque]
                        by_code[answer.code] += 1
                    elif not answer.flag & 1:
                        outcomes["requests from the broker (notify, check)"] += 1
                    else:
                        outcomes["answers to parked pulls or unmatched"] += 1
            if pulls_parked:
                outcomes["no answer, as RocketMQ (parked pulls, END_TRANSACTION)"] += pulls_parked
                alive = False  # a new connection: the next answers should not mix with theirs
        if alive and rng.random() < 0.15 and sent < frames:
            # the last frame: broken framing
            code = rng.choice(codes)
            ext, data = template(rng, code)
            opaque += 1
            header = header_of(code, opaque, ext)
            if rng.random() < 0.5:
                last = frame(unreadable_header(rng, header), data)
            else:
                last = broken_frame(rng, frame(header, data))
            sent += 1
            try:
                conn.sock.sendall(last)
            except OSError:  # the broker closed it first (a frame of the last burst it refused)
                outcomes["connection closed by the broker"] += 1
                conn.close()
            else:
                doomed.append((time.monotonic(), conn.sock))
        else:
            conn.close()
        settle()
    settle(force=True)
    results.put({"outcomes": dict(outcomes), "codes": dict(by_code), "slow": slow[:20], "sent": sent})


# ---------------------------------------------------------------------------------------------
# the control client and the broker


class Control:
    """Sends to CONTROL_TOPIC, pulls back what it sent, commits offsets; records every error."""

    def __init__(self, addr: str, namesrv: str):
        self.addr = addr
        self.namesrv = namesrv
        self.route_checks = 0
        self.client = RemotingClient()
        self.acked: set[bytes] = set()
        self.pulled = 0
        self.busy = 0  # SYSTEM_BUSY answers, retried
        self.errors: list[str] = []
        self.next_offset = [0] * CONTROL_QUEUES
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fuzz-control")

    def start(self) -> Control:
        self.client.start()
        answer = self.client.invoke_sync(self.addr, update_topic_request(CONTROL_TOPIC, CONTROL_QUEUES), 10)
        if answer.code != ResponseCode.SUCCESS:
            raise SystemExit(f"could not create {CONTROL_TOPIC}: {answer.remark}")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.client.shutdown()

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(0.02):
            n += 1
            body = b"control-%08d" % n
            queue_id = n % CONTROL_QUEUES
            try:
                request = send_request(CONTROL_TOPIC, body, queue_id=queue_id)
                answer = self.client.invoke_sync(self.addr, request, 10)
                for _ in range(BUSY_RETRIES):  # as a client does: flow control, retry a little later
                    if answer.code != ResponseCode.SYSTEM_BUSY:
                        break
                    self.busy += 1
                    self._stop.wait(0.05)
                    answer = self.client.invoke_sync(self.addr, request, 10)
                if answer.code != ResponseCode.SUCCESS:
                    self.errors.append(f"send answered {answer.code}: {answer.remark}")
                    continue
                self.acked.add(body)
                pull = pull_request(CONTROL_TOPIC, queue_id, self.next_offset[queue_id], group=CONTROL_GROUP)
                answer = self.client.invoke_sync(self.addr, pull, 10)
                if answer.code != ResponseCode.SUCCESS:
                    self.errors.append(f"pull answered {answer.code}: {answer.remark}")
                    continue
                got = records(answer.body)
                self.pulled += len(got)
                if body not in {bytes(m.body) for m in got}:
                    self.errors.append(f"{body!r} not in the pull after its send")
                self.next_offset[queue_id] = int(answer.ext_fields["nextBeginOffset"])
                commit = offset_request(
                    RequestCode.UPDATE_CONSUMER_OFFSET,
                    CONTROL_TOPIC,
                    queue_id,
                    CONTROL_GROUP,
                    commitOffset=self.next_offset[queue_id],
                )
                answer = self.client.invoke_sync(self.addr, commit, 10)
                if answer.code != ResponseCode.SUCCESS:
                    self.errors.append(f"offset commit answered {answer.code}: {answer.remark}")
                if n % 50 == 0:
                    self._check_route()
            except Exception as e:  # a timeout or a closed connection: the broker failed a client
                self.errors.append(f"{type(e).__name__}: {e}")

    def _check_route(self) -> None:
        """The control topic is routed to the real broker as the master of its name, whatever was forged."""
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": CONTROL_TOPIC})
        answer = self.client.invoke_sync(self.namesrv, request, 10)
        self.route_checks += 1
        if answer.code != ResponseCode.SUCCESS:
            self.errors.append(f"route of {CONTROL_TOPIC} answered {answer.code}: {answer.remark}")
            return
        route = loads_java_json(bytes(answer.body or b"").decode())
        masters = {
            str(data.get("brokerName")): (data.get("brokerAddrs") or {}).get("0")
            for data in route.get("brokerDatas") or []
        }
        if masters != {BROKER_NAME: self.addr}:
            self.errors.append(f"route of {CONTROL_TOPIC} names masters {masters}, not {BROKER_NAME}: {self.addr}")


def rss_kib(pid: int) -> int:
    try:
        found = RSS.search(Path(f"/proc/{pid}/status").read_text())
    except OSError:
        return 0
    return int(found.group(1)) if found else 0


def unexpected_exceptions(log_path: Path) -> collections.Counter:
    """What the broker logged as a failed processor: (request code, last line of the traceback)."""
    found: collections.Counter = collections.Counter()
    lines = log_path.read_text(errors="replace").splitlines()
    for i, line in enumerate(lines):
        m = FAILED.search(line)
        if not m:
            continue
        last = ""
        for follow in lines[i + 1 : i + 60]:
            if follow and not follow.startswith((" ", "Traceback", "\t")):
                last = follow
                break
        found[(int(m.group(1)), last[:200])] += 1
    return found


def run(args: argparse.Namespace) -> dict:
    store = Path(tempfile.mkdtemp(prefix="rmq-fuzz-"))
    procs = Processes()
    log_path = store / "broker.log"
    auth = (
        {} if args.no_cluster_auth else {"clusterAccessKey": CLUSTER_ACCESS_KEY, "clusterSecretKey": CLUSTER_SECRET_KEY}
    )
    settings = broker_settings(
        store / "store",
        mappedFileSizeCommitLog=str(64 << 20),
        brokerRole="ASYNC_MASTER",
        brokerName=BROKER_NAME,
        **auth,
    )
    report: dict = {
        "frames": args.frames,
        "workers": args.workers,
        "seed": args.seed,
        "namesrv_share": args.namesrv_share,
        "cluster_auth": bool(auth),
    }
    try:
        with open(log_path, "ab") as log:
            proc, addr = start_broker_process(procs.spawn, settings, extra_args=("--log-level", "WARNING"), stderr=log)
        control = Control(addr, f"{LOOPBACK}:{settings['namesrvListenPort']}").start()
        port = int(settings["listenPort"])
        namesrv_port = int(settings["namesrvListenPort"])
        results: multiprocessing.Queue = multiprocessing.get_context("spawn").Queue()
        ctx = multiprocessing.get_context("spawn")
        share = args.frames // args.workers
        workers = [
            ctx.Process(
                target=worker,
                args=(
                    port,
                    namesrv_port,
                    args.namesrv_share,
                    share + (args.frames % args.workers if i == 0 else 0),
                    args.seed * 100 + i,
                    results,
                ),
            )
            for i in range(args.workers)
        ]
        start = time.monotonic()
        for w in workers:
            w.start()
        rss = [rss_kib(proc.pid)]
        collected = []
        while len(collected) < len(workers):
            try:
                collected.append(results.get(timeout=1.0))
            except Exception:
                pass
            rss.append(rss_kib(proc.pid))
            if proc.poll() is not None:
                report["broker_died"] = proc.returncode
                break
            if not any(w.is_alive() for w in workers) and results.empty():
                report["workers_failed"] = len(workers) - len(collected)
                break
            if not args.json and len(rss) % 30 == 0:
                print(
                    f"  {time.monotonic() - start:.0f} s: RSS {rss[-1] // 1024} MiB, "
                    f"control acked {len(control.acked)}, errors {len(control.errors)}",
                    file=sys.stderr,
                )
        elapsed = time.monotonic() - start
        for w in workers:
            w.join(30)
            if w.is_alive():
                w.kill()
        control.stop()
        outcomes: collections.Counter = collections.Counter()
        by_code: collections.Counter = collections.Counter()
        slow: list[str] = []
        sent = 0
        for r in collected:
            outcomes.update(r["outcomes"])
            by_code.update(r["codes"])
            slow += r["slow"]
            sent += r["sent"]
        report.update(
            sent=sent,
            seconds=round(elapsed, 1),
            frames_per_second=round(sent / elapsed),
            answered={_code_name(c): n for c, n in by_code.most_common()},
            outcomes=dict(outcomes.most_common()),
            no_answer_codes=slow[:20],
            rss_anon_mib={"first": rss[0] // 1024, "max": max(rss) // 1024, "last": rss[-1] // 1024},
            control={
                "acked": len(control.acked),
                "pulled": control.pulled,
                "busy_retried": control.busy,
                "route_checks": control.route_checks,
                "errors": len(control.errors),
                "first_errors": control.errors[:5],
            },
        )
        report["broker_alive"] = proc.poll() is None
        if report["broker_alive"]:
            report["send_lane"] = send_lane_counts(addr)
        # the store after a crash: SIGKILL, restart on the same store, everything acknowledged there
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        with open(log_path, "ab") as log:
            proc, addr = start_broker_process(procs.spawn, settings, extra_args=("--log-level", "WARNING"), stderr=log)
        client = RemotingClient()
        client.start()
        try:
            found = bodies_in(client, addr, CONTROL_TOPIC, CONTROL_QUEUES)
        finally:
            client.shutdown()
        missing = control.acked - found
        report["recovery"] = {"acked": len(control.acked), "found": len(control.acked & found), "missing": len(missing)}
        report["unexpected_exceptions"] = [
            {"code": code, "count": n, "error": error}
            for (code, error), n in unexpected_exceptions(log_path).most_common()
        ]
        report["ok"] = bool(
            report["broker_alive"]
            and not control.errors
            and not missing
            and not outcomes["no answer in time"]
            and not report["unexpected_exceptions"]
            and not report.get("workers_failed")
        )
        return report
    finally:
        procs.stop_all()
        if args.keep:
            print(f"store and log kept in {store}", file=sys.stderr)
        else:
            shutil.rmtree(store, ignore_errors=True)


def send_lane_counts(addr: str) -> dict[str, int] | None:
    """The frames the broker's compiled send lane served and left to the processors, from
    GET_BROKER_RUNTIME_INFO (None: the lane is off, or the broker does not count them), so that a
    run shows the lane met the fuzzed frames."""
    client = RemotingClient()
    client.start()
    try:
        answer = client.invoke_sync(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 5)
    finally:
        client.shutdown()
    table = json.loads(bytes(answer.body or b""))["table"]
    if "sendLaneServed" not in table:
        return None
    counts = {"served": int(table["sendLaneServed"]), "left": int(table["sendLaneLeft"])}
    if "pullLaneServed" in table:  # the pulls it handed to the pull lane
        counts.update(pulls_served=int(table["pullLaneServed"]), pulls_left=int(table["pullLaneLeft"]))
    return counts


def _code_name(code: int) -> str:
    try:
        return f"{code} {ResponseCode(code).name}"
    except ValueError:
        return str(code)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=max(2, os.cpu_count() or 2))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--namesrv-share", type=float, default=0.1, help="share of connections to the embedded name server"
    )
    parser.add_argument(
        "--no-cluster-auth",
        action="store_true",
        help="run the broker without cluster credentials (keep --namesrv-share 0 then: an unsigned "
        "UNREGISTER_BROKER from the broker's own host is honoured, and the route check would fail)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the store and the broker's log")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    args = parser.parse_args()
    report = run(args)
    print(json.dumps(report, indent=None if args.json else 2, default=str))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
