"""The white-address patterns of plain_acl.yml, in the forms RocketMQ 4.x accepts."""

from __future__ import annotations

import pytest

from rmq.broker.acl.address import AddressPattern, AddressPatternError, host_of


@pytest.mark.parametrize(
    "pattern, inside, outside",
    [
        ("", [], ["127.0.0.1", "10.0.0.1"]),
        ("*", ["127.0.0.1", "::1"], []),
        ("*.*.*.*", ["10.1.2.3"], []),
        ("192.168.0.1", ["192.168.0.1"], ["192.168.0.2", "192.168.0.10"]),
        ("192.168.0.1,10.0.0.2", ["192.168.0.1", "10.0.0.2"], ["10.0.0.1"]),
        ("192.168.1.{1,2,3}", ["192.168.1.1", "192.168.1.3"], ["192.168.1.4", "192.168.2.1"]),
        ("192.168.0.*", ["192.168.0.0", "192.168.0.255"], ["192.168.1.1", "10.168.0.1"]),
        ("192.168.1-3.*", ["192.168.1.9", "192.168.3.200"], ["192.168.4.1", "192.168.0.1"]),
        ("192.168.*.1-100", ["192.168.7.1", "192.168.250.100"], ["192.168.7.101", "192.168.7.0"]),
        ("10.10.103.*", ["10.10.103.7"], ["10.10.104.7"]),
        ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["127.0.0.1"]),
        ("2001:db8::*", ["2001:db8::1", "2001:db8::ffff"], ["2001:db8::1:1", "2001:db9::1"]),
        ("2001:db8::1-ff", ["2001:db8::a"], ["2001:db8::100"]),
        ("2001:db8::{1,2}", ["2001:db8::2"], ["2001:db8::3"]),
    ],
)
def test_a_pattern_matches_the_addresses_it_names_and_no_others(pattern, inside, outside):
    compiled = AddressPattern(pattern)
    assert [a for a in inside if not compiled.match(a)] == []
    assert [a for a in outside if compiled.match(a)] == []


@pytest.mark.parametrize(
    "pattern",
    ["192.168.0", "192.168.0.256", "192.168.0.9-3", "192.168.0.x", "192.168.*", "192.168.0.1,nonsense", "{1,2}"],
)
def test_a_pattern_that_names_no_address_is_refused_with_it_in_the_message(pattern):
    with pytest.raises(AddressPatternError) as refused:
        AddressPattern(pattern)
    assert repr(pattern.split(",")[-1]) in str(refused.value) or repr(pattern) in str(refused.value)


def test_a_channels_remote_address_loses_its_port():
    assert host_of("127.0.0.1:10911") == "127.0.0.1"
    assert host_of("[::1]:10911") == "::1"
