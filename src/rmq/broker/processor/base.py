"""What every broker request processor shares: reading header fields, answering refusals.

A processor is a class taking the controller, with ``handlers() -> {request code: handler}``;
``handler(channel, request)`` returns the response, or None when it answers later (a SYNC_FLUSH
send, a parked pull) or the request is oneway. A handler refuses a request by raising
``BrokerRequestError(code, remark)``; ``answer_refusals`` turns that into the response, so the
connection and the broker go on.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Callable, Mapping, Optional

from rmq.common import is_writeable
from rmq.errors import BrokerRequestError
from rmq.net.codec import RemotingCommand
from rmq.net.codes import ResponseCode

if TYPE_CHECKING:
    from rmq.broker.controller import BrokerController
    from rmq.net.channel import Channel

log = logging.getLogger("rmq.broker")

Handler = Callable[["Channel", RemotingCommand], Optional[RemotingCommand]]

_REQUIRED = object()


class Processor:
    """Base of the broker's request processors: holds the controller, lists its handlers."""

    def __init__(self, controller: BrokerController):
        self.controller = controller

    def handlers(self) -> dict[int, Handler]:
        raise NotImplementedError


def answer_refusals(handler: Handler) -> Handler:
    """Wrap ``handler`` so that a BrokerRequestError becomes a response with its code and remark."""

    @functools.wraps(handler)
    def handle(channel, request):
        try:
            return handler(channel, request)
        except BrokerRequestError as e:
            log.info("refused request code %d from %s: %s (code %d)", request.code,
                     getattr(channel, "remote_address", "?"), e.remark, e.code)
            return RemotingCommand.response_to(request, e.code, remark=e.remark)

    return handle


def malformed(name: str, value: object, expected: str) -> BrokerRequestError:
    """The refusal for a header field that cannot be used (SYSTEM_ERROR, as RocketMQ's header decoding)."""
    if value is None:
        return BrokerRequestError(ResponseCode.SYSTEM_ERROR, f"header field {name!r} is missing, expected {expected}")
    return BrokerRequestError(ResponseCode.SYSTEM_ERROR, f"header field {name!r} is {value!r}, expected {expected}")


def str_field(ext: Mapping[str, str], name: str, default: object = _REQUIRED) -> str:
    value = ext.get(name)
    if value is None or value == "":
        if default is _REQUIRED:
            raise malformed(name, None, "a value")
        return default  # type: ignore[return-value]
    return value


def int_field(ext: Mapping[str, str], name: str, default: object = _REQUIRED) -> int:
    """An integer header field; ``default`` when absent, SYSTEM_ERROR naming the field when malformed."""
    value = ext.get(name)
    if value is None or value == "":
        if default is _REQUIRED:
            raise malformed(name, None, "an integer")
        return default  # type: ignore[return-value]
    try:
        return int(value)
    except ValueError:
        raise malformed(name, value, "an integer") from None


def bool_field(ext: Mapping[str, str], name: str, default: bool = False) -> bool:
    value = ext.get(name)
    if value is None or value == "":
        return default
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise malformed(name, value, "true or false")
    return text == "true"


def require_writeable_broker(controller: "BrokerController") -> None:
    """Refuse (NO_PERMISSION) when the broker's own permission forbids writes (brokerPermission)."""
    permission = controller.config.broker_permission
    if not is_writeable(permission):
        raise BrokerRequestError(ResponseCode.NO_PERMISSION,
                                 f"the broker {controller.broker_addr} does not accept writes "
                                 f"(brokerPermission {permission})")


def success(request: RemotingCommand, ext_fields: dict[str, str] | None = None, body=b"",
            remark: str | None = None) -> RemotingCommand:
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, remark=remark, ext_fields=ext_fields,
                                       body=body)
