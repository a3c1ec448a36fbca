"""What people who pick rmq up rely on besides behaviour, checked with the suite (so the README's one
test command, and CI, run them): lint and format (ruff), types (mypy; strict for ``rmq.protocol`` and
``rmq.client``, configured in pyproject.toml), the ``.pyi`` stubs against the compiled modules
(stubtest), and the codec and record tests again on the pure-Python twins (``RMQ_NO_EXTENSIONS=1``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
# the tests that run again with the pure-Python twins of the compiled codecs
PURE_TWIN_TESTS = ["tests/net", "tests/protocol"]


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> None:
    result = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 0, f"{' '.join(args)} failed:\n{output[-6000:]}"


def compiled_modules() -> list[str]:
    """Every extension module, named after its .pyx file."""
    return sorted(".".join(p.relative_to(SRC).with_suffix("").parts) for p in SRC.rglob("*.pyx"))


def test_ruff_lint():
    run("ruff", "check", ".")


def test_ruff_format():
    run("ruff", "format", "--check", ".")


def test_mypy():
    # not incremental: a cache from before a stub was added has given stale answers
    run("mypy", "--no-incremental")


def test_stubs_match_the_compiled_modules():
    modules = compiled_modules()
    for module in modules:
        stub = SRC.joinpath(*module.split(".")).with_suffix(".pyi")
        assert stub.exists(), f"{module} has no stub {stub.relative_to(ROOT)}"
    run("mypy.stubtest", "--allowlist", "stubtest-allowlist.txt", *modules, env={"MYPYPATH": str(SRC)})


@pytest.mark.slow
def test_codec_and_record_tests_pass_on_the_pure_python_twins():
    run("pytest", "-q", "-p", "no:cacheprovider", *PURE_TWIN_TESTS, env={"RMQ_NO_EXTENSIONS": "1"}, timeout=600)
