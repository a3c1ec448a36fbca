"""The name server's requests (registration, routes, cluster info, expiry) over the wire: real
rmq-namesrv processes on loopback, and the embedded NameServer."""

from __future__ import annotations

import json

from rmq.namesrv import NameServer, NamesrvConfig
from rmq.net.client import RemotingClient
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.replica import REGISTER_CONTROLLER_MODE, REGISTER_EPOCH
from tests.helpers import wait_until
from tests.helpers.processes import start_namesrv
from tests.helpers.requests import register_broker_request


def namesrv(spawn, *args: str) -> str:
    """The address of a new rmq-namesrv process."""
    return start_namesrv(spawn, *args)[1]


def route(client: RemotingClient, addr: str, topic: str) -> RemotingCommand:
    return client.invoke_sync(
        addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": topic}), timeout=3.0
    )


def test_registration_visible_on_two_name_servers_then_expires(spawn, client):
    fast_expiry = ("--scan-interval", "0.1", "--broker-expired", "1.0")
    servers = [namesrv(spawn, *fast_expiry), namesrv(spawn, *fast_expiry)]
    for ns in servers:
        answer = client.invoke_sync(ns, register_broker_request("127.0.0.1:10911", {"TopicTest": 4}), timeout=3.0)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
    for ns in servers:
        answer = route(client, ns, "TopicTest")
        assert answer.code == ResponseCode.SUCCESS
        assert json.loads(answer.body) == {
            "brokerDatas": [
                {"brokerAddrs": {"0": "127.0.0.1:10911"}, "brokerName": "broker-a", "cluster": "DefaultCluster"}
            ],
            "filterServerTable": {},
            "queueDatas": [
                {"brokerName": "broker-a", "perm": 6, "readQueueNums": 4, "topicSysFlag": 0, "writeQueueNums": 4}
            ],
        }
    # Name servers never talk to each other: a broker that stops registering drops out of each.
    remaining = set(servers)

    def dropped_everywhere() -> bool:
        remaining.difference_update(
            [ns for ns in remaining if route(client, ns, "TopicTest").code == ResponseCode.TOPIC_NOT_EXIST]
        )
        return not remaining

    wait_until(
        dropped_everywhere,
        10,
        lambda: f"the broker dropped by every name server after its silence timeout (still routed by {remaining})",
        0.1,
    )


def test_slave_registration_answers_master_address(spawn, client):
    ns = namesrv(spawn)
    client.invoke_sync(ns, register_broker_request("127.0.0.1:10911", {"T": 4}), timeout=3.0)
    answer = client.invoke_sync(ns, register_broker_request("127.0.0.1:20911", {"T": 4}, broker_id=1), timeout=3.0)
    assert answer.ext_fields["masterAddr"] == "127.0.0.1:10911"
    assert answer.ext_fields["haServerAddr"] == "127.0.0.1:10912"
    body = json.loads(route(client, ns, "T").body)
    assert body["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911", "1": "127.0.0.1:20911"}


def test_a_second_master_with_an_epoch_not_newer_is_refused(spawn, client):
    ns = namesrv(spawn)
    first = register_broker_request("127.0.0.1:10911", {"T": 4})
    first.ext_fields[REGISTER_EPOCH] = "2"
    assert client.invoke_sync(ns, first, timeout=3.0).code == ResponseCode.SUCCESS
    second = register_broker_request("127.0.0.1:20911", {"T": 4})
    second.ext_fields[REGISTER_EPOCH] = "2"
    answer = client.invoke_sync(ns, second, timeout=3.0)
    assert answer.code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH
    assert "127.0.0.1:10911" in answer.remark and "epoch 2" in answer.remark
    assert json.loads(route(client, ns, "T").body)["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911"}


def master_request(addr: str, epoch: int, controller_mode: bool) -> RemotingCommand:
    request = register_broker_request(addr, {"T": 4})
    request.ext_fields[REGISTER_EPOCH] = str(epoch)
    if controller_mode:
        request.ext_fields[REGISTER_CONTROLLER_MODE] = "true"
    return request


def test_a_master_the_controllers_elected_takes_the_route_from_a_live_old_one(spawn, client):
    """Controller mode, no cluster credentials: the old master (paused: its connection open, its
    registration fresh) gives way to the master of a newer epoch; it cannot take the route back
    with its old epoch, and outside controller mode a newer unsigned epoch still moves nothing."""
    ns = namesrv(spawn)
    assert client.invoke_sync(ns, master_request("127.0.0.1:10911", 1, True), 3.0).code == ResponseCode.SUCCESS
    answer = client.invoke_sync(ns, master_request("127.0.0.1:20911", 2, True), 3.0)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert json.loads(route(client, ns, "T").body)["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:20911"}
    stale = client.invoke_sync(ns, master_request("127.0.0.1:10911", 1, True), 3.0)
    assert stale.code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH and "epoch 2" in stale.remark
    assert json.loads(route(client, ns, "T").body)["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:20911"}
    # a master outside controller mode keeps the protection against an unsigned registration
    ns2 = namesrv(spawn)
    assert client.invoke_sync(ns2, master_request("127.0.0.1:10911", 1, False), 3.0).code == ResponseCode.SUCCESS
    refused = client.invoke_sync(ns2, master_request("127.0.0.1:20911", 2, True), 3.0)
    assert refused.code == ResponseCode.SYSTEM_ERROR and "live master 127.0.0.1:10911" in refused.remark


