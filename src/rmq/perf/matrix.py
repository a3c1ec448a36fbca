"""``rmq-perf matrix``: every cell of flushDiskType x role x size x load x batch on fresh
processes, the peers at equal concurrency beside them, one perf log, one summary table.

A load is an in-flight count (closed loop: as fast as answers come back) or a target rate (open
loop: ``--rate``, msgs/s, at most ``--rate-in-flight`` requests outstanding, latency from each
request's due time). Open-loop cells are what a capacity plan should rest on: a closed-loop cell
slows its sender down when the broker stalls and so hides the stall from its percentiles.

A cell: start a name server, a master and (replicated roles) a slave, each with a store of its own;
run the producer load for ``warmup`` seconds unrecorded, then ``duration`` seconds recorded while
the master's CPU, RSS, disk writes, flush rounds and replication lag are sampled every interval;
stop everything. Repeats run the whole list again (cell A, B, C, A, B, C, ...) so that a drift of
the machine hits every cell alike. Peers (``rmq.perf.peers``) get the standalone cells of the flush
modes they have an equivalent of, batch 1.

The table has a row per cell (``rate``: the msgs/s an open-loop cell offered; repeats merged: the
median msgs/s, percentiles of the summed histograms) and its ratio to the rmq ASYNC_FLUSH standalone
cell of the same size, load and batch; a ``*`` after the generator CPU marks a run whose load
generator was saturated, and ``gen us/msg`` is the generator's own CPU per acked message (the
compiled engine's by default, the same loop for rmq and Redis: the two figures differ by the
protocols, not by the tooling).
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from rmq.perf.cluster import BrokerSampler, RmqCell
from rmq.perf.env import environment
from rmq.perf.histogram import Histogram
from rmq.perf.load import LoadSpec, default_engine
from rmq.perf.log import KIND_HEADER, SCHEMA_VERSION, PerfLogWriter
from rmq.perf.peers import PeerServer, available, flushes, peer_mode
from rmq.perf.producer import make_cell, run_producer

TOPIC = "RmqPerfTopic"


@dataclasses.dataclass(frozen=True)
class Planned:
    system: str
    flush: str
    role: str
    size: int
    in_flight: int
    batch: int
    repeat: int
    rate: int = 0  # msgs/s offered; 0: closed loop


@dataclasses.dataclass
class MatrixOptions:
    flushes: list[str]
    roles: list[str]
    sizes: list[int]
    in_flights: list[int]
    batches: list[int]
    duration: float
    warmup: float
    repeat: int
    workers: int
    peers: list[str]
    out: Path
    interval: float = 1.0
    rates: list[int] = dataclasses.field(default_factory=list)  # open-loop cells, msgs/s
    rate_in_flight: int = 64  # the most an open-loop cell keeps outstanding
    engine: str = dataclasses.field(default_factory=default_engine)  # the load generator's (rmq.perf.load)

    def loads(self) -> list[tuple[int, int]]:
        """(in-flight, rate) of every load: the closed-loop cells, then the open-loop ones."""
        return [(n, 0) for n in self.in_flights] + [(self.rate_in_flight, r) for r in self.rates]


def new_run_id(kind: str) -> str:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{kind}-{secrets.token_hex(3)}"


def header(run_id: str, store_dir: str) -> dict[str, Any]:
    return {
        "kind": KIND_HEADER,
        "schema": SCHEMA_VERSION,
        "run_id": run_id,
        "started": round(time.time(), 3),
        "argv": sys.argv,
        "env": environment(store_dir),
    }


def plan(options: MatrixOptions, peers: list[str]) -> list[Planned]:
    """Every run, in the order they go: repeat by repeat, rmq cells then each peer's."""
    runs = []
    for repeat in range(options.repeat):
        for flush, role, size, (in_flight, rate), batch in itertools.product(
            options.flushes, options.roles, options.sizes, options.loads(), options.batches
        ):
            runs.append(Planned("rmq", flush, role, size, in_flight, batch, repeat, rate))
        for peer in peers:
            for flush, size, (in_flight, rate) in itertools.product(options.flushes, options.sizes, options.loads()):
                if flush in flushes(peer) and 1 in options.batches:
                    runs.append(Planned(peer, flush, "standalone", size, in_flight, 1, repeat, rate))
    return runs


