"""rmq.settings: every setting declared once, read strictly, with where each value came from."""

from __future__ import annotations

import dataclasses

import pytest

from rmq.broker.config import BrokerConfig
from rmq.controller import ControllerSettings
from rmq.dashboard.config import DashboardSettings
from rmq.errors import ConfigError
from rmq.namesrv import NamesrvConfig, NamesrvSettings
from rmq.net.server import ConnectionLimits
from rmq.settings import (
    CONTROLLER_SETTINGS,
    DASHBOARD_SETTINGS,
    NAMESRV_SETTINGS,
    SETTINGS,
    load_settings,
    lookup,
)
from rmq.store import FlushDiskType, MessageStoreConfig

CONFIGS = (BrokerConfig, MessageStoreConfig)


def test_every_declared_setting_is_a_field_and_every_field_is_declared():
    used = set()
    for config in CONFIGS:
        for field in dataclasses.fields(config):
            declared = field.metadata["setting"]
            assert SETTINGS[declared.key] is declared, f"{config.__name__}.{field.name}"
            assert field.name == declared.attr, f"{config.__name__}.{field.name} should be {declared.attr}"
            used.add(declared.key)
    assert used == set(SETTINGS), f"declared but used by no config: {set(SETTINGS) - used}"


@pytest.mark.parametrize(
    "settings, table",
    [
        (NamesrvSettings, NAMESRV_SETTINGS),
        (ControllerSettings, CONTROLLER_SETTINGS),
        (DashboardSettings, DASHBOARD_SETTINGS),
    ],
)
def test_every_name_server_controller_and_dashboard_setting_is_a_field_of_its_settings_and_back(settings, table):
    fields = {f.metadata["setting"].key: f for f in settings.settings_fields()}
    assert set(fields) == set(table)
    for key, field in fields.items():
        # a field declared once for several roles (rmq.settings.ServerSettings) carries one table's
        # declaration: it must read and default the same in this one
        declared = field.metadata["setting"]
        assert field.name == table[key].attr
        assert type(declared.kind) is type(table[key].kind) and declared.default == table[key].default, key
        assert table[key].check(table[key].default) == table[key].default


def test_a_name_server_and_a_broker_share_the_server_keys_but_not_listen_port():
    assert NAMESRV_SETTINGS["listenPort"].default == SETTINGS["namesrvListenPort"].default == 9876
    assert SETTINGS["listenPort"].default == 10911
    for key in ("serverChannelMaxIdleTimeSeconds", "serverSocketBacklog", "serverFrameTimeoutSeconds"):
        assert NAMESRV_SETTINGS[key].default == SETTINGS[key].default


def test_clients_look_for_a_name_server_where_one_listens_by_default():
    from rmq.client.admin_client import DEFAULT_NAMESRV
    from rmq.client.instance import ClientConfig

    assert ClientConfig().namesrv_addr == DEFAULT_NAMESRV == f"127.0.0.1:{NAMESRV_SETTINGS['listenPort'].default}"


def test_the_default_server_limits_are_the_settings_defaults():
    # rmq.net cannot read settings (it sits below them): what a bare RemotingServer allows is checked here
    assert BrokerConfig().connection_limits() == ConnectionLimits()
    # rmq-namesrv keeps its KV config in kvConfigPath; a NamesrvConfig made in code (a broker's
    # embedded name server, a test's) keeps it in memory
    settings_default = NamesrvSettings().namesrv_config()
    assert settings_default.kv_config_path == NAMESRV_SETTINGS["kvConfigPath"].default
    assert dataclasses.replace(settings_default, kv_config_path=None) == NamesrvConfig()


@pytest.mark.parametrize("key", sorted(SETTINGS))
def test_every_default_passes_its_own_check_and_has_help(key):
    setting = SETTINGS[key]
    assert setting.check(setting.default) == setting.default
    assert setting.help and setting.section in ("broker", "store")


def test_later_layers_win_and_say_where_they_came_from(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=10921\nflushDiskType=SYNC_FLUSH\nbrokerName=from-file\n")
    loaded = load_settings(conf, [("--set", {"listen_port": "20911"}), ("-n", {"namesrvAddr": "127.0.0.1:9876"})])
    assert loaded.value("listenPort") == 20911 and loaded.source("listenPort") == "--set"
    assert loaded.value("flushDiskType") is FlushDiskType.SYNC_FLUSH
    assert loaded.source("flushDiskType") == f"file {conf}"
    assert loaded.source("namesrvAddr") == "-n"
    assert loaded.value("fileReservedTime") == 72 and loaded.source("fileReservedTime") == "default"


@pytest.mark.parametrize(
    "text, size",
    [("4096", 4096), ("64k", 64 << 10), ("512m", 512 << 20), ("1g", 1 << 30), ("2GiB", 2 << 30), (" 1 MB ", 1 << 20)],
)
def test_sizes_take_units(text, size):
    assert load_settings(layers=[("--set", {"mappedFileSizeCommitLog": text})]).value("mappedFileSizeCommitLog") == size


@pytest.mark.parametrize(
    "key, hint",
    [
        ("flushDiskTypo", "did you mean flushDiskType?"),
        ("FLUSHDISKTYPE", "did you mean flushDiskType?"),
        ("delete_when_hours", "did you mean deleteWhen?"),
        ("colour", "rmq-broker --print-config lists every setting"),
    ],
)
def test_unknown_keys_are_refused_with_a_hint(key, hint):
    with pytest.raises(ConfigError) as e:
        lookup(key, "--set")
    assert str(e.value) == f"{key} is not a setting (from --set): {hint}"


@pytest.mark.parametrize("value", ["04", "04;16", "0;23"])
def test_delete_when_takes_hours_of_the_day(value):
    assert MessageStoreConfig(delete_when=value).delete_when == value


@pytest.mark.parametrize("value", ["4am", "24", "04;", "-1"])
def test_delete_when_refuses_what_is_not_hours(value):
    with pytest.raises(ConfigError, match="deleteWhen must be hours of the day 0-23"):
        MessageStoreConfig(delete_when=value)


def test_the_store_config_round_trips_through_properties():
    config = MessageStoreConfig(
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        mapped_file_size_commit_log=1 << 20,
        delete_when="03;15",
        store_path_root_dir="/data/store",
    )
    assert MessageStoreConfig.from_properties(config.to_properties()) == config
