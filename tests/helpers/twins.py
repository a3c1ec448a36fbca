"""The codecs exist twice, compiled and pure Python (aiokafka's way): which twin a module picks."""

from __future__ import annotations

import os
import subprocess
import sys


def chosen_implementation(module: str, no_extensions: str) -> str:
    """The last name of ``module.implementation`` in a fresh interpreter run with
    ``RMQ_NO_EXTENSIONS=no_extensions`` (each module reads it once, at import)."""
    code = f"import {module} as m; print(m.implementation.__name__.rsplit('.', 1)[1])"
    env = dict(os.environ, RMQ_NO_EXTENSIONS=no_extensions)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()
