"""The import rule of README.md's architecture section, checked over every source file.

    neutral   rmq, rmq.errors, rmq._clock, rmq._files, rmq._service,    import only neutral modules
              rmq._log, rmq.includes (C declarations shared by .pyx files of several areas:
              big-endian loads and stores, decimal text, Java's string hash; .pxd only)
    protocol  rmq.protocol                                              + neutral
    net       rmq.net                                                   + protocol
    settings  rmq.settings (every setting's declaration)                + protocol
    roles     store, namesrv, broker, client, cli                       + net, settings (and all below)
    tools     perf (rmq-perf and its perf logs)                        + client (and all below it)
              broker may also use store; cli may use any role; no other role crosses to another

The store role includes its compiled core, beside its Python side in rmq.store: StoreCore (rmq.store._store), its
rooms (_mapped_file, _commit_log, _consume_queue, _group_commit, _ha_stream) and the IndexFile (_index). The compiled
record codec is protocol's (rmq.protocol._record): the store cimports it, clients import it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"

NEUTRAL = {"rmq", "rmq.errors", "rmq._clock", "rmq._files", "rmq._service", "rmq._log", "rmq.includes"}
ROLES = {"store", "namesrv", "broker", "client", "cli", "perf"}
# what each layer or role may import besides itself
ALLOWED = {
    "neutral": {"neutral"},
    "protocol": {"neutral"},
    "net": {"neutral", "protocol"},
    "settings": {"neutral", "protocol"},
    "store": {"neutral", "protocol", "net", "settings"},
    "namesrv": {"neutral", "protocol", "net", "settings"},
    "client": {"neutral", "protocol", "net", "settings"},
    "broker": {"neutral", "protocol", "net", "settings", "store"},
    "perf": {"neutral", "protocol", "net", "settings", "client"},
    "cli": {"neutral", "protocol", "net", "settings"} | ROLES,
}
# `from rmq.x import y` / `cimport rmq.x` / `from rmq.x cimport y` in Cython sources
_CYTHON_IMPORT = re.compile(r"^\s*(?:from\s+(rmq[\w.]*)\s+c?import|c?import\s+(rmq[\w.]*))", re.M)


def area(module: str) -> str:
    """The layer or role a module belongs to."""
    if module in NEUTRAL or module.startswith("rmq.includes."):
        return "neutral"
    if module == "rmq.settings":
        return "settings"
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ROLES | {"protocol", "net"}:
        return parts[1]
    raise AssertionError(f"{module} is in no layer or role: add it to the rule in README.md and here")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every rmq module ``path`` imports, wherever the import statement is (functions included)."""
    text = path.read_text()
    if path.suffix in (".pyx", ".pxd", ".pxi"):
        return {a or b for a, b in _CYTHON_IMPORT.findall(text)}
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("rmq"):
                found.add(node.module)
                # `from rmq import _store` names a module too
                if node.module == "rmq":
                    found.update(f"rmq.{a.name}" for a in node.names if list((SRC / "rmq").glob(f"{a.name}*")))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("rmq"))
    return found


def sources() -> list[Path]:
    return sorted(p for p in (SRC / "rmq").rglob("*") if p.suffix in (".py", ".pyx", ".pxd", ".pxi"))


def test_the_rule_covers_every_module():
    for path in sources():
        area(module_name(path))


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_follow_the_rule(path: Path):
    mine = area(module_name(path))
    for imported in sorted(imports_of(path)):
        theirs = area(imported)
        assert theirs == mine or theirs in ALLOWED[mine], (
            f"{module_name(path)} ({mine}) imports {imported} ({theirs}): {mine} may use only "
            f"{', '.join(sorted(ALLOWED[mine]))}; put what two roles share in rmq.protocol or a neutral module"
        )


def test_the_rule_catches_a_role_importing_another(tmp_path):
    # the checker itself: a client module importing the broker is refused
    fake = SRC / "rmq" / "client" / "instance.py"
    assert area(module_name(fake)) == "client"
    assert "broker" not in ALLOWED["client"] and "store" not in ALLOWED["client"]
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from rmq.broker.controller import BrokerController\n")
    assert imports_of(probe) == {"rmq.broker.controller"}
    assert area("rmq.broker.controller") not in ALLOWED["client"]
