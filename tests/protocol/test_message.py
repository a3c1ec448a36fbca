"""Message properties on the wire, Java's String.hashCode (tags codes), legal topic and group names."""

from __future__ import annotations

import pytest

from rmq.protocol.message import (
    decode_properties,
    encode_properties,
    group_error,
    java_string_hash,
    topic_error,
)


def test_properties_round_trip():
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "7F000001000017AB"}
    data = encode_properties(props)
    assert data == b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x017F000001000017AB\x02"
    assert decode_properties(data) == props


def test_decode_tolerates_missing_trailing_separator():
    assert decode_properties(b"a\x011\x02b\x012") == {"a": "1", "b": "2"}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", 0),
        ("a", 97),
        ("TagA", 2598919),
        ("hello world", 1794106052),
        ("\u4e2d\u6587", 646394),
        ("\U0001f600", 1772899),
    ],
)
def test_java_string_hash_matches_java(text, expected):
    # expected values printed by Java 17 String.hashCode()
    assert java_string_hash(text) == expected


@pytest.mark.parametrize("topic", ["", "a b", "topic!", "x" * 128, "中文", "Trail\n"])
def test_illegal_topics(topic):
    assert topic_error(topic)


def test_a_name_ending_in_a_newline_is_illegal():
    # the pattern covers the whole name, as Java's matches(): re's "$" matched before the newline
    assert "'Trail\\n'" in topic_error("Trail\n")
    assert "'Group\\n'" in group_error("Group\n")


@pytest.mark.parametrize("topic", ["TopicTest", "%RETRY%group", "a-b_c|d", "x" * 127])
def test_legal_topics(topic):
    assert topic_error(topic) is None
    assert group_error(topic) is None
