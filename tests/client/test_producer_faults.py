"""Producer faults that need no live broker: a real name server, dead name servers, dead brokers."""

from __future__ import annotations

import time

import pytest

from rmq.client import Message, Producer
from rmq.errors import ClientError, RemotingConnectError, RemotingError
from rmq.namesrv import NameServer, NamesrvConfig
from rmq.net import RemotingClient
from tests.helpers import free_port, wait_until
from tests.helpers.broker import InProcessBrokers, create_topic, messages_in
from tests.helpers.requests import register_broker_request


@pytest.fixture
def namesrv():
    with NameServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0)) as ns:
        yield ns


@pytest.fixture
def register_dead_broker(namesrv):
    """Register brokers whose address nothing listens on (the name server forgets a broker when
    the connection it registered on closes, so it stays open for the test)."""
    with RemotingClient() as client:

        def register(topic: str, broker_name: str) -> str:
            addr = f"127.0.0.1:{free_port()}"
            request = register_broker_request(addr, {topic: 4}, broker_name=broker_name)
            answer = client.invoke_sync(namesrv.address, request, 3.0)
            assert answer.code == 0, answer.remark
            return addr

        yield register


def test_unknown_topic_is_refused_with_a_clear_error(namesrv):
    with Producer("pg", namesrv.address, instance_name="unknown-topic") as producer:
        with pytest.raises(ClientError, match="no route for topic 'NoSuchTopic'"):
            producer.send(Message("NoSuchTopic", b"x"))


def test_invalid_message_is_refused_before_any_request(namesrv):
    with Producer("pg", namesrv.address, instance_name="invalid") as producer:
        with pytest.raises(ClientError, match="body is empty"):
            producer.send(Message("T", b""))
        with pytest.raises(ClientError, match="more than the maximum message size"):
            producer.send(Message("T", b"x" * (4 * 1024 * 1024 + 1)))
        with pytest.raises(ClientError, match="one topic"):
            producer.send_batch([Message("T", b"a"), Message("U", b"b")])


def test_invalid_group_and_options_are_refused():
    with pytest.raises(ClientError, match="characters outside"):
        Producer("bad group")
    with pytest.raises(ClientError, match="unknown option.*send_timeout"):
        Producer("pg", send_timeout=1)


def test_dead_name_server_fails_over_to_the_next(namesrv):
    dead = f"127.0.0.1:{free_port()}"
    for _ in range(3):  # the first one tried is random
        with Producer("pg", f"{dead};{namesrv.address}", instance_name=f"failover{_}") as producer:
            with pytest.raises(ClientError, match="no route"):
                producer.send(Message("NoSuchTopic", b"x"))


def test_only_dead_name_servers_raise_naming_each(namesrv):
    dead = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    with Producer("pg", ";".join(dead), instance_name="all-dead") as producer:
        with pytest.raises(RemotingError) as info:
            producer.send(Message("T", b"x"))
    assert all(addr in str(info.value) for addr in dead)


def test_dead_brokers_are_each_tried_then_the_send_fails_quickly(namesrv, register_dead_broker):
    a = register_dead_broker("T", "broker-a")
    b = register_dead_broker("T", "broker-b")
    with Producer("pg", namesrv.address, instance_name="dead-brokers", send_msg_timeout=2.0) as producer:
        began = time.monotonic()
        with pytest.raises(RemotingConnectError) as info:
            producer.send(Message("T", b"x"))
        assert time.monotonic() - began < 2.5
        text = str(info.value)
        assert "after 3 tries" in text and a in text and b in text
        # both brokers are now isolated; the async form fails the same way, through its future
        future = producer.send_async(Message("T", b"y"))
        with pytest.raises(RemotingConnectError):
            future.result(5)


def test_a_send_finds_the_new_master_of_a_broker_set_without_waiting_for_the_route_poll(namesrv, tmp_path):
    """A broker set's master moves (a failover: the old one gone, another registered as master of
    the name): the producer's sends fail at the old address, it asks for the route at once, and
    its sends go on at the new master, though its 30 s route poll is hours away here."""
    stores = [tmp_path / "old", tmp_path / "new"]
    brokers = [InProcessBrokers(store) for store in stores]
    settings = {"namesrvAddr": namesrv.address, "brokerName": "broker-m"}
    try:
        old = brokers[0].start(**settings)
        create_topic(old, "Moving")
        wait_until(lambda: namesrv.route_info.pickup_topic_route("Moving") is not None, 5, "the topic routed")
        with Producer("pg", namesrv.address, instance_name="moving", poll_name_server_interval=3600) as producer:
            assert producer.send(Message("Moving", b"before")).ok
            brokers[0].shutdown_all()
            new = brokers[1].start(**settings)
            create_topic(new, "Moving")

            def sent_to_the_new_master() -> bool:
                try:
                    return producer.send(Message("Moving", b"after")).ok
                except (ClientError, RemotingError):
                    return False

            wait_until(sent_to_the_new_master, 10, "a send answered by the new master", 0.2)
            assert any(m.body == b"after" for q in range(4) for m in messages_in(new, "Moving", q))
    finally:
        for b in brokers:
            b.shutdown_all()
