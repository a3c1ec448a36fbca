"""Reading perf logs with the explicit schema: every documented field typed, bad lines counted and
shown but never fatal, unknown fields ignored, nothing to read said plainly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pyspark.sql.types import StructType

from rmq.perf import log
from rmq.perf.capacity import read
from tests.helpers.perf_logs import cell, header, write_run

SAMPLES = Path(__file__).resolve().parents[3] / "spark" / "samples"


def test_the_schema_names_every_field_the_perf_log_documents():
    schema = read.PERF_LOG_SCHEMA
    top = set(schema.fieldNames())
    assert set(log.HEADER_FIELDS + log.INTERVAL_FIELDS + log.SUMMARY_EXTRA_FIELDS) <= top
    nested = {f.name: f.dataType for f in schema.fields if isinstance(f.dataType, StructType)}
    assert set(nested["cell"].fieldNames()) == set(log.CELL_FIELDS)
    assert set(nested["env"].fieldNames()) == set(log.ENV_FIELDS)
    assert set(nested["broker"].fieldNames()) == set(log.BROKER_FIELDS)
    assert set(nested["latency"].fieldNames()) == {"scheme", "index", "count"}


def test_the_committed_samples_read_whole(spark):
    lines = sum(1 for f in SAMPLES.glob(f"*{log.SUFFIX}") for _ in f.open())
    records, bad = read.read_perf_logs(spark, [SAMPLES])
    assert bad.total == 0
    assert records.count() == lines
    kinds = {r["kind"]: r["count"] for r in records.groupBy("kind").count().collect()}
    assert kinds[log.KIND_HEADER] == 2 and kinds[log.KIND_INTERVAL] == kinds[log.KIND_SUMMARY]


def _one_cell_log(tmp_path: Path) -> Path:
    rng = np.random.default_rng(1)
    return write_run(tmp_path, "run-a", [(cell(in_flight=4), [rng.integers(100, 900, 500) for _ in range(3)])])


def test_corrupt_lines_are_counted_and_shown_and_the_rest_is_read(spark, tmp_path):
    path = _one_cell_log(tmp_path)
    good = path.read_text().splitlines()
    interval = json.loads(good[1])
    wrong_type = {**interval, "acked": "many"}
    no_latency = {k: v for k, v in interval.items() if k != "latency"}
    lopsided = {**interval, "latency": {**interval["latency"], "count": [1]}}
    unknown_kind = {**interval, "kind": "mystery"}
    with_extra = {**interval, "a_field_from_schema_2": {"x": 1}}
    bad_lines = [
        '{"kind": "interval", "run_id": "run-a", "cell": {',  # a run killed mid-line
        "not json at all",
        json.dumps(wrong_type),
        json.dumps(no_latency),
        json.dumps(lopsided),
        json.dumps(unknown_kind),
    ]
    path.write_text("\n".join([*good[:2], *bad_lines, json.dumps(with_extra), *good[2:]]) + "\n\n")
    records, bad = read.read_perf_logs(spark, [tmp_path])
    assert bad.total == len(bad_lines)
    assert bad.by_file == {f"file://{path}": len(bad_lines)}
    assert any("not json at all" in e["line"] for e in bad.examples)
    assert records.count() == len(good) + 1  # the line with an unknown field is a good record


def test_an_empty_log_directory_is_a_clear_error(spark, tmp_path):
    with pytest.raises(read.NoPerfLogs, match=r"no perf logs \(\*\.perf\.jsonl\) in .*rmq-perf"):
        read.read_perf_logs(spark, [tmp_path])


def test_a_log_of_nothing_but_bad_lines_is_a_clear_error(spark, tmp_path):
    (tmp_path / f"broken{log.SUFFIX}").write_text("garbage\n{}\n")
    with pytest.raises(read.NoPerfLogs, match=r"no interval or summary record in 1 perf log file\(s\) \(2 bad lines\)"):
        read.read_perf_logs(spark, [tmp_path])


def test_a_header_alone_is_nothing_to_plan_from(spark, tmp_path):
    with log.PerfLogWriter(tmp_path, "run-h") as writer:
        writer.write(header("run-h"))
    with pytest.raises(read.NoPerfLogs, match="no interval or summary record"):
        read.read_perf_logs(spark, [tmp_path])


def test_log_files_are_found_under_subdirectories_and_by_name(tmp_path):
    nested = tmp_path / "day1" / "matrix"
    path = _one_cell_log(nested)
    (nested / "notes.txt").write_text("not a perf log")
    assert read.perf_log_files([tmp_path]) == [str(path)]
    assert read.perf_log_files([path]) == [str(path)]
    with pytest.raises(read.NoPerfLogs, match="does not exist"):
        read.perf_log_files([tmp_path / "nowhere"])
