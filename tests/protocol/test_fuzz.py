"""Property-based fuzzing of what rmq.protocol decodes from peers: stored records (both twins of the
record codec), batch bodies, message properties, Java JSON, heartbeats, lock bodies and SQL92 filters. Whatever the
bytes, a decoder answers with a value or with its own error, never another exception; and what the
encoders write decodes to what they were given."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.errors import RecordError, RequestRefused
from rmq.protocol import _record, layout, record, record_py
from rmq.protocol.batch import decode_batch, encode_batch
from rmq.protocol.codes import ResponseCode
from rmq.protocol.heartbeat import parse_heartbeat
from rmq.protocol.java_json import dumps_mq_table, loads_java_json, loads_mq_tables
from rmq.protocol.message import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, decode_properties, encode_properties
from rmq.protocol.message_queue import MessageQueue, parse_lock_batch_body
from rmq.protocol.sql92 import SqlFilterError, compile_sql92, evaluate_sql92
from tests.helpers.golden import spec_record

FUZZ = settings(max_examples=100, deadline=None)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
NAMES = st.from_regex(r"[%|a-zA-Z0-9_-]{1,40}", fullmatch=True)
IPV4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))
HOSTS = st.tuples(IPV4, INT32)
# property names and values: anything but the two separators (a name is never empty)
PROPERTY_TEXT = st.text(st.characters(blacklist_characters=NAME_VALUE_SEPARATOR + PROPERTY_SEPARATOR, codec="utf-8"))
PROPERTIES = st.dictionaries(PROPERTY_TEXT.filter(bool), PROPERTY_TEXT, max_size=6)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


@st.composite
def records(draw):
    """A stored record laid out from docs/store-format.md, with the fields it was built from."""
    fields = dict(
        topic=draw(NAMES.filter(lambda t: len(t.encode()) <= 127)),
        body=draw(st.binary(max_size=300)),
        props=encode_properties(draw(PROPERTIES))[:2000],
        queue_id=draw(INT32),
        flag=draw(INT32),
        queue_offset=draw(INT64),
        phy_offset=draw(INT64),
        sys_flag=draw(INT32),
        born_ts=draw(INT64),
        born_host=draw(HOSTS),
        store_ts=draw(INT64),
        store_host=draw(HOSTS),
        reconsume=draw(INT32),
        prepared=draw(INT64),
    )
    return fields, spec_record(**fields)


@FUZZ
@given(built=records())
def test_a_record_decodes_to_its_fields_in_both_twins(built):
    fields, data = built
    for twin in (record_py, _record):
        assert twin.check_record(data, -1, True) == len(data)
        assert twin.check_record(data, fields["phy_offset"] if fields["phy_offset"] >= 0 else -1, True) == len(data)
    message = record.decode_record(data)
    assert (message.topic, message.body, message.queue_id, message.flag) == (
        fields["topic"],
        fields["body"],
        fields["queue_id"],
        fields["flag"],
    )
    assert (message.queue_offset, message.sys_flag, message.born_timestamp, message.store_timestamp) == (
        fields["queue_offset"],
        fields["sys_flag"],
        fields["born_ts"],
        fields["store_ts"],
    )
    assert (message.born_host, message.store_host) == (fields["born_host"], fields["store_host"])
    assert (message.reconsume_times, message.prepared_transaction_offset) == (fields["reconsume"], fields["prepared"])
    assert message.properties == decode_properties(fields["props"])


@FUZZ
@given(built=records(), at=st.integers(0, 10_000), bit=st.integers(0, 7), cut=st.integers(0, 10_000))
def test_a_damaged_record_gets_the_same_verdict_from_both_twins(built, at, bit, cut):
    _, data = built
    flipped = bytearray(data)
    flipped[at % len(data)] ^= 1 << bit
    for damaged in (bytes(flipped), data[: cut % len(data)], data + bytes(cut % 50)):
        verdicts = {twin.check_record(damaged, -1, True) for twin in (record_py, _record)}
        assert len(verdicts) == 1, verdicts
        (verdict,) = verdicts
        assert verdict in layout.CHECK_RESULTS or 0 < verdict <= len(damaged)
        try:
            record.decode_records(damaged, check_crc=True)
        except RecordError:
            assert verdict <= 0 or verdict < len(damaged)


@FUZZ
@given(data=st.binary(max_size=400))
def test_arbitrary_bytes_are_records_or_a_record_error(data):
    verdicts = {twin.check_record(data, -1, True) for twin in (record_py, _record)}
    assert len(verdicts) == 1, verdicts
    try:
        messages = record.decode_records(data, check_crc=True)
    except RecordError:
        return
    assert sum(m.store_size for m in messages) == len(data)


BATCH_MESSAGES = st.lists(st.tuples(st.binary(max_size=200), PROPERTIES.map(encode_properties), INT32), min_size=1)


@FUZZ
@given(messages=BATCH_MESSAGES)
def test_a_batch_body_decodes_to_its_messages(messages):
    messages = [(b, p[:32767], f) for b, p, f in messages]
    assert decode_batch(encode_batch(messages)) == messages


@FUZZ
@given(messages=BATCH_MESSAGES, at=st.integers(0, 10_000), value=st.integers(0, 255), cut=st.integers(0, 10_000))
def test_a_damaged_batch_body_decodes_or_is_illegal(messages, at, value, cut):
    body = bytearray(encode_batch([(b, p[:32767], f) for b, p, f in messages]))
    body[at % len(body)] = value
    for damaged in (bytes(body), bytes(body[: cut % len(body)])):
        try:
            decoded = decode_batch(damaged)
        except RequestRefused as e:
            assert e.code == ResponseCode.MESSAGE_ILLEGAL and e.remark.startswith("batch body")
            continue
        assert all(isinstance(b, bytes) and isinstance(p, bytes) for b, p, _ in decoded)


@FUZZ
@given(data=st.binary(max_size=300))
def test_arbitrary_batch_bytes_decode_or_are_illegal(data):
    try:
        decode_batch(data)
    except RequestRefused as e:
        assert e.code == ResponseCode.MESSAGE_ILLEGAL


@FUZZ
@given(properties=PROPERTIES)
def test_properties_decode_to_what_was_encoded(properties):
    assert decode_properties(encode_properties(properties)) == properties
    assert decode_properties(encode_properties(properties).decode()) == properties


@FUZZ
@given(data=st.binary(max_size=300) | st.text(max_size=100).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_arbitrary_property_bytes_decode_to_strings(data):
    decoded = decode_properties(data)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in decoded.items())


QUEUES = st.builds(MessageQueue, NAMES, NAMES, INT32)


# loads_mq_tables finds queue keys by their text, on the ground that a topic or broker name holds no
# brace: neither do the other strings of these bodies (client ids, addresses, group names).
BRACELESS_JSON = st.recursive(
    st.none() | st.integers() | st.text(st.characters(blacklist_characters="{}"), max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NAMES, inner, max_size=4),
    max_leaves=20,
)


@FUZZ
@given(table=st.dictionaries(QUEUES, BRACELESS_JSON, max_size=5), other=BRACELESS_JSON)
def test_queue_keyed_tables_read_back_as_written(table, other):
    text = '{"offsetTable":' + dumps_mq_table(table) + ',"other":' + json.dumps(other) + "}"
    assert loads_mq_tables(text) == {"offsetTable": table, "other": loads_java_json(json.dumps(other))}


@FUZZ
@given(table=st.dictionaries(st.integers(-(2**40), 2**40), JSON_VALUES, max_size=5))
def test_unquoted_integer_keys_read_as_fastjson_writes_them(table):
    text = "{" + ",".join(f"{k}:{json.dumps(v)}" for k, v in table.items()) + "}"
    assert loads_java_json(text) == {str(k): v for k, v in table.items()}


@FUZZ
@given(text=st.text(max_size=200))
def test_arbitrary_text_is_java_json_or_a_value_error(text):
    for parse in (loads_java_json, loads_mq_tables):
        try:
            parse(text)
        except ValueError:
            pass


def _refused_cleanly(parse, data) -> None:
    try:
        parse(data)
    except RequestRefused as e:
        assert e.code == ResponseCode.SYSTEM_ERROR and e.remark


HEARTBEAT_SHAPES = st.fixed_dictionaries(
    {"clientID": st.text(max_size=10) | JSON_VALUES},
    optional={
        "consumerDataSet": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "groupName": st.text(max_size=10) | JSON_VALUES,
                    "consumeType": st.sampled_from(["CONSUME_PASSIVELY", 0, 1, 9]) | JSON_VALUES,
                    "messageModel": st.sampled_from(["CLUSTERING", 0, 1]) | JSON_VALUES,
                    "consumeFromWhere": st.sampled_from([0, 4, 5, "CONSUME_FROM_LAST_OFFSET"]) | JSON_VALUES,
                    "subscriptionDataSet": st.lists(
                        st.fixed_dictionaries(
                            {},
                            optional={
                                "topic": st.text(max_size=10) | JSON_VALUES,
                                "subString": st.sampled_from(["*", "a || b", "||", "a > 1"]) | JSON_VALUES,
                                "subVersion": JSON_VALUES,
                                "tagsSet": JSON_VALUES,
                                "expressionType": st.sampled_from(["TAG", "SQL92"]) | JSON_VALUES,
                            },
                        )
                        | JSON_VALUES,
                        max_size=3,
                    )
                    | JSON_VALUES,
                },
            )
            | JSON_VALUES,
            max_size=3,
        )
        | JSON_VALUES,
        "producerDataSet": st.lists(st.fixed_dictionaries({"groupName": JSON_VALUES}) | JSON_VALUES, max_size=2),
    },
)


@FUZZ
@given(heartbeat=HEARTBEAT_SHAPES)
def test_any_heartbeat_json_parses_or_is_refused(heartbeat):
    _refused_cleanly(parse_heartbeat, json.dumps(heartbeat).encode())


@FUZZ
@given(data=st.binary(max_size=200) | JSON_VALUES.map(lambda v: json.dumps(v).encode()))
def test_any_heartbeat_or_lock_body_parses_or_is_refused(data):
    _refused_cleanly(parse_heartbeat, data)
    _refused_cleanly(parse_lock_batch_body, data)


@pytest.mark.parametrize("body", [b'{"consumerGroup":"G","clientId":"c","mqSet":[{"topic":"T"}]}'])
def test_a_lock_body_missing_queue_fields_is_refused(body):
    with pytest.raises(RequestRefused):
        parse_lock_batch_body(body)


# -- SQL92 filters ---------------------------------------------------------------------------------

SQL_NAMES = st.sampled_from(["a", "b", "c_1", "$d"])
SQL_STRINGS = st.text(st.characters(codec="utf-8", blacklist_categories=["Cs"]), max_size=6)
SQL_PROPERTIES = st.dictionaries(SQL_NAMES, st.one_of(st.integers(-5, 5).map(str), SQL_STRINGS), max_size=4)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@st.composite
def sql_expressions(draw, depth: int = 0):
    """A boolean SQL92 expression RocketMQ's parser takes, as a tree: (kind, parts...)."""
    if depth < 3 and draw(st.booleans()):
        kind = draw(st.sampled_from(["AND", "OR", "NOT"]))
        if kind == "NOT":
            return ("NOT", draw(sql_expressions(depth + 1)))
        return (kind, draw(sql_expressions(depth + 1)), draw(sql_expressions(depth + 1)))
    name = draw(SQL_NAMES)
    kind = draw(st.sampled_from(["cmp", "eq", "null", "between", "in", "text"]))
    if kind == "cmp":
        return ("cmp", name, draw(st.sampled_from([">", ">=", "<", "<="])), str(draw(st.integers(-9, 9))))
    if kind == "eq":
        literal = draw(st.one_of(st.integers(-9, 9).map(str), SQL_STRINGS.map(_quoted)))
        return ("cmp", name, draw(st.sampled_from(["=", "<>"])), literal)
    if kind == "null":
        return ("null", name, draw(st.booleans()))
    if kind == "between":
        low = draw(st.integers(-9, 9))
        return ("between", name, draw(st.booleans()), low, low + draw(st.integers(0, 5)))
    if kind == "in":
        return ("in", name, draw(st.booleans()), draw(st.lists(SQL_STRINGS, min_size=1, max_size=3)))
    return (
        "text",
        name,
        draw(st.booleans()),
        draw(st.sampled_from(["CONTAINS", "STARTSWITH", "ENDSWITH"])),
        draw(SQL_STRINGS),
    )


