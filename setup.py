"""Build the compiled core. Everything else is declared in pyproject.toml.

RMQ_DEBUG=1 builds with -O0 -g and Cython line tracing (for gdb, coverage and profilers).

The modules are cythonized and compiled on every core (one at a time, `pip install .` took 2.5 min
on two cores). A build reuses what the last one in this tree made (build/, the .c files) unless a
source changed: pip builds in an isolated environment with a fresh Cython, whose own .pxd files are
newer than every .c file, so Cython alone would regenerate them all, and then every module is
compiled again, for `pip install '.[spark]'` after `pip install .`.
"""

import json
import os
from pathlib import Path

import Cython
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("RMQ_DEBUG") == "1"
JOBS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
ROOT = Path(__file__).resolve().parent
# what the .c files of the last build were generated with: another Cython or RMQ_DEBUG makes them all again
STAMP = ROOT / "build" / "cythonized.json"

EXTENSIONS = [
    # the CommitLog record codec (clients load it too, so it is protocol's and imports no store)
    Extension("rmq.protocol._record", ["src/rmq/protocol/_record.pyx"]),
    # the store's rooms, and StoreCore, the facade over them
    Extension("rmq.store._mapped_file", ["src/rmq/store/_mapped_file.pyx"]),
    Extension("rmq.store._group_commit", ["src/rmq/store/_group_commit.pyx"]),
    # a master's replication stream: reports in, CommitLog frames out, without the GIL
    Extension("rmq.store._ha_stream", ["src/rmq/store/_ha_stream.pyx"]),
    Extension("rmq.store._commit_log", ["src/rmq/store/_commit_log.pyx"]),
    Extension("rmq.store._consume_queue", ["src/rmq/store/_consume_queue.pyx"]),
    Extension("rmq.store._store", ["src/rmq/store/_store.pyx"]),
    # the IndexFile (hash slots + chained entries)
    Extension("rmq.store._index", ["src/rmq/store/_index.pyx"]),
    # remoting frame codec
    Extension("rmq.net._codec", ["src/rmq/net/_codec.pyx"]),
    # the client's send requests, encoded straight to their frames
    Extension("rmq.client._send_wire", ["src/rmq/client/_send_wire.pyx"]),
    # the broker's compiled send lane (over the store's put_raw and the codec's FastLane)
    Extension("rmq.broker._send_lane", ["src/rmq/broker/_send_lane.pyx"]),
    # its pull lane (over the store's get_into), handed PULL_MESSAGE frames by the send lane
    Extension("rmq.broker._pull_lane", ["src/rmq/broker/_pull_lane.pyx"]),
    # rmq-perf's worker loop (rmq's remoting and Redis's RESP), so that a figure measures the broker
    Extension("rmq.perf._loadgen", ["src/rmq/perf/_loadgen.pyx"]),
]

compile_args = ["-O0", "-g"] if DEBUG else ["-O3"]
macros = [("CYTHON_TRACE_NOGIL", "1")] if DEBUG else []
for ext in EXTENSIONS:
    ext.extra_compile_args = compile_args
    ext.define_macros = macros


def generated_with() -> dict:
    return {"cython": Cython.__version__, "debug": DEBUG}


def newest_source() -> float:
    """The last change to anything a .c file is generated from (coarse: any .pyx, .pxd, .pxi or .h
    of the tree, so a module is only reused when nothing of ours changed)."""
    sources = [ROOT / "setup.py"]
    for pattern in ("*.pyx", "*.pxd", "*.pxi", "*.h"):
        sources += (ROOT / "src").rglob(pattern)
    return max(p.stat().st_mtime for p in sources)


def reusable(ext: Extension, since: float) -> Path | None:
    """The .c file of ``ext`` when it can be compiled (or its build reused) as it is."""
    c_file = ROOT / Path(ext.sources[0]).with_suffix(".c")
    return c_file if c_file.exists() and c_file.stat().st_mtime >= since else None


def extensions() -> list[Extension]:
    try:
        same_options = json.loads(STAMP.read_text()) == generated_with()
    except (OSError, ValueError):
        same_options = False
    since = newest_source()
    ready, to_cythonize = [], []
    for ext in EXTENSIONS:
        c_file = reusable(ext, since) if same_options else None
        if c_file is None:
            to_cythonize.append(ext)
        else:
            ext.sources = [str(c_file.relative_to(ROOT))]
            ready.append(ext)
    cythonized = (
        cythonize(
            to_cythonize,
            language_level=3,
            nthreads=JOBS,
            # other options or another Cython: every .c file again, whatever the timestamps say
            force=not same_options,
            # autotestdict off: no ``__test__`` dict of docstrings in every module (nothing runs them as doctests)
            compiler_directives={"linetrace": DEBUG, "embedsignature": True, "autotestdict": False},
        )
        if to_cythonize
        else []
    )
    STAMP.parent.mkdir(exist_ok=True)
    STAMP.write_text(json.dumps(generated_with()))
    return ready + cythonized


setup(
    ext_modules=extensions(),
    # setuptools compiles the modules in parallel and skips one whose build is newer than its .c file
    options={"build_ext": {"parallel": JOBS}},
)
