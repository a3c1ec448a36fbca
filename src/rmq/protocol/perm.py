"""Permission bits of topics and brokers (RocketMQ's PermName), shared by name server, broker and clients.

A topic's ``perm`` is a bit set: 4 read, 2 write, 1 inherit. INHERIT marks a template topic (TBW102)
whose settings a topic auto-created from it copies.
"""

from __future__ import annotations

PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
PERM_ALL = PERM_READ | PERM_WRITE | PERM_INHERIT


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_inherited(perm: int) -> bool:
    return bool(perm & PERM_INHERIT)


def perm_to_string(perm: int) -> str:
    """``6`` -> ``"RW-"``, as RocketMQ's admin tools print it."""
    return (
        ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-") + ("X" if perm & PERM_INHERIT else "-")
    )
