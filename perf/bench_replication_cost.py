"""Where ASYNC_MASTER's cost lands: the master's own work of replicating, or its slave's CPU.

Issue 11 asks for ASYNC_MASTER >= 0.9x standalone. On one machine the slave process shares the CPUs
with its master and the load generator, which a slave on a host of its own (RocketMQ's deployment)
does not. This runs, interleaved round by round, 1 KiB sends against

    standalone    an ASYNC_MASTER broker with no slave;
    null slave    the same with a "slave" that speaks the HA protocol (reports, reads every frame) and
                  stores nothing: the master streams its CommitLog exactly as to a real slave, so what
                  it loses is the master's own cost of replicating;
    real slave    the same with an ``rmq-broker`` slave process (bench_broker.py's async_master);
    tls slave     (--tls) the same, master and slave with tlsEnable and cluster credentials: the
                  replication stream encrypted (the master's certificate verified), the slave
                  authenticated; clients send plain (tlsServerMode permissive), so the difference
                  to "real slave" is what encrypting and decrypting the stream costs;

and prints each one's median and its per-round ratio to standalone. The load is the compiled
generator (``rmq.perf.load``, one connection, batches of 32 for "batch"; ``--engine python``:
bench_broker.py's Python pipeliner), so that on a pinned run the load's CPU is not what decides.

    PYTHONPATH=src python perf/bench_replication_cost.py [--seconds 3] [--repeat 5] [--in-flight 16,64] [--tls] [--pin]
        [--cpu] [--threads] [--rate MSGS] [--no-null-slave] [--base OTHER_CHECKOUT/src]
    PYTHONPATH=src python perf/bench_replication_cost.py --catch-up MB [--frame-kib 32] [--repeat 5]

``--pin`` runs each master (and the standalone broker) alone on the first CPU, its slave (real or
null) and the load on the others: the master's own cost of replicating, as on a host of its own.
``--cpu`` also prints the CPU time (user + system) each broker process spent per message acked, the
master's against the standalone broker's per round, and the real slaves': on a shared machine a
steadier figure than messages per second, which another tenant's load moves by tens of percent.
Pinned, it is the figure that decides: the master alone on its CPU takes at most 1 / (its CPU per
message) messages a second, while the slave shares the other CPU with the load (it would not on a
host of its own). ``--rate`` offers every broker the same msgs/s (below what the slowest takes): in
a closed loop a broker's CPU per message falls as requests pile up between its reads, so one whose
load ran slower (the slave's CPU is the load's) looks dearer. ``--threads`` splits the master's
CPU per message by thread (names from py-spy): what replicating adds shows as
``rmq-store-ha-stream``. ``--base SRC`` also runs a standalone broker and a master with a slave
from another build (e.g. ``git archive main`` built in place), in the same rounds: before and after
a change, each against its own standalone broker.

``--catch-up MB`` measures the stream alone instead: a master store holding MB of CommitLog, a new
slave store in a process of its own copying all of it, plain and over TLS (with cluster
authentication) in alternating rounds (``--frame-kib``: haTransferBatchSize on both sides, 32 by
default); MB/s of each and TLS/plain, and the CPU the master's thread
that sends spent per MB (``rmq-store-ha-stream`` for the plain slave, the HA loop ``rmq-store-ha``
for the TLS one: on loopback it includes the slave's TCP receive, which the kernel runs on the
sender's CPU).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import multiprocessing
import os
import re
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

from bench_broker import (
    BATCH,
    PIN_HELP,
    PROCESSES,
    QUEUES,
    TOPIC,
    free_port,
    pin_master,
    running_role,
    sends_per_second,
    start_broker,
)
from bench_tls import certificate

from rmq.net.tls import TlsServerOptions, server_context
from rmq.perf.load import ENGINE_C, LoadSpec, run_load
from rmq.protocol import ha as wire
from rmq.protocol.acl import ClusterAuthMode, SessionCredentials
from rmq.protocol.tls import TlsMode
from rmq.store import MessageStore, MessageStoreConfig
from rmq.store.ha import HASecurity

CATCH_UP_BODY = b"x" * 4096
CATCH_UP_TIMEOUT = 120
CREDENTIALS = SessionCredentials("bench-cluster", "bench-secret")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def built_from(src: str) -> Iterator[None]:
    """Brokers started within run the build at ``src`` (another checkout's ``src``, e.g. ``git archive
    main`` built in place), so that its rounds interleave with this build's."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.path.abspath(src)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def thread_names(pid: int) -> dict[int, str]:
    """Thread id -> Python thread name of process ``pid`` (from ``py-spy dump``; empty without it)."""
    try:
        out = subprocess.run(["py-spy", "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {int(m[1]): m[2] for m in re.finditer(r'^Thread (\d+) \(\w+\): "([^"]*)"', out.stdout, re.M)}


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each thread of process ``pid``, by thread id: the scheduler's ns of run time
    (``schedstat``), not ``stat``'s 10 ms ticks, of which a thread that costs 10 ms a second
    (the replication stream) would get two in a run."""
    found = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            found[int(tid)] = int(f.read().split()[0]) / 1e9
    return found


def generator_sends(port: int, depth: int, batch: bool, seconds: float, pids: list[int], rate: float = 0.0):  # type: ignore[no-untyped-def]
    """Sends from the compiled load generator (``rmq.perf.load``, one connection; ``rate`` msgs/s
    offered, open loop, 0: closed loop): (msgs/s, messages acked, each of ``pids``' CPU seconds by
    thread over the run), the CPU read when the run starts and once every answer is in."""
    spec = LoadSpec(
        "rmq", "127.0.0.1", port, TOPIC, batch=BATCH if batch else 1, in_flight=depth, duration=seconds,
        interval=seconds, tags="bench", queues=QUEUES, engine=ENGINE_C, rate=rate,
    )  # fmt: skip
    marks: dict[str, tuple[float, list[dict[int, float]]]] = {}

    def mark(name: str) -> None:
        marks[name] = (time.perf_counter(), [thread_cpu(pid) for pid in pids])

    report = run_load(spec, lambda *_: mark("end"), lambda: mark("start"))
    (began, before), (ended, after) = marks["start"], marks["end"]
    used = [{tid: cpu - b.get(tid, 0.0) for tid, cpu in a.items()} for a, b in zip(after, before, strict=True)]
    return report.acked / (ended - began), report.acked, used


def null_slave(port: int, stop: multiprocessing.synchronize.Event) -> None:
    """Connect to a master's HA port, report 0 (start at its last file), then read frames and report
    the end of each batch read, as a slave does after appending; store nothing."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(0.2)
    sock.sendall(wire.encode_report(0))
    buffer = bytearray(1 << 20)
    view = memoryview(buffer)
    filled, end = 0, -1
    while not stop.is_set():
        try:
            got = sock.recv_into(view[filled:])
        except TimeoutError:
            continue
        if not got:
            break
        filled += got
        position = 0
        while filled - position >= wire.FRAME_HEADER_SIZE:
            start, size = wire.decode_frame_header(buffer, position)
            if filled - position - wire.FRAME_HEADER_SIZE < size:
                break
            position += wire.FRAME_HEADER_SIZE + size
            end = start + size
        buffer[: filled - position] = view[position:filled]
        filled -= position
        if end >= 0:
            sock.sendall(wire.encode_report(end))
    sock.close()


@contextlib.contextmanager
def running_null_slave_master() -> Iterator[int]:
    """An ASYNC_MASTER broker (ASYNC_FLUSH) streaming to ``null_slave`` in a process of its own: its port."""
    root = tempfile.mkdtemp(prefix="rmq-bench-broker-")
    ha_port = free_port()
    proc, port, _namesrv = start_broker(root, "ASYNC_FLUSH", brokerRole="ASYNC_MASTER", haListenPort=str(ha_port))
    stop = multiprocessing.Event()
    reader = None
    try:
        sends_per_second(port, 1, False, 0.1)  # a first file for the slave to start from
        reader = multiprocessing.Process(target=null_slave, args=(ha_port, stop), daemon=True)
        reader.start()
        time.sleep(0.5)
        yield port
    finally:
        stop.set()
        if reader is not None:
            reader.join(5)
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        shutil.rmtree(root, ignore_errors=True)


def copy_all(root: str, master_address: str, end: int, cert: str | None, frame: int, result) -> None:  # type: ignore[no-untyped-def]
    """A slave store (its own process) copying a master's whole CommitLog: seconds it took."""
    security = HASecurity()
    if cert is not None:
        context = ssl.create_default_context(cafile=cert)
        context.check_hostname = False
        security = HASecurity(CREDENTIALS, client_tls=context)
    config = MessageStoreConfig(
        store_path_root_dir=root,
        broker_role="SLAVE",
        ha_master_address=master_address,
        ha_transfer_batch_size=frame,
        **CATCH_UP_FILES,
    )
    slave = MessageStore(config).start()
    try:
        began = time.perf_counter()
        slave.start_ha(security=security)
        while slave.commit_log.get_max_offset() < end:
            time.sleep(0.005)
        result.send(time.perf_counter() - began)
    finally:
        slave.shutdown()


# one CommitLog file holds the whole backlog: a new slave starts at the master's last file
CATCH_UP_FILES = {"mapped_file_size_commit_log": 1 << 30, "mapped_file_size_consume_queue": 20 * 300_000}


def catch_up(megabytes: int, repeat: int, frame: int) -> None:
    directory = tempfile.mkdtemp(prefix="rmq-bench-catch-up-")
    try:
        cert, key = certificate(directory)
        server = TlsServerOptions(server_context(cert, key), TlsMode.PERMISSIVE)
        port = free_port()
        master = MessageStore(
            MessageStoreConfig(
                store_path_root_dir=f"{directory}/master",
                ha_listen_port=port,
                ha_transfer_batch_size=frame,
                **CATCH_UP_FILES,
            )
        ).start()
        try:
            # permissive: the plain slave (no credentials) is served too
            master.start_ha(security=HASecurity(CREDENTIALS, ClusterAuthMode.PERMISSIVE, server_tls=server))
            for i in range(megabytes * 1024 * 1024 // len(CATCH_UP_BODY)):
                master.put("BenchTopic", CATCH_UP_BODY, i % 8, wait=False)
            end = master.commit_log.get_max_offset()
            rates: dict[str, list[float]] = {"plain": [], "tls": []}
            costs: dict[str, list[float]] = {"plain": [], "tls": []}  # the sender's CPU ms per MB
            senders = {"plain": "rmq-store-ha-stream", "tls": "rmq-store-ha"}
            for round_ in range(repeat):
                for side in rates:
                    sender = next(t.native_id for t in threading.enumerate() if t.name == senders[side])
                    spent = thread_cpu(os.getpid())[sender]
                    receive, send = multiprocessing.Pipe(duplex=False)
                    root = f"{directory}/slave-{side}-{round_}"
                    args = (root, f"127.0.0.1:{port}", end, cert if side == "tls" else None, frame, send)
                    proc = multiprocessing.Process(target=copy_all, args=args)
                    proc.start()
                    if not receive.poll(CATCH_UP_TIMEOUT):
                        proc.terminate()
                        raise TimeoutError(f"the {side} slave did not copy {megabytes} MB in {CATCH_UP_TIMEOUT} s")
                    seconds = receive.recv()
                    costs[side].append((thread_cpu(os.getpid())[sender] - spent) * 1e3 / (end / 1e6))
                    proc.join(30)
                    shutil.rmtree(root, ignore_errors=True)
                    rates[side].append(end / seconds / 1e6)
            for side, values in rates.items():
                print(
                    f"catch-up {megabytes} MB  {side:5s} {statistics.median(values):8.1f} MB/s  (rounds {values});"
                    f" {senders[side]} {statistics.median(costs[side]):.3f} ms CPU/MB"
                )
            ratio = statistics.median(t / p for t, p in zip(rates["tls"], rates["plain"], strict=True))
            print(f"catch-up TLS/plain per round: {ratio:.2f}x", flush=True)
        finally:
            master.shutdown()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one run")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--in-flight", default="16,64")
    parser.add_argument("--tls", action="store_true", help="also a slave replicating over TLS, authenticated")
    parser.add_argument("--catch-up", type=int, metavar="MB", help="the stream alone: a new slave copying MB")
    parser.add_argument(
        "--frame-kib", type=int, default=32,
        help="--catch-up: haTransferBatchSize of master and slave, in KiB (the most data a frame carries)",
    )  # fmt: skip
    parser.add_argument("--pin", action="store_true", help=PIN_HELP + " (the null slave with the load)")
    parser.add_argument("--cpu", action="store_true", help="also each broker's CPU time per message")
    parser.add_argument(
        "--base", metavar="SRC", help="also a standalone broker and a master with a slave from the build at SRC"
    )
    parser.add_argument("--no-null-slave", action="store_true", help="only standalone and real (and TLS) slaves")
    parser.add_argument(
        "--rate", type=float, default=0.0,
        help="msgs/s offered (open loop; 0: as many as answered): every broker then reads the same "
        "arrivals, and a broker's CPU per message does not vary with how fast the load ran for it",
    )  # fmt: skip
    parser.add_argument("--threads", action="store_true", help="also the master's CPU per message by thread (py-spy)")
    parser.add_argument(
        "--engine", choices=(ENGINE_C, "python"), default=ENGINE_C,
        help="the load: the compiled generator (rmq.perf.load) or bench_broker.py's Python pipeliner",
    )  # fmt: skip
    args = parser.parse_args()
    if args.pin:
        pin_master(parser)
    if args.catch_up:
        catch_up(args.catch_up, args.repeat, args.frame_kib * 1024)
        return 0
    depths = [int(d) for d in args.in_flight.split(",")]
    sides = ["standalone"] + ([] if args.no_null_slave else ["null slave"]) + ["real slave"]
    sides += ["tls slave"] if args.tls else []
    with contextlib.ExitStack() as stack:
        brokers: dict[str, tuple[int, int | None]] = {
            "standalone": stack.enter_context(running_role("standalone")),
            "real slave": stack.enter_context(running_role("async_master")),
        }
        if not args.no_null_slave:
            brokers["null slave"] = (stack.enter_context(running_null_slave_master()), None)
        if args.base:
            for role, side in (("standalone", "base standalone"), ("async_master", "base real slave")):
                with built_from(args.base):
                    brokers[side] = stack.enter_context(running_role(role))
                sides.append(side)
        if args.tls:
            directory = tempfile.mkdtemp(prefix="rmq-bench-tls-")
            stack.callback(shutil.rmtree, directory, ignore_errors=True)
            cert, key = certificate(directory)
            tls = {
                "tlsEnable": "true",
                "tlsServerCertPath": cert,
                "tlsServerKeyPath": key,
                "tlsClientTrustCertPath": cert,
                "clusterAccessKey": "bench-cluster",
                "clusterSecretKey": "bench-secret",
            }
            brokers["tls slave"] = stack.enter_context(running_role("async_master", **tls))
        names = {port: thread_names(PROCESSES[port].pid) for port, _slave in brokers.values()} if args.threads else {}
        for batch in (False, True):
            for depth in depths:
                rates: dict[str, list[float]] = {side: [] for side in sides}
                # CPU microseconds per message: (master, slave or None) per round
                costs: dict[str, list[tuple[float, float | None]]] = {side: [] for side in sides}
                # the master's, by thread name: microseconds per message per round
                threads: dict[str, dict[str, list[float]]] = {side: collections.defaultdict(list) for side in sides}
                for _ in range(args.repeat):
                    for side in sides:
                        port, slave_port = brokers[side]
                        pids = [PROCESSES[p].pid for p in (port, slave_port) if p is not None]
                        if args.engine == ENGINE_C:
                            rate, messages, used = generator_sends(port, depth, batch, args.seconds, pids, args.rate)
                            if len(pids) > 1:  # with the slave's last appends
                                at_end = thread_cpu(pids[1])
                                time.sleep(0.2)
                                for tid, cpu in thread_cpu(pids[1]).items():
                                    used[1][tid] = used[1].get(tid, 0.0) + cpu - at_end.get(tid, 0.0)
                        else:
                            before = [cpu_seconds(pid) for pid in pids]
                            began = time.perf_counter()
                            rate = sends_per_second(port, depth, batch, args.seconds)
                            messages = rate * (time.perf_counter() - began)
                            time.sleep(0.2)
                            used = [{0: cpu_seconds(pid) - b} for pid, b in zip(pids, before, strict=True)]
                        rates[side].append(rate)
                        per_message = [sum(u.values()) / max(messages, 1) * 1e6 for u in used]
                        costs[side].append((per_message[0], per_message[1] if len(per_message) > 1 else None))
                        by_name: dict[str, float] = collections.Counter()
                        for tid, cpu in used[0].items():
                            by_name[names.get(port, {}).get(tid, "other")] += cpu / max(messages, 1) * 1e6
                        for name, cost in by_name.items():
                            threads[side][name].append(cost)
                kind = "batch" if batch else "single"
                for side in sides:
                    reference = "base standalone" if side.startswith("base") else "standalone"
                    ratio = statistics.median(r / s for r, s in zip(rates[side], rates[reference], strict=True))
                    line = (
                        f"{kind:6s} in flight {depth:3d}  {side:15s} {statistics.median(rates[side]):>10,.0f} msgs/s"
                        f"  {ratio:.2f}x standalone per round"
                    )
                    if args.cpu:
                        master = [c[0] for c in costs[side]]
                        per_round = [m / s[0] for m, s in zip(master, costs[reference], strict=True)]
                        line += f"; master {statistics.median(master):.2f} us/msg ({statistics.median(per_round):.2f}x)"
                        slave = [c[1] for c in costs[side] if c[1] is not None]
                        if slave:
                            line += f", slave {statistics.median(slave):.2f} us/msg"
                    print(line, flush=True)
                    if args.threads:
                        spent = {
                            n: statistics.median(v + [0.0] * (args.repeat - len(v))) for n, v in threads[side].items()
                        }
                        top = sorted(spent.items(), key=lambda item: -item[1])
                        print("    master threads, us/msg: " + ", ".join(f"{n} {c:.2f}" for n, c in top if c >= 0.01))
    return 0


if __name__ == "__main__":
    sys.exit(main())
