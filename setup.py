"""Build the compiled core. Everything else is declared in pyproject.toml.

RMQ_DEBUG=1 builds with -O0 -g and Cython line tracing (for gdb, coverage and profilers).
"""

import os

from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("RMQ_DEBUG") == "1"

EXTENSIONS = [
    # the CommitLog record codec (clients load it too, so it is protocol's and imports no store)
    Extension("rmq.protocol._record", ["src/rmq/protocol/_record.pyx"]),
    # the store's rooms, and StoreCore, the facade over them
    Extension("rmq._mapped_file", ["src/rmq/_mapped_file.pyx"]),
    Extension("rmq._group_commit", ["src/rmq/_group_commit.pyx"]),
    # a master's replication stream: reports in, CommitLog frames out, without the GIL
    Extension("rmq._ha_stream", ["src/rmq/_ha_stream.pyx"]),
    Extension("rmq._commit_log", ["src/rmq/_commit_log.pyx"]),
    Extension("rmq._consume_queue", ["src/rmq/_consume_queue.pyx"]),
    Extension("rmq._store", ["src/rmq/_store.pyx"]),
    # the IndexFile (hash slots + chained entries)
    Extension("rmq._index", ["src/rmq/_index.pyx"]),
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

setup(
    ext_modules=cythonize(
        EXTENSIONS,
        language_level=3,
        # autotestdict off: no ``__test__`` dict of docstrings in every module (nothing runs them as doctests)
        compiler_directives={"linetrace": DEBUG, "embedsignature": True, "autotestdict": False},
    ),
)
