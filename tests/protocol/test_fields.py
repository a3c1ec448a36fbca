"""Reading request header fields: a value that cannot be used is refused naming the field."""

from __future__ import annotations

import pytest

from rmq.errors import RequestRefused
from rmq.protocol.codes import ResponseCode
from rmq.protocol.fields import int_field
from rmq.protocol.send_header import V2


@pytest.mark.parametrize(
    "name, value",
    [
        # Java's Integer header fields (the queue id of a send, V2 letter too) and Long ones: a value
        # past them reached the store's C ints and failed the processor (found by perf/fuzz_broker.py)
        ("queueId", str(2**31)),
        (V2["queueId"], str(-(2**31) - 1)),
        ("maxMsgNums", "99999999999999999999999"),
        ("queueOffset", str(2**63)),
        ("timestamp", str(-(2**63) - 1)),
    ],
)
def test_numbers_out_of_their_java_type_are_refused(name, value):
    with pytest.raises(RequestRefused) as e:
        int_field({name: value}, name)
    assert e.value.code == ResponseCode.SYSTEM_ERROR
    assert f"header field {name!r} is {value!r}, expected an integer of" in e.value.remark


@pytest.mark.parametrize(
    "name, value", [("queueId", 2**31 - 1), ("queueId", -(2**31)), ("queueOffset", 2**63 - 1), ("timestamp", -(2**63))]
)
def test_numbers_at_the_ends_of_their_java_type_are_read(name, value):
    assert int_field({name: str(value)}, name) == value


def test_a_field_that_is_no_number_is_refused():
    with pytest.raises(RequestRefused, match="header field 'queueId' is '12abc', expected an integer of 32 bits"):
        int_field({"queueId": "12abc"}, "queueId")
