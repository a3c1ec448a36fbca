"""pytest-benchmark view of what the plain ACL adds to a 1 KiB send (``python -m pytest
perf/test_bench_acl.py --benchmark-only``): the client signing it, the broker checking it."""

from __future__ import annotations

from rmq.broker.acl import PlainAccessValidator, parse_plain_acl
from rmq.net.codec import RemotingCommand
from rmq.net.codec_py import ext_fields_for_wire
from rmq.protocol.acl import SessionCredentials
from rmq.protocol.codes import RequestCode

BODY = b"x" * 1024
RULES = """\
accounts:
  - accessKey: bench-key
    secretKey: bench-secret
    topicPerms: [BenchTopic=PUB]
"""
CREDENTIALS = SessionCredentials("bench-key", "bench-secret")


def send_fields() -> dict[str, str]:
    # SEND_MESSAGE_V2's fields, as our producer sends them
    return ext_fields_for_wire(
        {"a": "bench-producer", "b": "BenchTopic", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1700000000000,
         "h": 0, "i": "UNIQ_KEY\x01AC1100010000000000000000000000\x02WAIT\x01true\x02", "j": 0, "k": False,
         "m": False}
    )  # fmt: skip


def test_client_signs_a_1kib_send(benchmark):
    def sign() -> dict[str, str]:
        ext = send_fields()
        CREDENTIALS.sign(ext, BODY)
        return ext

    assert "Signature" in benchmark(sign)


def test_broker_checks_a_signed_1kib_send(benchmark):
    validator = PlainAccessValidator(parse_plain_acl(RULES))
    ext = send_fields()
    CREDENTIALS.sign(ext, BODY)
    request = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=BODY)
    assert benchmark(validator.validate, "127.0.0.1", request) is None
