"""What every broker request handler needs: typed header fields, JSON bodies, refusals as responses.

A handler raises ``BrokerRequestError(code, remark)`` for anything the request carries wrong (a
missing or non-numeric header field, a malformed body, an unknown topic); ``answers_refusals``
turns it into the response with that code and remark, and the connection goes on.
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Any, Callable

from rmq.errors import BrokerRequestError
from rmq.net.codec import RemotingCommand
from rmq.net.codes import RequestCode, ResponseCode

log = logging.getLogger("rmq.broker")

Handler = Callable[[Any, RemotingCommand], "RemotingCommand | None"]


def answers_refusals(handler: Callable[..., RemotingCommand | None]) -> Callable[..., RemotingCommand | None]:
    """Decorate a processor method ``(self, channel, request)``: a BrokerRequestError it raises
    becomes the response (with a log line naming the request and the peer)."""

    @functools.wraps(handler)
    def wrapper(self, channel: Any, request: RemotingCommand) -> RemotingCommand | None:
        try:
            return handler(self, channel, request)
        except BrokerRequestError as e:
            log.warning("%s from %s refused (%d): %s", request_name(request.code),
                        getattr(channel, "remote_address", "?"), e.code, e.remark)
            return RemotingCommand.response_to(request, e.code, remark=e.remark)

    return wrapper


def request_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return f"request code {code}"


def field(request: RemotingCommand, name: str) -> str:
    """A header field that must be present."""
    value = request.ext_fields.get(name)
    if value is None:
        raise BrokerRequestError(ResponseCode.SYSTEM_ERROR, f"header field {name!r} is missing")
    return value


def int_field(request: RemotingCommand, name: str, default: int | None = None) -> int:
    """A numeric header field; ``default`` when absent (required when no default is given)."""
    value = request.ext_fields.get(name)
    if value is None or value == "":
        if default is None:
            raise BrokerRequestError(ResponseCode.SYSTEM_ERROR, f"header field {name!r} is missing")
        return default
    try:
        return int(value)
    except ValueError:
        raise BrokerRequestError(ResponseCode.SYSTEM_ERROR,
                                 f"header field {name!r} must be an integer, got {value!r}") from None


def bool_field(request: RemotingCommand, name: str, default: bool = False) -> bool:
    value = request.ext_fields.get(name)
    return default if value is None else value.strip().lower() == "true"


def json_body(request: RemotingCommand) -> Any:
    """The body parsed as JSON; a malformed body is refused with SYSTEM_ERROR."""
    try:
        return json.loads(bytes(request.body or b""))
    except (ValueError, UnicodeDecodeError) as e:
        raise BrokerRequestError(ResponseCode.SYSTEM_ERROR, f"body is not valid JSON: {e}") from None


def success(request: RemotingCommand, body: Any = b"", ext_fields: dict | None = None) -> RemotingCommand:
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, ext_fields=ext_fields, body=body)
