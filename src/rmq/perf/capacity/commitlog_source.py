"""The CommitLog as a Spark data source: ``spark.read.format("rmq-commitlog").load(STORE_DIR)``.

A broker's (or a copied) store read where it lies, a row per stored record, with PySpark 4's Python
Data Source API; ``register(spark)`` makes the format known to a session. The records are the
CommitLog's (docs/store-format.md#commitlog-record), decoded by the project's compiled record codec
(``rmq.protocol.record``: ``record_fields`` over a run of records, ``body_crc``), so an executor needs
rmq installed (the codec), unlike the perf-log pipeline, whose work is DataFrame expressions only.

**Partitions.** Each CommitLog file (``commitlog/<20-digit start offset>``) is cut at multiples of
``partitionSize`` bytes (option; default 64 MiB) of the file; a partition owns the records that
*start* in its range ``[start, end)``, so a record straddling ``end`` is read whole by the partition
it starts in and skipped by the next. Records never cross files (a file ends in the blank marker
``[int32 left][int32 0xCBD43194]`` or in zeros), so files need no coordination at all.

**Finding the first record of a partition.** Records start at known places only from a file's
start (RocketMQ's recovery walks every file from its first byte by TOTALSIZE). Walking there from
the file start costs every page before the partition (a TOTALSIZE hop is shorter than a page), so
each partition would read its whole prefix: quadratic. The ConsumeQueues know every record's offset,
but they trail the CommitLog (dispatch), may be missing in a copied store, and know nothing of a
torn tail. Instead every record carries its own position: field 7, PHYSICALOFFSET, is the record's
CommitLog offset. From ``start``, the reader looks for the magic (``0xDAA320A7``, field 2) with a
C-speed ``find``; a hit at ``p + 4`` is a record when ``check_record`` accepts the bytes at ``p``
with ``expected_offset = file base + p`` (the magic, TOTALSIZE fitting the file, body, topic and
properties lengths adding up to TOTALSIZE, and the 8-byte PHYSICALOFFSET equal to ``p``): a body
would have to hold a record header naming its own position to fool it. The scan reads at most one
record's bytes (a record is found within one record's length of any point), so a partition costs
its own range plus one record.

**What a reader yields.** Arrow record batches (pyarrow), a batch per ``CHUNK_BYTES`` of the file,
columns as ``SCHEMA``. Records are walked by TOTALSIZE, each one's PHYSICALOFFSET checked against
its position and (option ``checkCRC``, default true, RocketMQ's ``checkCRCOnRecover``) its body CRC.
A record that fails a check is a corrupt region: the reader resynchronises at the next record that
passes the position test and yields one row for the region, Spark's PERMISSIVE way
(``_corrupt_record`` names the check that failed, ``commitlog_offset`` where the region starts,
``total_size`` the bytes skipped, the other fields null; option ``mode=DROPMALFORMED`` drops those
rows). So corrupt or torn records are counted per file (``groupBy("file")``) and never fatal. A
region is counted by the partition whose walk runs into it, also when it starts just past that
partition's end (the next partition's scan skips it unseen). Zeros where a record should start
end the file's data (the unwritten rest of the file being written: RocketMQ's recovery stops
there too); the blank end-of-file marker ends it as well.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import re
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from rmq.protocol import layout
from rmq.protocol.message import MessageProperty
from rmq.protocol.record import body_crc, check_record, record_fields

NAME = "rmq-commitlog"
COMMITLOG_DIR = "commitlog"
# a CommitLog file's name: its first byte's offset as 20 digits (docs/store-format.md#mapped-files)
FILE_NAME = re.compile(r"^\d{20}$")
DEFAULT_PARTITION_BYTES = 64 << 20
# bytes decoded per call of the codec and per Arrow batch: a few thousand records of ~1 KiB
CHUNK_BYTES = 4 << 20
MAGIC = struct.pack(">I", layout.MESSAGE_MAGIC_CODE)
# a torn region's end is looked for backwards from the partition's end, this many bytes at a time
ZERO_SCAN_BYTES = 1 << 16
MODES = ("PERMISSIVE", "DROPMALFORMED")
CORRUPT = "_corrupt_record"

# (name, Spark type, Arrow type), in the order of the rows; a corrupt region's row has only the
# last four (and ``total_size``: the bytes skipped)
COLUMNS = (
    ("topic", StringType(), pa.string()),
    ("queue_id", IntegerType(), pa.int32()),
    ("queue_offset", LongType(), pa.int64()),
    ("commitlog_offset", LongType(), pa.int64()),
    ("born_timestamp", LongType(), pa.int64()),  # ms, the producer's clock (field 9)
    ("store_timestamp", LongType(), pa.int64()),  # ms, the broker's clock (field 11)
    ("body_size", IntegerType(), pa.int32()),
    ("flags", IntegerType(), pa.int32()),  # the application's FLAG (field 5)
    ("sys_flag", IntegerType(), pa.int32()),
    ("tags", StringType(), pa.string()),
    ("keys", StringType(), pa.string()),  # KEYS as stored: space-separated
    ("born_host", StringType(), pa.string()),  # "ip:port" of the producer's connection
    ("total_size", IntegerType(), pa.int32()),  # the record's bytes in the CommitLog
    ("file", StringType(), pa.string()),  # the CommitLog file's path
    (CORRUPT, StringType(), pa.string()),
)
SCHEMA = StructType([StructField(name, kind, nullable=True) for name, kind, _ in COLUMNS])
ARROW_SCHEMA = pa.schema([(name, kind) for name, _, kind in COLUMNS])

# record_fields' tuple: StoredMessage's field order
_TOTAL, _CRC, _QUEUE_ID, _FLAG, _QUEUE_OFFSET, _PHY, _SYS_FLAG, _BORN, _BORN_HOST, _STORE = range(10)
_BODY, _TOPIC, _PROPS = 13, 14, 15


class CommitLogError(ValueError):
    """A store path or option the data source cannot use, saying what was expected."""


@dataclasses.dataclass(frozen=True)
class CommitLogFile:
    path: str
    base: int  # the CommitLog offset of its first byte
    size: int


@dataclasses.dataclass
class Problem:
    """A corrupt region: where it starts, how many bytes were skipped, which check failed."""

    file: str
    offset: int
    skipped: int
    reason: str


def store_commitlog_dir(path: str | os.PathLike[str]) -> Path:
    """The CommitLog directory of a store root (``<root>/commitlog``) or the directory itself."""
    p = Path(path)
    if (p / COMMITLOG_DIR).is_dir():
        return p / COMMITLOG_DIR
    if p.is_dir() and any(FILE_NAME.match(f.name) for f in p.iterdir()):
        return p
    raise CommitLogError(f"{path}: no CommitLog here: expected a store root with {COMMITLOG_DIR}/ or that directory")


def commitlog_files(path: str | os.PathLike[str]) -> list[CommitLogFile]:
    """The CommitLog files of a store, in offset order."""
    directory = store_commitlog_dir(path)
    files = []
    for f in sorted(directory.iterdir()):
        if FILE_NAME.match(f.name) and f.is_file():
            files.append(CommitLogFile(str(f), int(f.name), f.stat().st_size))
    return files


class CommitLogPartition(InputPartition):
    """The records starting in ``[start, end)`` of one CommitLog file (offsets in the file)."""

    path: str
    base: int
    size: int
    start: int
    end: int

    def __init__(self, path: str, base: int, size: int, start: int, end: int):
        super().__init__((path, start))
        self.path, self.base, self.size, self.start, self.end = path, base, size, start, end


def plan_partitions(files: Sequence[CommitLogFile], partition_bytes: int) -> list[CommitLogPartition]:
    """Each file cut at multiples of ``partition_bytes``."""
    if partition_bytes < layout.END_FILE_MIN_BLANK_LENGTH:
        raise CommitLogError(f"partitionSize {partition_bytes}: expected at least {layout.END_FILE_MIN_BLANK_LENGTH}")
    return [
        CommitLogPartition(f.path, f.base, f.size, start, min(start + partition_bytes, f.size))
        for f in files
        for start in range(0, f.size, partition_bytes)
    ]


def next_record(view: memoryview, data: Any, base: int, start: int, end: int) -> int | None:
    """The first position in ``[start, end)`` where a record names itself (module docstring); None
    when none starts there. ``data`` is the file's mmap (its ``find``), ``view`` a memoryview of it."""
    at = start
    while at < end:
        # a hit at h is a candidate at h - 4: it must start before ``end``, so h + 4 <= end + 7
        hit = data.find(MAGIC, at + layout.REC_MAGIC, end + layout.REC_MAGIC + len(MAGIC) - 1)
        if hit < 0:
            return None
        candidate = hit - layout.REC_MAGIC
        if check_record(view[candidate:], base + candidate, False) > 0:
            return candidate
        at = candidate + 1
    return None


