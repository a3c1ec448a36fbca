"""Draining a broker and the name servers' KV config with rmq-admin, against a real in-process broker
and its name server: broker wipe-write-perm / add-write-perm (WIPE_WRITE_PERM_OF_BROKER 205,
ADD_WRITE_PERM_OF_BROKER 327), topic update --perm, kv put / get / delete (100, 101, 102)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from rmq.namesrv import NameServer, NamesrvConfig, NamesrvSettings
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.perm import PERM_READ, PERM_WRITE
from tests.helpers.admin import admin, admin_json

TOPIC = "DrainTopic"
READ_ONLY = "ReadOnlyTopic"


def routed(namesrv: str, topic: str) -> tuple[int, int, int]:
    (queue_data,) = admin_json(namesrv, "topic", "route", topic)["queueDatas"]
    return queue_data["perm"], queue_data["readQueueNums"], queue_data["writeQueueNums"]


def test_wipe_write_perm_drains_a_broker_until_add_write_perm(embedded):
    broker, namesrv = embedded
    name = broker.config.broker_name
    admin_json(namesrv, "topic", "create", TOPIC, "-q", "2")
    admin_json(namesrv, "topic", "create", READ_ONLY, "-q", "1", "--perm", str(PERM_READ))
    topics = len(broker.topic_config_manager.build_serialize_wrapper()["topicConfigTable"])

    wiped = admin_json(namesrv, "broker", "wipe-write-perm", name)
    assert wiped["topicCounts"] == {namesrv: topics}
    assert routed(namesrv, TOPIC) == (PERM_READ, 2, 2)
    # the broker's heartbeat registrations (same topics, same data version) do not undo it
    for future in broker.register_broker_all():
        assert future.result(5).code == ResponseCode.SUCCESS
    assert routed(namesrv, TOPIC) == (PERM_READ, 2, 2)

    code, out = admin(namesrv, "broker", "add-write-perm", name)
    assert code == 0 and f"gave write permission back to {topics} topic routes of {name}" in out
    assert routed(namesrv, TOPIC) == (PERM_READ | PERM_WRITE, 2, 2)
    assert routed(namesrv, READ_ONLY) == (PERM_READ, 1, 1)  # it was read-only before the drain


def test_topic_update_perm_changes_the_permission_and_keeps_the_queues(embedded):
    broker, namesrv = embedded
    admin_json(namesrv, "topic", "create", TOPIC, "-q", "2", "--order")
    updated = admin_json(namesrv, "topic", "update", TOPIC, "--perm", str(PERM_READ))
    assert (updated["perm"], updated["readQueueNums"], updated["writeQueueNums"]) == (PERM_READ, 2, 2)
    assert routed(namesrv, TOPIC) == (PERM_READ, 2, 2)
    config = broker.topic_config_manager.select_topic_config(TOPIC)
    assert (config.perm, config.read_queue_nums, config.write_queue_nums, config.order) == (PERM_READ, 2, 2, True)


def test_kv_config_put_get_delete(embedded, client):
    _, namesrv = embedded
    code, out = admin(namesrv, "kv", "put", "ORDER_TOPIC_CONFIG", TOPIC, "broker-a:4")
    assert code == 0, out
    assert admin_json(namesrv, "kv", "get", "ORDER_TOPIC_CONFIG", TOPIC)["value"] == "broker-a:4"
    # as a 4.x client asks it
    ask = RemotingCommand.request(RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": TOPIC})
    assert client.invoke_sync(namesrv, ask, timeout=3.0).ext_fields["value"] == "broker-a:4"

    admin_json(namesrv, "kv", "delete", "ORDER_TOPIC_CONFIG", TOPIC)
    code, out = admin(namesrv, "kv", "get", "ORDER_TOPIC_CONFIG", TOPIC)
    assert code == 3 and f"No config item, Namespace: ORDER_TOPIC_CONFIG Key: {TOPIC}" in out
    answer = client.invoke_sync(namesrv, ask, timeout=3.0)
    assert answer.code == ResponseCode.QUERY_NOT_FOUND


def test_kv_config_survives_a_name_server_restart(tmp_path: Path):
    path = str(tmp_path / "kvConfig.json")
    config = NamesrvSettings.from_properties({"listenPort": "0", "kvConfigPath": path}).namesrv_config()
    namesrv = NameServer(config).start()
    try:
        assert admin(namesrv.address, "kv", "put", "NS", "k", "v1")[0] == 0
    finally:
        namesrv.shutdown()
    namesrv = NameServer(config).start()
    try:
        assert admin_json(namesrv.address, "kv", "get", "NS", "k")["value"] == "v1"
    finally:
        namesrv.shutdown()
    assert json.loads(Path(path).read_text()) == {"configTable": {"NS": {"k": "v1"}}}


def test_a_kv_config_file_that_does_not_read_stops_rmq_namesrv_with_the_reason(spawn, tmp_path: Path):
    path = tmp_path / "kvConfig.json"
    path.write_text("{not json")
    proc = spawn("-m", "rmq.cli.namesrv", "--port", "0", "--set", f"kvConfigPath={path}", stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "kvConfigPath" in err.decode() and "configTable" in err.decode()


def test_a_kv_put_the_name_server_cannot_write_is_refused_and_not_kept(tmp_path: Path):
    namesrv = NameServer(NamesrvConfig(listen_port=0, kv_config_path=str(tmp_path / "gone" / "kv.json"))).start()
    (tmp_path / "gone").write_text("")  # where its directory should be: the file cannot be written
    try:
        code, out = admin(namesrv.address, "kv", "put", "NS", "k", "v1")
        assert code == 1 and "SYSTEM_ERROR" in out and "KV config not changed" in out
        assert admin(namesrv.address, "kv", "get", "NS", "k")[0] == 3
    finally:
        namesrv.shutdown()


def test_an_embedded_name_server_keeps_the_kv_config_in_memory():
    assert NamesrvConfig().kv_config_path is None
