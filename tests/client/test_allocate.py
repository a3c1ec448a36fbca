"""Queue allocation strategies: pure functions every consumer of a group runs alike."""

from __future__ import annotations

import pytest

from rmq.client.allocate import allocate_average, allocate_average_by_circle, strategy
from rmq.errors import ClientError

QUEUES = list(range(8))
CIDS = ["c0", "c1", "c2"]


def test_average_gives_contiguous_blocks_first_ones_one_more():
    assert [allocate_average(c, QUEUES, CIDS) for c in CIDS] == [[0, 1, 2], [3, 4, 5], [6, 7]]


def test_average_by_circle_deals_round_robin():
    assert [allocate_average_by_circle(c, QUEUES, CIDS) for c in CIDS] == [[0, 3, 6], [1, 4, 7], [2, 5]]


@pytest.mark.parametrize("allocate", [allocate_average, allocate_average_by_circle])
@pytest.mark.parametrize("n_queues", [1, 3, 4, 7, 16])
@pytest.mark.parametrize("n_cids", [1, 2, 3, 5, 20])
def test_every_queue_goes_to_exactly_one_consumer(allocate, n_queues, n_cids):
    queues = list(range(n_queues))
    cids = [f"c{i:02d}" for i in range(n_cids)]
    shares = [allocate(c, queues, cids) for c in cids]
    flat = [q for share in shares for q in share]
    assert sorted(flat) == queues
    # nobody gets more than one queue above anybody else
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1


def test_more_consumers_than_queues_leaves_the_extra_ones_idle():
    cids = [f"c{i}" for i in range(6)]
    assert [allocate_average(c, [0, 1, 2, 3], cids) for c in cids] == [[0], [1], [2], [3], [], []]


def test_a_consumer_not_in_the_list_gets_nothing():
    assert allocate_average("stranger", QUEUES, CIDS) == []
    assert allocate_average_by_circle("c0", [], CIDS) == []


def test_strategy_by_name_or_callable():
    assert strategy("average") is allocate_average
    assert strategy("AVG_BY_CIRCLE") is allocate_average_by_circle
    assert strategy(allocate_average) is allocate_average
    with pytest.raises(ClientError, match="unknown allocation strategy 'hash'"):
        strategy("hash")
