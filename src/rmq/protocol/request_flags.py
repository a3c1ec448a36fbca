"""Flags that requests carry in their extFields, beside the frame's own flag bits (rmq.net.frame) and a
message's sysFlag (``MessageSysFlag``, rmq.protocol.message).

PULL_MESSAGE's ``sysFlag`` (RocketMQ's PullSysFlag)::

    bit 0  0x1  COMMIT_OFFSET   the request's commitOffset is the group's progress: store it
    bit 1  0x2  SUSPEND         no message yet: park the pull until one comes or the suspend ends
    bit 2  0x4  SUBSCRIPTION    the request carries its subscription (expression and type);
                                without it the broker uses the group's registered one
    bit 3  0x8  CLASS_FILTER    a class filter (RocketMQ's filter server): rmq neither sends nor reads it

QUERY_MESSAGE's ``_UNIQUE_KEY_QUERY`` (RocketMQ's MixAll.UNIQUE_MSG_QUERY_FLAG): ``"true"`` when the key
is a message's unique key (UNIQ_KEY) rather than one of its KEYS. Plain ACL leaves it out of the
signed content (rmq.protocol.acl).
"""

from __future__ import annotations


class PullSysFlag:
    """PULL_MESSAGE's sysFlag bits. Plain ints, not an IntFlag: they are tested on every pull."""

    COMMIT_OFFSET = 0x1
    SUSPEND = 0x2
    SUBSCRIPTION = 0x4
    CLASS_FILTER = 0x8


UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
