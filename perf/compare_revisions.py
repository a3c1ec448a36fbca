"""Before and after, interleaved in one run: the same benchmark scripts against two builds of rmq.

    python perf/compare_revisions.py BASE_REV [HEAD_REV] --bench store,broker [--rounds 3]
        [--bench-args "--seconds 2"] [--bench-args "store:--messages 100000 --only put"] [--json] [--keep]

On a small shared VM a figure moves by tens of percent from one minute to the next, so two figures
measured one after the other say little about a change. This tool measures both builds in the
same run, alternately (base, head, base, head, ... for ``--rounds`` rounds), and prints per figure
the median over rounds of each build, its spread (min..max over rounds) and the ratio head/base.
It measures, it does not judge: a slower head is a result, not a failure.

- BASE_REV (and HEAD_REV if given) is any git revision of this checkout. It is exported with
  ``git archive`` into a temp dir and built there (``python setup.py build_ext --inplace -q``,
  which needs Cython). Without HEAD_REV the head is this working tree as it is, uncommitted changes
  included; its extensions are built in place first, so an edited ``.pyx`` is measured, not a
  stale ``.so``.
- ``--bench store,broker`` runs this working tree's ``perf/bench_store.py`` and
  ``perf/bench_broker.py`` (``perf/bench_<name>.py``, which must have a ``--json`` flag) against
  both builds: the same scripts, the build chosen by ``PYTHONPATH=<tree>/src`` in the child's
  environment. Before any figure is taken, a child per build prints where ``rmq`` and the compiled
  module of ``StoreCore`` come from (``rmq._store`` before the store26 move, ``rmq.store._store``
  since); if that is not the build's tree (an install that shadows PYTHONPATH), the tool stops.
- The load generator is the head build's for both sides: every child gets
  ``RMQ_BENCH_GENERATOR_SRC=<head tree>/src``, from which perf/bench_broker.py (and the scripts that
  use its senders) load ``rmq.perf._loadgen`` and its frame templates, whatever build ``rmq`` is. A
  base from before the generator is measured with it too, and a change to the generator moves
  both sides alike: the ratio is the brokers'.
- ``--bench-args ARGS`` is passed to every script; ``--bench-args NAME:ARGS`` only to
  ``perf/bench_<NAME>.py``. Repeatable. A value that starts with ``-`` and holds no space is taken
  for an option unless written with ``=``: ``--bench-args=--only=put``.
- A figure a build cannot produce (a script section that fails on an older base) is shown as
  ``missing`` with the reason below the table. The exit status is 0 unless something is wrong with
  the run itself: a revision that does not export or build, rmq imported from the wrong place, or
  a script failing against the head build.
- ``--json`` prints one JSON object instead of the table (progress still goes to stderr).
- The temp dir (exports, builds, the children's working directory) is removed at the end unless
  ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

PERF = Path(__file__).resolve().parent
CHECKOUT = PERF.parent
SIDES = ("base", "head")
# lines of a failed child's output quoted in an error (a failed bench script says why on its last line)
TAIL_LINES = 10
# where perf/bench_broker.py loads the load generator from (its GENERATOR_ENV)
GENERATOR_ENV = "RMQ_BENCH_GENERATOR_SRC"


@dataclass
class Build:
    """One side of the comparison: a tree with ``src/rmq`` built in place."""

    side: str
    rev: str  # as given, or "working tree"
    commit: str | None  # None: the working tree as it is
    tree: Path

    @property
    def title(self) -> str:
        return f"{self.rev} ({self.commit[:10]})" if self.commit else self.rev

    def env(self, generator: Build | None = None) -> dict[str, str]:
        """The children's environment: this build's ``rmq`` and ``generator``'s load generator."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.tree / "src"), env.get("PYTHONPATH")) if p)
        if generator is not None:
            env[GENERATOR_ENV] = str(generator.tree / "src")
        return env


@dataclass
class Figure:
    bench: str
    name: str
    unit: str
    values: dict[str, list[float]] = field(default_factory=lambda: {side: [] for side in SIDES})

    @property
    def label(self) -> str:
        return f"{self.bench}: {self.name}"

    def ratio(self) -> float | None:
        base, head = self.values["base"], self.values["head"]
        if not base or not head or statistics.median(base) == 0:
            return None
        return statistics.median(head) / statistics.median(base)


@dataclass
class Failure:
    round: int
    bench: str
    side: str
    reason: str


def git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(CHECKOUT), *args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def export(commit: str, into: Path) -> None:
    """The tree of ``commit`` in ``into``, without touching this repository's worktrees or index."""
    into.mkdir(parents=True)
    archive = subprocess.Popen(["git", "-C", str(CHECKOUT), "archive", "--format=tar", commit], stdout=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, capture_output=True, text=True)
    archive.stdout.close()
    if archive.wait() or untar.returncode:
        raise SystemExit(f"could not export {commit} into {into}: {untar.stderr.strip()}")


