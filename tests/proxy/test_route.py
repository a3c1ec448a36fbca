"""QueryRoute against real brokers: each broker's own gRPC endpoint, message types, bad topics."""

from __future__ import annotations

from rmq.broker.topic_config import TopicConfig
from rmq.net import RemotingClient
from rmq.perf.procs import wait_until
from rmq.protocol.codes import ResponseCode
from rmq.protocol.grpc.v2.definition_pb2 import Code, MessageType, Permission
from tests.helpers import LOOPBACK, free_port
from tests.helpers.grpc import messaging_stub, metadata, resource, service
from tests.helpers.requests import call, register_broker_request


def query_route(stub, topic: str):
    return stub.QueryRoute(service.QueryRouteRequest(topic=resource(topic)), metadata=metadata(), timeout=5)


def test_the_route_names_the_brokers_own_grpc_endpoint_and_the_topics_queues(grpc_broker, stub):
    grpc_broker.controller.topic_config_manager.update_topic_config(TopicConfig("RouteMe", 2, 4))
    response = query_route(stub, "RouteMe")
    assert response.status.code == Code.OK
    queues = response.message_queues
    # 2 read-write queues and 2 write-only ones, as RouteActivity lists them
    assert [(q.id, q.permission) for q in queues] == [
        (0, Permission.WRITE), (1, Permission.WRITE), (2, Permission.READ_WRITE), (3, Permission.READ_WRITE),
    ]  # fmt: skip
    broker = queues[0].broker
    assert broker.name == "broker-a" and broker.id == 0
    assert [(a.host, a.port) for a in broker.endpoints.addresses] == [("127.0.0.1", grpc_broker.proxy.port)]
    assert all(list(q.accept_message_types) == [MessageType.NORMAL] for q in queues)


def test_a_topics_message_type_is_what_the_route_accepts(grpc_broker, stub):
    topics = grpc_broker.controller.topic_config_manager
    topics.update_topic_config(TopicConfig("FifoRoute", 1, 1, attributes={"message.type": "FIFO"}))
    topics.update_topic_config(TopicConfig("MixedRoute", 1, 1, attributes={"message.type": "MIXED"}))
    assert list(query_route(stub, "FifoRoute").message_queues[0].accept_message_types) == [MessageType.FIFO]
    mixed = query_route(stub, "MixedRoute").message_queues[0].accept_message_types
    assert set(mixed) == {MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION}


def test_two_broker_sets_behind_one_name_server_each_at_its_own_grpc_port(start_grpc_broker):
    a = start_grpc_broker()
    b = start_grpc_broker(brokerName="broker-b", namesrvAddr=a.namesrv.address)
    for startup in (a, b):
        startup.controller.topic_config_manager.update_topic_config(TopicConfig("BothSets", 1, 1))
    with messaging_stub(a.proxy.port) as stub:

        def both_routed():
            queues = query_route(stub, "BothSets").message_queues
            return {q.broker.name: q.broker.endpoints.addresses[0].port for q in queues}

        ports = wait_until(lambda: len(both_routed()) == 2 and both_routed(), 10, "both broker sets routed")
    assert ports == {"broker-a": a.proxy.port, "broker-b": b.proxy.port}
    assert a.proxy.port != b.proxy.port


def test_a_routed_broker_that_could_not_be_asked_is_routed_once_it_answers(start_grpc_broker):
    """A broker the name server routes before it answers (starting, or elected after a failover) is
    left out of the route only until it answers, not for the 30 s a gRPC port it named is reused."""
    a = start_grpc_broker()
    a.controller.topic_config_manager.update_topic_config(TopicConfig("Later", 1, 1))
    port = free_port()
    # broker-b routed at a port nothing listens on yet (the name server keeps a registration while
    # the connection it came over is open)
    with RemotingClient() as client, messaging_stub(a.proxy.port) as stub:
        request = register_broker_request(f"{LOOPBACK}:{port}", {"Later": 1}, "broker-b")
        assert call(client, a.namesrv.address, request).code == ResponseCode.SUCCESS

        def routed() -> set[str]:
            return {q.broker.name for q in query_route(stub, "Later").message_queues}

        assert routed() == {"broker-a"}
        b = start_grpc_broker(brokerName="broker-b", namesrvAddr=a.namesrv.address, listenPort=str(port))
        b.controller.topic_config_manager.update_topic_config(TopicConfig("Later", 1, 1))
        wait_until(lambda: routed() == {"broker-a", "broker-b"}, 10, "broker-b routed once it answers", 0.2)


def test_a_bad_or_unknown_topic_is_answered_with_its_code(stub):
    assert query_route(stub, "no such topic!").status.code == Code.ILLEGAL_TOPIC
    assert query_route(stub, "").status.code == Code.ILLEGAL_TOPIC
    missing = query_route(stub, "NeverCreated")
    assert missing.status.code == Code.TOPIC_NOT_FOUND and "NeverCreated" in missing.status.message


def test_a_call_without_a_client_id_is_refused(stub):
    route = stub.QueryRoute(service.QueryRouteRequest(topic=resource("TBW102")), timeout=5)
    assert route.status.code == Code.CLIENT_ID_REQUIRED