def _columns(records: list[tuple[Any, ...]], path: str, hosts: dict[Any, str]) -> dict[str, list[Any]]:
    if not records:
        return {name: [] for name, _, _ in COLUMNS}
    fields = list(zip(*records, strict=True))
    props = fields[_PROPS]
    tags_key, keys_key = str(MessageProperty.TAGS), str(MessageProperty.KEYS)
    n = len(records)
    return {
        "topic": list(fields[_TOPIC]),
        "queue_id": list(fields[_QUEUE_ID]),
        "queue_offset": list(fields[_QUEUE_OFFSET]),
        "commitlog_offset": list(fields[_PHY]),
        "born_timestamp": list(fields[_BORN]),
        "store_timestamp": list(fields[_STORE]),
        "body_size": [len(b) for b in fields[_BODY]],
        "flags": list(fields[_FLAG]),
        "sys_flag": list(fields[_SYS_FLAG]),
        "tags": [p.get(tags_key) for p in props],
        "keys": [p.get(keys_key) for p in props],
        # the codec hands the same tuple back while the host repeats: one string per host
        "born_host": [hosts.get(h) or hosts.setdefault(h, f"{h[0]}:{h[1]}") for h in fields[_BORN_HOST]],
        "total_size": list(fields[_TOTAL]),
        "file": [path] * n,
        CORRUPT: [None] * n,
    }


