"""RocketMQ 4.x plain ACL on the wire: the extFields a signed request carries and its signature.

A client with credentials (access key, secret key, optionally a security token) adds to every
request's extFields, before it is encoded (Java's ``AclClientRPCHook``)::

    AccessKey       the access key
    SecurityToken   the token, only when the client has one
    Signature       base64(HMAC-SHA1(secretKey, content))

    content = the values of every other extFields entry, in the order of their keys, concatenated
              and UTF-8 encoded, followed by the body bytes (``AclUtils.combineRequestContent``)

Keys sort as Java's ``TreeMap<String, String>`` sorts them (UTF-16 code units, which is also how
ali-ons' ``Array.sort`` compares). A broker recomputes the content over the extFields it received,
without ``Signature`` and ``_UNIQUE_KEY_QUERY`` (``PlainAccessValidator.parse``), so a field a
client adds (ali-ons adds ``OnsChannel``) is signed like any other.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import hashlib
import hmac
from collections.abc import Iterable, Mapping

from rmq.protocol.request_flags import UNIQUE_MSG_QUERY_FLAG

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
# QUERY_MESSAGE's unique-key flag is left out of the content, as the broker's PlainAccessValidator does.
_NOT_SIGNED = frozenset({SIGNATURE, UNIQUE_MSG_QUERY_FLAG})

Buffer = bytes | bytearray | memoryview


class ClusterAuthMode(str, enum.Enum):
    """How a process that holds the cluster's credentials treats its peers' unsigned writes (name
    server registrations, a slave on the HA port): refused, or taken and logged (the upgrade path,
    while the other processes of the cluster are given the credentials one by one)."""

    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


# REGISTER_BROKER's extField with a master's claim to its epoch (``master_claim``), and the fields
# of the name server's CONTROLLER_FENCED_MASTER_EPOCH answer that name the routed master: only that
# claim, checked with the cluster secret by the refused master itself, makes a master fence itself.
MASTER_CLAIM = "masterClaim"
ROUTED_MASTER_ADDR = "routedMasterAddr"
ROUTED_MASTER_EPOCH = "routedMasterEpoch"
ROUTED_MASTER_CLAIM = "routedMasterClaim"


def _java_order(key: str) -> bytes:
    # Java compares strings by UTF-16 code unit; big-endian UTF-16 bytes compare the same way.
    return key.encode("utf-16-be", "surrogatepass")


def signature_content(ext_fields: Mapping[str, str], body: Buffer | Iterable[Buffer] = b"") -> bytes:
    """The bytes a request's signature covers: its extFields values (not Signature's), ordered by
    key, then the body (bytes or a list of buffers, as a RemotingCommand holds it)."""
    keys = sorted((k for k in ext_fields if k not in _NOT_SIGNED), key=_java_order)
    head = "".join(ext_fields[k] for k in keys).encode("utf-8")
    if isinstance(body, bytes | bytearray | memoryview):
        return head + bytes(body)
    return head + b"".join(bytes(part) for part in body)


def calc_signature(content: bytes, secret_key: str) -> str:
    """base64(HMAC-SHA1(secret_key, content)), as ``AclSigner.calSignature``."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def signature_matches(ext_fields: Mapping[str, str], body: Buffer | Iterable[Buffer], secret_key: str) -> bool:
    """Whether ``ext_fields`` carry the Signature ``secret_key`` makes over them and ``body``."""
    expected = calc_signature(signature_content(ext_fields, body), secret_key)
    return hmac.compare_digest(expected, ext_fields.get(SIGNATURE, ""))


@dataclasses.dataclass(frozen=True)
class SignedCall:
    """A RocketMQ 5.x client's signed gRPC call, as its endpoint read the metadata
    (rmq.protocol.proxy): the access key, the signed content (the ``x-mq-date-time`` value) and the
    signature, lower-case hex of HMAC-SHA1(secret key, content). The broker checks it against the
    account as it checks a 4.x request's Signature (rmq.broker.acl)."""

    access_key: str
    content: bytes
    signature: str

    def matches(self, secret_key: str) -> bool:
        expected = hmac.new(secret_key.encode("utf-8"), self.content, hashlib.sha1).hexdigest()
        return hmac.compare_digest(expected, self.signature.lower())


def master_claim(secret_key: str, cluster: str, broker_name: str, broker_addr: str, epoch: int) -> str:
    """What only a holder of the cluster secret can say: "``broker_addr`` is the master of
    ``broker_name`` in ``cluster`` in ``epoch``". A name server passes it on unchanged, so a master
    it refuses can check the evidence itself instead of trusting whoever sent a registration."""
    content = f"{cluster}|{broker_name}|{broker_addr}|{epoch}".encode()
    return base64.b64encode(hmac.new(secret_key.encode("utf-8"), content, hashlib.sha256).digest()).decode("ascii")


@dataclasses.dataclass(frozen=True)
class SessionCredentials:
    """What a client signs its requests with (RocketMQ's SessionCredentials). The secret never
    shows in a repr or a log line."""

    access_key: str
    secret_key: str = dataclasses.field(repr=False)
    security_token: str | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("access_key", "secret_key"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"credentials need a non-empty {name} string")

    @classmethod
    def of(cls, value: SessionCredentials | tuple[str, ...] | None) -> SessionCredentials | None:
        """``(access_key, secret_key[, security_token])`` or credentials as they are; None stays None."""
        if value is None or isinstance(value, SessionCredentials):
            return value
        if not isinstance(value, tuple | list) or len(value) not in (2, 3):
            raise ValueError("credentials must be (access_key, secret_key) or (access_key, secret_key, security_token)")
        return cls(*value)

    def sign(self, ext_fields: dict[str, str], body: Buffer | Iterable[Buffer] = b"") -> None:
        """Add AccessKey (and SecurityToken) to ``ext_fields``, then the Signature over them and the body."""
        ext_fields[ACCESS_KEY] = self.access_key
        if self.security_token is not None:
            ext_fields[SECURITY_TOKEN] = self.security_token
        ext_fields[SIGNATURE] = calc_signature(signature_content(ext_fields, body), self.secret_key)