def build_extensions(build: Build) -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace", "-q"], cwd=build.tree, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"building {build.title} in {build.tree} failed: {tail(done.stdout + done.stderr)}")
    progress(f"built {build.side} {build.title} in {time.monotonic() - started:.0f} s")


# where rmq and StoreCore's compiled module are loaded from, asked by name-neutral means: the module moved
# (rmq._store -> rmq.store._store) and a comparison may span the move
STORE_CORE_FILES = (
    "import sys, rmq, rmq.store.message_store as m; print(rmq.__file__); "
    "print(sys.modules[m.StoreCore.__module__].__file__)"
)


def check_imports(build: Build, run_dir: Path) -> None:
    """Refuse to measure a build the children would not load (an editable install elsewhere, say)."""
    done = subprocess.run(
        [sys.executable, "-c", STORE_CORE_FILES],
        cwd=run_dir,
        env=build.env(),
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"rmq does not import from {build.title}: {tail(done.stderr)}")
    src = (build.tree / "src").resolve()
    for path in done.stdout.split():
        if not Path(path).resolve().is_relative_to(src):
            raise SystemExit(
                f"with PYTHONPATH={src} a child imports {path}, not the {build.side} build "
                f"{build.title} (no src/rmq in that tree, or something ahead of PYTHONPATH on sys.path?)"
            )
    progress(f"{build.side} {build.title}: rmq from {done.stdout.split()[0]}")


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def bench_scripts(names: str) -> dict[str, Path]:
    scripts = {}
    for name in filter(None, (n.strip() for n in names.split(","))):
        script = PERF / f"bench_{name}.py"
        if not script.exists() or "--json" not in script.read_text():
            usable = sorted(p.stem[len("bench_") :] for p in PERF.glob("bench_*.py") if "--json" in p.read_text())
            raise SystemExit(f"no perf/bench_{name}.py with a --json flag; benches that have one: {', '.join(usable)}")
        scripts[name] = script
    if not scripts:
        raise SystemExit("--bench names no benchmark")
    return scripts


def bench_arguments(specs: list[str], names: list[str]) -> dict[str, list[str]]:
    """``--bench-args`` values by bench: unprefixed ones go to every bench, ``NAME:ARGS`` to one."""
    arguments: dict[str, list[str]] = {name: [] for name in names}
    for spec in specs:
        prefixed = re.fullmatch(r"([a-z_]+):(.*)", spec, re.DOTALL)
        if prefixed is None:
            for name in names:
                arguments[name] += shlex.split(spec)
        elif prefixed[1] in arguments:
            arguments[prefixed[1]] += shlex.split(prefixed[2])
        else:
            raise SystemExit(f"--bench-args {spec!r} names bench {prefixed[1]!r}, which --bench does not run")
    return arguments


def run_bench(
    script: Path, arguments: list[str], build: Build, generator: Build, run_dir: Path
) -> tuple[dict, str | None]:
    """One run of a benchmark script against ``build`` loaded by ``generator``'s load generator:
    its figures and, if it failed, why."""
    done = subprocess.run(
        [sys.executable, str(script), *arguments, "--json"],
        cwd=run_dir,
        env=build.env(generator),
        capture_output=True,
        text=True,
    )
    figures = {}
    lines = done.stdout.strip().splitlines()
    if lines:
        try:
            figures = json.loads(lines[-1])
        except json.JSONDecodeError:
            pass
    if done.returncode or not figures:
        return figures, f"exit status {done.returncode}: {tail(done.stderr, 1) or tail(done.stdout, 1)}"
    return figures, None


def number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def cells(figure: Figure, side: str) -> tuple[str, str]:
    values = figure.values[side]
    if not values:
        return "missing", ""
    return number(statistics.median(values)), f"{number(min(values))}..{number(max(values))}"


