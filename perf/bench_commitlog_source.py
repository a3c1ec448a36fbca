"""The CommitLog data source's reading speed, against a plain Python loop over the same files with the
same codec (issue 25's acceptance 2).

    PYTHONPATH=src python perf/bench_commitlog_source.py STORE_DIR [--cores 1,2] [--partition-mib 64] [--no-crc]

Four figures over the CommitLog's records (MB = 10^6 bytes of records, TOTALSIZE summed; the
files' unwritten tails are not counted):

    loop: decode      read_partition over each whole file (record_fields, offset and CRC checks)
    loop: + arrow     the same and the Arrow batches the data source yields (CommitLogReader.read)
    spark local[N]    spark.read.format("rmq-commitlog").load(STORE).agg(count, sum(body_size)),
                      N executor cores; MB/s per core = MB/s / N

The files are read once before timing, so every figure is from the page cache (a store the broker
just wrote is there too); the disk's own speed is not what is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from rmq.perf.capacity import commitlog_source, read
from rmq.perf.capacity.commitlog_source import CommitLogPartition, CommitLogReader, commitlog_files, read_partition

MB = 1_000_000


def warm(files: list[commitlog_source.CommitLogFile]) -> None:
    for f in files:
        with open(f.path, "rb") as handle:
            while handle.read(16 << 20):
                pass


def whole_files(files: list[commitlog_source.CommitLogFile]) -> list[CommitLogPartition]:
    return [CommitLogPartition(f.path, f.base, f.size, 0, f.size) for f in files]


def loop_decode(files: list[commitlog_source.CommitLogFile], crc: bool) -> tuple[int, int, float]:
    start = time.perf_counter()
    records = size = 0
    for part in whole_files(files):
        for chunk in read_partition(part, crc):
            if isinstance(chunk, list):
                records += len(chunk)
                size += sum(rec[0] for rec in chunk)
    return records, size, time.perf_counter() - start


def loop_arrow(files: list[commitlog_source.CommitLogFile], crc: bool) -> tuple[int, float]:
    reader = CommitLogReader([], 1 << 62, crc, True)
    start = time.perf_counter()
    records = 0
    for part in whole_files(files):
        for batch in reader.read(part):
            records += batch.num_rows
    return records, time.perf_counter() - start


def spark_read(store: str, cores: int, partition_bytes: int, crc: bool) -> tuple[int, float]:
    spark = read.session(f"local[{cores}]", app_name="bench-commitlog-source")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        commitlog_source.register(spark)
        df = (
            spark.read.format(commitlog_source.NAME)
            .option("partitionSize", str(partition_bytes))
            .option("checkCRC", str(crc).lower())
            .load(store)
        )
        df.limit(1).collect()  # the Python workers started before the clock does
        start = time.perf_counter()
        row = df.groupBy().agg({"body_size": "sum", "*": "count"}).first()
        elapsed = time.perf_counter() - start
    finally:
        spark.stop()
    assert row is not None
    return int(row["count(1)"]), elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store")
    parser.add_argument("--cores", default="1,2", help="Spark local[N] runs, comma-separated")
    parser.add_argument("--partition-mib", type=int, default=64)
    parser.add_argument("--no-crc", action="store_true", help="skip the body CRC checks (checkCRC=false)")
    args = parser.parse_args()
    crc = not args.no_crc
    files = commitlog_files(args.store)
    warm(files)
    records, size, decode_s = loop_decode(files, crc)
    result = {
        "store": args.store,
        "files": len(files),
        "records": records,
        "record_mb": round(size / MB, 1),
        "crc": crc,
        "cpu": os.cpu_count(),
        "loop_decode_mb_s": round(size / MB / decode_s, 1),
    }
    arrow_records, arrow_s = loop_arrow(files, crc)
    assert arrow_records >= records
    result["loop_arrow_mb_s"] = round(size / MB / arrow_s, 1)
    for cores in (int(c) for c in args.cores.split(",")):
        spark_records, spark_s = spark_read(args.store, cores, args.partition_mib << 20, crc)
        assert spark_records >= records, (spark_records, records)
        result[f"spark_local{cores}_mb_s"] = round(size / MB / spark_s, 1)
        result[f"spark_local{cores}_mb_s_per_core"] = round(size / MB / spark_s / cores, 1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
