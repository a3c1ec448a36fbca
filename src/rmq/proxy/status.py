"""Every gRPC response's ``status``: the remoting answers of the broker mapped to the 5.x ``Code``s, as
RocketMQ 5.x's proxy maps them (ResponseBuilder#buildCode and #buildStatus(Throwable), the
activities' own checks); docs/grpc.md has the table.

    status(Code.OK)                      -> Status(code=20000, message="OK")
    from_response(response)              -> the Status of a broker's remoting answer
    raise ProxyError(Code.ILLEGAL_TOPIC, "topic name ...")    # a check of the endpoint's own
    from_exception(exc)                  -> the Status a failed call is answered with

The 5.x clients call code 0 illegal: every answer carries a status, OK is 20000.
"""

from __future__ import annotations

import asyncio
import logging

from rmq.errors import RmqError
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import ResponseCode
from rmq.protocol.grpc.v2.definition_pb2 import Code, Status

log = logging.getLogger("rmq.proxy")

# ResponseBuilder.RESPONSE_CODE_MAPPING, then what its buildStatus(Throwable) makes of the others:
# TOPIC_NOT_EXIST is TopicRouteHelper's TOPIC_NOT_FOUND, NO_PERMISSION the ACL's UNAUTHORIZED, and a
# send's persistence outcomes are SendMessageActivity's (FLUSH_DISK_TIMEOUT -> MASTER_PERSISTENCE_TIMEOUT).
# Anything else is INTERNAL_SERVER_ERROR with the broker's remark, as there.
REMOTING_TO_CODE: dict[int, Code] = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: Code.UNAUTHORIZED,
    ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
}


class ProxyError(RmqError):
    """A call refused by the endpoint itself (GrpcProxyException): its ``code`` and message."""

    def __init__(self, code: Code, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def status(code: Code, message: str | None = None) -> Status:
    return Status(code=code, message=message if message is not None else Code.Name(code))


OK = status(Code.OK)


def code_of(remoting_code: int) -> Code:
    return REMOTING_TO_CODE.get(remoting_code, Code.INTERNAL_SERVER_ERROR)


def from_response(response: RemotingCommand) -> Status:
    """The status of a broker's answer: its code mapped, its remark as the message."""
    code = code_of(response.code)
    if code == Code.OK:
        return OK
    return status(code, response.remark or str(response.code))


def check(response: RemotingCommand) -> RemotingCommand:
    """``response`` when it is a success, else ProxyError with its mapped status."""
    if response.code != ResponseCode.SUCCESS:
        raise ProxyError(code_of(response.code), response.remark or str(response.code))
    return response


def from_exception(exc: BaseException) -> Status:
    """What a call that failed with ``exc`` is answered with."""
    if isinstance(exc, ProxyError):
        return status(exc.code, exc.message)
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return status(Code.PROXY_TIMEOUT, "the broker did not answer in time")
    log.error("gRPC call failed", exc_info=exc)
    return status(Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