def table(figures: list[Figure]) -> str:
    header = ["figure", "unit", "base median", "base min..max", "head median", "head min..max", "head/base"]
    rows = [header]
    for figure in figures:
        ratio = figure.ratio()
        rows.append(
            [
                figure.label,
                figure.unit,
                *cells(figure, "base"),
                *cells(figure, "head"),
                "" if ratio is None else f"{ratio:.3f}",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    out = []
    for row in rows:  # names and units to the left, numbers to the right
        out.append(
            "  ".join(
                cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    out.insert(1, "-" * len(out[0]))
    return "\n".join(out)


def as_json(builds: dict[str, Build], args, figures: list[Figure], failures: list[Failure]) -> str:
    def side(values: list[float]) -> dict | None:
        if not values:
            return None
        return {"median": statistics.median(values), "min": min(values), "max": max(values), "values": values}

    return json.dumps(
        {
            "base": {"rev": builds["base"].rev, "commit": builds["base"].commit},
            "head": {"rev": builds["head"].rev, "commit": builds["head"].commit},
            "rounds": args.rounds,
            "bench_args": args.bench_args,
            "figures": [
                {
                    "bench": f.bench,
                    "name": f.name,
                    "unit": f.unit,
                    "base": side(f.values["base"]),
                    "head": side(f.values["head"]),
                    "ratio": f.ratio(),
                }
                for f in figures
            ],
            "failures": [vars(f) for f in failures],
        },
        indent=2,
    )


def prepare(args, work: Path) -> dict[str, Build]:
    """Both builds, exported and built, each checked to be what a child imports."""
    builds: dict[str, Build] = {}
    trees: dict[str, Path] = {}  # commit -> tree, so that an A/A comparison builds once
    for side, rev in zip(SIDES, (args.base_rev, args.head_rev), strict=True):
        if rev is None:
            dirty = git("status", "--porcelain", "--untracked-files=no")
            title = "working tree" + (" (uncommitted changes)" if dirty else "")
            builds[side] = Build(side, title, None, CHECKOUT)
        else:
            commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
            if commit not in trees:
                trees[commit] = work / side
                export(commit, trees[commit])
            builds[side] = Build(side, rev, commit, trees[commit])
    built = set()
    for build in builds.values():
        if build.tree not in built:
            build_extensions(build)
            built.add(build.tree)
        check_imports(build, work / "run")
    return builds


def measure(args, builds: dict[str, Build], run_dir: Path) -> tuple[list[Figure], list[Failure]]:
    scripts = bench_scripts(args.bench)
    arguments = bench_arguments(args.bench_args, list(scripts))
    figures: dict[tuple[str, str], Figure] = {}
    first_seen: dict[str, list[tuple[str, str]]] = {side: [] for side in SIDES}
    failures = []
    for round_ in range(1, args.rounds + 1):
        for bench, script in scripts.items():
            for side in SIDES:  # base, head, base, head...: drift of the machine weighs on both alike
                started = time.monotonic()
                got, reason = run_bench(script, arguments[bench], builds[side], builds["head"], run_dir)
                progress(
                    f"round {round_}/{args.rounds} {bench:8s} {side}: {len(got)} figures "
                    f"in {time.monotonic() - started:.1f} s" + (f"; FAILED, {reason}" if reason else "")
                )
                if reason:
                    failures.append(Failure(round_, bench, side, reason))
                for name, value in got.items():
                    figures.setdefault((bench, name), Figure(bench, name, value["unit"]))
                    figures[(bench, name)].values[side].append(value["median"])
                    if (bench, name) not in first_seen[side]:
                        first_seen[side].append((bench, name))
    # in the order the head's scripts print them; then what only the base printed
    order = first_seen["head"] + first_seen["base"]
    benches = list(scripts)
    return sorted(figures.values(), key=lambda f: (benches.index(f.bench), order.index((f.bench, f.name)))), failures


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog="See the module docstring (perf/compare_revisions.py) for details."
    )
    parser.add_argument("base_rev", metavar="BASE_REV", help="git revision measured as the base")
    parser.add_argument(
        "head_rev",
        metavar="HEAD_REV",
        nargs="?",
        help="git revision measured as the head (default: the working tree as it is)",
    )
    parser.add_argument("--bench", required=True, help="comma-separated names: perf/bench_<name>.py, e.g. store,broker")
    parser.add_argument("--rounds", type=int, default=3, help="alternations base, head (default 3)")
    parser.add_argument(
        "--bench-args",
        action="append",
        default=[],
        metavar="[NAME:]ARGS",
        help="arguments for every bench script, or for bench NAME only; repeatable",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir of exports and builds")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    bench_arguments(args.bench_args, list(bench_scripts(args.bench)))  # refuse bad names before building
    work = Path(tempfile.mkdtemp(prefix="rmq-compare-"))
    (work / "run").mkdir()
    try:
        builds = prepare(args, work)
        figures, failures = measure(args, builds, work / "run")
    finally:
        if args.keep:
            progress(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(as_json(builds, args, figures, failures))
    else:
        print(
            f"base: {builds['base'].title}\nhead: {builds['head'].title}\n"
            f"{args.rounds} rounds interleaved base, head; medians over rounds; "
            f"bench args: {' '.join(map(shlex.quote, args.bench_args)) or 'none'}\n"
        )
        print(table(figures))
        for failure in failures:
            print(f"round {failure.round} {failure.bench} {failure.side}: {failure.reason}")
    head_failed = any(f.side == "head" for f in failures)
    if head_failed or not figures:
        print(
            "error: " + ("a bench failed against the head build" if head_failed else "no figures at all"),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
