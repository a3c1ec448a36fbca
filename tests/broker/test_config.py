"""broker.conf parsing, --set overrides, typed values and clear errors, for the broker and its store."""

import ipaddress

import pytest

from rmq.broker.config import BrokerConfig, BrokerRole, load_broker_config
from rmq.errors import ConfigError
from rmq.settings import parse_properties, parse_set_options
from rmq.store import FlushDiskType

# the trailing blanks after listenPort are written \x20 so that editors and linters keep them
BROKER_CONF = """\
# RocketMQ's conf/2m-2s-sync/broker-a.properties, roughly
brokerClusterName=DefaultCluster
  brokerName = broker-b
brokerId=0
! a bang comment
deleteWhen=04
fileReservedTime=48
brokerRole=SYNC_MASTER
flushDiskType=SYNC_FLUSH
namesrvAddr=10.0.0.1:9876;\\
            10.0.0.2:9876
storePathRootDir : /data/store
autoCreateTopicEnable false
listenPort=10921\x20\x20\x20
messageDelayLevel=1s 5s 10s
"""


def test_broker_conf_sets_the_broker_and_its_store(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text(BROKER_CONF)
    config, store = load_broker_config(path, parse_set_options(["brokerIP1=127.0.0.1"]))
    assert config.broker_name == "broker-b"
    assert config.broker_role is BrokerRole.SYNC_MASTER
    assert config.namesrv_addr_list == ["10.0.0.1:9876", "10.0.0.2:9876"]
    assert config.auto_create_topic_enable is False
    assert config.listen_port == 10921
    assert config.broker_addr == "127.0.0.1:10921"
    assert config.ha_server_addr == "127.0.0.1:10922"  # haListenPort: listenPort + 1
    assert (store.delete_when, store.file_reserved_time, store.flush_disk_type) == ("04", 48, FlushDiskType.SYNC_FLUSH)
    assert (store.store_path_root_dir, store.message_delay_level) == ("/data/store", "1s 5s 10s")
    # the store writes the broker's address into every record
    assert store.broker_ip1 == "127.0.0.1" and store.listen_port == 10921


def test_set_overrides_the_file(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text("listenPort=10921\nbrokerName=from-file\n")
    config, _ = load_broker_config(path, parse_set_options(["listenPort=20911", "broker_name=from-set"]))
    assert config.listen_port == 20911
    assert config.broker_name == "from-set"


def test_defaults_are_rocketmqs():
    config, _ = load_broker_config()
    assert (config.broker_cluster_name, config.broker_id, config.listen_port) == ("DefaultCluster", 0, 10911)
    assert config.broker_role is BrokerRole.ASYNC_MASTER
    assert config.default_topic_queue_nums == 8 and config.broker_permission == 6
    assert config.wait_time_mills_in_send_queue == 200
    assert config.register_name_server_period == 30000
    # embedded name server: a single-machine default
    assert config.embedded_namesrv and config.broker_ip1 == "127.0.0.1"


def test_broker_ip_defaults_to_a_host_address_with_a_remote_name_server():
    config, _ = load_broker_config(overrides={"namesrvAddr": "10.0.0.1:9876"})
    ipaddress.IPv4Address(config.broker_ip1)
    assert config.broker_ip2 == config.broker_ip1


def test_an_ha_listen_address_is_where_slaves_are_sent_unless_broker_ip2_says_otherwise():
    config, store_config = load_broker_config(overrides={"haListenAddress": "127.0.0.2", "haListenPort": "20912"})
    assert store_config.ha_listen_address == "127.0.0.2" and config.ha_server_addr == "127.0.0.2:20912"
    config, _ = load_broker_config(overrides={"haListenAddress": "127.0.0.2", "brokerIP2": "127.0.0.3"})
    assert config.broker_ip2 == "127.0.0.3"
    config, _ = load_broker_config(overrides={"haListenAddress": "0.0.0.0"})
    assert config.broker_ip2 == config.broker_ip1


def test_ha_security_from_the_cluster_and_tls_settings(tmp_path):
    config, _ = load_broker_config()
    security = config.ha_security()
    assert security.credentials is None and security.server_tls is None and security.client_tls is None
    config, _ = load_broker_config(
        overrides={"clusterAccessKey": "ak", "clusterSecretKey": "sk", "clusterAuthMode": "permissive"}
    )
    security = config.ha_security()
    assert security.credentials is not None and security.credentials.access_key == "ak" and not security.enforcing
    assert "sk" not in repr(security)
    missing = tmp_path / "no-such-ca.pem"
    config, _ = load_broker_config(
        overrides={
            "tlsEnable": "true",
            "tlsServerCertPath": "c",
            "tlsServerKeyPath": "k",
            "tlsClientTrustCertPath": str(missing),
        }
    )
    with pytest.raises(ConfigError, match=f"cannot load tlsClientTrustCertPath={missing}"):
        config.client_tls()


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("listenPort", "abc", "listenPort must be an integer, got 'abc'"),
        ("autoCreateTopicEnable", "yes", "autoCreateTopicEnable must be true or false, got 'yes'"),
        ("brokerRole", "MASTER", "brokerRole must be one of ASYNC_MASTER, SYNC_MASTER, SLAVE, got 'MASTER'"),
        ("listenPort", "70000", "listenPort must be a TCP port (0-65535), got 70000"),
        ("brokerPermission", "9", "brokerPermission must be a perm bit set 0-7, got 9"),
        ("defaultTopicQueueNums", "0", "defaultTopicQueueNums must be at least 1, got 0"),
        ("brokerName", "my broker", "brokerName is used as a topic name: topic name 'my broker' has characters"),
        ("flushDiskType", "SYNC", "flushDiskType must be one of ASYNC_FLUSH, SYNC_FLUSH, got 'SYNC' (from --set)"),
        (
            "deleteWhen",
            "4am",
            "deleteWhen must be hours of the day 0-23 separated by ';' (like 04 or 04;16), got '4am'",
        ),
        ("mappedFileSizeCommitLog", "big", "mappedFileSizeCommitLog must be a size in bytes, like 1073741824 or 1g"),
        ("mappedFileSizeCommitLog", "1k", "mappedFileSizeCommitLog must be a size of at least 4096 bytes, got 1024"),
        ("flushDiskTypo", "SYNC_FLUSH", "flushDiskTypo is not a setting (from --set): did you mean flushDiskType?"),
        ("listenport", "1", "listenport is not a setting (from --set): did you mean listenPort?"),
        ("namesrvAddr", "ns1", "namesrvAddr must be addresses host:port separated by ';', got 'ns1'"),
        ("haListenAddress", "localhost", "haListenAddress must be an IPv4 address, got 'localhost'"),
    ],
)
def test_bad_values_are_refused_clearly(key, value, message):
    with pytest.raises(ConfigError) as e:
        load_broker_config(overrides={key: value})
    assert str(e.value).startswith(message)


