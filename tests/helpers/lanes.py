"""What the twin tests of the broker's compiled lanes (tests/broker/test_send_lane.py,
test_pull_lane.py) draw their request headers from: JSON objects with a request code and its
extFields, written as clients write them, and cut, spliced or flipped; and the twin brokers they
compare, one with the lane and one without."""

from __future__ import annotations

import json
import os
import re
import struct

import orjson
import pytest
from hypothesis import strategies as st

from rmq.broker.controller import NO_FAST_LANE_ENV
from rmq.errors import ProtocolError, RequestRefused
from rmq.net import _codec, codec
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.headers import send_header
from rmq.protocol.message import SCHEDULE_TOPIC
from rmq.store._store import LAYOUT
from tests.helpers.frames import RawConnection, raw_frame


def header_bytes(codes: st.SearchStrategy[int], ext_fields: st.SearchStrategy[dict]) -> st.SearchStrategy[bytes]:
    """Headers of a code from ``codes`` with extFields from ``ext_fields`` and a few of the other
    top-level fields, written by orjson, by json with ASCII escapes, or spaced with raw UTF-8."""
    headers = st.fixed_dictionaries(
        {"code": codes, "extFields": ext_fields},
        optional={
            "opaque": st.integers(-(2**31), 2**31 - 1),
            "flag": st.sampled_from([0, 0, 0, 1, 2]),
            "language": st.sampled_from(["JAVA", "CPP", "PYTHON"]),
            "version": st.sampled_from([399, 317]),
            "remark": st.one_of(st.none(), st.text(max_size=5)),
            "serializeTypeCurrentRPC": st.just("JSON"),
        },
    )
    styles = {
        "orjson": orjson.dumps,
        "ascii": lambda header: json.dumps(header).encode(),
        "spaced": lambda header: json.dumps(header, ensure_ascii=False, indent=1).encode(),
    }
    return st.builds(lambda header, style: styles[style](header), headers, st.sampled_from(sorted(styles)))


def header_mutations(header: bytes, data: st.DataObject) -> tuple[bytes, ...]:
    """``header`` cut, with junk spliced in, junk alone, cut with junk after."""
    cut = data.draw(st.integers(0, len(header)))
    junk = data.draw(st.binary(max_size=8))
    return header[:cut], header[:cut] + junk + header[cut:], junk, header[:cut] + junk


_SEND_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)


def random_queue_send(header: bytes) -> bool:
    """A send whose header names a negative queue id, in the spelling send_header reads (V2
    letters, or long names under any send code): each twin's processor picks one of the topic's
    write queues at random (RocketMQ's randomQueueId), so the twins may store it apart."""
    try:
        (command,) = codec.decode_frames(raw_frame(header))
        return command.code in _SEND_CODES and send_header(command).queue_id < 0
    except (ProtocolError, RequestRefused):
        return False


# the fields of a record that differ between twins: where and when it was stored, who sent it
MASKED = [
    (LAYOUT["REC_BORNHOST"], 8),
    (LAYOUT["REC_STORETIMESTAMP"], 8),
    (LAYOUT["REC_STOREHOST"], 8),
]
TIMER_DUE = re.compile(rb"(TIMER_OUT_MS\x01)([0-9]+)")
# the suite run without the lane (RMQ_NO_FAST_LANE=1, or the pure-Python codec): no twin to compare
needs_lane = pytest.mark.skipif(
    os.environ.get(NO_FAST_LANE_ENV) == "1" or codec.implementation is not _codec, reason="the send lane is off"
)
PROBE_CODE = 9999  # no processor: answered REQUEST_CODE_NOT_SUPPORTED, stores nothing


class Twin:
    def __init__(self, broker):
        self.broker = broker
        self.connection = RawConnection(broker.config.listen_port)

    # what the probe is answered with
    probe_codes = (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,)

    def probe(self, opaque: int) -> bytes:
        """A request answered after everything sent before it on the connection."""
        return raw_frame(b'{"code":%d,"opaque":%d,"flag":0,"extFields":{}}' % (PROBE_CODE, opaque))

    def exchange(self, frame: bytes, opaque: int) -> list | None:
        """Send ``frame`` and a probe; the answers before the probe's, None when the broker closed
        the connection (a frame it could not read): then a new connection."""
        try:
            self.connection.send(frame + self.probe(opaque))
            answers = []
            while True:
                (answer,) = self.connection.read_commands(1)
                if answer.code in self.probe_codes and answer.opaque == opaque:
                    return answers
                answers.append(answer)
        except (ConnectionError, OSError):
            self.connection.close()
            self.connection = RawConnection(self.broker.config.listen_port)
            return None

    def records(self) -> list[bytes]:
        """The CommitLog's records, with what differs between twins masked."""
        store = self.broker.store
        out = []
        offset = store.get_min_phy_offset()
        end = store.get_max_phy_offset()
        while offset < end:
            view = store.replica_view(offset, end - offset)
            if not len(view):
                break
            data = bytearray(view)
            pos = 0
            while pos + 8 <= len(data):
                (size,) = struct.unpack_from(">i", data, pos)
                if size <= 0 or pos + size > len(data):
                    break
                record = data[pos : pos + size]
                born, stored = (LAYOUT["REC_BORNTIMESTAMP"], LAYOUT["REC_STORETIMESTAMP"])
                if record[born : born + 8] == record[stored : stored + 8]:
                    record[born : born + 8] = bytes(8)  # no bornTimestamp sent: the store's time
                for start, length in MASKED:
                    record[start : start + length] = bytes(length)
                # a timer's due time is its store time plus the delay: each twin's own millisecond
                record = TIMER_DUE.sub(lambda m: m.group(1) + b"0" * len(m.group(2)), bytes(record))
                out.append(record)
                pos += size
            offset += len(data)
        return out

    def queues(self) -> dict:
        """The ConsumeQueues' entries; a delayed message's tags code is its due time, masked."""
        out = {}
        for cq in self.broker.store.consume_queues():
            entries = bytearray(cq.read_entries(0, cq.max_offset_in_queue) or b"")
            if cq.topic == SCHEDULE_TOPIC:
                for start in range(LAYOUT["CQ_TAGS_CODE"], len(entries), LAYOUT["CQ_STORE_UNIT_SIZE"]):
                    entries[start : start + 8] = bytes(8)
            out[(cq.topic, cq.queue_id)] = bytes(entries)
        return out


def start_twin_brokers(start_broker, root, **settings: str) -> tuple:
    """Two brokers alike but for the lane: (with it, without it), stores under ``root``."""
    lane = start_broker(storePathRootDir=str(root / "lane"), **settings)
    python = start_broker(storePathRootDir=str(root / "python"), fastLaneEnable="false", **settings)
    assert lane.send_lane is not None and python.send_lane is None
    return lane, python


def close_twins(pair) -> None:
    for twin in pair:
        twin.connection.close()


def assert_scanner_reads_as_decoder(scan, decode, header: bytes, data=None) -> None:
    """A lane's header scanner reads ``header`` (and, given Hypothesis ``data``, its cut, spliced and
    flipped variants) exactly as the Python decoder does, or leaves it to the processor (None)."""
    for changed in [header] if data is None else header_mutations(header, data):
        scanned = scan(changed)
        if scanned is not None:
            assert scanned == decode(changed)
