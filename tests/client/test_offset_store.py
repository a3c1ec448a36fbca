"""Offset stores: the local offset file of broadcasting consumers."""

from __future__ import annotations

import json

from rmq.client import MessageQueue
from rmq.client.offset_store import LocalFileOffsetStore


def test_local_offsets_survive_a_restart(tmp_path):
    mq = MessageQueue("T", "broker-a", 3)
    store = LocalFileOffsetStore("g", tmp_path, "127.0.0.1@x")
    assert store.read_store(mq) == -1
    store.update(mq, 42)
    store.update(mq, 40, increase_only=True)
    store.persist([mq])
    path = tmp_path / "127.0.0.1@x" / "g" / "offsets.json"
    assert json.loads(path.read_text()) == {"offsetTable": {"T@broker-a@3": 42}}
    assert LocalFileOffsetStore("g", tmp_path, "127.0.0.1@x").read_store(mq) == 42
    path.write_text("{not json")
    assert LocalFileOffsetStore("g", tmp_path, "127.0.0.1@x").read_store(mq) == -1
