"""The gRPC endpoint's calls on the broker's Prometheus endpoint: rocketmq_rpc_latency with
protocol_type grpc_v2, by method and the status code each call was answered with."""

from __future__ import annotations

from rmq.broker.topic_config import TopicConfig
from rmq.protocol.grpc.v2.definition_pb2 import Code
from tests.helpers import LOOPBACK, free_port
from tests.helpers.grpc import definition, messaging_stub, metadata, resource, service
from tests.helpers.metrics import scrape, value


def test_grpc_calls_are_counted_by_method_and_status_code_beside_the_remoting_requests(start_grpc_broker):
    port = free_port()
    startup = start_grpc_broker(
        metricsExporterType="PROM",
        metricsPromExporterHost=LOOPBACK,
        metricsPromExporterPort=str(port),
        grpcClientConsumerMinLongPollingTimeoutMillis="100",
    )
    startup.controller.topic_config_manager.update_topic_config(TopicConfig("Counted", 1, 1))
    receive = service.ReceiveMessageRequest(
        group=resource("CountedGroup"),
        message_queue=definition.MessageQueue(topic=resource("Counted"), id=-1),
        batch_size=1,
    )
    receive.invisible_duration.FromMilliseconds(10_000)
    receive.long_polling_timeout.FromMilliseconds(100)
    bad_ack = service.AckMessageRequest(
        group=resource("CountedGroup"),
        topic=resource("Counted"),
        entries=[service.AckMessageEntry(message_id="x", receipt_handle="not a handle")],
    )
    with messaging_stub(startup.proxy.port) as stub:
        for _ in range(2):
            answers = list(stub.ReceiveMessage(receive, metadata=metadata(), timeout=5))
            assert answers[0].status.code == Code.MESSAGE_NOT_FOUND
        assert stub.AckMessage(bad_ack, metadata=metadata(), timeout=5).status.code == Code.INVALID_RECEIPT_HANDLE

    samples = scrape(port)
    grpc = {"protocol_type": "grpc_v2"}
    assert (
        value(samples, "rocketmq_rpc_latency_count", request_code="ReceiveMessage", response_code="40401", **grpc) == 2
    )
    assert value(samples, "rocketmq_rpc_latency_count", request_code="AckMessage", response_code="40013", **grpc) == 1
    assert value(samples, "rocketmq_rpc_latency_bucket", request_code="AckMessage", le="+Inf", **grpc) == 1
    # the POPs the receives made through the seam are the broker's own remoting requests
    pops = [
        s for s in samples["rocketmq_rpc_latency_count"]
        if s.labels["protocol_type"] == "remoting" and s.labels["request_code"] == "200050"
    ]  # fmt: skip
    assert sum(s.value for s in pops) == 2
