"""Fixtures of the compatibility tests: real third-party RocketMQ clients (installed once into
``.cache/compat``, see tests.helpers.compat and tests.helpers.grpc_clients) against real rmq
processes (the ``cluster`` fixture, ``grpc_cluster`` for the 5.x clients)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rmq.perf.procs import Processes
from tests.helpers.compat import (
    ALI_ONS,
    FAMILIES,
    ClientRunner,
    FamilyClients,
    install_ali_ons,
    install_rocketmq_python,
)
from tests.helpers.grpc_clients import Grpc5Clients, GrpcCluster, install_node_client, install_python_client
from tests.helpers.transaction import FAST_CHECKS


@pytest.fixture(scope="session")
def ali_ons() -> Path:
    """A directory whose node_modules holds ali-ons."""
    return install_ali_ons()


@pytest.fixture(scope="session")
def rocketmq_python() -> Path:
    """The python executable of a virtual environment holding rocketmq==0.4.4."""
    return install_rocketmq_python()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """HOME (and working directory) of the client scripts: the C++ client writes its logs there."""
    return tmp_path / "home"


@pytest.fixture
def ons_clients(ali_ons: Path, home: Path) -> ClientRunner:
    """A runner of the ali-ons scripts only: the rocketmq venv is neither needed nor installed."""
    return ClientRunner(home, node_path=ali_ons)


@pytest.fixture(params=FAMILIES, ids=lambda family: family.name)
def family_clients(request, home: Path) -> FamilyClients:
    """Each scenario runs once with ali-ons and once with the C++ client; only the family's own
    client is installed."""
    family = request.param
    if family is ALI_ONS:
        runner = ClientRunner(home, node_path=request.getfixturevalue("ali_ons"))
    else:
        runner = ClientRunner(home, python=request.getfixturevalue("rocketmq_python"))
    return FamilyClients(family, runner)


@pytest.fixture(scope="session")
def python_client_5() -> Path:
    """The python executable of a virtual environment holding rocketmq-python-client==5.1.2."""
    return install_python_client()


@pytest.fixture
def grpc_clients(python_client_5: Path, home: Path) -> Grpc5Clients:
    """The 5.x Python client's scripts (the Node client's too, once ``node_client_5`` installed it)."""
    return Grpc5Clients(ClientRunner(home, python=python_client_5))


@pytest.fixture
def node_clients(grpc_clients: Grpc5Clients) -> Grpc5Clients:
    """``grpc_clients`` with the 5.x Node client on NODE_PATH."""
    grpc_clients.runner.node_path = install_node_client()
    return grpc_clients


@pytest.fixture(scope="module")
def grpc_cluster(tmp_path_factory) -> Iterator[GrpcCluster]:
    """The ``cluster`` fixture's processes, the broker serving gRPC on a free port (``endpoint``),
    SQL92 filters (enablePropertyFilter) and checking open transactions every 0.5 s. One for the
    tests of a module (a name server and a broker take a second or two to start): each of them
    sends to and reads from topics and groups of its own, and none stops the broker."""
    processes = Processes()
    store = tmp_path_factory.mktemp("grpc-cluster") / "broker-store"
    store.mkdir()
    cluster = GrpcCluster(processes.spawn, store)
    cluster.settings.update(FAST_CHECKS, enablePropertyFilter="true")
    try:
        yield cluster.start()
    finally:
        cluster.close()
        processes.stop_all()
