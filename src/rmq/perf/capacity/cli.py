"""``rmq-capacity LOGDIR... --out DIR``: perf logs in, a capacity plan and its report out;
``rmq-capacity cluster up|down|status``: a Spark standalone cluster on this machine to run it on
(``rmq.perf.capacity.spark_cluster``; a log directory named ``cluster`` is given as ``./cluster``).

Exit codes: 0 written; 1 nothing to plan from (no perf log, or none with a usable record: the message
says which), or a cluster that would not start or is not running; 2 a usage error (a bad flag, a
workload field missing or out of range).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml

from rmq.perf import log
from rmq.perf.capacity.plan import FLUSHES, ROLES, Workload, WorkloadError
from rmq.perf.procs import LOOPBACK

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from rmq.perf.capacity.report import Capacity

# what --from-store derived, beside capacity.json
FROM_STORE_JSON = "from_store.json"
# workload fields that have a flag, and their flags' names
WORKLOAD_FLAGS = (
    "peak_rate",
    "avg_rate",
    "size",
    "retention_hours",
    "slo_p99_ms",
    "role",
    "flush",
    "groups",
    "headroom",
    "topic",
    "tags",
    "keys",
    "disk_bytes",
    "network_mb_per_s",
)


def load_workload(path: str | None, flags: dict[str, Any], base: dict[str, Any] | None = None) -> Workload:
    """The workload of a YAML file, flags laid over it (both over ``base``: what --from-store
    derived); WorkloadError saying what is wrong."""
    data: dict[str, Any] = dict(base or {})
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text())
        except (OSError, yaml.YAMLError) as e:
            raise WorkloadError(f"cannot read workload {path}: {e}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise WorkloadError(f"{path}: expected a mapping of workload fields, got {type(loaded).__name__}")
        data.update(loaded or {})
    data.update({k: v for k, v in flags.items() if v is not None})
    if not {"peak_rate", "size", "slo_p99_ms"} & {k.replace("-", "_") for k in data}:
        raise WorkloadError("a workload is needed: --workload FILE.yaml, or --peak-rate, --size and --slo-p99-ms")
    return Workload.from_mapping(data, source=path or "flags")


class _PlanOrCluster(click.Command):
    """The plan command, which hands ``cluster ...`` to the cluster commands: one console script."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args[:1] == ["cluster"]:
            cluster.main(args[1:], prog_name=f"{ctx.info_name or 'rmq-capacity'} cluster")  # exits
        return super().parse_args(ctx, args)


def _say(quiet: bool, text: str) -> None:
    if not quiet:
        click.echo(text, err=True)


@click.command(cls=_PlanOrCluster, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("logdirs", nargs=-1, type=click.Path(exists=True))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="directory to write into")
@click.option("--master", help="Spark master URL (default local[*], or spark-submit's --master)")
@click.option("--workload", "workload_file", type=click.Path(exists=True, dir_okay=False), help="workload YAML")
@click.option("--peak-rate", type=float, help="peak msgs/s")
@click.option("--avg-rate", type=float, help="average msgs/s (sizes the disk; default: the peak)")
@click.option("--size", type=int, help="message body bytes")
@click.option("--retention-hours", type=float, help="hours messages are kept (default 72)")
@click.option("--slo-p99-ms", type=float, help="p99 send latency to stay within (ms)")
@click.option("--role", type=click.Choice(ROLES), help="least replication: standalone, async_master, sync_master")
@click.option("--flush", type=click.Choice(FLUSHES), help="least flushing (default ASYNC_FLUSH)")
@click.option("--groups", type=int, help="consumer groups reading every message (default 1)")
@click.option("--headroom", type=float, help="per cent above the peak each set must carry (default 30)")
@click.option("--topic", help="topic name (its length is in every record)")
@click.option("--tags", help="tags of each message")
@click.option("--keys", type=int, help="KEYS per message (each indexed)")
@click.option("--disk-bytes", help="a broker machine's disk: bytes, or 800g (binary units); sizes the broker count "
              "so that a broker's files stay below diskMaxUsedSpaceRatio")  # fmt: skip
