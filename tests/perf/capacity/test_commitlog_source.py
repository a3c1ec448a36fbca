"""The CommitLog as a Spark data source, over a store a real broker wrote in the test: several
CommitLog files, records straddling partition boundaries, a torn tail written after the broker
stopped. What it reads back is exactly what the broker acknowledged; what is corrupt is counted."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmq.client import Message, Producer
from rmq.perf.capacity import commitlog_source
from rmq.perf.capacity.commitlog_source import CORRUPT, commitlog_files, plan_partitions, read_partition
from rmq.perf.procs import Processes
from rmq.protocol import layout
from rmq.protocol.record import StoredMessage, body_crc, decode_msg_id, encode_record
from tests.helpers.processes import Cluster

FILE_BYTES = 64 * 1024
PARTITION_BYTES = 8 * 1024
TOPICS = ("OrdersTopic", "ClicksTopic")
MESSAGES = 240
Key = tuple[str, int, int, int]  # topic, queue id, queue offset, CommitLog offset
# a valid stored record (of another CommitLog, at offset 0), to be carried in bodies
NESTED = encode_record(
    StoredMessage(0, body_crc(b"n" * 40), 0, 0, 0, 0, 0, 0, ("10.0.0.1", 5000), 0, ("10.0.0.2", 10911), 0, 0,
                  b"n" * 40, "NestedTopic", {})
)  # fmt: skip


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Iterator[tuple[Path, dict[Key, tuple[int, str | None, str]]]]:
    """A store a broker wrote with 64 KiB CommitLog files, the broker stopped; and what it acked:
    each message's key -> (body size, tags, keys)."""
    store = tmp_path_factory.mktemp("commitlog-source") / "store"
    store.mkdir()
    processes = Processes()
    cluster = Cluster(processes.spawn, store)
    cluster.settings["mappedFileSizeCommitLog"] = str(FILE_BYTES)
    acked: dict[Key, tuple[int, str | None, str]] = {}
    try:
        cluster.start()
        for topic in TOPICS:
            cluster.create_topic(topic)
        with Producer("commitlog-source-producers", namesrv_addr=cluster.namesrv_addr) as producer:
            for i in range(MESSAGES):
                topic = TOPICS[i % 2]
                size = 100 + (i * 37) % 1400  # 100 .. 1499 bytes: records of many lengths
                tags = f"tag{i % 3}" if i % 4 else None
                # every sixth body holds whole records (a store dump sent as messages): a partition's
                # scan for its first record must not take them for the CommitLog's own
                body = (NESTED * (size // len(NESTED) + 1))[:size] if i % 6 == 0 else b"b" * size
                result = producer.send(Message(topic, body, tags=tags, keys=[f"k{i}", f"o{i // 10}"]))
                _ip, _port, offset = decode_msg_id(result.offset_msg_id)
                key = (topic, result.message_queue.queue_id, result.queue_offset, offset)
                acked[key] = (size, tags, f"k{i} o{i // 10}")
    finally:
        cluster.close()
        processes.stop_all()
    yield store, acked


@pytest.fixture
def store(written, tmp_path) -> tuple[Path, dict[Key, tuple[int, str | None, str]]]:
    """A copy of the written store each test may damage."""
    source, acked = written
    copy = tmp_path / "store"
    shutil.copytree(source / "commitlog", copy / "commitlog")
    return copy, acked


def _rows(spark, store: Path, **options: str) -> list:
    commitlog_source.register(spark)
    reader = spark.read.format(commitlog_source.NAME)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load(str(store)).collect()


def _records(rows) -> dict[Key, tuple[int, str | None, str]]:
    return {
        (r.topic, r.queue_id, r.queue_offset, r.commitlog_offset): (r.body_size, r.tags, r.keys)
        for r in rows
        if r[CORRUPT] is None and r.topic in TOPICS
    }


def _end_of_data(path: str) -> int:
    """Where the records of a CommitLog file end (walked by TOTALSIZE from its start)."""
    data = Path(path).read_bytes()
    at = 0
    while at + 8 <= len(data) and int.from_bytes(data[at + 4 : at + 8], "big") == layout.MESSAGE_MAGIC_CODE:
        at += int.from_bytes(data[at : at + 4], "big")
    return at


def test_the_data_source_reads_back_exactly_what_the_broker_acknowledged(spark, store):
    root, acked = store
    files = commitlog_files(root)
    assert len(files) >= 4, [f.path for f in files]  # the records span several CommitLog files
    # records straddle partition boundaries: each must be read once, by the partition it starts in
    straddling = [k for k, (size, _t, _k) in acked.items() if k[3] % PARTITION_BYTES + size > PARTITION_BYTES]
    assert len(straddling) > 5
    # a torn tail, as a crash mid-write leaves it: a record's first half after the last record
    last = files[-1].path
    end = _end_of_data(last)
    with open(last, "r+b") as f:
        total = int.from_bytes(f.read(4), "big")
        f.seek(0)
        torn = bytearray(f.read(total))
        torn[layout.REC_PHYSICALOFFSET : layout.REC_PHYSICALOFFSET + 8] = (files[-1].base + end).to_bytes(8, "big")
        f.seek(end)
        f.write(torn[: len(torn) // 2])

    rows = _rows(spark, root, partitionSize=str(PARTITION_BYTES))

    assert _records(rows) == acked
    assert len([r for r in rows if r[CORRUPT] is None and r.topic in TOPICS]) == len(acked)  # none twice
    corrupt = [(r.file, r.commitlog_offset) for r in rows if r[CORRUPT] is not None]
    assert corrupt == [(last, files[-1].base + end)]
    (torn_row,) = [r for r in rows if r[CORRUPT] is not None]
    assert torn_row[CORRUPT] == layout.CHECK_RESULTS[layout.CHECK_BAD_LENGTHS]
    assert torn_row.total_size == len(torn) // 2
    # the other columns of a record: what the producer's connection and the broker's clock said
    one = next(r for r in rows if r[CORRUPT] is None and r.topic in TOPICS)
    assert one.born_host.startswith("127.0.0.1:") and one.store_timestamp >= one.born_timestamp > 0
    assert one.total_size > one.body_size and one.file.endswith(Path(one.file).name)


def test_a_corrupt_record_in_the_middle_is_counted_and_the_records_after_it_are_read(spark, store):
    root, acked = store
    files = commitlog_files(root)
    victim = files[1]
    data = bytearray(Path(victim.path).read_bytes())
    # the third record of the second file: one body byte flipped, as a bad sector would
    at = 0
    for _ in range(2):
        at += int.from_bytes(data[at : at + 4], "big")
    data[at + layout.REC_BODY] ^= 0xFF
    Path(victim.path).write_bytes(data)
    size = int.from_bytes(data[at : at + 4], "big")

    rows = _rows(spark, root, partitionSize=str(PARTITION_BYTES))

    bad = [(r.file, r.commitlog_offset, r.total_size, r[CORRUPT]) for r in rows if r[CORRUPT] is not None]
    assert bad == [(victim.path, victim.base + at, size, layout.CHECK_RESULTS[layout.CHECK_BAD_CRC])]
    lost = {k for k in acked if k[3] == victim.base + at}
    assert len(lost) == 1 and _records(rows) == {k: v for k, v in acked.items() if k not in lost}
    # DROPMALFORMED: the records only; checkCRC=false: the flipped body passes
    assert not [r for r in _rows(spark, root, mode="DROPMALFORMED") if r[CORRUPT]]
    assert _records(_rows(spark, root, checkCRC="false")) == acked


@pytest.mark.parametrize("partition_bytes", [50, 999, PARTITION_BYTES, FILE_BYTES])
def test_every_partitioning_yields_each_record_once(written, partition_bytes):
    root, acked = written
    parts = plan_partitions(commitlog_files(root), partition_bytes)
    offsets = [rec[5] for part in parts for chunk in read_partition(part) for rec in chunk]
    ours = {k[3] for k in acked}
    assert sorted(o for o in offsets if o in ours) == sorted(ours)


def test_a_path_without_a_commitlog_or_a_bad_option_is_refused_saying_what_was_expected(spark, written, tmp_path):
    commitlog_source.register(spark)
    with pytest.raises(Exception, match="no CommitLog here: expected a store root with commitlog/"):
        spark.read.format(commitlog_source.NAME).load(str(tmp_path)).count()
    root, _acked = written
    with pytest.raises(Exception, match="partitionSize='0': expected bytes"):
        spark.read.format(commitlog_source.NAME).option("partitionSize", "0").load(str(root)).count()
