"""A producer-and-consumer process loads the SDK, the protocol and the network layer, never the
store, the broker or the name server (the compiled store is a broker's, not a client's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parent / "scripts" / "produce_consume.py"
# the compiled store: StoreCore, its rooms and the IndexFile
STORE_CORE = {
    "rmq.store._store",
    "rmq.store._mapped_file",
    "rmq.store._commit_log",
    "rmq.store._consume_queue",
    "rmq.store._group_commit",
    "rmq.store._index",
}


def test_producer_and_consumer_never_load_the_store(cluster):
    topic = cluster.create_topic("FootprintTopic")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), cluster.namesrv_addr, topic, "20"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = set(done.stdout.split())
    assert "rmq.client" in loaded and "rmq.net" in loaded  # it did use the SDK
    assert not loaded & STORE_CORE
    if os.environ.get("RMQ_NO_EXTENSIONS") != "1":
        assert "rmq.protocol._record" in loaded  # the compiled record codec, without the store
    assert not {name for name in loaded if name.split(".")[1:2] in (["store"], ["broker"], ["namesrv"])}
