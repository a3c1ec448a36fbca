"""Subscription expressions and tag matching (tagsCode first, then the exact tag)."""

import pytest

from rmq.errors import RequestRefused
from rmq.protocol.codes import ResponseCode
from rmq.protocol.message import java_string_hash
from rmq.protocol.subscription import build_subscription_data


@pytest.mark.parametrize("expression", ["*", "", None, "  *  "])
def test_everything(expression):
    sub = build_subscription_data("T", expression)
    assert sub.sub_string == "*" and sub.sub_all
    assert sub.is_matched_by_tags_code(java_string_hash("Anything"))
    assert sub.is_matched_by_tag(None)


def test_tags_with_whitespace():
    sub = build_subscription_data("T", " TagA ||TagB||  ", sub_version=7)
    assert sub.tags_set == {"TagA", "TagB"}
    assert sub.code_set == {java_string_hash("TagA"), java_string_hash("TagB")}
    assert sub.sub_version == 7 and sub.expression_type == "TAG"
    assert sub.is_matched_by_tags_code(java_string_hash("TagA"))
    assert not sub.is_matched_by_tags_code(java_string_hash("TagC"))
    assert sub.is_matched_by_tags_code(None)  # an entry without tagsCode is not filtered out
    assert sub.is_matched_by_tag("TagB") and not sub.is_matched_by_tag("TagC") and not sub.is_matched_by_tag(None)


def test_hash_collision_is_caught_by_the_exact_check():
    # "Aa" and "BB" share Java's String.hashCode
    assert java_string_hash("Aa") == java_string_hash("BB")
    sub = build_subscription_data("T", "Aa")
    assert sub.is_matched_by_tags_code(java_string_hash("BB"))
    assert not sub.is_matched_by_tag("BB")


def test_sql92_is_parsed_when_built_and_bad_sql_and_empty_tag_lists_are_refused_clearly():
    sub = build_subscription_data("T", " a > 5 ", "sql92", sub_version=3)
    assert (sub.expression_type, sub.sub_string, sub.sub_version) == ("SQL92", "a > 5", 3)
    assert not sub.sub_all and sub.is_matched_by_tags_code(123)  # the broker filters by properties
    with pytest.raises(RequestRefused) as e:
        build_subscription_data("T", "a >> 5", "SQL92")
    assert e.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert e.value.remark.startswith("subscription to 'T': SQL92 expression 'a >> 5', line 1 column 4: unexpected '>'")
    with pytest.raises(RequestRefused, match="names no tag"):
        build_subscription_data("T", "||")
    with pytest.raises(RequestRefused, match="unknown expression type 'XPATH'"):
        build_subscription_data("T", "x", "XPATH")
