"""pytest-benchmark view of what the plain ACL adds to a request (``python -m pytest
perf/test_bench_acl.py --benchmark-only``): the client signing a 1 KiB send, the broker checking it
(the check decodes the send header, which the processor then reads from the request), and the
same for a consumer's heartbeat, whose body the check and the processor once parsed twice."""

from __future__ import annotations

import json

from rmq.broker.acl import PlainAccessValidator, parse_plain_acl
from rmq.net.codec import RemotingCommand
from rmq.net.codec_py import ext_fields_for_wire
from rmq.protocol import headers
from rmq.protocol.acl import SessionCredentials
from rmq.protocol.codes import RequestCode

BODY = b"x" * 1024
RULES = """\
accounts:
  - accessKey: bench-key
    secretKey: bench-secret
    topicPerms: [BenchTopic=PUB|SUB]
    groupPerms: [bench-group=SUB]
"""
CREDENTIALS = SessionCredentials("bench-key", "bench-secret")
CLIENT = "127.0.0.1"


def send_fields() -> dict[str, str]:
    # SEND_MESSAGE_V2's fields, as our producer sends them
    return ext_fields_for_wire(
        {"a": "bench-producer", "b": "BenchTopic", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1700000000000,
         "h": 0, "i": "UNIQ_KEY\x01AC1100010000000000000000000000\x02WAIT\x01true\x02", "j": 0, "k": False,
         "m": False}
    )  # fmt: skip


def signed(code: int, ext: dict[str, str], body: bytes) -> RemotingCommand:
    CREDENTIALS.sign(ext, body)
    return RemotingCommand(code, ext_fields=ext, body=body)


def test_client_signs_a_1kib_send(benchmark):
    def sign() -> dict[str, str]:
        ext = send_fields()
        CREDENTIALS.sign(ext, BODY)
        return ext

    assert "Signature" in benchmark(sign)


def test_broker_checks_a_signed_1kib_send(benchmark):
    validator = PlainAccessValidator(parse_plain_acl(RULES))
    request = signed(RequestCode.SEND_MESSAGE_V2, send_fields(), BODY)

    def check_then_read_header() -> headers.SendHeader:
        request.cached_header = None  # every request arrives undecoded
        validator.validate(CLIENT, request)
        return headers.send_header(request)  # what the send processor then reads

    assert benchmark(check_then_read_header).topic == "BenchTopic"


def test_broker_checks_a_signed_heartbeat(benchmark):
    validator = PlainAccessValidator(parse_plain_acl(RULES))
    consumer = {
        "groupName": "bench-group",
        "consumeType": "CONSUME_PASSIVELY",
        "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
        "subscriptionDataSet": [{"topic": "BenchTopic", "subString": "*", "subVersion": 1}],
    }
    body = json.dumps({"clientID": "bench-client", "consumerDataSet": [consumer], "producerDataSet": []}).encode()
    request = signed(RequestCode.HEART_BEAT, {}, body)

    def check_then_read_body():
        request.cached_header = None
        validator.validate(CLIENT, request)
        return headers.heartbeat(request)  # what the heartbeat processor then reads

    assert benchmark(check_then_read_body).client_id == "bench-client"
