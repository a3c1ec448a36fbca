"""``rmq-broker`` refuses settings it cannot use before it starts anything: exit code 2 and one line
naming the key, the value and what is expected; ``--print-config`` shows every effective setting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmq.broker.config import BrokerRole, load_broker_config
from tests.helpers.settings import print_config_rows

BROKER = [sys.executable, "-m", "rmq.cli.broker"]


def run_broker(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    # HOME points at an empty directory: a broker that started anyway would create ~/store there.
    return subprocess.run(
        [*BROKER, *args], capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(home)}
    )


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["--set", "flushDiskType=SYNC"],
            "flushDiskType must be one of ASYNC_FLUSH, SYNC_FLUSH, got 'SYNC' (from --set)",
        ),
        (
            ["--set", "flushDiskTypo=SYNC_FLUSH"],
            "flushDiskTypo is not a setting (from --set): did you mean flushDiskType?",
        ),
        (
            ["--set", "deleteWhen=4am"],
            "deleteWhen must be hours of the day 0-23 separated by ';' (like 04 or 04;16), got '4am' (from --set)",
        ),
        (["--set", "listenPort=ten"], "listenPort must be an integer, got 'ten' (from --set)"),
        (
            ["--set", "haMasterAddress=10.0.0.1"],
            "haMasterAddress must be an address host:port, got '10.0.0.1' (from --set)",
        ),
        (["--set", "longPollingEnable=yes"], "longPollingEnable must be true or false, got 'yes' (from --set)"),
        (
            ["--set", "maxMessageSize=4 megs"],
            "maxMessageSize must be a size in bytes, like 1073741824 or 1g, got '4 megs' (from --set)",
        ),
        (
            ["-c", "/nonexistent/broker.conf"],
            "cannot read config file '/nonexistent/broker.conf': No such file or directory",
        ),
        (
            ["-n", "ns1"],
            "namesrvAddr must be addresses host:port separated by ';', got 'ns1' ('ns1' is not one) (from -n)",
        ),
    ],
)
def test_a_setting_it_cannot_use_stops_it_with_one_line_and_exit_2(args, line, tmp_path):
    result = run_broker(*args, home=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"Error: {line}"]
    assert list(tmp_path.iterdir()) == [], "nothing may start"


def test_an_unreadable_config_file_and_a_bad_line_in_one(tmp_path):
    unreadable = tmp_path / "unreadable.conf"
    unreadable.mkdir()  # a directory: open() fails as for a file without read permission (tests run as root)
    result = run_broker("-c", str(unreadable), home=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"Error: cannot read config file '{unreadable}': Is a directory"]

    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-b\nfileReservedTime=two days\n")
    result = run_broker("-c", str(conf), home=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"Error: fileReservedTime must be an integer, got 'two days' (from file {conf})"
    ]


def test_print_config_shows_every_setting_and_where_it_came_from(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-b\nflushDiskType=SYNC_FLUSH\nmappedFileSizeCommitLog=64m\n")
    result = run_broker("-c", str(conf), "--set", "listenPort=20911", "-n", "127.0.0.1:9876", "-p", home=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = print_config_rows(result.stdout)
    assert rows["brokerName"] == ("broker-b", f"file {conf}")
    assert rows["flushDiskType"] == ("SYNC_FLUSH", f"file {conf}")
    assert rows["mappedFileSizeCommitLog"] == (str(64 << 20), f"file {conf}")
    assert rows["listenPort"] == ("20911", "--set")
    assert rows["namesrvAddr"] == ("127.0.0.1:9876", "-n")
    assert rows["deleteWhen"] == ("04", "default")
    assert rows["haListenPort"] == ("20912", "derived")  # listenPort + 1, as RocketMQ
    assert rows["slaveTimeout"] == ("3000", "default")
    assert rows["storePathRootDir"] == (str(tmp_path / "store"), "default")
    assert rows["clusterSecretKey"] == ("", "default")  # unset: nothing to mask
    assert len(rows) > 40
    assert list(tmp_path.iterdir()) == [conf], "printing the settings starts nothing"


def test_print_config_masks_the_cluster_secret(tmp_path):
    result = run_broker(
        "--set", "clusterAccessKey=rmq-cluster", "--set", "clusterSecretKey=s3cret-value", "-p", home=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "s3cret-value" not in result.stdout + result.stderr
    assert "clusterSecretKey=******" in result.stdout and "clusterAccessKey=rmq-cluster" in result.stdout


def test_the_two_broker_set_conf_files_fit_on_one_machine():
    """conf/2m-2s-async: broker-a and broker-b, each a master and a slave, every file loadable, no
    port or store shared, all registering with the same name servers."""
    conf = Path(__file__).resolve().parents[2] / "conf" / "2m-2s-async"
    configs = [load_broker_config(path) for path in sorted(conf.glob("*.properties"))]
    brokers = {(b.broker_name, b.broker_id): b for b, _ in configs}
    assert sorted(brokers) == [("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)]
    assert all((b.broker_id == 0) == (b.broker_role is not BrokerRole.SLAVE) for b in brokers.values())
    ports = [port for b, _ in configs for port in (b.listen_port, b.ha_listen_port, b.grpc_server_port)]
    assert len(set(ports)) == len(ports) == 12
    assert len({store.store_path_root_dir for _, store in configs}) == 4
    assert len({b.namesrv_addr for b, _ in configs}) == 1
