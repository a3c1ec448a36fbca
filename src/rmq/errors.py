"""One exception tree for all of rmq.

Expected outcomes (PULL_NOT_FOUND, FLUSH_DISK_TIMEOUT, an illegal message refused by the store)
are status enums in results, not exceptions. Exceptions are for what a caller must handle.
Messages say what was wrong and what was expected.
"""

from __future__ import annotations


class RmqError(Exception):
    """Root of every error rmq raises on purpose."""


class ProtocolError(RmqError):
    """Bytes on the wire that do not form a valid remoting frame."""


class StoreError(RmqError):
    """The message store cannot do what was asked (bad configuration, unusable directory)."""


class RecordError(StoreError):
    """Bytes that are not a valid stored CommitLog record (on disk, or in a pull or query answer)."""


class StoreLockedError(StoreError):
    """Another process holds the store's lock file."""


class RemotingError(RmqError):
    """A request could not be carried to its peer and back."""


class RemotingConnectError(RemotingError):
    """No connection could be made to the address."""


class RemotingTimeoutError(RemotingError):
    """No answer arrived within the timeout."""


class RemotingSendError(RemotingError):
    """The request could not be written to the connection (closed while sending)."""


class ClientError(RmqError):
    """The client SDK refused an operation (invalid name, oversized body, not started)."""


class AdminError(RmqError):
    """An admin operation has nothing to act on (an unknown cluster, a topic no master serves)."""


class NotFound(AdminError):
    """What an admin command looked for is not there (an unknown topic, no such message)."""


class ConfigError(RmqError):
    """A setting or a configuration file that cannot be used (bad value, unreadable file)."""


class RequestRefused(RmqError):
    """A server (broker or name server) refuses a request: carries the response code and the remark
    to answer with.

    Raised by request handlers and the parsers they call (an illegal topic name, a malformed
    heartbeat, a topic that cannot be auto-created); the processor turns it into a response with
    ``code`` and ``remark``, and the connection goes on.
    """

    def __init__(self, code: int, remark: str):
        self.code = code
        self.remark = remark
        super().__init__(remark)


class ResponseError(RmqError):
    """A peer answered with a response code other than SUCCESS."""

    def __init__(self, code: int, remark: str | None = None, address: str | None = None):
        self.code = code
        self.remark = remark
        self.address = address
        where = f" from {address}" if address else ""
        super().__init__(f"response code {code}{where}: {remark or 'no remark'}")
