"""JSON as Java peers write it: fastjson leaves integer map keys unquoted (``{0:"127.0.0.1:10911"}``)."""

from __future__ import annotations

import json
import re
from typing import Any

# An integer key left unquoted by fastjson: `{0:12,` or `, 3:` (names never contain { , :).
_BARE_INT_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


def loads_java_json(text: str) -> Any:
    """``json.loads`` that also accepts fastjson's unquoted integer map keys."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        quoted = _BARE_INT_KEY.sub(r'\1"\2"\3', text)
        if quoted == text:
            raise
        return json.loads(quoted)
