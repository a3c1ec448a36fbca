"""Fixtures of the compatibility tests: real third-party RocketMQ clients (installed once into
``.cache/compat``, see tests.helpers.compat) against real rmq processes (the ``cluster`` fixture)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.compat import (
    ALI_ONS,
    FAMILIES,
    ClientRunner,
    FamilyClients,
    install_ali_ons,
    install_rocketmq_python,
)


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
