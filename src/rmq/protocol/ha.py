"""The HA wire format: master -> slave CommitLog replication over a raw TCP connection (docs/replication.md#the-stream).

No remoting frames: the slave connects to the master's haListenPort and both sides write bare
big-endian integers.

    slave -> master: an offset report, after connecting, after every append and every
    haSendHeartbeatInterval ms
    +-------------------------------+
    | int64 maxPhyOffset            |   the slave's CommitLog ends here (everything below it is
    +-------------------------------+   byte-identical to the master's)
    0                               8

    master -> slave: a frame of CommitLog bytes, never crossing a CommitLog file
    +-------------------------------+---------------+------------------------------+
    | int64 startOffset             | int32 size    | data: size bytes             |
    +-------------------------------+---------------+------------------------------+
    0                               8               12                     12 + size
    size <= haTransferBatchSize; size 0 is a heartbeat (startOffset: where the master would
    continue). A frame whose startOffset is not the slave's max offset breaks the stream.

The first report decides where the master starts: 0 means "I have nothing", and the master starts at
the beginning of its last CommitLog file (RocketMQ's choice: a new slave copies only the newest file).

Cluster authentication (rmq, beyond 4.x): a slave with clusterAccessKey/clusterSecretKey opens with a
HELLO instead of its first report; master and slave each prove they hold the cluster secret before
any CommitLog byte crosses. A HELLO starts with AUTH_MAGIC, whose first byte 0xff makes it a negative
offset to a 4.x master (refused), and which no report can be (offsets are never negative).

    slave -> master: HELLO
    +-------------------------------+-------------------------------+
    | AUTH_MAGIC: 8 bytes           | slave nonce: 32 random bytes  |
    +-------------------------------+-------------------------------+
    0                               8                               40

    master -> slave: CHALLENGE
    +-------------------+-------------+------------------------+------------------------+
    | AUTH_MAGIC        | int32 flags | master nonce: 32 bytes | master proof: 32 bytes |
    +-------------------+-------------+------------------------+------------------------+
    0                   8             12                       44                       76
    flags bit 0 (CHALLENGE_AUTHENTICATES): the master holds cluster credentials; without it the
    nonce and proof are zeros (a master without credentials: the slave decides whether to go on)

    slave -> master: PROOF, then its first report
    +--------------------------+------------------------------+------------------------+
    | int16 accessKey length n | accessKey, UTF-8: n bytes    | slave proof: 32 bytes  |
    +--------------------------+------------------------------+------------------------+
    0                          2                          2 + n                 2 + n + 32
    n <= MAX_ACCESS_KEY

    master proof = HMAC-SHA256(secret, b"rmq-ha-master" | slave nonce | master nonce | accessKey)
    slave proof  = HMAC-SHA256(secret, b"rmq-ha-slave" | master nonce | slave nonce | accessKey)

Both nonces are fresh per connection, so neither proof can be replayed on another one, and the two
labels keep the master's proof from being usable as a slave's. Without TLS the proofs authenticate
the peers, not the bytes that follow them: TLS (tlsEnable, the master's certificate verified) is
what keeps a man in the middle out of the stream.

Controller mode (rmq, as 5.x's AutoSwitchHAConnection learns its slave's id): a slave whose broker id
the controllers assigned names it first, before a HELLO or its first report, so that its master
knows which broker of its set each connection is (the sync state set counts brokers, not sockets).
Its first byte 0xff keeps it apart from a report as a HELLO's does; a slave without such an id
(not in controller mode) sends none, and its master serves it as before.

    slave -> master: SLAVE_ID
    +-------------------------------+-------------------------------+
    | SLAVE_ID_MAGIC: 8 bytes       | int64 brokerId                |
    +-------------------------------+-------------------------------+
    0                               8                               16
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = [
    "AUTH_MAGIC",
    "ACCESS_KEY_LENGTH",
    "CHALLENGE",
    "CHALLENGE_AUTHENTICATES",
    "CHALLENGE_SIZE",
    "FRAME_HEADER",
    "FRAME_HEADER_SIZE",
    "HELLO_SIZE",
    "HEARTBEAT_SIZE",
    "MAX_ACCESS_KEY",
    "NONCE_SIZE",
    "PROOF_SIZE",
    "REPORT",
    "REPORT_SIZE",
    "SLAVE_ID_MAGIC",
    "SLAVE_ID_SIZE",
    "decode_challenge",
    "decode_frame_header",
    "decode_proof",
    "decode_report",
    "decode_slave_id",
    "encode_challenge",
    "encode_frame_header",
    "encode_hello",
    "is_hello",
    "encode_proof",
    "master_proof",
    "slave_proof",
    "encode_report",
    "encode_slave_id",
    "is_slave_id",
]

REPORT = struct.Struct(">q")
REPORT_SIZE = REPORT.size  # 8
FRAME_HEADER = struct.Struct(">qi")
FRAME_HEADER_SIZE = FRAME_HEADER.size  # 12
HEARTBEAT_SIZE = 0


def encode_report(max_offset: int) -> bytes:
    return REPORT.pack(max_offset)


def decode_report(data: Buffer, position: int = 0) -> int:
    offset: int = REPORT.unpack_from(data, position)[0]
    return offset


def encode_frame_header(start_offset: int, size: int) -> bytes:
    return FRAME_HEADER.pack(start_offset, size)


def decode_frame_header(data: Buffer, position: int = 0) -> tuple[int, int]:
    """(startOffset, size) of the frame at ``position``."""
    start, size = FRAME_HEADER.unpack_from(data, position)
    return start, size


# -- cluster authentication ----------------------------------------------------------------------

AUTH_MAGIC = b"\xffRMQHA01"
NONCE_SIZE = 32
PROOF_SIZE = 32  # HMAC-SHA256
HELLO_SIZE = len(AUTH_MAGIC) + NONCE_SIZE  # 40
CHALLENGE = struct.Struct(f">{len(AUTH_MAGIC)}si{NONCE_SIZE}s{PROOF_SIZE}s")
CHALLENGE_SIZE = CHALLENGE.size  # 76
CHALLENGE_AUTHENTICATES = 0x1
ACCESS_KEY_LENGTH = struct.Struct(">h")
MAX_ACCESS_KEY = 1024
_MASTER_LABEL = b"rmq-ha-master"
_SLAVE_LABEL = b"rmq-ha-slave"


def encode_hello(slave_nonce: bytes) -> bytes:
    return AUTH_MAGIC + slave_nonce


def is_hello(data: Buffer) -> bool:
    """Whether ``data`` (at least 8 bytes) starts a HELLO rather than a report."""
    return bytes(memoryview(data)[: len(AUTH_MAGIC)]) == AUTH_MAGIC


def encode_challenge(flags: int, master_nonce: bytes, proof: bytes) -> bytes:
    return CHALLENGE.pack(AUTH_MAGIC, flags, master_nonce, proof)


def decode_challenge(data: Buffer) -> tuple[int, bytes, bytes]:
    """(flags, master nonce, master proof); ValueError when it does not start with AUTH_MAGIC."""
    magic, flags, nonce, proof = CHALLENGE.unpack_from(data)
    if magic != AUTH_MAGIC:
        raise ValueError(f"expected a challenge starting {AUTH_MAGIC!r}, got {bytes(magic)!r}")
    return flags, nonce, proof


def encode_proof(access_key: str, proof: bytes) -> bytes:
    key = access_key.encode("utf-8")
    return ACCESS_KEY_LENGTH.pack(len(key)) + key + proof


def decode_proof(data: Buffer) -> tuple[str, bytes, int] | None:
    """(accessKey, slave proof, bytes taken) of the PROOF at the start of ``data``, None while it
    is incomplete; ValueError for a length out of [0, MAX_ACCESS_KEY] or a key that is not UTF-8."""
    view = memoryview(data)
    if view.nbytes < ACCESS_KEY_LENGTH.size:
        return None
    (length,) = ACCESS_KEY_LENGTH.unpack_from(view)
    if not 0 <= length <= MAX_ACCESS_KEY:
        raise ValueError(f"access key length {length} is not in [0, {MAX_ACCESS_KEY}]")
    end = ACCESS_KEY_LENGTH.size + length + PROOF_SIZE
    if view.nbytes < end:
        return None
    key = bytes(view[ACCESS_KEY_LENGTH.size : ACCESS_KEY_LENGTH.size + length]).decode("utf-8")
    return key, bytes(view[end - PROOF_SIZE : end]), end


def _proof(secret: str, label: bytes, first: bytes, second: bytes, access_key: str) -> bytes:
    content = label + first + second + access_key.encode("utf-8")
    return hmac.new(secret.encode("utf-8"), content, hashlib.sha256).digest()


def master_proof(secret: str, access_key: str, slave_nonce: bytes, master_nonce: bytes) -> bytes:
    return _proof(secret, _MASTER_LABEL, slave_nonce, master_nonce, access_key)


def slave_proof(secret: str, access_key: str, master_nonce: bytes, slave_nonce: bytes) -> bytes:
    return _proof(secret, _SLAVE_LABEL, master_nonce, slave_nonce, access_key)


# -- controller mode: the slave's broker id -------------------------------------------------------

SLAVE_ID_MAGIC = b"\xffRMQID01"
SLAVE_ID = struct.Struct(f">{len(SLAVE_ID_MAGIC)}sq")
SLAVE_ID_SIZE = SLAVE_ID.size  # 16


def encode_slave_id(broker_id: int) -> bytes:
    return SLAVE_ID.pack(SLAVE_ID_MAGIC, broker_id)


def is_slave_id(data: Buffer) -> bool:
    """Whether ``data`` (at least 8 bytes) starts a SLAVE_ID rather than a HELLO or a report."""
    return bytes(memoryview(data)[: len(SLAVE_ID_MAGIC)]) == SLAVE_ID_MAGIC


def decode_slave_id(data: Buffer) -> int:
    """The broker id of the SLAVE_ID at the start of ``data`` (SLAVE_ID_SIZE bytes at least);
    ValueError when it does not start with SLAVE_ID_MAGIC or the id is negative."""
    magic, broker_id = SLAVE_ID.unpack_from(data)
    if magic != SLAVE_ID_MAGIC:
        raise ValueError(f"expected a slave id starting {SLAVE_ID_MAGIC!r}, got {bytes(magic)!r}")
    if broker_id < 0:
        raise ValueError(f"broker id {broker_id} is negative")
    return int(broker_id)