def run_cell(p: Planned, options: MatrixOptions, writer: PerfLogWriter) -> dict[str, Any]:
    """Fresh processes for one run, the load, the summary record."""

    def spec(host: str, port: int) -> LoadSpec:
        return LoadSpec(
            system=p.system,
            host=host,
            port=port,
            topic=TOPIC,
            size=p.size,
            batch=p.batch,
            in_flight=p.in_flight,
            workers=options.workers,
            rate=float(p.rate),
            duration=options.duration,
            warmup=options.warmup,
            interval=options.interval,
            engine=options.engine,
        )

    if p.system == "rmq":
        with RmqCell(p.flush, p.role, TOPIC) as cell:
            host, port = cell.master_addr.rsplit(":", 1)
            s = spec(host, int(port))
            assert cell.master is not None
            sampler = BrokerSampler(
                cell.master.pid, cell.namesrv_addr, cell.master_addr, p.role != "standalone", cell.root
            )
            try:
                return run_producer(s, make_cell(s, p.flush, p.role, None, p.repeat), writer, sampler)
            finally:
                sampler.close()
    with PeerServer(p.system, p.flush) as server:
        s = spec("127.0.0.1", server.port)
        cell_fields = make_cell(s, p.flush, p.role, peer_mode(p.system, p.flush), p.repeat)
        return run_producer(s, cell_fields, writer, server.sampler())


def run_matrix(options: MatrixOptions, notice: Callable[[str], None]) -> tuple[Path, list[dict[str, Any]]]:
    """Run every planned cell; (the perf log's path, the summary records)."""
    peers = []
    for peer in options.peers:
        why = available(peer)
        if why:
            notice(why)
        else:
            peers.append(peer)
    runs = plan(options, peers)
    run_id = new_run_id("matrix")
    summaries: list[dict[str, Any]] = []
    started = time.monotonic()
    with PerfLogWriter(options.out, run_id) as writer:
        writer.write(header(run_id, tempfile.gettempdir()))
        each = f"{options.duration:g} s (+{options.warmup:g} s warm-up)"
        notice(f"rmq-perf matrix: {len(runs)} runs of {each}, log {writer.path}")
        with click.progressbar(
            runs,
            label="cells",
            show_eta=True,
            show_pos=True,
            file=sys.stderr,
            item_show_func=lambda p: _label(p) if p else "",
        ) as bar:
            for p in bar:
                try:
                    summaries.append(run_cell(p, options, writer))
                except Exception as e:  # one broken cell must not lose the others' figures
                    notice(f"\n{_label(p)}: failed: {type(e).__name__}: {e}")
        notice(f"{len(summaries)} of {len(runs)} runs in {time.monotonic() - started:.0f} s; log {writer.path}")
        return writer.path, summaries


def _label(p: Planned) -> str:
    load = f"{p.rate}/s" if p.rate else f"if{p.in_flight}"
    return f"{p.system} {p.flush} {p.role} {p.size}B {load} b{p.batch} r{p.repeat}"