@click.option("--network-mb-per-s", type=float, help="a machine's network each way, MB/s (10^6 B; 1 GbE = 125)")
@click.option(
    "--from-store",
    "stores",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    help="derive the workload from a broker's store (repeat for a cluster's brokers): rates, sizes, fan-out",
)
@click.option(
    "--peak-window",
    type=click.IntRange(1),
    help="--from-store: seconds the peak rate is averaged over (default 10, RocketMQ's shortest putTps window)",
)
@click.option("-q", "--quiet", is_flag=True, help="print only the output paths")
def main(
    logdirs: tuple[str, ...],
    out: str,
    master: str | None,
    workload_file: str | None,
    quiet: bool,
    stores: tuple[str, ...],
    peak_window: int | None,
    **flags: Any,
) -> None:
    """Read perf logs (rmq-perf's *.perf.jsonl under each LOGDIR), model each mode's throughput and
    latency, plan brokers and disk for a workload; write capacity.json, report.html and PNG charts.
    With --from-store the workload comes from brokers' stores (flags and --workload override it);
    with no LOGDIR it writes only what it derived (from_store.json).

    rmq-capacity cluster up|down|status: a Spark standalone cluster on this machine to run it on."""
    if not logdirs and not stores:
        raise click.UsageError("nothing to read: give LOGDIR... (perf logs), --from-store STORE_DIR, or both")
    derived = _derive_from_stores(stores, master, peak_window, Path(out), quiet, bool(logdirs)) if stores else None
    if not logdirs:
        click.echo(str(Path(out) / FROM_STORE_JSON))
        return
    try:
        workload = load_workload(workload_file, {k: flags[k] for k in WORKLOAD_FLAGS}, derived)
    except WorkloadError as e:
        raise click.UsageError(str(e)) from None
    # Spark and the model load only once the command line is known good: a JVM takes seconds
    from rmq.perf.capacity import read, report

    started = time.monotonic()
    try:
        files = read.require_perf_log_files(logdirs)
    except read.NoPerfLogs as e:
        click.echo(f"Error: {e}", err=True)
        sys.exit(1)
    where = master or "local[*], or spark-submit's --master"
    _say(quiet, f"reading {len(files)} perf log file(s) with Spark ({where})")
    spark = read.session(master)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        capacity = plan_logs(spark, logdirs, workload, lambda text: _say(quiet, text))
    except read.NoPerfLogs as e:
        click.echo(f"Error: {e}", err=True)
        sys.exit(1)
    finally:
        spark.stop()
    if derived is not None:
        inputs = {**capacity.inputs, "from_store": {"file": FROM_STORE_JSON, "workload": derived}}
        capacity = dataclasses.replace(capacity, inputs=inputs)
    rec = capacity.plan.recommended
    paths = report.write_outputs(Path(out), capacity)
    for note in capacity.inputs["notes"]:
        _say(quiet, f"note: {note}")
    if rec is not None and rec.throughput is not None:
        _say(
            quiet,
            f"{rec.name}: {rec.broker_sets} broker set(s) ({rec.machines} machine(s)), "
            f"{rec.throughput.msgs_per_s:,.0f} msgs/s per set at p99 <= {workload.slo_p99_ms:g} ms; "
            f"{rec.binding} binds",
        )
    else:
        _say(quiet, f"no mode meets p99 <= {workload.slo_p99_ms:g} ms at {workload.size} B in these measurements")
    _say(quiet, f"done in {time.monotonic() - started:.0f} s")
    for path in paths.values():
        click.echo(str(path))


def plan_logs(spark: SparkSession, logdirs: Sequence[str], workload: Workload, say: Callable[[str], None]) -> Capacity:
    """The perf logs (and broker stats logs) under ``logdirs`` read and modelled with ``spark``, and
    the plan for ``workload``: what ``main`` writes out. NoPerfLogs when there is nothing to plan from."""
    from rmq.perf.capacity import model, read, report
    from rmq.perf.capacity.plan import make_plan

    files = read.require_perf_log_files(logdirs)
    records, bad = read.read_perf_logs(spark, logdirs)
    if bad.total:
        say(f"{bad.total} bad line(s) skipped: " + ", ".join(f"{f} {n}" for f, n in bad.by_file.items()))
    headers = records.filter(records.kind == log.KIND_HEADER).select("run_id", "env.*").collect()
    points = model.points(records)
    broker_stats: list[dict[str, Any]] = []
    stats_bad = read.BadLines(0, {}, [])
    if stats_files := read.stats_log_files(logdirs):
        stats, stats_bad = read.read_stats_logs(spark, stats_files)
        broker_stats = model.broker_stats(stats)
        say(f"read {len(stats_files)} broker stats log(s), {stats_bad.total} bad line(s)")
    saturations = [s for c in model.curves(points).values() if (s := model.saturation(c, workload.slo_us))]
    fits = model.size_fits(saturations)
    measured = {(p.flush, p.role) for p in points if p.system == "rmq" and p.batch == 1}
    plan = make_plan(workload, saturations, fits, measured)
    notes = []
    rec = plan.recommended
    if rec is not None and rec.throughput is not None and not any(p.rate for p in points):
        notes.append(
            f"every measurement is closed loop (a fixed number in flight): an open-loop load at "
            f"{rec.throughput.msgs_per_s:,.0f} msgs/s queues behind any stall; check it with "
            f"rmq-perf producer --rate {rec.throughput.msgs_per_s:.0f} before relying on it"
        )
    if saturated := sorted({c for p in points if p.generator_saturated for c in p.cell_ids}):
        notes.append(f"the load generator was the bottleneck in {len(saturated)} cell(s): {', '.join(saturated)}")
    runs = {r["run_id"]: r.asDict() for r in headers}
    for p in points:
        for run_id in p.run_ids:
            runs.setdefault(run_id, {"run_id": run_id})
    inputs = {"files": files, "runs": sorted(runs.values(), key=lambda r: r["run_id"]), "bad_lines": bad.to_json()}
    inputs["notes"] = notes
    inputs["stats_logs"] = {"files": stats_files, "bad_lines": stats_bad.to_json()}
    return report.Capacity(points, saturations, fits, plan, inputs, broker_stats)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cluster() -> None:
    """A Spark standalone cluster on this machine (a master and workers of the pip-installed PySpark)
    to run rmq-capacity on: rmq-capacity LOGDIR --master URL, with URL what ``up`` prints."""


