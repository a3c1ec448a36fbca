"""ClientInstance's choice among a broker name's master and slaves, and the credentials its members
share (no network)."""

from __future__ import annotations

import time

import pytest

from rmq.client import Producer
from rmq.client.instance import ClientConfig, ClientInstance
from rmq.errors import ClientError

MASTER, SLAVE1, SLAVE2 = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"


def instance(addrs: dict[int, str]) -> ClientInstance:
    inst = ClientInstance(ClientConfig(namesrv_addr="127.0.0.1:9", instance_name="choice"))
    inst.broker_addrs["b"] = addrs
    return inst


def test_pulls_go_where_suggested_else_to_the_master_else_a_slave():
    inst = instance({0: MASTER, 1: SLAVE1, 2: SLAVE2})
    assert inst.find_broker_addr_in_subscribe("b", 0) == (MASTER, False)
    assert inst.find_broker_addr_in_subscribe("b", 1) == (SLAVE1, True)
    assert inst.find_broker_addr_in_subscribe("nobody", 0) is None
    # a suggested slave missing from the route: the next id up, as RocketMQ's client does
    assert instance({0: MASTER, 2: SLAVE2}).find_broker_addr_in_subscribe("b", 1) == (SLAVE2, True)
    # the master missing from the route: a slave
    assert instance({1: SLAVE1}).find_broker_addr_in_subscribe("b", 0) == (SLAVE1, True)


def test_an_address_that_refused_a_connection_is_passed_over_for_a_while():
    inst = instance({0: MASTER, 1: SLAVE1})
    inst.mark_unreachable(MASTER)
    assert inst.find_broker_addr_in_subscribe("b", 0) == (SLAVE1, True)
    assert inst.find_broker_addr_in_admin("b") == SLAVE1
    # nothing else left: the refused one is tried anyway
    inst.mark_unreachable(SLAVE1)
    assert inst.find_broker_addr_in_subscribe("b", 0) == (MASTER, False)
    assert inst.find_broker_addr_in_admin("b") == MASTER
    # once the while has passed, the master is back
    inst._unreachable = {MASTER: time.monotonic() - 1}
    assert inst.reachable(MASTER) and inst.find_broker_addr_in_admin("b") == MASTER


def test_offsets_go_to_the_master_else_a_slave():
    assert instance({0: MASTER, 1: SLAVE1}).find_broker_addr_in_admin("b") == MASTER
    assert instance({2: SLAVE2, 1: SLAVE1}).find_broker_addr_in_admin("b") == SLAVE1
    assert instance({0: MASTER}).find_broker_addr_in_admin("b", {MASTER}) is None


def test_members_of_one_instance_sign_with_one_account():
    with Producer(
        "pg-signed",
        "127.0.0.1:9",
        instance_name="signed",
        client_ip="127.0.0.1",
        credentials=("app-key-1", "app-secret-1"),
    ):
        with pytest.raises(ClientError, match="already signs with other credentials: give .* another instance_name"):
            Producer(
                "pg-other",
                "127.0.0.1:9",
                instance_name="signed",
                client_ip="127.0.0.1",
                credentials=("app-key-2", "app-secret-2"),
            ).start()
        # the same account shares the instance
        Producer(
            "pg-same",
            "127.0.0.1:9",
            instance_name="signed",
            client_ip="127.0.0.1",
            credentials=("app-key-1", "app-secret-1"),
        ).start().shutdown()


def test_malformed_credentials_are_a_client_error_naming_the_shape():
    with pytest.raises(ClientError, match=r"\(access_key, secret_key\)"):
        Producer("pg-bad", "127.0.0.1:9", credentials=("only-a-key",))
    assert "app-secret-1" not in repr(ClientConfig(credentials=("app-key-1", "app-secret-1")))
