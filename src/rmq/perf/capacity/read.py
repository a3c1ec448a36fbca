"""Perf logs into Spark, with an explicit schema: every field ``rmq.perf.log`` documents, typed.

Broker stats logs (``stats.log``, RocketMQ's per-topic puts and per-group gets) are read the same
way with a schema of their own.

Lines that are not records of that schema (not JSON, a field of the wrong type, an unknown kind, a
required field missing or null, a histogram whose index and count arrays differ in length) are
counted per file and a few are kept as examples; they never stop a run. Fields the schema does not
know are ignored, as ``rmq.perf.log`` asks of every reader.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from rmq.perf import log
from rmq.perf.histogram import SCHEME

CORRUPT = "_corrupt_record"
SOURCE = "_source"
# the broker's stats log, <storePathRootDir>/logs/stats.log (format: rmq.broker.stats_log, which a
# tool may not import; the schema below is written from its docstring)
STATS_LOG_NAME = "stats.log"
STATS_TOPIC_PUT = "topic_put"
STATS_GROUP_GET = "group_get"


def _struct(fields: dict[str, Any]) -> StructType:
    return StructType([StructField(name, kind, nullable=True) for name, kind in fields.items()])


HISTOGRAM_SCHEMA = _struct({"scheme": StringType(), "index": ArrayType(LongType()), "count": ArrayType(LongType())})
CELL_SCHEMA = _struct(
    {
        "system": StringType(),
        "flush": StringType(),
        "role": StringType(),
        "size": LongType(),
        "in_flight": LongType(),
        "connections": LongType(),
        "batch": LongType(),
        "rate": LongType(),
        "peer_mode": StringType(),
        "repeat": LongType(),
    }
)
ENV_SCHEMA = _struct(
    {
        "cpu_model": StringType(),
        "cores": LongType(),
        "mem_bytes": LongType(),
        "disk": StringType(),
        "kernel": StringType(),
        "python": StringType(),
        "rmq_version": StringType(),
        "git_rev": StringType(),
    }
)
BROKER_SCHEMA = _struct(
    {
        "cpu_pct": DoubleType(),
        "rss_bytes": LongType(),
        "flushes_per_s": DoubleType(),
        "msgs_per_flush": DoubleType(),
        "repl_lag_bytes": LongType(),
        "repl_lag_ms": DoubleType(),
        "disk_bytes_written": LongType(),  # the store's block device, every writer on it (rmq.perf.log)
    }
)
GENERATOR_SCHEMA = _struct({"cpu_pct": DoubleType(), "processes": LongType(), "saturated": BooleanType()})
# header, interval and summary records in one schema: a line has the fields of its kind
PERF_LOG_SCHEMA = _struct(
    {
        "kind": StringType(),
        "schema": LongType(),
        "run_id": StringType(),
        "started": DoubleType(),
        "argv": ArrayType(StringType()),
        "env": ENV_SCHEMA,
        "cell": CELL_SCHEMA,
        "cell_id": StringType(),
        "t_start": DoubleType(),
        "t_end": DoubleType(),
        "sent": LongType(),
        "acked": LongType(),
        "failed": MapType(StringType(), LongType()),
        "msgs_per_s": DoubleType(),
        "mb_per_s": DoubleType(),
        "latency": HISTOGRAM_SCHEMA,
        "consumed": LongType(),
        "consume_lag": LongType(),
        "broker": BROKER_SCHEMA,
        "generator": GENERATOR_SCHEMA,
        "duration_s": DoubleType(),
        "p50_us": DoubleType(),
        "p99_us": DoubleType(),
        "p999_us": DoubleType(),
        "max_us": DoubleType(),
        CORRUPT: StringType(),
    }
)

STATS_LOG_SCHEMA = _struct(
    {
        "kind": StringType(),
        "broker": StringType(),
        "t_start": DoubleType(),
        "t_end": DoubleType(),
        "topic": StringType(),
        "put_nums": LongType(),
        "put_size": LongType(),
        "put_tps": DoubleType(),
        "put_latency_ms": _struct(
            {"bounds": ArrayType(LongType()), "counts": ArrayType(LongType()), "sampled": LongType()}
        ),
        "group": StringType(),
        "get_nums": LongType(),
        "get_size": LongType(),
        "get_tps": DoubleType(),
        CORRUPT: StringType(),
    }
)
STATS_NOT_NULL = {
    STATS_TOPIC_PUT: ("broker", "t_start", "t_end", "topic", "put_nums", "put_size"),
    STATS_GROUP_GET: ("broker", "t_start", "t_end", "group", "topic", "get_nums", "get_size"),
}

# what the pipeline needs of a record to use it; rmq.perf.log.REQUIRED says which keys a writer must
# write, and a reader may only insist on values that may not be null
NOT_NULL = {
    log.KIND_HEADER: ("run_id",),
    log.KIND_INTERVAL: ("run_id", "cell_id", "t_start", "t_end", "acked", "latency"),
    log.KIND_SUMMARY: ("run_id", "cell_id", "t_start", "t_end", "acked", "latency"),
}
CELL_NOT_NULL = ("system", "flush", "role", "size", "in_flight", "connections", "batch", "repeat")


class NoPerfLogs(Exception):
    """Nothing to read: no perf-log files, or none with a usable record."""


@dataclasses.dataclass
class BadLines:
    """Lines that were not records: how many, per file, and a few of them to show."""

    total: int
    by_file: dict[str, int]
    examples: list[dict[str, str]]

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


DEFAULT_MASTER = "local[*]"


def session(master: str | None = None, app_name: str = "rmq-capacity") -> SparkSession:
    """A Spark session for the pipeline: no UI, few shuffle partitions (the data is small). With no
    ``master``: spark-submit's when it launched us (it passes the gateway's port), else local[*]."""
    builder = SparkSession.builder
    if master is not None or "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = master or DEFAULT_MASTER
        builder = builder.master(master)
        if master.startswith("local"):  # one process: no port needs to face the network
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    return (
        builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )


def perf_log_files(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Every ``*.perf.jsonl`` under each path (a directory, searched recursively, or a file)."""
    found: list[str] = []
    for path in map(Path, paths):
        if path.is_dir():
            found.extend(str(p) for p in sorted(path.rglob(f"*{log.SUFFIX}")) if p.is_file())
        elif path.is_file():
            found.append(str(path))
        else:
            raise NoPerfLogs(f"{path} does not exist")
    return found