_dir_option = click.option(
    "--dir", "root", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="where pid files, logs, work and conf go (default: a directory under the temp dir)",
)  # fmt: skip


@cluster.command("up")
@_dir_option
@click.option("--host", default=LOOPBACK, show_default=True, help="the address every daemon binds")
@click.option("--port", type=int, default=7077, show_default=True, help="the master's port")
@click.option("--webui-port", type=int, default=8080, show_default=True, help="the master's web UI port")
@click.option("--workers", type=click.IntRange(1), default=2, show_default=True)
@click.option("--cores", type=click.IntRange(1), default=1, show_default=True, help="cores of each worker")
@click.option("--memory", default="1g", show_default=True, help="memory of each worker (its executor's)")
def cluster_up(root: Path | None, host: str, port: int, webui_port: int, workers: int, cores: int, memory: str) -> None:
    """Start a master and WORKERS workers; print the master URL once every worker is ALIVE."""
    from rmq.perf.capacity.spark_cluster import SparkCluster, SparkClusterError, default_dir

    spark = SparkCluster(root or default_dir(), port, webui_port, workers, cores, memory, host)
    try:
        spark.start()
    except SparkClusterError as e:
        click.echo(f"Error: {e}", err=True)
        sys.exit(1)
    click.echo(
        f"{workers} worker(s) of {cores} core(s) and {memory} ALIVE; web UI http://{host}:{webui_port}/", err=True
    )
    click.echo(f"run: rmq-capacity LOGDIR --out DIR --master {spark.master_url} (SPARK_CONF_DIR={spark.conf_dir})",
               err=True)  # fmt: skip
    click.echo(spark.master_url)


@cluster.command("down")
@_dir_option
def cluster_down(root: Path | None) -> None:
    """Stop the processes ``up`` started (by their pid files)."""
    from rmq.perf.capacity.spark_cluster import SparkCluster, default_dir

    stopped = SparkCluster(root or default_dir()).stop()
    click.echo(f"stopped {', '.join(stopped)}" if stopped else "nothing was running", err=True)


@cluster.command("status")
@_dir_option
def cluster_status(root: Path | None) -> None:
    """The master URL and each process; exit 1 when the cluster is not running."""
    from rmq.perf.capacity.spark_cluster import SparkCluster, default_dir

    spark = SparkCluster(root or default_dir())
    running = spark.running_pids()
    for role, pid in spark.pid_files().items():
        click.echo(f"{role}: pid {pid} {'running' if role in running else 'not running'}")
    if "master" not in running:
        click.echo("not running", err=True)
        sys.exit(1)
    master = spark.master_json() or {}
    alive = sum(1 for w in master.get("workers", []) if w.get("state") == "ALIVE")
    click.echo(f"{spark.master_url_file()} {master.get('status', 'not answering')}, {alive} worker(s) ALIVE")


def _derive_from_stores(
    stores: tuple[str, ...], master: str | None, peak_window: int | None, out: Path, quiet: bool, keep_session: bool
) -> dict[str, Any]:
    """The workload fields the stores' traffic gives; from_store.json (what they came from) in ``out``.
    ``keep_session``: the Spark session stays for the perf logs (one JVM start, not two)."""
    from rmq.perf.capacity import from_store, read
    from rmq.perf.capacity.commitlog_source import CommitLogError, store_commitlog_dir

    window = peak_window or from_store.DEFAULT_PEAK_WINDOW_S
    try:
        for store in stores:  # before a JVM starts: a wrong path is said in one line, at once
            store_commitlog_dir(store)
    except CommitLogError as e:
        click.echo(f"Error: {e}", err=True)
        sys.exit(1)
    _say(quiet, f"reading {len(stores)} store(s) with Spark ({master or 'local[*]'})")
    spark = read.session(master)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        traffic = from_store.store_traffic(spark, stores)
        fields = traffic.workload_fields(window)
    except ValueError as e:  # no producer's message in the stores
        spark.stop()
        click.echo(f"Error: {e}", err=True)
        sys.exit(1)
    if not keep_session:
        spark.stop()
    out.mkdir(parents=True, exist_ok=True)
    from_store.write_summary(out / FROM_STORE_JSON, traffic, window)
    _say(quiet, from_store.describe(traffic, window))
    return fields


if __name__ == "__main__":
    main()
