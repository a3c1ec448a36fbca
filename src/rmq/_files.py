"""Files rmq rewrites whole (broker metadata, a broadcasting consumer's offsets), written so that a
crash or a power cut leaves a complete version behind.

The new content goes to ``<name>.tmp`` and is fsynced; the current file is renamed to ``<name>.bak``;
the temp file is renamed over ``<name>``; the directory is fsynced. At every instant either
``<name>`` or ``<name>.bak`` holds a complete version, so a reader falls back to ``.bak`` when
``<name>`` is missing or unreadable.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

BACKUP_SUFFIX = ".bak"
TEMP_SUFFIX = ".tmp"


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def write_file_atomically(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` so that a crash leaves ``path`` or ``path.bak`` complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(path.name + TEMP_SUFFIX)
    backup = backup_path(path)
    try:
        with open(temp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        # a full disk (ENOSPC) leaves ``path`` as it was; the partial temp file goes
        temp.unlink(missing_ok=True)
        raise
    if path.exists():
        os.replace(path, backup)
    os.replace(temp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_with_backup(path: Path, parse: Callable[[str], T]) -> T | None:
    """``parse`` of ``path``'s text, else of ``path.bak``'s (what a crash during a rewrite leaves);
    None when neither exists. When every file present fails to parse, the last error is raised."""
    error: Exception | None = None
    for candidate in (path, backup_path(path)):
        try:
            text = candidate.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        try:
            return parse(text)
        except Exception as e:  # any malformed content: try the backup
            error = e
    if error is not None:
        raise error
    return None
