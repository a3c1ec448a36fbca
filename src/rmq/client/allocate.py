"""How a consumer group shares a topic's queues: RocketMQ's AllocateMessageQueueStrategy.

Every consumer of the group runs the same pure function over the same sorted lists (all queues,
all client ids) and takes its own share, so no coordinator is needed; during a rebalance two
consumers may briefly overlap, which is why delivery is at least once.

    average            contiguous blocks: 8 queues, 3 consumers -> [0 1 2] [3 4 5] [6 7]
    average_by_circle  round robin:       8 queues, 3 consumers -> [0 3 6] [1 4 7] [2 5]

More consumers than queues: the extra ones get nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from rmq.errors import ClientError
from rmq.protocol.message_queue import MessageQueue

Q = TypeVar("Q")

# (current client id, every queue, every client id) -> the current client's queues
AllocateStrategy = Callable[[str, Sequence[Q], Sequence[str]], list[Q]]


def _check(current_cid: str, mq_all: Sequence[Q], cid_all: Sequence[str]) -> bool:
    if not current_cid:
        raise ClientError("current client id is empty")
    return bool(mq_all) and current_cid in cid_all


def allocate_average(current_cid: str, mq_all: Sequence[Q], cid_all: Sequence[str]) -> list[Q]:
    """Contiguous blocks; the first ``len(mq_all) % len(cid_all)`` consumers get one more."""
    if not _check(current_cid, mq_all, cid_all):
        return []
    index = list(cid_all).index(current_cid)
    n_mq, n_cid = len(mq_all), len(cid_all)
    mod = n_mq % n_cid
    if n_mq <= n_cid:
        average = 1
    elif mod > 0 and index < mod:
        average = n_mq // n_cid + 1
    else:
        average = n_mq // n_cid
    start = index * average if mod > 0 and index < mod else index * average + mod
    count = min(average, n_mq - start)
    return [mq_all[(start + i) % n_mq] for i in range(max(count, 0))]


def allocate_average_by_circle(current_cid: str, mq_all: Sequence[Q], cid_all: Sequence[str]) -> list[Q]:
    """Round robin: consumer i gets queues i, i + n, i + 2n, ..."""
    if not _check(current_cid, mq_all, cid_all):
        return []
    index = list(cid_all).index(current_cid)
    return list(mq_all[index :: len(cid_all)])


STRATEGIES: dict[str, AllocateStrategy[MessageQueue]] = {
    "average": allocate_average,
    "average_by_circle": allocate_average_by_circle,
    # RocketMQ's getName() spellings
    "AVG": allocate_average,
    "AVG_BY_CIRCLE": allocate_average_by_circle,
}


def strategy(name_or_fn: str | AllocateStrategy[MessageQueue]) -> AllocateStrategy[MessageQueue]:
    """A strategy by name ("average", "average_by_circle") or a callable of the same shape."""
    if callable(name_or_fn):
        return name_or_fn
    try:
        return STRATEGIES[name_or_fn]
    except KeyError:
        raise ClientError(
            f"unknown allocation strategy {name_or_fn!r}, expected one of {', '.join(STRATEGIES)} or a callable"
        ) from None
