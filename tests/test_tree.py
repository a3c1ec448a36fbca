"""The test tree's own rules, checked over every file under tests/:

- a test module imports rmq, third-party packages and ``tests.helpers``, never another test module
  or a conftest (what two tests share lives in tests.helpers; fixtures reach tests through conftests);
- tests/ mirrors src/rmq/: every test directory is a package named after the rmq package it tests
  (``tests/compat``, the tests that drive third-party clients, and ``tests/helpers`` aside).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SRC_RMQ = TESTS.parent / "src" / "rmq"
# directories of the tree that mirror no rmq package
NOT_MIRRORS = {"compat", "helpers"}
# directories of scripts run as processes of their own (third-party clients, a footprint probe)
SCRIPT_DIRS = {Path("compat/clients"), Path("client/scripts")}


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def local_module_names() -> set[str]:
    """Top-level names a test file could import a test module or conftest by (``from remoting_helpers
    import ...`` works when pytest puts a test directory without __init__.py on sys.path)."""
    return {p.stem for p in python_files() if p.parent.name != "helpers"} - {"__init__"}


def forbidden_imports(path: Path) -> list[str]:
    """The imports in ``path`` (anywhere in it, functions included) of a test module or a conftest.
    A script of a SCRIPT_DIRS directory may import the modules beside it: they run together, in an
    interpreter of their own (a client's virtual environment), where tests.helpers is out of reach."""
    local = local_module_names()
    if path.parent.is_relative_to(TESTS) and path.parent.relative_to(TESTS) in SCRIPT_DIRS:
        local -= {p.stem for p in path.parent.glob("*.py")}
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: a sibling module
                found.append("." * node.level + (node.module or node.names[0].name))
                continue
            names = [node.module] if node.module else []
            if node.module == "tests":
                names = [f"tests.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if name == "tests.helpers" or name.startswith("tests.helpers."):
                continue
            if top == "tests" or top in local:
                found.append(name)
    return found


def test_nothing_imports_a_test_module_or_a_conftest():
    bad = {str(p.relative_to(TESTS)): imports for p in python_files() if (imports := forbidden_imports(p))}
    assert not bad, (
        f"test modules or conftests imported (file: imports): {bad}; move what is shared into "
        f"tests.helpers (a fixture: define it in a conftest that calls tests.helpers)"
    )


def test_the_import_check_catches_each_kind(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from tests.conftest import free_port\n"
        "import tests.broker.conftest\n"
        "from tests import conftest\n"
        "def f():\n"
        "    from test_codec import JAVA_HEADER\n"
        "    from . import sibling\n"
        "from tests.helpers import wait_until\n"
        "from tests.helpers.requests import call\n"
    )
    assert forbidden_imports(probe) == [
        "tests.conftest",
        "tests.broker.conftest",
        "tests.conftest",
        "test_codec",
        ".sibling",
    ]


def mirroring_directories() -> list[Path]:
    """Every directory of tests/ but the script directories and the trees that mirror nothing."""
    relative = (d.relative_to(TESTS) for d in TESTS.rglob("*") if d.is_dir() and "__pycache__" not in d.parts)
    return sorted(d for d in relative if d not in SCRIPT_DIRS and d.parts[0] not in NOT_MIRRORS)


@pytest.mark.parametrize("directory", mirroring_directories(), ids=str)
def test_each_test_directory_is_a_package_mirroring_one_of_rmq(directory: Path):
    assert (SRC_RMQ / directory / "__init__.py").exists(), f"tests/{directory} mirrors no package src/rmq/{directory}"
    assert (TESTS / directory / "__init__.py").exists(), f"tests/{directory} has no __init__.py"
