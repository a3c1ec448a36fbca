"""The import rule of README.md's architecture section, checked over every source file.

    neutral   rmq, rmq.errors, rmq._clock, rmq._files, rmq._service,    import only neutral modules
              rmq._log, rmq._rpc_latency, rmq.includes (C declarations shared by .pyx files of several areas:
              big-endian loads and stores, decimal text, Java's string hash; .pxd only)
    protocol  rmq.protocol                                              + neutral
    net       rmq.net                                                   + protocol
    settings  rmq.settings (every setting's declaration)                + protocol
    roles     store, namesrv, controller, broker, client, proxy, cli    + net, settings (and all below)
    tools     perf (rmq-perf and its perf logs),                       + client (and all below it)
              dashboard (rmq-dashboard's pages, over AdminClient)
              broker may also use store; cli may use any role; no other role crosses to another

The store role includes its compiled core, beside its Python side in rmq.store: StoreCore (rmq.store._store), its
rooms (_mapped_file, _commit_log, _consume_queue, _group_commit, _ha_stream) and the IndexFile (_index). The compiled
record codec is protocol's (rmq.protocol._record): the store cimports it, clients import it.

Every import counts, wherever it stands (in a function, under ``if TYPE_CHECKING:``), in Cython sources
too, relative ones resolved; ``from package import module`` names the module. And no module imports
itself back through others: a cycle, even a type-only one, ties two modules' changes together.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"

NEUTRAL = {
    "rmq",
    "rmq.errors",
    "rmq._clock",
    "rmq._files",
    "rmq._service",
    "rmq._log",
    "rmq._rpc_latency",
    "rmq.includes",
}
ROLES = {"store", "namesrv", "controller", "broker", "client", "cli", "perf", "dashboard", "proxy"}
# what each layer or role may import besides itself
ALLOWED = {
    "neutral": {"neutral"},
    "protocol": {"neutral"},
    "net": {"neutral", "protocol"},
    "settings": {"neutral", "protocol"},
    "store": {"neutral", "protocol", "net", "settings"},
    "namesrv": {"neutral", "protocol", "net", "settings"},
    "controller": {"neutral", "protocol", "net", "settings"},
    "client": {"neutral", "protocol", "net", "settings"},
    "broker": {"neutral", "protocol", "net", "settings", "store"},
    "proxy": {"neutral", "protocol", "net", "settings"},
    "perf": {"neutral", "protocol", "net", "settings", "client"},
    "dashboard": {"neutral", "protocol", "net", "settings", "client"},
    "cli": {"neutral", "protocol", "net", "settings"} | ROLES,
}
# Cython's import lines: `from rmq.x import y`, `from rmq.x cimport (y, z)`, `cimport rmq.x`, `from . import y`
_CYTHON_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+c?import[ \t]+(\([^)]*\)|[^\n]*)|c?import[ \t]+(rmq[\w.]*))", re.M
)


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


def is_module(name: str) -> bool:
    """``name`` is a module or package of src (a .py, a compiled source or a folder)."""
    path = SRC.joinpath(*name.split("."))
    return path.is_dir() or any(path.with_suffix(s).exists() for s in (".py", ".pyx", ".pxd"))


def resolved(importer: str, module: str, level: int, names: list[str]) -> set[str]:
    """The rmq modules ``from <level dots><module> import <names>`` in ``path`` names: the module,
    or the submodules among the names when they all are (``from rmq.net import codec`` imports
    rmq.net.codec, not what rmq/net/__init__.py imports)."""
    if level:
        package = importer.split(".")  # importer: a package's own name ends in ".__init__"
        package = package[: len(package) - level]
        module = ".".join(package + ([module] if module else []))
    if module != "rmq" and not module.startswith("rmq."):
        return set()
    submodules = {f"{module}.{name}" for name in names if is_module(f"{module}.{name}")}
    if len(submodules) == len(names):
        return submodules
    return submodules | {module}


def _cython_names(text: str) -> list[str]:
    return [n.split(" as ")[0].strip() for n in text.strip("() \t").replace("\n", " ").split(",") if n.strip()]


def imports_of(path: Path, importer: str | None = None) -> set[str]:
    """Every rmq module ``path`` imports, wherever the import statement is (functions and
    ``if TYPE_CHECKING:`` included), relative imports resolved from ``importer``, the module
    ``path`` is (by default where it sits under src)."""
    if importer is None:
        importer = ".".join(path.relative_to(SRC).with_suffix("").parts) if path.is_relative_to(SRC) else ""
    text = path.read_text()
    found = set()
    if path.suffix in (".pyx", ".pxd", ".pxi"):
        for base, names, plain in _CYTHON_IMPORT.findall(text):
            if plain:
                found.add(plain)
            else:
                stripped = base.lstrip(".")
                found |= resolved(importer, stripped, len(base) - len(stripped), _cython_names(names))
        return found
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            found |= resolved(importer, node.module or "", node.level, [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name == "rmq" or a.name.startswith("rmq."))
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


def test_relative_and_cython_imports_are_read(tmp_path):
    # relative imports resolve to their modules; `from rmq.store import x` names the module x in a .pyx
    probe = tmp_path / "probe.py"
    probe.write_text("from . import send\nfrom ..controller import BrokerController\nfrom .. import role\n")
    expected = {"rmq.broker.processor.send", "rmq.broker.controller", "rmq.broker.role"}
    assert imports_of(probe, "rmq.broker.processor.probe") == expected
    assert imports_of(probe, "rmq.broker.processor.__init__") == expected
    pyx = tmp_path / "probe.pyx"
    pyx.write_text(
        "from rmq.store import _store\nfrom .processor cimport (send,\n    pull)\nfrom rmq.client import x\n"
    )
    assert imports_of(pyx, "rmq.broker.probe") == {
        "rmq.store._store",
        "rmq.broker.processor.send",
        "rmq.broker.processor.pull",
        "rmq.client",
    }
    assert area("rmq.client") not in ALLOWED["broker"]


def import_graph() -> dict[str, set[str]]:
    """Module -> the rmq modules it imports, over src/rmq (a .pyx and its .pxd are one module)."""
    graph: dict[str, set[str]] = {}
    for path in sources():
        name = module_name(path)
        graph.setdefault(name, set()).update(imports_of(path) - {name})
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: one path around each strongly connected component of more
    than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(component)
    return [_path_around(graph, component) for component in components]


def _path_around(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module, as the modules in import order."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph.get(node, set()) & component):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start}")


def test_no_import_cycles():
    # type-only imports count: a cycle under `if TYPE_CHECKING:` is one import away from a real one,
    # and it ties the two modules' changes together all the same
    found = cycles(import_graph())
    assert not found, "import cycles (break each: the shared type to the lower module, or a Protocol):\n" + "\n".join(
        " -> ".join(cycle) for cycle in found
    )


def test_the_cycle_check_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