def test_cluster_info_topic_list_unregister(spawn, client):
    ns = namesrv(spawn)
    client.invoke_sync(ns, register_broker_request("127.0.0.1:10911", {"A": 4, "B": 2}), timeout=3.0)
    info = client.invoke_sync(ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), timeout=3.0)
    assert json.loads(info.body) == {
        "brokerAddrTable": {
            "broker-a": {"brokerAddrs": {"0": "127.0.0.1:10911"}, "brokerName": "broker-a", "cluster": "DefaultCluster"}
        },
        "clusterAddrTable": {"DefaultCluster": ["broker-a"]},
    }
    topics = client.invoke_sync(
        ns, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), timeout=3.0
    )
    assert json.loads(topics.body) == {"topicList": ["A", "B"]}
    answer = client.invoke_sync(
        ns,
        RemotingCommand.request(
            RequestCode.UNREGISTER_BROKER,
            ext_fields={
                "brokerName": "broker-a",
                "brokerAddr": "127.0.0.1:10911",
                "clusterName": "DefaultCluster",
                "brokerId": "0",
            },
        ),
        timeout=3.0,
    )
    assert answer.code == ResponseCode.SUCCESS
    assert route(client, ns, "A").code == ResponseCode.TOPIC_NOT_EXIST


def test_bad_registrations_are_refused_and_change_nothing(spawn, client):
    ns = namesrv(spawn)
    bad_crc = register_broker_request("127.0.0.1:10911", {"T": 4})
    bad_crc.ext_fields["bodyCrc32"] = "12345"
    answer = client.invoke_sync(ns, bad_crc, timeout=3.0)
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")

    not_json = register_broker_request("127.0.0.1:10911", {"T": 4})
    not_json.body = b"{not json"
    del not_json.ext_fields["bodyCrc32"]
    answer = client.invoke_sync(ns, not_json, timeout=3.0)
    assert answer.code == ResponseCode.SYSTEM_ERROR and "JSON" in answer.remark

    no_name = register_broker_request("127.0.0.1:10911", {"T": 4})
    del no_name.ext_fields["brokerName"]
    answer = client.invoke_sync(ns, no_name, timeout=3.0)
    assert answer.code == ResponseCode.SYSTEM_ERROR and "brokerName" in answer.remark

    unknown = client.invoke_sync(ns, RemotingCommand.request(9999), timeout=3.0)
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED

    assert route(client, ns, "T").code == ResponseCode.TOPIC_NOT_EXIST


def test_query_data_version_keeps_a_broker_alive(spawn, client):
    ns = namesrv(spawn, "--scan-interval", "0.1", "--broker-expired", "1.5")
    client.invoke_sync(ns, register_broker_request("127.0.0.1:10911", {"T": 4}), timeout=3.0)
    # registered at the same time, silent afterwards: once it expired, so would have the other
    client.invoke_sync(
        ns, register_broker_request("127.0.0.1:20911", {"U": 4}, broker_name="broker-silent"), timeout=3.0
    )
    version = json.dumps({"timestamp": 1700000000000, "counter": 1}).encode()

    def keep_alive_until_the_silent_one_expired() -> bool:
        answer = client.invoke_sync(
            ns,
            RemotingCommand.request(
                RequestCode.QUERY_DATA_VERSION,
                ext_fields={
                    "brokerName": "broker-a",
                    "brokerAddr": "127.0.0.1:10911",
                    "clusterName": "DefaultCluster",
                    "brokerId": "0",
                },
                body=version,
            ),
            timeout=3.0,
        )
        assert answer.ext_fields["changed"] == "false"
        return route(client, ns, "U").code == ResponseCode.TOPIC_NOT_EXIST

    wait_until(keep_alive_until_the_silent_one_expired, 10, "the silent broker expired", interval=0.2)
    assert route(client, ns, "T").code == ResponseCode.SUCCESS


def test_embedded_name_server(client):
    with NameServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0)) as ns:
        client.invoke_sync(ns.address, register_broker_request("127.0.0.1:10911", {"Embedded": 1}), timeout=3.0)
        assert ns.route_info.pickup_topic_route("Embedded") is not None
        assert route(client, ns.address, "Embedded").code == ResponseCode.SUCCESS
