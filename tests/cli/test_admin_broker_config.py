"""rmq-admin broker config get|update (GET_BROKER_CONFIG 26, UPDATE_BROKER_CONFIG 25): the settings a
broker runs with, the ones that change live changed and kept in its config file, the others refused
with the reason, nothing changed by an update that has one bad key."""

from __future__ import annotations

from pathlib import Path

from rmq.net.codec import RemotingCommand
from rmq.perf.procs import broker_settings, start_broker_process
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.perm import PERM_READ, PERM_WRITE
from tests.helpers.admin import admin, admin_json
from tests.helpers.broker import InProcessBrokers, create_topic
from tests.helpers.requests import send_request

TOPIC = "ConfigTopic"


def update(client, addr: str, text: str) -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, {}, text.encode())
    return client.invoke_sync(addr, request, timeout=3.0)


def pull_of_new_group(client, addr: str) -> RemotingCommand:
    ext = {
        "consumerGroup": "NeverSeenGroup",
        "topic": TOPIC,
        "queueId": "0",
        "queueOffset": "0",
        "maxMsgNums": "1",
        "sysFlag": "4",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": "*",
        "subVersion": "0",
    }
    return client.invoke_sync(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, ext), timeout=3.0)


def test_get_and_update_a_live_setting_kept_in_the_config_file(store_dir: Path, tmp_path: Path, client):
    conf = tmp_path / "broker.conf"
    conf.write_text("# operators' notes stay\nautoCreateSubscriptionGroup = true\n")
    brokers = InProcessBrokers(store_dir)
    try:
        broker = brokers.start(brokerConfigPath=str(conf), clusterAccessKey="ops", clusterSecretKey="s3cret-key")
        namesrv = brokers.started[0].namesrv.address
        create_topic(broker, TOPIC, 1)
        shown = admin_json(namesrv, "broker", "config", "get", broker.config.broker_name)["config"]
        assert shown["autoCreateSubscriptionGroup"] == "true" and shown["listenPort"] == str(broker.config.listen_port)
        assert shown["clusterSecretKey"] == "******"  # a secret never leaves the broker

        code, out = admin(
            namesrv, "broker", "config", "update", broker.broker_addr, "autoCreateSubscriptionGroup=false"
        )
        assert code == 0, out
        answer = pull_of_new_group(client, broker.broker_addr)
        assert answer.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, answer.remark
        got = admin_json(namesrv, "broker", "config", "get", broker.broker_addr, "autoCreateSubscriptionGroup")
        assert got["config"] == {"autoCreateSubscriptionGroup": "false"}
        assert conf.read_text() == "# operators' notes stay\nautoCreateSubscriptionGroup=false\n"
    finally:
        brokers.shutdown_all()


def test_refused_updates_name_the_key_and_change_nothing(store_dir: Path, client):
    brokers = InProcessBrokers(store_dir)
    try:
        broker = brokers.start()
        addr = broker.broker_addr
        for text, code, said in (
            ("brokerName=other", ResponseCode.NO_PERMISSION, "brokerName cannot change while the broker runs"),
            ("longPolingEnable=false", ResponseCode.INVALID_PARAMETER, "did you mean longPollingEnable?"),
            ("longPollingEnable=maybe", ResponseCode.INVALID_PARAMETER, "longPollingEnable"),
            # one bad key: the good one is not taken either
            ("shortPollingTimeMills=50\nflushDiskType=SYNC_FLUSH", ResponseCode.NO_PERMISSION, "flushDiskType"),
        ):
            answer = update(client, addr, text)
            assert answer.code == code and said in answer.remark, (text, answer.remark)
        assert broker.config.short_polling_time_mills == 1000 and broker.config.long_polling_enable
        # no config file: taken, and the answer says it lasts until the broker stops
        answer = update(client, addr, "shortPollingTimeMills=50")
        assert answer.code == ResponseCode.SUCCESS and "until the broker stops" in answer.remark
        assert broker.config.short_polling_time_mills == 50
    finally:
        brokers.shutdown_all()


def test_broker_permission_read_only_reaches_the_routes_and_refuses_sends(store_dir: Path, client):
    brokers = InProcessBrokers(store_dir)
    try:
        broker = brokers.start()
        namesrv = brokers.started[0].namesrv.address
        admin_json(namesrv, "topic", "create", TOPIC, "-q", "1")
        admin_json(namesrv, "broker", "config", "update", broker.broker_addr, f"brokerPermission={PERM_READ}")
        (queue_data,) = admin_json(namesrv, "topic", "route", TOPIC)["queueDatas"]
        assert queue_data["perm"] == PERM_READ
        answer = client.invoke_sync(broker.broker_addr, send_request(TOPIC, b"m"), timeout=3.0)
        assert answer.code == ResponseCode.NO_PERMISSION, answer.remark

        admin_json(
            namesrv, "broker", "config", "update", broker.broker_addr, f"brokerPermission={PERM_READ | PERM_WRITE}"
        )
        (queue_data,) = admin_json(namesrv, "topic", "route", TOPIC)["queueDatas"]
        assert queue_data["perm"] == PERM_READ | PERM_WRITE
        assert (
            client.invoke_sync(broker.broker_addr, send_request(TOPIC, b"m"), timeout=3.0).code == ResponseCode.SUCCESS
        )
    finally:
        brokers.shutdown_all()


def test_a_live_change_survives_a_restart_of_an_rmq_broker_process(spawn, store_dir: Path, tmp_path: Path):
    conf = tmp_path / "broker.conf"
    conf.write_text("longPollingEnable=true\n")
    settings = broker_settings(store_dir)
    proc, addr = start_broker_process(spawn, settings, extra_args=("-c", str(conf)))
    namesrv = f"127.0.0.1:{settings['namesrvListenPort']}"
    admin_json(namesrv, "broker", "config", "update", addr, "longPollingEnable=false")
    proc.terminate()
    proc.wait(10)
    _, addr = start_broker_process(spawn, settings, extra_args=("-c", str(conf)))
    got = admin_json(namesrv, "broker", "config", "get", addr, "longPollingEnable", "brokerConfigPath")
    assert got["config"] == {"longPollingEnable": "false", "brokerConfigPath": str(conf)}