def render(tree, keyword=str.upper, gap: str = " ", extra_parens: bool = False) -> str:
    """The text of ``tree``; keyword case, spacing and redundant parentheses vary, the meaning not."""
    kind = tree[0]
    k = keyword
    not_ = k("NOT") + gap if len(tree) > 2 and tree[2] is True else ""
    if kind in ("AND", "OR"):
        left, right = (render(part, keyword, gap, extra_parens) for part in tree[1:])
        text = f"({left}){gap}{k(kind)}{gap}({right})"
    elif kind == "NOT":
        text = f"{k('NOT')}{gap}({render(tree[1], keyword, gap, extra_parens)})"
    elif kind == "cmp":
        text = f"{tree[1]}{gap}{tree[2]}{gap}{tree[3]}"
    elif kind == "null":
        text = f"{tree[1]}{gap}{k('IS')}{gap}{not_}{k('NULL')}"
    elif kind == "between":
        text = f"{tree[1]}{gap}{not_}{k('BETWEEN')}{gap}{tree[3]}{gap}{k('AND')}{gap}{tree[4]}"
    elif kind == "in":
        items = ",".join(_quoted(s) for s in tree[3])
        text = f"{tree[1]}{gap}{not_}{k('IN')}{gap}({items})"
    else:
        text = f"{tree[1]}{gap}{not_}{k(tree[3])}{gap}{_quoted(tree[4])}"
    return f"({text})" if extra_parens else text


