"""TLS on the remoting port, as RocketMQ 4.x serves it (tls.server.mode).

A server in ``permissive`` mode takes TLS and plain clients on one port, telling them apart by a
connection's first byte: 0x16, the content type of a TLS handshake record (a ClientHello), or
anything else, the first byte of a plain frame's length (a frame shorter than 0x16000000 bytes, so
never 0x16). ``enforcing`` closes a connection that does not start with a handshake.
"""

from __future__ import annotations

import enum

TLS_HANDSHAKE_RECORD = 0x16


class TlsMode(str, enum.Enum):
    """Which clients a TLS server takes (RocketMQ's tls.server.mode, less ``disabled``: tlsEnable)."""

    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"
