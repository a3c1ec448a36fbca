"""Constants of the remoting frame itself (docs/protocol.md#frame): flag bits, serialize types, the
language and version rmq writes in headers, the default frame size limit. The request and response
codes a frame carries are ``rmq.protocol.codes``'.
"""

from __future__ import annotations

# RemotingCommand.flag bits
FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2

# serializeType (the high byte of the second frame int). Only JSON is ever written.
SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1

# The language rmq reports in headers (a name of RocketMQ's LanguageCode enum).
LANGUAGE = "PYTHON"
# The version number rmq reports: a 4.9.x ordinal of RocketMQ's MQVersion.Version, so that peers
# enable every 4.x feature.
VERSION = 399

MAX_FRAME_SIZE_DEFAULT = 16 * 1024 * 1024
