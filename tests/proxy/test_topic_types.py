"""Topic message types set with ``rmq-admin topic create --type``: what 5.x routes accept, and what
either protocol may send there."""

from __future__ import annotations

from click.testing import CliRunner

from rmq.cli.admin import main
from rmq.protocol.codes import ResponseCode
from rmq.protocol.grpc.v2.definition_pb2 import Code, MessageType
from tests.helpers.grpc import message, metadata, resource, send, service
from tests.helpers.requests import call, send_request


def admin(startup, *args: str) -> str:
    result = CliRunner().invoke(main, [*args, "-n", startup.namesrv.address])
    assert result.exit_code == 0, result.output
    return result.output


def accepted(stub, topic: str) -> set[int]:
    route = stub.QueryRoute(service.QueryRouteRequest(topic=resource(topic)), metadata=metadata(), timeout=5)
    return set(route.message_queues[0].accept_message_types)


def test_the_type_set_by_rmq_admin_is_what_routes_accept_and_sends_must_be(grpc_broker, stub, client):
    assert "FIFO messages" in admin(grpc_broker, "topic", "create", "Typed", "-q", "2", "--type", "fifo")
    assert grpc_broker.controller.topic_config_manager.select_topic_config("Typed").attributes == {
        "message.type": "FIFO"
    }
    assert accepted(stub, "Typed") == {MessageType.FIFO}
    assert send(stub, message("Typed", b"f", "T-1", group="g")).status.code == Code.OK
    refused = call(client, grpc_broker.controller.broker_addr, send_request("Typed", b"plain"))
    assert refused.code == ResponseCode.MESSAGE_ILLEGAL and "expected type is FIFO" in refused.remark

    admin(grpc_broker, "topic", "update", "Typed", "-q", "2", "--type", "MIXED")
    assert accepted(stub, "Typed") == {MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION}
    assert (
        call(client, grpc_broker.controller.broker_addr, send_request("Typed", b"plain")).code == ResponseCode.SUCCESS
    )
    # an update without --type keeps the type
    admin(grpc_broker, "topic", "update", "Typed", "-q", "4")
    assert grpc_broker.controller.topic_config_manager.select_topic_config("Typed").message_type.value == "MIXED"


def test_a_topic_without_a_type_takes_normal_messages_only_from_5x_clients(grpc_broker, stub):
    admin(grpc_broker, "topic", "create", "Untyped")
    assert accepted(stub, "Untyped") == {MessageType.NORMAL}
    fifo = send(stub, message("Untyped", b"f", "U-1", group="g"))
    assert fifo.status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert "expected type is NORMAL, but actual type is FIFO" in fifo.status.message
