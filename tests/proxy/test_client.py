"""Telemetry, Heartbeat and NotifyClientTermination: the settings a 5.x client is answered with, and
the broker knowing the client from them on."""

from __future__ import annotations

import grpc
import pytest

from rmq.broker.subscription_group import SubscriptionGroupConfig
from rmq.broker.topic_config import TopicConfig
from rmq.protocol.grpc.v2.definition_pb2 import ClientType, Code
from tests.helpers.admin import admin_json
from tests.helpers.grpc import Telemetry, consumer_settings, metadata, producer_settings, resource, service


def test_a_producer_is_answered_the_settings_a_5x_client_insists_on_and_registered(grpc_broker, stub):
    controller = grpc_broker.controller
    controller.topic_config_manager.update_topic_config(TopicConfig("Orders", 4, 4))
    with Telemetry(stub, "producer-1") as telemetry:
        telemetry.send(producer_settings("Orders"))
        answer = telemetry.receive()
        assert answer.status.code == Code.OK
        settings = answer.settings
        assert settings.client_type == ClientType.PRODUCER
        # the Node client needs both: a backoff policy, and a non-zero max body size
        assert settings.backoff_policy.max_attempts == 3
        assert settings.backoff_policy.exponential_backoff.multiplier == 2
        assert settings.publishing.max_body_size == controller.store.max_message_size
        assert settings.publishing.validate_message_type
        # the proxy's producer group is the topic: a transaction check finds this client under it
        assert controller.client_manager.producers.client_ids("Orders") == ["producer-1"]
        heartbeat = stub.Heartbeat(
            service.HeartbeatRequest(client_type=ClientType.PRODUCER), metadata=metadata("producer-1"), timeout=5
        )
        assert heartbeat.status.code == Code.OK
        ended = stub.NotifyClientTermination(
            service.NotifyClientTerminationRequest(), metadata=metadata("producer-1"), timeout=5
        )
        assert ended.status.code == Code.OK
        assert controller.client_manager.producers.client_ids("Orders") == []


def test_a_consumer_gets_its_groups_retries_and_the_brokers_polling_settings(grpc_broker, stub):
    controller = grpc_broker.controller
    controller.topic_config_manager.update_topic_config(TopicConfig("Events", 4, 4))
    controller.subscription_group_manager.update_subscription_group_config(
        SubscriptionGroupConfig("events-group", retry_max_times=5, consume_message_orderly=True)
    )
    with Telemetry(stub, "consumer-1") as telemetry:
        telemetry.send(consumer_settings("events-group", "Events", "TagA || TagB"))
        settings = telemetry.receive().settings
        assert settings.backoff_policy.max_attempts == 6  # retryMaxTimes + 1
        assert [d.seconds for d in settings.backoff_policy.customized_backoff.next][:3] == [1, 5, 10]
        assert settings.subscription.receive_batch_size == 32
        assert settings.subscription.long_polling_timeout.seconds == 20
        assert settings.subscription.fifo
        assert controller.client_manager.consumers.consumer_ids("events-group") == ["consumer-1"]
        subscription = controller.client_manager.consumers.find_subscription_data("events-group", "Events")
        assert subscription is not None and subscription.tags_set == {"TagA", "TagB"}


def test_a_5x_consumer_is_told_the_retries_and_fifo_an_operator_set_with_rmq_admin(grpc_broker, stub):
    grpc_broker.controller.topic_config_manager.update_topic_config(TopicConfig("Events", 4, 4))
    namesrv = grpc_broker.namesrv.address
    admin_json(namesrv, "group", "update", "ops-group", "--retry-max-times", "2", "--consume-message-orderly")
    with Telemetry(stub, "consumer-2") as telemetry:
        telemetry.send(consumer_settings("ops-group", "Events", "*"))
        settings = telemetry.receive().settings
        assert settings.backoff_policy.max_attempts == 3 and settings.subscription.fifo
    admin_json(namesrv, "group", "update", "ops-group", "--retry-max-times", "0", "--no-consume-message-orderly")
    with Telemetry(stub, "consumer-3") as telemetry:
        telemetry.send(consumer_settings("ops-group", "Events", "*"))
        settings = telemetry.receive().settings
        assert settings.backoff_policy.max_attempts == 1 and not settings.subscription.fifo


def test_a_heartbeat_before_any_settings_is_an_unrecognized_client(stub):
    response = stub.Heartbeat(
        service.HeartbeatRequest(client_type=ClientType.PRODUCER), metadata=metadata("stranger"), timeout=5
    )
    assert response.status.code == Code.UNRECOGNIZED_CLIENT_TYPE


def test_a_bad_filter_expression_ends_the_stream_as_an_invalid_argument(grpc_broker, stub):
    grpc_broker.controller.topic_config_manager.update_topic_config(TopicConfig("Filtered", 1, 1))
    with Telemetry(stub, "consumer-2") as telemetry:
        telemetry.send(consumer_settings("sql-group", "Filtered", "a >", sql=True))
        with pytest.raises(grpc.RpcError) as failure:
            telemetry.receive()
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "expression" in failure.value.details().lower() or "sql" in failure.value.details().lower()
    # and no settings were kept for it
    response = stub.Heartbeat(
        service.HeartbeatRequest(group=resource("sql-group"), client_type=ClientType.SIMPLE_CONSUMER),
        metadata=metadata("consumer-2"),
        timeout=5,
    )
    assert response.status.code == Code.UNRECOGNIZED_CLIENT_TYPE
