"""Real processes on loopback, for rmq-perf, the scripts in ``perf/`` and the test suite alike:
free ports, bounded waits, and ``rmq-namesrv`` / ``rmq-broker`` processes started until they listen
and are routed, a group of ``rmq-controller`` processes until each listens, then stopped.

    procs = Processes()
    _, namesrv = start_namesrv(procs.spawn)
    proc, addr = start_broker_process(procs.spawn, broker_settings(store), namesrv)
    controllers = ControllerGroup(procs.spawn, root, size=3).start()
    ...
    controllers.close()
    procs.stop_all()

A broker process counts as up once the name server routes to it, not when its port opens: the port
opens before its first registration ends. A port ``free_port`` hands out can still be taken by
someone else before the process binds it; a name server or broker that dies of that is started
again on fresh ports (``PORT_ATTEMPTS`` starts in all).

A wait that runs out raises ``WaitTimeout``, a process that exits before listening ``ProcessExited``:
both are AssertionErrors, so that a test reports them as its failure and a script counting failed
rounds catches them with the assertions it makes itself.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from rmq.net import RemotingClient, RemotingCommand
    from rmq.protocol.controller import ControllerMetadata

T = TypeVar("T")
# how a starter runs ``python ARGS`` (``Processes.spawn``, or a caller's that pins or logs it)
Spawn = Callable[..., subprocess.Popen[Any]]

LOOPBACK = "127.0.0.1"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0
# What ProcessExited quotes of a broker's log: its last lines say why it stopped.
LOG_TAIL_LINES = 20


class WaitTimeout(AssertionError, TimeoutError):
    """A bounded wait ran out: what should have happened, and how long it was given. A TimeoutError
    too, for callers that handle timeouts of any kind."""


class ProcessExited(AssertionError):
    """A process exited before it listened or registered."""


# Ports handed out come from below the kernel's ephemeral range (32768-60999 by default), where no
# outgoing connection is ever given a local port: a port picked with bind(0) is an ephemeral one,
# and a client connecting meanwhile could take it before the broker binds it ("Address already in
# use"). Each with the next one free too: a broker listens for slaves on listenPort + 1.
_PORT_RANGE = (20000, 32000)
_handed_out: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on, nor on the port after it, right now, and that
    this process has not handed out before."""
    low, high = _PORT_RANGE
    for _ in range(1000):
        port = random.randrange(low, high)
        if port in _handed_out or not (_bindable(port) and _bindable(port + 1)):
            continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port pair found between {low} and {high}")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


def port_in_use(port: int) -> bool:
    """Whether something listens on ``port`` (of 127.0.0.1 or of every address) right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOOPBACK, port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
        return False


def wait_until(predicate: Callable[[], T], timeout: float, what: str | Callable[[], str], interval: float = 0.01) -> T:
    """Poll ``predicate`` until it returns something true, and return that; WaitTimeout naming
    ``what`` (what should have happened; a callable is asked only then) once ``timeout`` seconds
    passed."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"{what() if callable(what) else what}: not within {timeout:g} s")
        time.sleep(interval)


def _check_running(proc: subprocess.Popen[Any] | None, what: str, before: str) -> None:
    if proc is not None and proc.poll() is not None:
        raise ProcessExited(f"{what} (pid {proc.pid}) exited with {proc.returncode} before {before}")


def wait_for_port(
    port: int, proc: subprocess.Popen[Any] | None = None, what: str = "the process", timeout: float = START_TIMEOUT
) -> None:
    """Until something accepts on 127.0.0.1:``port``; ProcessExited when ``proc`` exits first."""

    def accepting() -> bool:
        _check_running(proc, what, f"listening on {port}")
        try:
            with socket.create_connection((LOOPBACK, port), timeout=0.5):
                return True
        except OSError:
            return False

    wait_until(accepting, timeout, f"{what} listening on {LOOPBACK}:{port}", interval=0.02)


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on TCP ``port`` (any address), from /proc/net/tcp and tcp6."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                        inodes.add(fields[9])
        except FileNotFoundError:
            continue
    return inodes


def listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` itself holds a socket listening on ``port``: a connection that
    succeeds proves only that something listens, maybe the process that took the port first."""
    inodes = _listening_inodes(port)
    if not inodes:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


def wait_listening(
    proc: subprocess.Popen[Any], port: int, what: str = "the process", timeout: float = START_TIMEOUT
) -> None:
    """Until ``proc`` itself listens on ``port``; ProcessExited when it exits first."""

    def listening() -> bool:
        _check_running(proc, what, f"listening on {port}")
        return listens_on(proc.pid, port)

    wait_until(listening, timeout, f"{what} (pid {proc.pid}) listening on {port}", interval=0.02)


def stop_process(proc: subprocess.Popen[Any], timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM, then SIGKILL when it does not exit within ``timeout`` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    _reap(proc, timeout)


def _reap(proc: subprocess.Popen[Any], timeout: float) -> None:
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


class Processes:
    """``python ARGS`` processes started together; ``stop_all`` terminates them all at once, then
    kills each one still running ``timeout`` seconds later."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[Any]] = []

    def spawn(self, *args: str, env: dict[str, str] | None = None, **popen: Any) -> subprocess.Popen[Any]:
        """``python ARGS`` with this process's environment updated by ``env``; ``popen``: more
        arguments of the process (``stdout=``, ``stderr=``)."""
        proc = subprocess.Popen([sys.executable, *args], env={**os.environ, **(env or {})}, **popen)
        self.procs.append(proc)
        return proc

    def stop_all(self, timeout: float = 10.0) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:  # one SIGTERM each: a broker still shutting down is not told twice
            _reap(proc, timeout)


PORT_ATTEMPTS = 3
ADDRESS_IN_USE = os.strerror(errno.EADDRINUSE)  # "Address already in use", as a broker logs it
# The ports of a broker process; each is picked anew after a clash.
BROKER_PORT_KEYS = ("listenPort", "namesrvListenPort", "haListenPort", "grpcServerPort")


def start_namesrv(spawn: Spawn, *args: str, **popen: Any) -> tuple[subprocess.Popen[Any], str]:
    """``rmq-namesrv`` on a free port; (process, address) once it listens. A name server that exits
    before listening while something else listens on its port is started again on another port
    (its stderr may be the caller's, so the port is asked, not a log). ``args``: its options;
    ``popen``: more arguments of the process (``stderr=``, ``env=``)."""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        port = free_port()
        proc = spawn("-m", "rmq.cli.namesrv", "--host", LOOPBACK, "--port", str(port), *args, **popen)
        try:
            wait_listening(proc, port, "rmq-namesrv")
        except ProcessExited:
            if attempt == PORT_ATTEMPTS or not port_in_use(port):
                raise
            print(f"rmq-namesrv: port {port} taken before it bound it; starting it again", file=sys.stderr)
            continue
        return proc, f"{LOOPBACK}:{port}"
    raise AssertionError("unreachable")


def broker_log(settings: dict[str, str]) -> Path:
    """Where a broker started with ``settings`` logs (besides its stderr)."""
    return Path(settings["storePathRootDir"]) / "logs" / "broker.log"


def logged_since(path: Path, start: int) -> str:
    """What was written to ``path`` from byte ``start`` on ("" when there is no such file)."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            return f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


def start_broker_process(
    spawn: Spawn,
    settings: dict[str, str],
    namesrv: str | None = None,
    extra_args: tuple[str, ...] = (),
    timeout: float = START_TIMEOUT,
    **popen: Any,
) -> tuple[subprocess.Popen[Any], str]:
    """``rmq-broker`` with ``--set`` settings, registering with ``namesrv`` (``-n``), the setting
    namesrvAddr or, without either, with the name server it embeds on namesrvListenPort; (process,
    address) once routed.
    ``popen``: more arguments of the process (``stderr=``). A broker that says it died of
    EADDRINUSE is started again with fresh ports, written into ``settings``; one that dies of
    anything else raises ProcessExited quoting the end of what it wrote."""
    output = _broker_output(settings, popen)
    for attempt in range(1, PORT_ATTEMPTS + 1):
        argv = ["-m", "rmq.cli.broker", *(["-n", namesrv] if namesrv else []), *extra_args]
        for key, value in settings.items():
            argv += ["--set", f"{key}={value}"]
        output_start = output.stat().st_size if output.exists() else 0
        proc = spawn(*argv, **popen)
        try:
            wait_listening(proc, int(settings["listenPort"]), "rmq-broker", timeout)
            if settings.get("enableGrpc", "true") == "true" and "grpcServerPort" in settings:
                # the endpoint binds after the remoting port: a broker whose gRPC port was taken
                # exits only then
                wait_listening(proc, int(settings["grpcServerPort"]), "rmq-broker's gRPC endpoint", timeout)
            break
        except ProcessExited as exited:
            said = logged_since(output, output_start)
            if attempt == PORT_ATTEMPTS or ADDRESS_IN_USE not in said:
                tail = "\n".join(said.splitlines()[-LOG_TAIL_LINES:])
                raise ProcessExited(f"{exited}; {output} ends:\n{tail}") from None
            for key in BROKER_PORT_KEYS:
                if key in settings:
                    settings[key] = str(free_port())
            print(f"rmq-broker: a port was taken before it bound it; starting it again on {settings}", file=sys.stderr)
    addr = f"{LOOPBACK}:{settings['listenPort']}"
    registers_with = namesrv or settings.get("namesrvAddr", "").split(";")[0]
    wait_registered(registers_with or f"{LOOPBACK}:{settings['namesrvListenPort']}", addr, proc, timeout)
    return proc, addr


def _broker_output(settings: dict[str, str], popen: dict[str, Any]) -> Path:
    """Where to read what a broker said: its stderr when that goes to a file (it holds what the log
    does, and a refused setting, told before the log opens), else its log."""
    name = getattr(popen.get("stderr"), "name", None)
    return Path(name) if isinstance(name, str) else broker_log(settings)


def wait_registered(
    namesrv: str, broker_addr: str, proc: subprocess.Popen[Any], timeout: float = START_TIMEOUT
) -> None:
    """Until ``namesrv`` lists ``broker_addr`` in its cluster table; ProcessExited when ``proc``
    exits first."""
    # imported here: perf/bench_broker.py loads this file from one tree whatever build rmq is, so
    # that it can start the brokers of builds older than it; nothing else of rmq is needed for that
    from rmq.client.admin_client import AdminClient

    with AdminClient(namesrv, timeout=2.0) as admin:

        def registered() -> bool:
            _check_running(proc, "rmq-broker", f"registering with {namesrv}")
            try:
                tables = admin.cluster_info().get("brokerAddrTable") or {}
            except Exception:
                return False
            return any(broker_addr in (data.get("brokerAddrs") or {}).values() for data in tables.values())

        wait_until(registered, timeout, f"{broker_addr} registered with {namesrv}", interval=0.02)


# Small files: tests and short runs write little, and sparse 1 GiB files are still work for the
# file system.
SMALL_FILES = {
    "mappedFileSizeCommitLog": str(4 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": str(20 * 3000),
    "maxHashSlotNum": "1024",
    "maxIndexNum": "4096",
}


def broker_settings(store_dir: Path, small_files: bool = True, **overrides: Any) -> dict[str, str]:
    """``--set`` style settings of a broker, in-process or a process: loopback only, free ports
    (its own, its HA port, its gRPC port and its embedded name server's), no gRPC endpoint
    (``enableGrpc=true`` in ``overrides`` starts one), ``SMALL_FILES`` unless not ``small_files``,
    then ``overrides``."""
    settings = {
        "brokerIP1": LOOPBACK,
        "listenPort": str(free_port()),
        "namesrvListenPort": str(free_port()),
        # not the default listenPort + 1: free ports come in sequence, and that one may be taken
        "haListenPort": str(free_port()),
        # the gRPC endpoint only where a test asks for it (enableGrpc=true): each costs a thread
        # and a server; its port is free either way
        "enableGrpc": "false",
        "grpcServerPort": str(free_port()),
        "storePathRootDir": str(store_dir),
        **(SMALL_FILES if small_files else {}),
    }
    settings.update({k: str(v) for k, v in overrides.items()})
    return settings


class ControllerGroup:
    """``size`` ``rmq-controller`` processes forming one Raft group on free ports (remoting and
    Raft), member i with its store in ``root/controller-n<i>`` and its stderr appended to
    ``root/controller-n<i>.log``; a member killed or stopped starts again on the same ports and
    store. ``settings``: more ``--set`` settings of every member."""

    def __init__(self, spawn: Spawn, root: Path, size: int = 3, log_level: str = "WARNING", **settings: str):
        self.spawn = spawn
        self.root = root
        self.size = size
        self.log_level = log_level
        self.settings = dict(settings)
        self.raft_ports = [free_port() for _ in range(size)]
        self.ports = [free_port() for _ in range(size)]
        #: controllerDLegerPeers: every member's Raft address
        self.peers = ";".join(f"n{i}-{LOOPBACK}:{port}" for i, port in enumerate(self.raft_ports))
        self.procs: list[subprocess.Popen[Any] | None] = [None] * size
        self._client: RemotingClient | None = None

    @property
    def addresses(self) -> list[str]:
        """Each member's remoting address (what brokers' controllerAddr and rmq-admin name)."""
        return [f"{LOOPBACK}:{port}" for port in self.ports]

    @property
    def controller_addr(self) -> str:
        """controllerAddr of a broker in controller mode: every member."""
        return ";".join(self.addresses)

    def log_path(self, member: int) -> Path:
        return self.root / f"controller-n{member}.log"

    def start(self, *members: int) -> ControllerGroup:
        """Start ``members`` (default: all) at once, and wait until each listens."""
        members = members or tuple(range(self.size))
        for i in members:
            sets = {
                **self.settings,
                "controllerDLegerPeers": self.peers,
                "controllerDLegerSelfId": f"n{i}",
                "controllerStorePath": str(self.root / f"controller-n{i}"),
            }
            argv = ["-m", "rmq.cli.controller", "--host", LOOPBACK, "--port", str(self.ports[i])]
            argv += ["--log-level", self.log_level]
            for key, value in sets.items():
                argv += ["--set", f"{key}={value}"]
            with open(self.log_path(i), "ab") as log:
                self.procs[i] = self.spawn(*argv, stderr=log)
        for i in members:
            proc = self.procs[i]
            assert proc is not None
            wait_listening(proc, self.ports[i], f"rmq-controller n{i}")
        return self

    def kill(self, member: int) -> None:
        self._signal(member, signal.SIGKILL)

    def stop(self, member: int) -> None:
        self._signal(member, signal.SIGTERM)

    def _signal(self, member: int, signum: int) -> None:
        proc = self.procs[member]
        assert proc is not None
        proc.send_signal(signum)
        _reap(proc, STOP_TIMEOUT)

    def close(self) -> None:
        """Drop the connections to the members (the processes are their spawner's to stop)."""
        if self._client is not None:
            self._client.shutdown()
            self._client = None

    # -- asking them ------------------------------------------------------------------------------

    @property
    def client(self) -> RemotingClient:
        if self._client is None:
            from rmq.net import RemotingClient  # see wait_registered: this module imports no rmq at load

            self._client = RemotingClient()
            self._client.start()
        return self._client

    def call(self, member: int, request: RemotingCommand, timeout: float = 5.0) -> RemotingCommand:
        return self.client.invoke_sync(self.addresses[member], request, timeout)

    def metadata(self, member: int, timeout: float = 5.0) -> ControllerMetadata:
        """CONTROLLER_GET_METADATA_INFO of ``member`` (AssertionError when refused)."""
        from rmq.net import RemotingCommand
        from rmq.protocol.codes import RequestCode, ResponseCode
        from rmq.protocol.controller import ControllerMetadata

        answer = self.call(member, RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO), timeout)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        return ControllerMetadata.from_fields(answer.ext_fields)

    def leader(self, among: tuple[int, ...] | None = None, timeout: float = 10.0) -> int:
        """The member every one of ``among`` (default: all) names as leader, once they agree and the
        leader's remoting address is known; a member that does not answer is waited for."""
        from rmq.errors import RemotingError

        members = among if among is not None else tuple(range(self.size))

        def agreed() -> int | None:
            try:
                metas = [self.metadata(i, 1.0) for i in members]
            except RemotingError:
                return None
            ids = {m.leader_id for m in metas}
            if len(ids) != 1 or not metas[0].leader_address:
                return None
            leader = int(metas[0].leader_id[1:])
            return leader + 1 if leader in members else None  # + 1: member 0 is an answer too

        found = wait_until(agreed, timeout, f"controllers {members} agreeing on a leader", 0.02)
        assert found is not None
        return found - 1