def _problem_batch(problems: list[Problem]) -> pa.RecordBatch:
    columns: dict[str, list[Any]] = {name: [None] * len(problems) for name, _, _ in COLUMNS}
    columns["commitlog_offset"] = [p.offset for p in problems]
    columns["total_size"] = [p.skipped for p in problems]
    columns["file"] = [p.file for p in problems]
    columns[CORRUPT] = [p.reason for p in problems]
    return pa.RecordBatch.from_pydict(columns, schema=ARROW_SCHEMA)


def _int32(view: memoryview, at: int) -> int:
    return int.from_bytes(view[at : at + 4], "big", signed=True)


def read_partition(
    part: CommitLogPartition, check_crc: bool = True, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[list[tuple[Any, ...]] | Problem]:
    """The records starting in ``part`` as lists of ``record_fields`` tuples (a list per chunk), and
    a Problem per corrupt region the walk runs into (module docstring)."""
    if part.size == 0:
        return
    with open(part.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        view = memoryview(data)
        try:
            yield from _walk(part, data, view, check_crc, chunk_bytes)
        finally:
            view.release()


def _walk(
    part: CommitLogPartition, data: Any, view: memoryview, check_crc: bool, chunk_bytes: int
) -> Iterator[list[tuple[Any, ...]] | Problem]:
    size, base, end = min(part.size, len(data)), part.base, part.end
    pos: int | None = part.start if part.start == 0 else next_record(view, data, base, part.start, end)
    while pos is not None and pos < end:
        limit = min(size, pos + chunk_bytes)
        records, stop, outcome = record_fields(view[pos:limit])
        good = []
        at = pos
        bad: str | None = None
        for rec in records:
            if at >= end:
                break
            if rec[_PHY] != base + at:  # field 7: a stale record of an earlier file, or garbage
                bad = layout.CHECK_RESULTS[layout.CHECK_BAD_OFFSET]
                break
            if check_crc and body_crc(rec[_BODY]) != rec[_CRC] & 0x7FFFFFFF:  # field 3
                bad = layout.CHECK_RESULTS[layout.CHECK_BAD_CRC]
                break
            good.append(rec)
            at += rec[_TOTAL]
        if good:
            yield good
        if bad is None and at >= end:
            pos = at  # the records from here are the next partition's
            break
        if bad is None:
            if outcome == 1:
                pos = at
                continue
            if outcome == layout.CHECK_END_OF_FILE:
                return
            total = _int32(view, at) if at + 8 <= size else 0
            if outcome == layout.CHECK_EMPTY and (at + 8 > size or (total == 0 and _int32(view, at + 4) == 0)):
                return  # zeros: nothing written from here
            if outcome in (layout.CHECK_TRUNCATED, layout.CHECK_EMPTY) and limit < size and 0 < total <= size - at:
                # the chunk cut a record short, not the file: read on with room for it
                pos = at
                chunk_bytes = max(chunk_bytes, total)
                continue
            bad = layout.CHECK_RESULTS.get(outcome, str(outcome))
        problem, pos = _problem(view, data, part, at, end, bad)
        yield problem
    if pos is not None and end <= pos < size:
        # the walk ran past ``end`` into what the next partition's scan would skip unseen
        outcome = check_record(view[pos:], base + pos, check_crc)
        if outcome < 0 and outcome != layout.CHECK_EMPTY:
            next_end = min(size, end + (end - part.start))
            yield _problem(view, data, part, pos, next_end, layout.CHECK_RESULTS.get(outcome, str(outcome)))[0]


def _problem(
    view: memoryview, data: Any, part: CommitLogPartition, at: int, end: int, reason: str
) -> tuple[Problem, int | None]:
    """The corrupt region at ``at``, and the next record before ``end`` (None: none). The region
    runs to that record, else to its last byte that is not zero (a torn tail is followed by the
    unwritten rest of the file)."""
    resume = next_record(view, data, part.base, at + 1, end)
    stop = resume
    if stop is None:
        stop = end
        while stop > at:
            low = max(at, stop - ZERO_SCAN_BYTES)
            written = data[low:stop].rstrip(b"\0")
            if written:
                stop = low + len(written)
                break
            stop = low
    return Problem(part.path, part.base + at, max(stop - at, 1), reason), resume


class CommitLogReader(DataSourceReader):
    def __init__(self, paths: list[str], partition_bytes: int, check_crc: bool, permissive: bool):
        self.paths, self.partition_bytes = paths, partition_bytes
        self.check_crc, self.permissive = check_crc, permissive

    def partitions(self) -> Sequence[InputPartition]:
        files = [f for path in self.paths for f in commitlog_files(path)]
        return plan_partitions(files, self.partition_bytes)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        assert isinstance(partition, CommitLogPartition)
        hosts: dict[Any, str] = {}
        for item in read_partition(partition, self.check_crc):
            if isinstance(item, Problem):
                if self.permissive:
                    yield _problem_batch([item])
                continue
            yield pa.RecordBatch.from_pydict(_columns(item, partition.path, hosts), schema=ARROW_SCHEMA)


def _option_bool(options: dict[str, str], name: str, default: bool) -> bool:
    value = options.get(name)
    if value is None:
        return default
    if value.lower() not in ("true", "false"):
        raise CommitLogError(f"option {name}={value!r}: expected true or false")
    return value.lower() == "true"


class CommitLogDataSource(DataSource):
    """``spark.read.format("rmq-commitlog")``: ``load(STORE_DIR)`` (a store root or its commitlog/),
    or ``.option("paths", "DIR1,DIR2")`` for several brokers' stores. Options: ``partitionSize``
    (bytes), ``checkCRC`` (true|false), ``mode`` (PERMISSIVE|DROPMALFORMED)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        options = {k.lower(): v for k, v in self.options.items()}
        paths = [p for p in options.get("paths", "").split(",") if p] or [options.get("path", "")]
        if not paths[0]:
            raise CommitLogError("no store given: load(STORE_DIR) or option paths=DIR1,DIR2")
        for path in paths:
            store_commitlog_dir(path)  # a path without a CommitLog fails here, on the driver
        size = options.get("partitionsize", str(DEFAULT_PARTITION_BYTES))
        if not size.isdigit() or int(size) < layout.END_FILE_MIN_BLANK_LENGTH:
            raise CommitLogError(f"partitionSize={size!r}: expected bytes, a whole number >= 8")
        mode = options.get("mode", MODES[0]).upper()
        if mode not in MODES:
            raise CommitLogError(f"mode={mode!r}: expected one of {', '.join(MODES)}")
        return CommitLogReader(paths, int(size), _option_bool(options, "checkcrc", True), mode == MODES[0])


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("rmq-commitlog")`` known to ``spark``."""
    spark.dataSource.register(CommitLogDataSource)
