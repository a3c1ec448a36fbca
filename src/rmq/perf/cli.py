"""``rmq-perf``: load a running cluster as RocketMQ's benchmark scripts do, or run a whole
comparison of durability modes on fresh processes, writing perf logs (``rmq.perf.log``).

    rmq-perf producer -n 127.0.0.1:9876 -t BenchTopic --size 1024 --in-flight 16 --duration 30 [--engine c]
    rmq-perf producer -t BenchTopic --rate-profile 2000:270,8000:60,2000:270   # a known rate profile
    rmq-perf consumer -n 127.0.0.1:9876 -t BenchTopic -g BenchGroup
    rmq-perf matrix [--flush ASYNC_FLUSH,SYNC_FLUSH] [--roles standalone,async_master,sync_master] \
                    [--sizes 1024] [--in-flight 1,16,64] [--rate 10000,30000] [--batch 1] [--peers redis,nats]

``--engine`` picks the load generator's loop: ``c`` (compiled, the default; RMQ_PERF_ENGINE sets
another) or ``python``, its twin (``rmq.perf.load``).

Exit codes: 0 done, 1 failed (nobody answering, a worker that could not connect), 2 bad usage.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from rmq.client.admin_client import DEFAULT_NAMESRV, AdminClient
from rmq.errors import RmqError
from rmq.perf.cluster import ROLES
from rmq.perf.load import ENGINES, LoadError, LoadSpec, default_engine
from rmq.perf.log import PerfLogWriter
from rmq.perf.matrix import MatrixOptions, header, new_run_id, run_matrix, table
from rmq.perf.peers import PEERS
from rmq.perf.producer import make_cell, run_producer

FLUSHES = ("ASYNC_FLUSH", "SYNC_FLUSH")
DEFAULT_OUT = "perf-logs"
EXIT_FAILED = 1


def _list(
    kind: Callable[[str], Any], allowed: tuple[str, ...] | None = None, empty: bool = False
) -> Callable[..., list[Any]]:
    """A click callback reading a comma list (``1,16,64``), each item checked; ``empty``: nothing
    is a valid value."""

    def parse(ctx: click.Context, param: click.Parameter, value: str) -> list[Any]:
        items = [v.strip() for v in value.split(",") if v.strip()]
        if not items and not empty:
            raise click.BadParameter("expected a comma-separated list, got nothing")
        out = []
        for item in items:
            if allowed is not None and item not in allowed:
                raise click.BadParameter(f"{item!r} is not one of {', '.join(allowed)}")
            try:
                v = kind(item)
            except ValueError:
                raise click.BadParameter(f"{item!r} is not a whole number") from None
            if isinstance(v, int) and v < 1:
                raise click.BadParameter(f"{item} must be at least 1")
            out.append(v)
        return out

    return parse


def _profile(ctx: click.Context, param: click.Parameter, value: str) -> tuple[tuple[float, float], ...]:
    """A rate profile, ``2000:270,8000:60``: (msgs/s, whole seconds) steps."""
    steps = []
    for item in (v.strip() for v in value.split(",") if v.strip()):
        rate, _, seconds = item.partition(":")
        try:
            step = (float(rate), float(seconds))
        except ValueError:
            raise click.BadParameter(f"{item!r}: expected RATE:SECONDS, e.g. 2000:270") from None
        if step[0] <= 0 or step[1] < 1 or step[1] != int(step[1]):
            raise click.BadParameter(f"{item!r}: expected a rate above 0 and whole seconds (the rate steps per second)")
        steps.append(step)
    return tuple(steps)


def _peers(ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


engine_option = click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default=default_engine,
    show_default="c, or $RMQ_PERF_ENGINE",
    help="the load generator's loop: compiled, or its Python twin (NATS runs on python whatever this says)",
)


@click.group(help=__doc__.split("\n\n")[0] if __doc__ else None)
def main() -> None:
    pass


@main.command()
@click.option("-n", "--namesrv", default=DEFAULT_NAMESRV, show_default=True, help="name server(s), host:port[;...]")
@click.option("-t", "--topic", default="BenchmarkTest", show_default=True, help="created when missing")
@click.option("-s", "--size", type=click.IntRange(1, 4 << 20), default=128, show_default=True, help="body bytes")
@click.option("--in-flight", type=click.IntRange(1), default=64, show_default=True, help="requests outstanding, in all")
@click.option("--batch", type=click.IntRange(1, 1024), default=1, show_default=True, help="messages per request")
@click.option("--rate", type=click.FloatRange(0), default=0, show_default=True, help="msgs/s target (0: unlimited)")
@click.option(
    "--rate-profile",
    "profile",
    default="",
    callback=_profile,
    help="msgs/s steps RATE:SECONDS[,RATE:SECONDS...] (e.g. 2000:270,8000:60,2000:270), instead of --rate:"
    " the run lasts their sum",
)
@click.option("--duration", type=click.FloatRange(0.1), default=60, show_default=True, help="seconds recorded")
@click.option("--warmup", type=click.FloatRange(0), default=0, show_default=True, help="seconds sent, not recorded")
@click.option(
    "-w", "--workers", type=click.IntRange(1, 64), default=2, show_default=True, help="processes (= connections)"
)
@click.option("--tags", default="", help="the messages' tag")
@click.option(
    "--flush",
    type=click.Choice(FLUSHES),
    default="ASYNC_FLUSH",
    show_default=True,
    help="the cluster's flushDiskType, for the log (a broker does not tell)",
)
@click.option("--json", "as_json", is_flag=True, help="the perf-log records on stdout instead of lines")
@click.option(
    "--out", type=click.Path(file_okay=False), default=DEFAULT_OUT, show_default=True, help="perf-log directory"
)
@engine_option
@click.pass_context
def producer(ctx: click.Context, namesrv: str, topic: str, size: int, in_flight: int, batch: int, rate: float,
             profile: tuple[tuple[float, float], ...], duration: float, warmup: float, workers: int, tags: str,
             flush: str, as_json: bool, out: str, engine: str) -> None:  # fmt: skip
    """Send to a running cluster, a line per second as benchmark/producer.sh."""
    if profile:
        given = [
            f"--{name}" for name in ("rate", "duration")
            if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
        ]  # fmt: skip
        if given:
            raise click.UsageError(f"--rate-profile sets the rate and the duration: drop {' and '.join(given)}")
        rate = profile[0][0]
        duration = sum(seconds for _rate, seconds in profile)
    try:
        addr, queues, role = _target(namesrv, topic)
    except RmqError as e:
        raise click.ClickException(f"cannot reach the cluster at {namesrv}: {e}") from None
    host, port = addr.rsplit(":", 1)
    spec = LoadSpec(
        "rmq", host, int(port), topic, size, batch, in_flight, workers, rate, duration, warmup, 1.0, tags, queues,
        engine=engine, profile=profile,
    )  # fmt: skip
    run_id = new_run_id("producer")
    with PerfLogWriter(out, run_id) as writer:
        writer.write(header(run_id, "."))
        if not as_json:
            click.echo(
                f"rmq-perf producer: {addr} {topic}, {spec.effective_workers} workers, log {writer.path}", err=True
            )
        try:
            run_producer(spec, make_cell(spec, flush, role), writer, None, click.echo, as_json)
        except LoadError as e:
            raise click.ClickException(str(e)) from None


def _target(namesrv: str, topic: str) -> tuple[str, int, str]:
    """(a master's address, its write queues, the matrix role it plays) of ``topic``, created on
    every master when missing."""
    with AdminClient(namesrv, timeout=5.0) as admin:
        if not admin.topic_exists(topic):
            admin.update_topic(topic)
        route = admin.topic_route(topic)
        masters = admin.topic_masters(topic)
        name, addr = sorted(masters.items())[0]
        queues = next(
            (int(q["writeQueueNums"]) for q in route.get("queueDatas") or [] if q.get("brokerName") == name), 4
        )
        role = "standalone"
        with contextlib.suppress(RmqError, KeyError):
            broker_role = admin.broker_runtime_info(addr)["brokerRole"]
            if len(admin.broker_addrs(name)) > 1:
                role = broker_role.lower()
    return addr, queues, role


@main.command()
@click.option("-n", "--namesrv", default=DEFAULT_NAMESRV, show_default=True, help="name server(s), host:port[;...]")
@click.option("-t", "--topic", default="BenchmarkTest", show_default=True)
@click.option("-g", "--group", default="benchmark_consumer", show_default=True, help="consumer group")
@click.option("-e", "--expression", default="*", show_default=True, help="tag expression, e.g. 'TagA || TagB'")
@click.option("--duration", type=click.FloatRange(0), default=0, show_default=True, help="seconds (0: until ^C)")
@click.option("--json", "as_json", is_flag=True, help="the perf-log records on stdout instead of lines")
@click.option(
    "--out", type=click.Path(file_okay=False), default=DEFAULT_OUT, show_default=True, help="perf-log directory"
)
def consumer(namesrv: str, topic: str, group: str, expression: str, duration: float, as_json: bool, out: str) -> None:
    """Consume from a running cluster, a line per second as benchmark/consumer.sh."""
    from rmq.perf.consumer import run_consumer

    run_id = new_run_id("consumer")
    cell = {
        "system": "rmq", "flush": "ASYNC_FLUSH", "role": "standalone", "size": 0, "in_flight": 0,
        "connections": 1, "batch": 1, "rate": None, "peer_mode": None, "repeat": 0,
    }  # fmt: skip
    with PerfLogWriter(out, run_id) as writer:
        writer.write(header(run_id, "."))
        echo = click.echo if not as_json else lambda line: None
        try:
            summary = run_consumer(namesrv, topic, group, expression, duration, cell, writer, echo)
        except RmqError as e:
            raise click.ClickException(f"cannot consume from {namesrv}: {e}") from None
        if as_json:
            click.echo(json.dumps(summary))


@main.command()
@click.option("--flush", "flushes", default=",".join(FLUSHES), show_default=True, callback=_list(str, FLUSHES))
@click.option("--roles", default=",".join(ROLES), show_default=True, callback=_list(str, ROLES))
@click.option("--sizes", default="1024", show_default=True, callback=_list(int), help="body bytes")
@click.option("--in-flight", "in_flights", default="1,16,64", show_default=True, callback=_list(int, empty=True),
              help="closed-loop cells: requests outstanding ('' for none)")  # fmt: skip
@click.option("--rate", "rates", default="", callback=_list(int, empty=True),
              help="open-loop cells too: msgs/s offered, latency from each request's due time")  # fmt: skip
@click.option("--rate-in-flight", type=click.IntRange(1), default=64, show_default=True,
              help="the most an open-loop cell keeps outstanding")  # fmt: skip
@click.option("--batch", "batches", default="1", show_default=True, callback=_list(int), help="messages per request")
@click.option("--duration", type=click.FloatRange(0.5), default=8, show_default=True, help="seconds recorded per cell")
@click.option("--warmup", type=click.FloatRange(0), default=1, show_default=True, help="seconds per cell, not recorded")
@click.option("--repeat", type=click.IntRange(1), default=1, show_default=True, help="runs of every cell")
@click.option("-w", "--workers", type=click.IntRange(1, 64), default=2, show_default=True,
              help="load processes (= connections; at most the in-flight count)")  # fmt: skip
@click.option("--peers", default="", callback=_peers, help=f"also drive these at equal concurrency: {','.join(PEERS)}")
@click.option(
    "--out", type=click.Path(file_okay=False), default=DEFAULT_OUT, show_default=True, help="perf-log directory"
)
@click.option("--json", "as_json", is_flag=True, help="the summary records on stdout instead of the table")
@engine_option
def matrix(flushes: list[str], roles: list[str], sizes: list[int], in_flights: list[int], rates: list[int],
           rate_in_flight: int, batches: list[int], duration: float, warmup: float, repeat: int, workers: int,
           peers: list[str], out: str, as_json: bool, engine: str) -> None:  # fmt: skip
    """Every cell of flush x role x size x load (in-flight, rate) x batch on fresh processes; a table at the end."""
    if not in_flights and not rates:
        raise click.UsageError("no load to run: give --in-flight or --rate")
    options = MatrixOptions(
        flushes, roles, sizes, in_flights, batches, duration, warmup, repeat, workers, peers, Path(out),
        rates=rates, rate_in_flight=rate_in_flight, engine=engine,
    )  # fmt: skip
    _path, summaries = run_matrix(options, lambda line: click.echo(line, err=True))
    if as_json:
        for s in summaries:
            click.echo(json.dumps(s, separators=(",", ":")))
    else:
        for line in table(summaries):
            click.echo(line)
    if not summaries:
        sys.exit(EXIT_FAILED)


if __name__ == "__main__":
    main()
