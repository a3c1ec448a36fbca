"""MessageStoreConfig from a broker config file's camelCase string values, or typed values."""

import pytest

from rmq.errors import ConfigError
from rmq.settings import camel_to_snake, parse_delay_levels
from rmq.store import FlushDiskType, MessageStoreConfig


def test_from_properties_accepts_rocketmq_names_and_strings():
    config = MessageStoreConfig.from_properties(
        {
            "storePathRootDir": "/data/store",
            "mappedFileSizeCommitLog": "1048576",
            "flushDiskType": "SYNC_FLUSH",
            "deleteWhen": "04;05",
            "brokerIP1": "10.0.0.1",
            "listenPort": "10921",
            "brokerName": "broker-a",
            "sync_flush_timeout": 100,
        }
    )
    assert config.store_path_root_dir == "/data/store"
    assert config.mapped_file_size_commit_log == 1 << 20
    assert config.flush_disk_type is FlushDiskType.SYNC_FLUSH and config.sync_flush
    assert config.delete_hours == {4, 5}
    assert (config.broker_ip1, config.listen_port, config.sync_flush_timeout) == ("10.0.0.1", 10921, 100)


def test_defaults_are_rocketmqs():
    c = MessageStoreConfig()
    assert (c.mapped_file_size_commit_log, c.mapped_file_size_consume_queue) == (1 << 30, 6_000_000)
    assert (c.flush_interval_commit_log, c.flush_commit_log_least_pages, c.sync_flush_timeout) == (500, 4, 5000)
    assert (c.file_reserved_time, c.delete_when, c.disk_max_used_space_ratio) == (72, "04", 75)
    assert c.max_message_size == 4 << 20
    assert c.delay_level_ms[:4] == [1000, 5000, 10000, 30000] and c.delay_level_ms[-1] == 7_200_000


def test_bad_values_say_what_was_expected():
    with pytest.raises(ConfigError, match="maxMessageSize must be a size in bytes, like 1073741824 or 1g, got 'big'"):
        MessageStoreConfig.from_properties({"maxMessageSize": "big"})
    with pytest.raises(ConfigError, match="level 2 is '5x'"):
        parse_delay_levels("1s 5x")
    with pytest.raises(ConfigError, match="flushDiskType must be one of ASYNC_FLUSH, SYNC_FLUSH, got 'SOMETIMES'"):
        MessageStoreConfig(flush_disk_type="SOMETIMES")
    # typed values from Python code are checked as strictly as text from a file
    with pytest.raises(ConfigError, match="diskMaxUsedSpaceRatio must be an integer from 0 to 100, got 101"):
        MessageStoreConfig(disk_max_used_space_ratio=101)


@pytest.mark.parametrize(
    "camel, snake",
    [
        ("storePathRootDir", "store_path_root_dir"),
        ("brokerIP1", "broker_ip1"),
        ("mappedFileSizeConsumeQueue", "mapped_file_size_consume_queue"),
    ],
)
def test_camel_to_snake(camel, snake):
    assert camel_to_snake(camel) == snake
