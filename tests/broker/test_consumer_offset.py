"""ConsumerOffsetManager: commits, queries, cleaning, consumerOffset.json across a restart."""

import json

from rmq.broker.consumer_offset import ConsumerOffsetManager


def test_commit_and_query(store_dir):
    m = ConsumerOffsetManager(store_dir)
    assert m.query_offset("g", "T", 0) == -1
    m.commit_offset("g", "T", 0, 12)
    m.commit_offset("g", "T", 1, 5)
    m.commit_offset("g", "T", 1, 3)  # backwards is allowed
    assert m.query_offset("g", "T", 0) == 12 and m.query_offset("g", "T", 1) == 3
    assert m.query_offset("other", "T", 0) == -1
    assert m.query_offsets("g", "T") == {0: 12, 1: 3}


def test_consumer_offset_json_in_rocketmqs_shape_survives_a_restart(store_dir):
    m = ConsumerOffsetManager(store_dir)
    m.commit_offset("g", "T", 0, 12)
    m.commit_offset("g", "T", 3, 7)
    assert m.persist()
    assert not m.persist()  # nothing committed since
    on_disk = json.loads((store_dir / "config" / "consumerOffset.json").read_text())
    assert on_disk == {"offsetTable": {"T@g": {"0": 12, "3": 7}}}
    again = ConsumerOffsetManager(store_dir)
    assert again.load()
    assert again.query_offsets("g", "T") == {0: 12, 3: 7}


def test_reads_a_file_written_by_java_rocketmq(store_dir):
    (store_dir / "config").mkdir()
    (store_dir / "config" / "consumerOffset.json").write_text(
        '{\n\t"offsetTable":{\n\t\t"TopicTest@please_rename_unique_group_name_4":{0:250,1:249,2:251,3:250}\n\t}\n}'
    )
    m = ConsumerOffsetManager(store_dir)
    assert m.load()
    assert m.query_offset("please_rename_unique_group_name_4", "TopicTest", 2) == 251


def test_which_topic_which_group_clean_and_reset(store_dir):
    m = ConsumerOffsetManager(store_dir)
    m.commit_offset("g1", "A", 0, 1)
    m.commit_offset("g1", "B", 0, 1)
    m.commit_offset("g2", "A", 0, 1)
    assert m.which_topic_by_consumer("g1") == {"A", "B"}
    assert m.which_group_by_topic("A") == {"g1", "g2"}
    m.clean_offset_by_topic("A")
    assert m.which_group_by_topic("A") == set() and m.which_topic_by_consumer("g1") == {"B"}
    m.reset_offset("g1", "B", {0: 0, 1: 0})
    assert m.query_offsets("g1", "B") == {0: 0, 1: 0}
    m.clone_offset("g1", "g3", "B")
    assert m.query_offsets("g3", "B") == {0: 0, 1: 0}
    m.remove_offset("g1")
    assert m.which_topic_by_consumer("g1") == set() and m.which_topic_by_consumer("g3") == {"B"}


def test_a_slave_keeps_its_own_commits_over_its_masters_until_the_master_has_them(store_dir):
    m = ConsumerOffsetManager(store_dir, slave=True)
    assert m.copy_from_master({"T@g": {"0": 5, "1": 5}}) == {}
    assert m.query_offsets("g", "T") == {0: 5, 1: 5}
    # the master is away: clients commit here
    m.commit_offset("g", "T", 0, 9)
    m.commit_offset("g", "T", 1, 4)
    m.commit_offset("h", "T", 0, 2)
    # the master comes back with an older table: the higher commits stay and go to the master;
    # a commit the master has passed (queue 1) is dropped
    ahead = m.copy_from_master({"T@g": {"0": 5, "1": 6}})
    assert ahead == {"T@g": {0: 9}, "T@h": {0: 2}}
    assert m.query_offsets("g", "T") == {0: 9, 1: 6} and m.query_offset("h", "T", 0) == 2
    # the marks survive a restart of the slave
    assert m.persist()
    again = ConsumerOffsetManager(store_dir, slave=True)
    assert again.load() and again.slave_commits() == {"T@g": {0: 9}, "T@h": {0: 2}}
    # once the master took them, the slave follows the master again, backwards too (a reset)
    m.master_has("T@g", 0, 9)
    m.master_has("T@h", 0, 2)
    assert m.slave_commits() == {}
    assert m.copy_from_master({"T@g": {"0": 1}}) == {}
    assert m.query_offsets("g", "T") == {0: 1} and m.query_offset("h", "T", 0) == -1


def test_a_master_keeps_no_slave_commits(store_dir):
    m = ConsumerOffsetManager(store_dir)
    m.commit_offset("g", "T", 0, 9)
    assert m.slave_commits() == {}
    assert "slaveCommitTable" not in m.encode()
