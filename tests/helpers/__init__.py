"""What many tests need and no test module owns. Tests and conftests import from here, never from
other test modules or conftests (tests/test_tree.py checks it).

    tests.helpers            loopback ports and bounded waits (rmq.perf.procs's, which rmq-perf and
                             the scripts in perf/ use too), and perf/harness.py loaded (this module)
    tests.helpers.golden     golden bytes built from docs/store-format.md with nothing from rmq
    tests.helpers.requests   requests a RocketMQ client sends, built by hand; stored records of a pull
    tests.helpers.frames     raw remoting frames and a blocking socket that reads them
    tests.helpers.store      small store files, for tests that open a MessageStore
    tests.helpers.disk       a tiny tmpfs mounted for a test, and files that fill it up
    tests.helpers.broker     an in-process broker: start it, put into its store, read its queues
    tests.helpers.processes  a Cluster (name server + broker processes) and a BrokerPair (master + slave)
    tests.helpers.acl        a broker process with aclEnable, its plain_acl.yml rewritten under it
    tests.helpers.failover   two broker processes swapping roles by SIGKILL, promotion and rejoin
    tests.helpers.overload   a flood of sends and pulls (a process of its own), a broker's memory,
                             a disk whose msync stalls (msync_stall.c, preloaded)
    tests.helpers.threads    what the leak checks look at: rmq threads, open descriptors
    tests.helpers.compat     third-party RocketMQ clients: where .ci/install-peers put them, families, a runner
    tests.helpers.grpc_clients  Apache's 5.x (gRPC) clients: where they are, a broker with a gRPC endpoint
    tests.helpers.twins      which twin of a codec (compiled or pure Python) a module picks
    tests.helpers.perf_logs  perf logs made for tests: hand-made cells, the synthetic spark/samples
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from rmq.perf.procs import LOOPBACK, free_port, wait_for_port, wait_until

__all__ = ["LOOPBACK", "free_port", "harness", "wait_for_port", "wait_until"]

# Hand-built requests, floods and the failover pair are perf/harness.py's: the operations scripts
# beside it run without the test tree, and the suite runs the same copy.
_HARNESS_PATH = Path(__file__).resolve().parents[2] / "perf" / "harness.py"


def _load_harness():
    spec = importlib.util.spec_from_file_location("harness", _HARNESS_PATH)
    assert spec is not None and spec.loader is not None, _HARNESS_PATH
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


harness = sys.modules.get("harness") or _load_harness()
