"""What crosses the wire around the gRPC endpoint (rmq.proxy, docs/grpc.md), beside the generated
5.x classes in ``rmq.protocol.grpc``: the metadata keys the 5.x clients send with every call
(RocketMQ's GrpcConstants), their signature's form, and the key a broker answers its gRPC port under.

    authorization: MQv2-HMAC-SHA1 Credential=<access key>, SignedHeaders=x-mq-date-time, Signature=<hex>
    Signature = lower-case hex of HMAC-SHA1(secret key, the x-mq-date-time value, UTF-8)
    x-mq-date-time: yyyyMMdd'T'HHmmss'Z' (the Python client writes its local time there)
"""

from __future__ import annotations

import hashlib
import hmac

from rmq.protocol.acl import SignedCall

# metadata keys (GrpcConstants)
CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
CLIENT_VERSION = "x-mq-client-version"
PROTOCOL_VERSION = "x-mq-protocol"
DATE_TIME = "x-mq-date-time"
REQUEST_ID = "x-mq-request-id"
NAMESPACE = "x-mq-namespace"
AUTHORIZATION = "authorization"
SESSION_TOKEN = "x-mq-session-token"

# the authorization header's parts (DefaultAuthenticationContextBuilder)
ALGORITHM = "MQv2-HMAC-SHA1"
CREDENTIAL = "Credential"
SIGNED_HEADERS = "SignedHeaders"
SIGNATURE = "Signature"

# GET_BROKER_RUNTIME_INFO's key for the broker's gRPC port (rmq's: absent when it serves none).
# A gRPC endpoint answering QueryRoute names every broker of the route at its address's host and
# this port.
RUNTIME_GRPC_PORT = "grpcServerPort"


def sign(secret_key: str, date_time: str) -> str:
    """The Signature a 5.x client sends for ``date_time`` (hex, as the Python and Java clients)."""
    return hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1).hexdigest()


def signed_call(authorization_value: str, date_time: str) -> SignedCall:
    """The call a client signed with this ``authorization`` and ``x-mq-date-time``; ValueError
    saying what is wrong with the header."""
    access_key, signature = parse_authorization(authorization_value)
    return SignedCall(access_key, date_time.encode("utf-8"), signature)


def authorization(access_key: str, secret_key: str, date_time: str) -> str:
    """The ``authorization`` value a 5.x client sends."""
    return (
        f"{ALGORITHM} {CREDENTIAL}={access_key}, {SIGNED_HEADERS}={DATE_TIME}, "
        f"{SIGNATURE}={sign(secret_key, date_time)}"
    )


def parse_authorization(value: str) -> tuple[str, str]:
    """(access key, signature) of an ``authorization`` value; ValueError saying what is wrong."""
    algorithm, sep, rest = value.partition(" ")
    if not sep:
        raise ValueError(f"authorization header is incorrect: expected '{ALGORITHM} {CREDENTIAL}=..., ...'")
    access_key = signature = None
    for item in rest.split(","):
        key, eq, text = item.strip().partition("=")
        if not eq:
            raise ValueError(f"authorization item {item.strip()!r} is not key=value")
        if key == CREDENTIAL:
            access_key = text.split("/")[0]
        elif key == SIGNATURE:
            signature = text
    if access_key is None or signature is None:
        raise ValueError(f"authorization header lacks {CREDENTIAL} or {SIGNATURE}")
    return access_key, signature