def _key(cell: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(cell[k] for k in ("system", "flush", "role", "size", "in_flight", "connections", "batch", "rate"))


def _load_key(cell: dict[str, Any]) -> tuple[Any, ...]:
    """What a peer's cell must share with an rmq cell to be compared with it."""
    return tuple(cell[k] for k in ("flush", "size", "in_flight", "connections", "batch", "rate"))


def peer_ratios(summaries: list[dict[str, Any]]) -> dict[tuple[tuple[Any, ...], str], float]:
    """(rmq standalone cell key, peer) -> the median over repeats of rmq's msgs/s over the peer's in
    the same repeat: the two ran one after the other, so a drift of the machine that lasts longer
    than a repeat cancels out of each ratio (the medians of the two columns do not pair runs)."""
    runs: dict[tuple[Any, ...], dict[int, float]] = {}
    for s in summaries:
        cell = s["cell"]
        if cell["role"] == "standalone":
            runs.setdefault((cell["system"], *_load_key(cell)), {})[cell.get("repeat", 0)] = s["msgs_per_s"]
    out = {}
    for (system, *load), ours in runs.items():
        if system != "rmq":
            continue
        for (other, *other_load), theirs in runs.items():
            paired = [ours[r] / theirs[r] for r in ours.keys() & theirs.keys() if theirs[r] > 0]
            if other != "rmq" and other_load == load and paired:
                out[(tuple(load), other)] = statistics.median(paired)
    return out


def table(summaries: list[dict[str, Any]]) -> Iterator[str]:
    """The summary table: a row per cell, repeats merged; with peers, a column per peer: the rmq
    standalone cell's msgs/s over the peer's at the same load (``peer_ratios``)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for s in summaries:
        groups.setdefault(_key(s["cell"]), []).append(s)
    versus = peer_ratios(summaries)
    peers = sorted({peer for _load, peer in versus})
    base: dict[tuple[Any, ...], float] = {}
    rows = []
    for runs in groups.values():
        cell = runs[0]["cell"]
        rate = statistics.median(r["msgs_per_s"] for r in runs)
        mb = statistics.median(r["mb_per_s"] for r in runs)
        h = Histogram.merged(Histogram.from_json(r["latency"]) for r in runs)
        flushes_per_s = [r["broker"]["flushes_per_s"] for r in runs if r.get("broker") and r["broker"]["flushes_per_s"]]
        gen = statistics.median(r["generator"]["cpu_pct"] for r in runs)
        per_msg = [r["generator"]["cpu_us_per_msg"] for r in runs if r["generator"].get("cpu_us_per_msg")]
        gen_us = f"{statistics.median(per_msg):.2f}" if per_msg else "-"
        saturated = any(r["generator"]["saturated"] for r in runs)
        failed = sum(sum(r["failed"].values()) for r in runs)
        if cell["system"] == "rmq" and cell["flush"] == "ASYNC_FLUSH" and cell["role"] == "standalone":
            base[(cell["size"], cell["in_flight"], cell["batch"], cell["rate"])] = rate
        rows.append((cell, rate, mb, h, flushes_per_s, gen, saturated, gen_us, failed))
    head = (
        f"{'system':15s} {'flush':11s} {'role':12s} {'size':>6s} {'in-fl':>5s} {'conns':>5s} {'batch':>5s}"
        f" {'rate':>7s} {'msgs/s':>9s} {'MB/s':>7s} {'p50 ms':>7s} {'p99 ms':>7s} {'p999 ms':>8s} {'ratio':>6s}"
        f" {'flush/s':>8s} {'gen cpu':>8s} {'gen us/msg':>10s} {'failed':>6s}"
    ) + "".join(f" {'vs ' + peer:>9s}" for peer in peers)
    yield head
    yield "-" * len(head)
    for cell, rate, mb, h, flushes_per_s, gen, saturated, gen_us, failed in rows:
        b = base.get((cell["size"], cell["in_flight"], cell["batch"], cell["rate"]))
        ratio = f"{rate / b:.2f}x" if b else "-"
        mode = cell["peer_mode"]
        name = cell["system"] + ("/" + mode.rsplit("=", 1)[-1] if mode else "")
        fps = f"{statistics.median(flushes_per_s):.0f}" if flushes_per_s else "-"
        yield (
            f"{name:15s} {cell['flush']:11s} {cell['role']:12s} {cell['size']:6d} {cell['in_flight']:5d}"
            f" {cell['connections']:5d} {cell['batch']:5d} {cell['rate'] or '-':>7} {rate:9.0f} {mb:7.1f}"
            f" {h.percentile(50) / 1000:7.2f} {h.percentile(99) / 1000:7.2f} {h.percentile(99.9) / 1000:8.2f}"
            f" {ratio:>6s} {fps:>8s} {gen:7.0f}%{'*' if saturated else ' '} {gen_us:>10s} {failed:6d}"
        ) + "".join(
            f" {versus[_load_key(cell), peer]:8.2f}x"
            if (_load_key(cell), peer) in versus and cell["system"] == "rmq" and cell["role"] == "standalone"
            else f" {'-':>9s}"
            for peer in peers
        )
