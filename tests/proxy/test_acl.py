"""ACL for 5.x clients: their signed metadata checked against the broker's plain ACL accounts and
permissions, as a 4.x client's signed requests are."""

from __future__ import annotations

import grpc
import pytest

from rmq.broker.topic_config import TopicConfig
from rmq.perf.procs import wait_until
from rmq.protocol.grpc.v2.definition_pb2 import Code
from tests.helpers.grpc import (
    Telemetry,
    consumer_settings,
    message,
    messaging_stub,
    metadata,
    producer_settings,
    resource,
    send,
    service,
)

RULES = """\
accounts:
  - accessKey: producer-key
    secretKey: producer-secret
    defaultTopicPerm: DENY
    topicPerms: [Orders=PUB]
  - accessKey: consumer-key
    secretKey: consumer-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: DENY
    groupPerms: [billing=SUB]
"""
GOOD = {"access_key": "producer-key", "secret_key": "producer-secret"}


@pytest.fixture
def acl_broker(start_grpc_broker, tmp_path):
    rules = tmp_path / "plain_acl.yml"
    rules.write_text(RULES)
    startup = start_grpc_broker(aclEnable="true", aclConfigFile=str(rules))
    for topic in ("Orders", "Secrets"):
        startup.controller.topic_config_manager.update_topic_config(TopicConfig(topic, 1, 1))
    return startup


def test_a_signed_client_sends_where_its_account_may_publish(acl_broker):
    with messaging_stub(acl_broker.proxy.port) as stub:
        assert send(stub, message("Orders", b"ok", "A-1"), **GOOD).status.code == Code.OK
        route = stub.QueryRoute(
            service.QueryRouteRequest(topic=resource("Orders")), metadata=metadata(**GOOD), timeout=5
        )
        assert route.status.code == Code.OK and route.message_queues


@pytest.mark.parametrize(
    "credentials, topic, why",
    [
        ({"access_key": "producer-key", "secret_key": "wrong"}, "Orders", "Check signature failed"),
        ({}, "Orders", "No accessKey"),  # what the Python client sends without credentials
        ({"access_key": "nobody", "secret_key": "x"}, "Orders", "No acl config for accessKey=nobody"),
        (GOOD, "Secrets", "No permission for topic:Secrets"),
    ],
)
def test_a_call_its_account_does_not_allow_is_unauthorized(acl_broker, client, credentials, topic, why):
    with messaging_stub(acl_broker.proxy.port) as stub:
        response = send(stub, message(topic, b"no", "A-2"), **credentials)
    assert response.status.code == Code.UNAUTHORIZED
    assert why in response.status.message


def test_a_wrong_signature_gets_no_route_and_no_settings(acl_broker):
    wrong = {"access_key": "producer-key", "secret_key": "wrong"}
    with messaging_stub(acl_broker.proxy.port) as stub:
        route = stub.QueryRoute(
            service.QueryRouteRequest(topic=resource("Orders")), metadata=metadata(**wrong), timeout=5
        )
        assert route.status.code == Code.UNAUTHORIZED
        with Telemetry(stub, "bad-signer", **wrong) as telemetry:
            telemetry.send(producer_settings("Orders"))
            with pytest.raises(grpc.RpcError) as refused:
                telemetry.receive()
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert acl_broker.controller.client_manager.producers.client_ids("Orders") == []


CLUSTER_RULES = (
    RULES
    + """\
  - accessKey: cluster-key
    secretKey: cluster-secret
"""
)


def test_with_acl_another_brokers_endpoint_is_found_with_the_cluster_account(start_grpc_broker, tmp_path):
    rules = tmp_path / "cluster_acl.yml"
    rules.write_text(CLUSTER_RULES)
    secured = {
        "aclEnable": "true",
        "aclConfigFile": str(rules),
        "clusterAccessKey": "cluster-key",
        "clusterSecretKey": "cluster-secret",
    }
    a = start_grpc_broker(**secured)
    b = start_grpc_broker(brokerName="broker-b", namesrvAddr=a.namesrv.address, **secured)
    for startup in (a, b):
        startup.controller.topic_config_manager.update_topic_config(TopicConfig("Orders", 1, 1))
    with messaging_stub(a.proxy.port) as stub:

        def routed() -> dict[str, int]:
            route = stub.QueryRoute(
                service.QueryRouteRequest(topic=resource("Orders")), metadata=metadata(**GOOD), timeout=5
            )
            return {q.broker.name: q.broker.endpoints.addresses[0].port for q in route.message_queues}

        ports = wait_until(lambda: len(routed()) == 2 and routed(), 10, "both broker sets routed")
    assert ports == {"broker-a": a.proxy.port, "broker-b": b.proxy.port}


def test_a_consumer_registers_only_in_a_group_its_account_may_consume_as(acl_broker):
    consumer = {"access_key": "consumer-key", "secret_key": "consumer-secret"}
    with messaging_stub(acl_broker.proxy.port) as stub:
        with Telemetry(stub, "billing-consumer", **consumer) as telemetry:
            telemetry.send(consumer_settings("billing", "Orders"))
            assert telemetry.receive().settings.subscription.receive_batch_size > 0
        with Telemetry(stub, "other-consumer", **consumer) as telemetry:
            telemetry.send(consumer_settings("shipping", "Orders"))
            with pytest.raises(grpc.RpcError) as refused:
                telemetry.receive()
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "group:shipping" in refused.value.details()
    consumers = acl_broker.controller.client_manager.consumers
    assert consumers.consumer_ids("billing") == ["billing-consumer"] and consumers.consumer_ids("shipping") == []
