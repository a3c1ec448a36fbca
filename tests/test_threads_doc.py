"""docs/threads.md against the threads the code starts, found statically in every source file.

- Every place that starts a thread (``threading.Thread``, a ``ThreadPoolExecutor``, asyncio's default
  executor through ``run_in_executor(None, ...)``, prometheus_client's ``start_http_server``, a
  pthread in a ``.pyx``) is in a module that "Where these threads start" names.
- Every thread name the code gives (to a thread, an event loop, a remoting client or server, a
  ``ServiceThread`` or ``Scheduler``, a pool's prefix) is a row of one of the document's tables, and
  every row names a thread the code gives: a new thread cannot go undocumented, nor a removed one
  stay documented.

Names are compared with their variable parts as placeholders: ``f"rmq-client-{config.instance_name}"``
in the code is ``rmq-client-<instance>`` in the document; a pool's threads add ``_<n>`` to its prefix.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
THREADS_DOC = ROOT / "docs" / "threads.md"

# calls that start a thread, by the called name
STARTERS = {"Thread", "ThreadPoolExecutor", "run_in_executor", "start_http_server", "start_new_thread", "to_thread"}
PYX_STARTERS = re.compile(r"\b(threading\.Thread|ThreadPoolExecutor|pthread_create|start_new_thread)\s*\(")
# calls whose first positional argument is a thread's name
NAMED_BY_FIRST_ARGUMENT = {"Scheduler", "EventLoop"}
# pools: the name given is a prefix, each thread adds _<n> (ThreadPoolExecutor's scheme, and ConsumePool's)
POOL_SUFFIX = "_<>"
# ConsumePool's threads by its second argument: its workers, and its watchdog
POOLS_BY_SECOND_ARGUMENT = {"ConsumePool": (POOL_SUFFIX, "_watch")}
# asyncio's default executor names its threads asyncio_0, asyncio_1, ...
ASYNCIO_EXECUTOR = "asyncio_<>"
# rows of the document that are not threads rmq names
NOT_NAMED_BY_RMQ = {"MainThread", "application threads"}


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _names_in(node: ast.AST) -> set[str]:
    """The strings an expression may evaluate to, f-strings' fields as ``<>`` (``name or f"x-{p}"``)."""
    if isinstance(node, ast.Constant):
        found = {node.value} if isinstance(node.value, str) else set()
    elif isinstance(node, ast.JoinedStr):
        found = {"".join(v.value if isinstance(v, ast.Constant) else "<>" for v in node.values)}
    else:
        found = set().union(*(_names_in(child) for child in ast.iter_child_nodes(node)))
    return {n for n in found if re.search(r"[a-z]", n.replace("<>", ""))}


def _module(path: Path) -> str:
    return ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")


@functools.cache
def scan_sources() -> tuple[dict[str, set[str]], set[str]]:
    """({module: what it calls to start threads}, thread names the code gives); read once per session."""
    starters: dict[str, set[str]] = {}
    names: set[str] = set()
    for path in sorted(SRC.rglob("*.py")):
        module = _module(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                called = _called_name(node)
                if called in STARTERS:
                    starters.setdefault(module, set()).add(called)
                if called == "run_in_executor" and node.args and _is_none(node.args[0]):
                    names.add(ASYNCIO_EXECUTOR)
                if called == "Process":  # a process's name, not a thread's
                    continue
                for keyword in node.keywords:
                    if keyword.arg == "thread_name_prefix":
                        names |= {n + POOL_SUFFIX for n in _names_in(keyword.value)}
                    elif keyword.arg == "name":
                        names |= {n for n in _names_in(keyword.value) if n.startswith("rmq-")}
                if called in NAMED_BY_FIRST_ARGUMENT and node.args:
                    names |= _names_in(node.args[0])
                if called in POOLS_BY_SECOND_ARGUMENT and len(node.args) > 1:
                    names |= {n + s for n in _names_in(node.args[1]) for s in POOLS_BY_SECOND_ARGUMENT[called]}
                if called == "__init__" and _is_super(node.func) and node.args:  # a ServiceThread's name
                    names |= {n for n in _names_in(node.args[0]) if n.startswith("rmq-")}
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr == "name" for t in node.targets
            ):  # a thread renamed after another library started it
                names |= {n for n in _names_in(node.value) if n.startswith("rmq-")}
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):  # a default name
                arguments = node.args.args + node.args.kwonlyargs
                defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + list(node.args.defaults)
                defaults += node.args.kw_defaults
                for argument, default in zip(arguments, defaults, strict=True):
                    if argument.arg == "name" and default is not None:
                        names |= {n for n in _names_in(default) if n.startswith("rmq-")}
    for path in sorted([*SRC.rglob("*.pyx"), *SRC.rglob("*.pxd")]):
        code = "\n".join(line.split("#", 1)[0] for line in path.read_text(encoding="utf-8").splitlines())
        for match in PYX_STARTERS.finditer(code):
            starters.setdefault(_module(path), set()).add(match.group(1))
    return starters, names


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_super(func: ast.AST) -> bool:
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "super"
    )


def documented_threads() -> set[str]:
    """The first cell of every table row of docs/threads.md, placeholders as ``<>``."""
    names = set()
    for line in THREADS_DOC.read_text(encoding="utf-8").splitlines():
        row = re.match(r"^\| `([^`]+)` \|", line) or re.match(r"^\| ([^|`]+?) \|", line)
        if row and not set(row.group(1)) <= set("-: ") and row.group(1) != "thread":
            names.add(re.sub(r"<[^>]*>", "<>", row.group(1)))
    return names - NOT_NAMED_BY_RMQ


def documented_start_modules() -> set[str]:
    text = THREADS_DOC.read_text(encoding="utf-8")
    where = text[text.index("## Where these threads start") :]
    return set(re.findall(r"`(rmq(?:\.\w+)+)(?:\.\w+)*[^`]*`", where))


def _documented_module(module: str, documented: set[str]) -> bool:
    return any(module == d or module.startswith(d + ".") or d.startswith(module + ".") for d in documented)


def test_every_module_that_starts_threads_is_in_where_these_threads_start():
    starters, _ = scan_sources()
    documented = documented_start_modules()
    missing = {m: sorted(calls) for m, calls in starters.items() if not _documented_module(m, documented)}
    assert missing == {}, f"docs/threads.md's 'Where these threads start' does not name {missing}"
    stale = {d for d in documented if not any(_documented_module(m, {d}) for m in starters)}
    assert stale == set(), f"'Where these threads start' names modules that start no thread: {sorted(stale)}"


def test_every_thread_the_code_names_is_documented_and_every_documented_one_exists():
    _, named = scan_sources()
    documented = documented_threads()
    assert sorted(named - documented) == [], "threads the code names that docs/threads.md has no row for"
    assert sorted(documented - named) == [], "rows of docs/threads.md for threads no code names"


def test_the_scan_finds_the_threads_it_must():
    """A scan that finds nothing would pass the two tests above: these are known to exist."""
    starters, named = scan_sources()
    assert {"rmq.net.loop", "rmq._service", "rmq.client.consume_pool"} <= set(starters)
    assert {
        "rmq-broker-loop",
        "rmq-store-ha-stream",
        "rmq-client-timer-<>",
        "rmq-consume-<>_<>",
        "rmq-consume-<>_watch",
    } <= named
