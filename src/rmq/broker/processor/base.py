"""What every broker request processor shares.

A processor is a class taking the broker's services it uses (its Protocol in
``rmq.broker.services``; the controller passes itself), with ``handlers() -> {request code: handler}``;
``handler(channel, request)`` returns the response, or None when it answers later (a SYNC_FLUSH
send, a parked pull) or the request is oneway. A handler refuses a request by raising
``RequestRefused(code, remark)`` (``rmq.protocol.fields`` reads header fields that way); the
server answers it with that code and remark, and the connection and the broker go on.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable
from typing import Any, Generic, Protocol, TypeVar

from rmq.broker.services import Identity
from rmq.errors import RequestRefused
from rmq.net.channel import Handler
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import ResponseCode
from rmq.protocol.perm import is_writeable

__all__ = ["Handler", "Lane", "Processor", "answer_once_registered", "require_writeable_broker", "success"]

S = TypeVar("S")


class Lane(Protocol):
    """A compiled lane (rmq.broker._send_lane, _pull_lane) as its processor sees it: told when
    the role changes. Typed here so that a processor does not import the lane that imports it."""

    def role_changed(self) -> None: ...


class Processor(Generic[S]):
    """Base of the broker's request processors: holds the services it uses, lists its handlers."""

    def __init__(self, controller: S):
        self.controller = controller

    def handlers(self) -> dict[int, Handler]:
        raise NotImplementedError

    def role_changed(self) -> None:
        """The broker switched role (a slave promoted to master: ``rmq.broker.role``); on the
        event loop. Processors that keep what depends on the role read it again."""


def require_writeable_broker(controller: Identity) -> None:
    """Refuse (NO_PERMISSION) when the broker's own permission forbids writes (brokerPermission)."""
    permission = controller.config.broker_permission
    if not is_writeable(permission):
        raise RequestRefused(
            ResponseCode.NO_PERMISSION,
            f"the broker {controller.broker_addr} does not accept writes (brokerPermission {permission})",
        )


def success(
    request: RemotingCommand, ext_fields: dict[str, str] | None = None, body=b"", remark: str | None = None
) -> RemotingCommand:
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, remark=remark, ext_fields=ext_fields, body=body)


def answer_once_registered(
    channel: Any, response: RemotingCommand, registrations: Iterable[concurrent.futures.Future]
) -> RemotingCommand | None:
    """``response`` now when the name servers already took the broker's registration, else None and
    ``response`` sent once every one answered: what changed the routes (a topic, brokerPermission)
    is in them when the caller asks next, as RocketMQ waits for registerBrokerAll."""
    pending = [f for f in registrations if not f.done()]
    if not pending:
        return response
    remaining = [len(pending)]

    def registered(_future: concurrent.futures.Future) -> None:
        remaining[0] -= 1
        if remaining[0] == 0:
            channel.send_response(response)

    for future in pending:
        future.add_done_callback(registered)
    return None
