"""Send requests encoded straight to their frames (layout in ``rmq.client.send_wire_py``): the
compiled ``rmq.client._send_wire`` unless ``RMQ_NO_EXTENSIONS=1`` asks for the pure-Python twin."""

from __future__ import annotations

import os

if os.environ.get("RMQ_NO_EXTENSIONS") == "1":
    from rmq.client import send_wire_py as implementation
else:
    from rmq.client import _send_wire as implementation  # type: ignore[no-redef]

json_string = implementation.json_string
fixed_fields = implementation.fixed_fields
message_fields = implementation.message_fields
send_frame = implementation.send_frame

__all__ = ["fixed_fields", "implementation", "json_string", "message_fields", "send_frame"]
