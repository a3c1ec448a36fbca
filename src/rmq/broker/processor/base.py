"""What every broker request processor shares.

A processor is a class taking the controller, with ``handlers() -> {request code: handler}``;
``handler(channel, request)`` returns the response, or None when it answers later (a SYNC_FLUSH
send, a parked pull) or the request is oneway. A handler refuses a request by raising
``RequestRefused(code, remark)`` (``rmq.protocol.fields`` reads header fields that way); the
server answers it with that code and remark, and the connection and the broker go on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmq.errors import RequestRefused
from rmq.net.channel import Handler
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import ResponseCode
from rmq.protocol.perm import is_writeable

if TYPE_CHECKING:
    from rmq.broker.controller import BrokerController

__all__ = ["Handler", "Processor", "require_writeable_broker", "success"]


class Processor:
    """Base of the broker's request processors: holds the controller, lists its handlers."""

    def __init__(self, controller: BrokerController):
        self.controller = controller

    def handlers(self) -> dict[int, Handler]:
        raise NotImplementedError

    def role_changed(self) -> None:
        """The broker switched role (a slave promoted to master: ``rmq.broker.role``); on the
        event loop. Processors that keep what depends on the role read it again."""


def require_writeable_broker(controller: BrokerController) -> None:
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