def names_of(tree) -> set[str]:
    if tree[0] in ("AND", "OR"):
        return names_of(tree[1]) | names_of(tree[2])
    if tree[0] == "NOT":
        return names_of(tree[1])
    return {tree[1]}


@FUZZ
@given(tree=sql_expressions(), properties=SQL_PROPERTIES)
def test_a_generated_sql92_expression_reads_back_the_same_however_written(tree, properties):
    plain = render(tree)
    sql92 = compile_sql92(plain)
    assert sql92.property_names == names_of(tree)
    expected = evaluate_sql92(plain, properties)
    assert expected in (True, False, None, "error")
    assert sql92(properties) is (expected is True)
    for other in (
        render(tree, str.lower, "  ", True),
        render(tree, str.title, "\n/* c */ ", False),
        render(tree, str.upper, "\t", True) + " -- the end",
    ):
        assert evaluate_sql92(other, properties) == expected, other


THREE_VALUED_AND = {
    (True, True): True,
    (False, None): False,
    (None, False): False,
    (None, True): None,
    (True, None): None,
    (None, None): None,
}


@FUZZ
@given(left=sql_expressions(), right=sql_expressions(), properties=SQL_PROPERTIES)
def test_sql92_logic_is_three_valued(left, right, properties):
    a, b = evaluate_sql92(render(left), properties), evaluate_sql92(render(right), properties)
    if "error" in (a, b):
        return
    both = evaluate_sql92(f"({render(left)}) AND ({render(right)})", properties)
    either = evaluate_sql92(f"({render(left)}) OR ({render(right)})", properties)
    negated = evaluate_sql92(f"NOT ({render(left)})", properties)
    assert both == (False if False in (a, b) else None if None in (a, b) else True)
    assert either == (True if True in (a, b) else None if None in (a, b) else False)
    assert negated == (None if a is None else not a)


@FUZZ
@given(
    text=st.text(max_size=60)
    | st.lists(
        st.sampled_from(
            [
                "a",
                "'x'",
                "1",
                "1.5",
                "(",
                ")",
                "AND",
                "OR",
                "NOT",
                "=",
                ">",
                "IN",
                "IS",
                "NULL",
                "BETWEEN",
                ",",
                "--",
                "/*",
                "*/",
                "TRUE",
                "99999999999999999999",
            ]
        )
    ).map(" ".join),
    properties=SQL_PROPERTIES,
)
def test_any_text_compiles_or_is_refused_and_never_fails_a_message(text, properties):
    try:
        sql92 = compile_sql92(text)
    except SqlFilterError as e:
        assert str(e)
        return
    assert sql92(properties) in (True, False)
