"""What the scripts of Apache's 5.x Python client (PyPI rocketmq-python-client==5.1.2) share: its
configuration from the command line and environment, a received message as one JSON line.

Imported by the ``py5_*.py`` scripts beside it, which run in the client's own virtual environment
(the package installs a top-level ``rocketmq``, as rocketmq==0.4.4 does: they never share one).
ACL_ACCESS_KEY / ACL_SECRET_KEY in the environment: the client signs its gRPC metadata with them;
without, it sends an ``authorization`` header with an empty access key, as it always does.
"""

import json
import os
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression
from rocketmq.grpc_protocol import FilterType

#: seconds a request may take; the default 3 s is short for a broker busy restarting
REQUEST_TIMEOUT = 5


def configuration(endpoint: str) -> ClientConfiguration:
    credentials = Credentials(os.environ.get("ACL_ACCESS_KEY", ""), os.environ.get("ACL_SECRET_KEY", ""))
    return ClientConfiguration(endpoint, credentials, request_timeout=REQUEST_TIMEOUT)


def filter_expression(expression: str) -> FilterExpression:
    """``SQL92:<sql>`` subscribes by SQL92, anything else is a tag expression."""
    if expression.startswith("SQL92:"):
        return FilterExpression(expression[len("SQL92:") :], FilterType.SQL)
    return FilterExpression(expression)


def emit(**line) -> None:
    print(json.dumps(line), flush=True)


def message_line(message) -> dict:
    """What a test wants of a delivered message."""
    return {
        "body": message.body.decode(),
        "msgId": message.message_id,
        "topic": message.topic,
        "tag": message.tag,
        "keys": sorted(message.keys),
        "messageGroup": message.message_group,
        "attempt": message.delivery_attempt,
        "properties": dict(message.properties),
        "bornTimestamp": message.born_timestamp,
        "deliveryTimestamp": message.delivery_timestamp,
        "received": time.time(),
        "corrupted": message.corrupted,
    }


def fail(what: str, error: BaseException) -> None:
    """A refusal the test reads: the exception's class and text on stderr, exit status 3."""
    print(f"{what} failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
    sys.exit(3)
