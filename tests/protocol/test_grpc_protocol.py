"""The 5.x protocol's classes are what Apache's vendored ``.proto`` files generate, and they carry
the wire names the 5.x clients use."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmq.protocol.grpc import generate
from rmq.protocol.grpc.v2 import definition_pb2, service_pb2, service_pb2_grpc


def test_the_committed_classes_are_what_the_proto_files_generate(tmp_path: Path):
    pytest.importorskip("grpc_tools")
    made = generate.generate(tmp_path)
    committed = generate.HERE / "v2"
    assert sorted(p.name for p in made) == sorted(
        p.name for p in committed.iterdir() if p.suffix in (".py", ".pyi") and p.name != "__init__.py"
    )
    for path in made:
        assert path.read_text() == (committed / path.name).read_text(), (
            f"{path.name} differs from what the .proto files generate: run python -m rmq.protocol.grpc.generate"
        )


def test_a_send_request_round_trips_with_the_field_numbers_of_the_5x_clients():
    message = definition_pb2.Message(
        topic=definition_pb2.Resource(name="TopicA"),
        body=b"hello",
        system_properties=definition_pb2.SystemProperties(
            message_id="01ABC", message_group="g1", body_encoding=definition_pb2.IDENTITY
        ),
    )
    wire = service_pb2.SendMessageRequest(messages=[message]).SerializeToString()
    # field 1 (messages), length-delimited; inside it field 1 (topic), then the resource's name (field 2)
    assert wire[0] == (1 << 3) | 2
    back = service_pb2.SendMessageRequest.FromString(wire)
    assert back.messages[0].system_properties.message_group == "g1"
    assert definition_pb2.Code.Name(20000) == "OK" and definition_pb2.Code.Value("MESSAGE_NOT_FOUND") == 40401
    assert service_pb2_grpc.MessagingServiceServicer.ReceiveMessage  # the servicer a server implements
