"""GET_COMMIT_LOG_DIGESTS (rmq's own): a broker hashes its CommitLog off the event loop and answers
the same digests the store computes; unusable ranges are refused and the broker goes on."""

from __future__ import annotations

import pytest

from rmq.net import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.replica import CommitLogDigests
from rmq.store.digest import commit_log_digests
from tests.helpers.broker import assert_still_serving, create_topic, put
from tests.helpers.requests import call

RANGE = 64 * 1024


def digests_request(start: int, end: int, range_size: int) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.GET_COMMIT_LOG_DIGESTS, {"startOffset": start, "endOffset": end, "rangeSize": range_size}
    )


def test_the_broker_answers_its_stores_digests(broker, client):
    create_topic(broker, "Digests")
    for i in range(200):
        put(broker, "Digests", b"%d" % i * 300)
    end = broker.store.get_max_phy_offset()
    r = call(client, broker.broker_addr, digests_request(0, end, RANGE))
    assert r.code == ResponseCode.SUCCESS, r.remark
    answer = CommitLogDigests.decode(r.body)
    assert (answer.min_offset, answer.max_offset, answer.range_size) == (0, end, RANGE)
    assert answer.digests == commit_log_digests(broker.store, 0, end, RANGE)
    assert len(answer.digests) == -(-end // RANGE)

    # an empty range asks only what the log holds
    r = call(client, broker.broker_addr, digests_request(0, 0, RANGE))
    assert CommitLogDigests.decode(r.body).digests == [] and CommitLogDigests.decode(r.body).max_offset == end


@pytest.mark.parametrize(
    "start, end, size, remark",
    [
        (0, 100, 0, "header field 'rangeSize' is '0', expected a positive number of bytes"),
        (100, 50, RANGE, "header field 'endOffset' is '50', expected an offset at or after startOffset 100"),
        (0, 2**40, 1, "header field 'rangeSize' is '1', expected ranges few enough"),
    ],
)
def test_unusable_ranges_are_refused(broker, client, start, end, size, remark):
    r = call(client, broker.broker_addr, digests_request(start, end, size))
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark.startswith(remark)
    assert_still_serving(broker, client)