def test_slave_and_master_ids_must_agree_with_the_role():
    with pytest.raises(ConfigError, match="set brokerRole=SLAVE"):
        load_broker_config(overrides={"brokerId": "1"})
    with pytest.raises(ConfigError, match="greater than 0"):
        load_broker_config(overrides={"brokerRole": "SLAVE"})
    config, _ = load_broker_config(overrides={"brokerRole": "SLAVE", "brokerId": "1", "brokerIP1": "127.0.0.1"})
    assert config.broker_id == 1


def test_missing_file_and_bad_set_option():
    with pytest.raises(ConfigError, match="cannot read config file '/nonexistent/broker.conf'"):
        load_broker_config("/nonexistent/broker.conf")
    with pytest.raises(ConfigError, match="--set expects key=value, got 'listenPort'"):
        parse_set_options(["listenPort"])


def test_java_properties_syntax():
    text = "a=1\n  b : 2\nc 3\nd==4\ne=x\\\n   y\\\\\nf=\\u0041\\tB\n# g=5\nkey\\ with\\ space=v\nempty=\n"
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "=4",
        "e": "xy\\",
        "f": "A\tB",
        "key with space": "v",
        "empty": "",
    }


def test_to_properties_round_trips():
    config = BrokerConfig(broker_name="x", broker_ip1="127.0.0.1", broker_role=BrokerRole.SYNC_MASTER)
    assert BrokerConfig.from_properties(config.to_properties()) == config


def test_unset_command_line_options_keep_the_defaults():
    config, _ = load_broker_config(overrides={"namesrvAddr": None, "listenPort": None})
    assert config.namesrv_addr is None and config.listen_port == 10911


def test_latin1_file_as_java_reads_it(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_bytes("storePathRootDir=/data/\xe9t\xe9\nbrokerIP1=127.0.0.1\n".encode("latin-1"))
    _, store = load_broker_config(path)
    assert store.store_path_root_dir == "/data/\xe9t\xe9"