def require_perf_log_files(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """``perf_log_files``, or NoPerfLogs when there are none."""
    paths = list(paths)
    files = perf_log_files(paths)
    if not files:
        where = ", ".join(map(str, paths))
        raise NoPerfLogs(f"no perf logs (*{log.SUFFIX}) in {where}: rmq-perf matrix --out DIR writes them")
    return files


def _all(conditions: list[Column]) -> Column:
    result = conditions[0]
    for condition in conditions[1:]:
        result = result & condition
    return F.coalesce(result, F.lit(False))


def _valid(needed: dict[str, list[Column]]) -> Column:
    """True for a line that parsed, is of a known kind and has what that kind needs."""
    kind = F.col("kind")
    ok = F.col(CORRUPT).isNull() & kind.isin(*needed)
    for name, conditions in needed.items():
        ok = ok & (~(kind == F.lit(name)) | _all(conditions))
    return F.coalesce(ok, F.lit(False))


def _perf_log_needs() -> dict[str, list[Column]]:
    needed = {}
    for kind, fields in NOT_NULL.items():
        conditions = [F.col(f).isNotNull() for f in fields]
        if kind != log.KIND_HEADER:
            conditions += [F.col(f"cell.{f}").isNotNull() for f in CELL_NOT_NULL]
            conditions += [
                F.col("latency.scheme") == F.lit(SCHEME),
                F.size("latency.index") == F.size("latency.count"),
            ]
        needed[kind] = conditions
    return needed


def _read_json_lines(
    spark: SparkSession, files: list[str], schema: StructType, needed: dict[str, list[Column]], examples: int
) -> tuple[DataFrame, BadLines, int]:
    """The valid records of ``files`` read with ``schema`` (and ``_source``), the bad lines, and how
    many valid records are not headers."""
    raw = (
        spark.read.schema(schema)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json(files)
        .withColumn(SOURCE, F.input_file_name())
        .withColumn("_valid", _valid(needed))
        .cache()  # Spark refuses a query of the corrupt-record column alone on an uncached read
    )
    # one pass counts both, per file: every query is a Spark job (or several), seconds on a cluster
    counts = raw.groupBy(SOURCE).agg(
        F.count(F.when(~F.col("_valid"), 1)).alias("bad"),
        F.count(F.when(F.col("_valid") & (F.col("kind") != F.lit(log.KIND_HEADER)), 1)).alias("usable"),
    )
    by_file, usable = {}, 0
    for row in counts.collect():
        usable += row["usable"]
        if row["bad"]:
            by_file[row[SOURCE]] = row["bad"]
    bad = raw.filter(~F.col("_valid"))
    shown = [
        {"file": row[SOURCE], "line": (row[CORRUPT] or _describe(row.asDict(recursive=True)))[:240]}
        for row in (bad.limit(examples).collect() if by_file else ())
    ]
    good = raw.filter(F.col("_valid")).drop(CORRUPT, "_valid")
    return good, BadLines(total=sum(by_file.values()), by_file=by_file, examples=shown), usable


def read_perf_logs(
    spark: SparkSession, paths: Iterable[str | os.PathLike[str]], examples: int = 5
) -> tuple[DataFrame, BadLines]:
    """The usable records of every perf log under ``paths`` (with ``_source``, the file each came
    from), and the lines that were not records. NoPerfLogs when there is no file or no record."""
    files = require_perf_log_files(paths)
    good, bad, usable = _read_json_lines(spark, files, PERF_LOG_SCHEMA, _perf_log_needs(), examples)
    if not usable:
        raise NoPerfLogs(
            f"no interval or summary record in {len(files)} perf log file(s)"
            + (f" ({bad.total} bad lines)" if bad.total else "")
        )
    return good, bad


def _describe(record: dict[str, Any]) -> str:
    """A line that parsed but lacks what its kind needs, shown by its non-null fields."""
    fields = {k: v for k, v in record.items() if v is not None and not k.startswith("_")}
    return f"(parsed, but not a usable {record.get('kind') or 'record'}): {fields}"


def stats_log_files(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Every broker stats log (``stats.log``, as a broker writes it in ``<store>/logs``) under ``paths``."""
    return [str(p) for path in map(Path, paths) if path.is_dir() for p in sorted(path.rglob(STATS_LOG_NAME))]


def read_stats_logs(spark: SparkSession, files: list[str], examples: int = 5) -> tuple[DataFrame, BadLines]:
    """The usable records of broker stats logs, and the lines that were not records."""
    needed = {kind: [F.col(f).isNotNull() for f in fields] for kind, fields in STATS_NOT_NULL.items()}
    good, bad, _ = _read_json_lines(spark, files, STATS_LOG_SCHEMA, needed, examples)
    return good, bad
