"""ConfigManager: atomic persist with a .bak, load falling back to it; DataVersion."""

import json
import logging

from rmq.broker.config_manager import ConfigManager, DataVersion


class Table(ConfigManager):
    file_name = "table.json"

    def __init__(self, root):
        super().__init__(root)
        self.table = {}

    def set(self, key, value):
        self.table[key] = value
        self.mark_changed()

    def encode(self):
        return {"table": self.table}

    def decode(self, obj):
        table = {str(k): int(v) for k, v in obj["table"].items()}
        self.table = table


def test_persist_keeps_the_previous_version_as_bak(store_dir):
    t = Table(store_dir)
    t.set("a", 1)
    assert t.persist()
    t.set("a", 2)
    assert t.persist()
    assert json.loads((store_dir / "config" / "table.json").read_text()) == {"table": {"a": 2}}
    assert json.loads((store_dir / "config" / "table.json.bak").read_text()) == {"table": {"a": 1}}
    assert not (store_dir / "config" / "table.json.tmp").exists()


def test_persist_writes_only_when_changed(store_dir):
    t = Table(store_dir)
    assert not t.persist()
    t.set("a", 1)
    assert t.changed and t.persist()
    assert not t.changed and not t.persist()
    assert t.persist(force=True)


def test_corrupt_file_falls_back_to_bak(store_dir, caplog):
    t = Table(store_dir)
    t.set("a", 1)
    t.persist()
    t.set("a", 2)
    t.persist()
    (store_dir / "config" / "table.json").write_text('{"table": {"a": 3')  # torn write
    again = Table(store_dir)
    with caplog.at_level(logging.ERROR):
        assert again.load()
    assert again.table == {"a": 1}
    assert "cannot load" in caplog.text


def test_missing_file_falls_back_to_bak(store_dir):
    t = Table(store_dir)
    t.set("a", 1)
    t.persist()
    t.set("a", 2)
    t.persist()
    (store_dir / "config" / "table.json").unlink()
    again = Table(store_dir)
    assert again.load() and again.table == {"a": 1}


def test_fresh_store_loads_empty_and_unreadable_files_report_false(store_dir):
    assert Table(store_dir).load()
    (store_dir / "config").mkdir()
    (store_dir / "config" / "table.json").write_text("not json")
    (store_dir / "config" / "table.json.bak").write_text('{"wrong": 1}')
    t = Table(store_dir)
    assert t.load() is False and t.table == {}


def test_data_version_moves_forward():
    v = DataVersion.new()
    before = v.to_json()
    v.next_version()
    assert v.counter == before["counter"] + 1 and v.timestamp >= before["timestamp"]
    assert DataVersion.from_json(v.to_json()) == v
