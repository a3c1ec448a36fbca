"""The receipt handle a 5.x consumer holds: the POP_CK extraInfo plus the CommitLog offset, as
RocketMQ's proxy encodes it."""

from __future__ import annotations

import pytest

from rmq.protocol.fields import BadRequest
from rmq.protocol.pop import ExtraInfo
from rmq.protocol.receipt_handle import ReceiptHandle


def test_a_handle_is_the_extra_info_and_the_commit_log_offset_as_rocketmq_spells_it():
    # RocketMQ's ReceiptHandle.encode of the same fields
    java = "5 1700000000000 60000 1 0 broker-a 3 7 12345"
    handle = ReceiptHandle.decode(java)
    assert handle.extra_info == ExtraInfo(5, 1700000000000, 60000, 1, "0", "broker-a", 3, 7)
    assert handle.commit_log_offset == 12345
    assert handle.encode() == java
    assert handle.next_visible_time == 1700000060000
    assert not handle.is_expired(1700000059999) and handle.is_expired(1700000060000)
    # a handle without the CommitLog offset (RocketMQ's decode takes 8 fields) cannot be forwarded
    assert ReceiptHandle.decode(java.rpartition(" ")[0]).commit_log_offset == -1


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage",
        "5 1700000000000 60000 1 0 broker-a 3",
        "5 x 60000 1 0 broker-a 3 7 1",
        "5 1 60000 1 9 b 3 7 1",
        "5 1 60000 1 0 b 3 7 notanumber",
        "5 1 60000 1 0 b 3 7 1 extra",
    ],
)
def test_a_handle_the_proxy_never_made_is_refused_saying_what_a_handle_is(text):
    with pytest.raises(BadRequest, match="ckQueueOffset popTime invisibleTime"):
        ReceiptHandle.decode(text)
