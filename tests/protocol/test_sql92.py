"""The SQL92 filter against RocketMQ's expression classes, case by case (rocketmq-all-4.9.4,
``filter/src/main/java/org/apache/rocketmq/filter``; the 5.x CONTAINS/STARTSWITH/ENDSWITH too).

Each row: expression, the message's properties (strings, as a broker reads them from the record;
a few rows use typed values as RocketMQ's ExpressionTest does), the three-valued result Java gives
(True, False, None for null, "error" where Java's evaluate throws; a broker matches only True), and
where in the Java source that result comes from.

When this was written, every row with string properties, every parse error below (but the one
rmq is stricter on) and 23,000 random expressions over random property strings were run through
RocketMQ's own parser and expression classes (the filter module's sources, compiled with this
machine's JDK and guava): no result differed.
"""

from __future__ import annotations

import itertools

import pytest

from rmq.protocol.sql92 import (
    MAX_EXPRESSION_LENGTH,
    MAX_NESTING_DEPTH,
    SHOWN_PREFIX,
    JavaLong,
    SqlFilterError,
    compile_sql92,
    evaluate_sql92,
    parse_java_double,
)

# ComparisonExpression (CE), UnaryExpression (UE), LogicExpression (LE), SelectorParser.jj (SP)
SEMANTICS = [
    # -- numbers against string properties: __compare with CONVERT_STRING_EXPRESSIONS on -----------
    ("a > 5", {"a": "6"}, True, "CE.__compare: String vs Integer -> Integer.valueOf(lv)"),
    ("a > 5", {"a": "5"}, False, "Integer.compareTo"),
    ("a >= 5", {"a": "5"}, True, "asBoolean(answer >= 0)"),
    ("a < 5", {"a": "-7"}, True, "Integer.valueOf accepts a sign"),
    ("a <= 5", {"a": "+5"}, True, "Integer.valueOf('+5') = 5"),
    ("a > 5", {"a": "5.5"}, "error", "Integer.valueOf('5.5'): NumberFormatException -> RuntimeException"),
    ("a > 5", {"a": "abc"}, "error", "NumberFormatException"),
    ("a > 5", {"a": " 6"}, "error", "Integer.valueOf does not trim"),
    ("a > 5", {"a": "3000000000"}, "error", "beyond int: Integer.valueOf throws (literal 5 is an Integer)"),
    ("a > 5000000000", {"a": "6000000000"}, True, "a literal beyond int is a Long: Long.valueOf(lv)"),
    ("a > 5.0", {"a": "5.5"}, True, "String vs Double -> Double.valueOf(lv)"),
    ("a > 3.1E10", {"a": "31000000001"}, True, "ExpressionTest.testEvaluate_exponent"),
    ("a > 5.0", {"a": " 5.5 "}, True, "Double.valueOf trims whitespace"),
    ("a > 5.0", {"a": "6d"}, True, "Double.valueOf accepts an f/d suffix"),
    ("a = 5", {"a": "5"}, True, "CE.doCreateEqual: equals false, then compare -> 0"),
    ("a = 5", {"a": "05"}, True, "Integer.valueOf('05') = 5"),
    ("a <> 5", {"a": "6"}, True, "createNotEqual = NOT(equal)"),
    ("a = 5.0", {"a": "5"}, True, "Double.valueOf('5') = 5.0"),
    ("a = 5", {"a": "x"}, "error", "NumberFormatException in equality too"),
    ("'1' = 1", {}, True, "constants: String vs Integer converts too (the issue's 'false' is not Java's)"),
    ("1 = 1.0", {}, True, "Integer vs Double -> lv.doubleValue()"),
    ("5 > a", {"a": "4"}, True, "Integer vs String -> Integer.valueOf(rv)"),
    # -- two strings -------------------------------------------------------------------------------
    ("a = 'x'", {"a": "x"}, True, "String.equals"),
    ("a = 'x'", {"a": "X"}, False, "case-sensitive"),
    ("a <> 'x'", {"a": "y"}, True, "NOT(equal)"),
    ("a > b", {"a": "10", "b": "9"}, True, "CE.evaluate: two Strings under > are Double.valueOf'd"),
    ("a > b", {"a": "x", "b": "9"}, "error", "'It's illegal to compare string by >'"),
    ("a = b", {"a": "1", "b": "1"}, True, "ExpressionTest.testEvaluate_stringCompare (a=b)"),
    ("a = b", {}, True, "doCreateEqual: lv == rv when both are null"),
    ("a <> b", {"a": "1"}, True, "doCreateEqual: lv set, rv null -> FALSE; NOT -> TRUE"),
    # -- null: a missing property ------------------------------------------------------------------
    ("a > 5", {}, None, "CE.evaluate: lv == null -> null"),
    ("a = 5", {}, None, "doCreateEqual: lv null xor rv null, lv null -> null"),
    ("a <> 5", {}, None, "NOT(null) = null"),
    ("a = 'x'", {"b": "x"}, None, "another property does not stand in"),
    ("a IS NULL", {}, True, "createIsNull = doCreateEqual(a, NULL): both null"),
    ("a IS NULL", {"a": ""}, False, "an empty string is not null"),
    ("a IS NOT NULL", {"a": "1"}, True, "NOT(equal(a, NULL)): lv set, rv null -> FALSE -> TRUE"),
    ("a IS NOT NULL", {}, False, "NOT(TRUE)"),
    # -- three-valued AND / OR / NOT ---------------------------------------------------------------
    ("a > 5 AND b = 'x'", {"a": "6", "b": "x"}, True, "LE.createAND"),
    ("a > 5 AND b = 'x'", {"a": "6"}, None, "TRUE AND null -> null"),
    ("a > 5 AND b = 'x'", {"a": "1"}, False, "FALSE AND anything -> FALSE"),
    ("a > 5 OR b = 'x'", {"b": "x"}, True, "null OR TRUE -> TRUE"),
    ("a > 5 OR b = 'x'", {"b": "y"}, None, "null OR FALSE -> null"),
    ("a > 5 OR b = 'x'", {"a": "6", "b": "oops"}, True, "OR short-circuits before a failing right side"),
    ("NOT (a > 5)", {"a": "1"}, True, "UE.createNOT"),
    ("NOT (a > 5)", {}, None, "NOT null -> null"),
    ("NOT a = 1", {"a": "2"}, False, "SP: NOT binds tighter: (NOT cast(a)) = 1, Boolean vs Integer -> -1"),
    ("NOT a", {"a": "true"}, True, "createBooleanCast of a String -> FALSE, NOT -> TRUE"),
    ("a", {"a": "true"}, False, "a property alone: BooleanCast of a String is FALSE"),
    ("TRUE", {}, True, "a boolean literal filter"),
    ("FALSE OR TRUE", {}, True, "LE.createOR"),
    ("a = 1 AND b = 2 OR c = 3", {"c": "3"}, True, "AND binds tighter than OR"),
    ("a = 1 AND (b = 2 OR c = 3)", {"c": "3"}, None, "parentheses: null AND TRUE -> null"),
    # -- booleans ----------------------------------------------------------------------------------
    ("a = TRUE", {"a": "true"}, True, "String vs Boolean -> Boolean.valueOf(lv)"),
    ("a = TRUE", {"a": "TRUE"}, True, "Boolean.valueOf ignores case"),
    ("a = TRUE", {"a": "yes"}, False, "Boolean.valueOf('yes') = false"),
    ("a = FALSE", {"a": "no"}, True, "anything but 'true' is false"),
    ("1 = TRUE", {}, False, "Integer vs Boolean -> -1"),
    ("(a = 1) = 'x'", {"a": "1"}, "error", "Boolean vs String: Java casts the Boolean to String"),
    # -- BETWEEN -----------------------------------------------------------------------------------
    ("a BETWEEN 2 AND 10", {"a": "2"}, True, "createBetween = a >= 2 AND a <= 10"),
    ("a BETWEEN 2 AND 10", {"a": "10"}, True, "inclusive"),
    ("a BETWEEN 2 AND 10", {"a": "11"}, False, "above"),
    ("a BETWEEN 2 AND 10", {}, None, "null AND null"),
    ("a BETWEEN -5 AND 5", {"a": "-5"}, True, "a negated literal (UE.createNegate)"),
    ("a NOT BETWEEN 2 AND 10", {"a": "1"}, True, "createNotBetween = a < 2 OR a > 10"),
    ("a NOT BETWEEN 2 AND 10", {"a": "5"}, False, "inside"),
    ("a NOT BETWEEN 2 AND 10", {}, None, "null OR null"),
    ("a BETWEEN 1.5 AND 2.5", {"a": "2"}, True, "Double bounds: Double.valueOf('2')"),
    # -- IN ----------------------------------------------------------------------------------------
    ("a IN ('x', 'y')", {"a": "y"}, True, "UE.createInExpression: contains"),
    ("a IN ('x', 'y')", {"a": "z"}, False, "not contained"),
    ("a IN ('x', 'y')", {}, None, "rvalue null -> null"),
    ("a NOT IN ('x', 'y')", {"a": "z"}, True, "contains ^ not"),
    ("a NOT IN ('x', 'y')", {}, None, "null, not TRUE: a missing property is not 'not in'"),
    ("a IN ('1')", {"a": 1}, None, "a non-String value -> null (ExpressionTest's typed context)"),
    ("a IN ('it''s')", {"a": "it's"}, True, "SP.stringLitteral: '' is a quote"),
    # -- CONTAINS / STARTSWITH / ENDSWITH (5.x) ----------------------------------------------------
    ("a CONTAINS 'bc'", {"a": "abcd"}, True, "ContainsExpression"),
    ("a CONTAINS 'bc'", {}, False, "null -> FALSE, not null"),
    ("a NOT CONTAINS 'bc'", {}, False, "NotContainsExpression: null -> FALSE too"),
    ("a NOT CONTAINS 'bc'", {"a": "xyz"}, True, "not contained"),
    ("a CONTAINS ''", {"a": "abc"}, False, "an empty search -> FALSE"),
    ("a STARTSWITH 'ab'", {"a": "abc"}, True, "StartsWithExpression"),
    ("a NOT STARTSWITH 'ab'", {"a": "abc"}, False, "NotStartsWithExpression"),
    ("a ENDSWITH 'bc'", {"a": "abc"}, True, "EndsWithExpression"),
    ("a NOT ENDSWITH 'x'", {"a": "abc"}, True, "NotEndsWithExpression"),
    # -- TAGS and other message properties ---------------------------------------------------------
    ("TAGS = 'TagA'", {"TAGS": "TagA"}, True, "MessageEvaluationContext.get: every property, TAGS too"),
    ("TAGS IN ('TagA', 'TagB') AND KEYS IS NOT NULL", {"TAGS": "TagB", "KEYS": "k"}, True, "properties"),
    # -- typed values, as in ExpressionTest's contexts ---------------------------------------------
    ("a > b", {"a": 1, "b": 2}, False, "ExpressionTest.testEvaluate_twoVariable (Integers)"),
    ("a > b", {"a": 3, "b": 2}, True, "ExpressionTest.testEvaluate_twoVariableGt"),
    ("a > 5", {"a": 6.5}, True, "Double vs Integer -> rv.doubleValue()"),
    ("a = 5", {"a": JavaLong(5)}, True, "Long vs Integer -> rv.longValue()"),
    ("a > 3.14", {"a": 3.15}, True, "ExpressionTest.testEvaluate_floatNumber"),
    # -- case and layout ---------------------------------------------------------------------------
    ("a > 5 and b = 'x'", {"a": "6", "b": "x"}, True, "SP: keywords ignore case"),
    ("a>5/* comment */AND\tb='x'", {"a": "6", "b": "x"}, True, "SP: block comments and any whitespace"),
    ("a > 5 -- trailing comment", {"a": "6"}, True, "a line comment may end the text"),
    ("a > 5L", {"a": "6"}, True, "a long suffix; 5L fits int, so it is an Integer"),
    ("$x_1 = 'v'", {"$x_1": "v"}, True, "SP.ID: [a-z_$][a-z0-9_$]*"),
    ("a > -2147483648", {"a": "-2147483647"}, True, "negated Long literal stays a Long"),
]


@pytest.mark.parametrize("expression, properties, expected, java", SEMANTICS, ids=[row[0] for row in SEMANTICS])
def test_semantics_match_rocketmq(expression, properties, expected, java):
    assert evaluate_sql92(expression, properties) == expected, java
    # a broker delivers exactly the TRUE ones; null and a failed evaluation filter the message out
    assert compile_sql92(expression)(properties) is (expected is True)


PARSE_ERRORS = [
    # expression, position (0-based) of the fault, words of the reason; RocketMQ refuses each too
    ("a >> 5", 3, "unexpected '>'"),
    ("a and between 2 and 10", 6, "unexpected 'between'"),  # ParserTest.testParse_invalid
    (" a between 10 and 0", 11, "low value is above the high"),  # ParserTest.testParse_illegalBetween
    ("a > 100000000000000000000000", 4, "does not fit a long"),  # ParserTest.testParse_decimalOverFlow
    ("a > 0.0", 4, "less than Double.MIN_VALUE"),  # ConstantExpression.createFloat: value < MIN_VALUE
    ("a = NULL", 4, "use IS NULL"),  # checkEqualOperand
    ("TRUE = 1", 5, "cannot be compared"),  # checkEqualOperandCompatability
    ("a > 'x'", 4, "cannot be compared with > >= < <="),  # checkLessThanOperand
    ("a > TRUE", 4, "cannot be compared"),
    ("(a = 1) > 2", 0, "boolean expression cannot be compared"),
    ("a IN (1, 2)", 6, "string literal"),  # IN takes string literals only
    ("'x' IN ('x')", 4, "IN needs a property"),  # createInFilter
    ("5", 0, "will not result in a boolean value"),  # asBooleanExpression
    ("a = 1 AND 5", 10, "will not result in a boolean value"),
    ("a = 'unterminated", 4, "unterminated string literal"),
    ("a = 1 /* open", 6, "unterminated comment"),
    ("a = 1 #", 6, "unexpected character '#'"),
    ("a = (1", 6, "expected ')'"),
    ("", 0, "unexpected end of the expression"),
    ("a IS 5", 5, "expected NULL or NOT NULL"),
    # stricter than RocketMQ, which stops at the first whole expression and ignores the rest
    ("a = 1 b = 2", 6, "unexpected 'b'"),
]


@pytest.mark.parametrize("expression, position, reason", PARSE_ERRORS, ids=[row[0] or "empty" for row in PARSE_ERRORS])
def test_what_does_not_parse_is_refused_with_its_position(expression, position, reason):
    with pytest.raises(SqlFilterError) as e:
        compile_sql92(expression)
    assert e.value.position == position, str(e.value)
    assert reason in str(e.value)
    assert f"column {position + 1}" in str(e.value) and repr(expression) in str(e.value)


def test_positions_count_lines_as_javacc_does():
    with pytest.raises(SqlFilterError) as e:
        compile_sql92("a = 1\nAND b >> 2")
    assert (e.value.line, e.value.column) == (2, 8)


def test_valid_expressions_of_rocketmq_parser_test_parse():
    for expression in (
        "a=3 and b<>4 And c>5 AND d<=4",
        "a=3 or b<>4 Or c>5 OR d<=4",
        "a in ('3', '4', '5')",
        "(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))",
        "(a between 2 and 10) AND (b not between 6 and 9)",
        "a is null",
        "a is not null",
        "a <= now",
        "a=3 and b contains 'xxx' and c not contains 'xxx'",
    ):
        compile_sql92(expression)


def or_chain(length: int, operator: str = "OR") -> str:
    """``a = 0 OR a = 1 OR ...``, as long as fits in ``length`` characters."""
    terms, size = [], -len(operator) - 2
    for i in itertools.count():
        term = f"a = {i}"
        if size + len(term) + len(operator) + 2 > length:
            return f" {operator} ".join(terms)
        terms.append(term)
        size += len(term) + len(operator) + 2
    raise AssertionError("unreachable")


def test_the_longest_and_or_chain_allowed_compiles_and_evaluates_without_recursion():
    chain = or_chain(MAX_EXPRESSION_LENGTH)
    assert len(chain) > MAX_EXPRESSION_LENGTH - 20
    matches = compile_sql92(chain)
    last = chain.rsplit("= ", 1)[1]
    assert matches({"a": last}) and matches({"a": "0"}) and not matches({"a": "-1"})
    assert evaluate_sql92(chain, {}) is None  # every term null: null, as nested binary ORs give
    all_of = compile_sql92(or_chain(MAX_EXPRESSION_LENGTH // 4, "AND"))
    assert not all_of({"a": "0"}) and evaluate_sql92("a = 1 AND a = 1 AND a = 1", {"a": "1"}) is True


# operands of each outcome: TRUE, FALSE, null, and a failed conversion (Java throws)
OPERANDS = {True: "t = 't'", False: "t = 'f'", None: "missing = 1", "error": "t = 1"}


@pytest.mark.parametrize("operator", ["AND", "OR"])
def test_a_chain_evaluates_as_nested_binary_operators_do(operator):
    for outcomes in itertools.product(OPERANDS, repeat=3):
        a, b, c = (OPERANDS[o] for o in outcomes)
        nested = evaluate_sql92(f"(({a}) {operator} ({b})) {operator} ({c})", {"t": "t"})
        assert evaluate_sql92(f"{a} {operator} {b} {operator} {c}", {"t": "t"}) == nested, outcomes


@pytest.mark.parametrize(
    "expression",
    [
        "(" * 10_000 + "a = 1" + ")" * 10_000,
        "NOT " * 10_000 + "a",
        "- " * 10_000 + "a > 1",
        "a = 1" + " = TRUE" * 5_000,
        "a IS NULL" + " IS NULL" * 5_000,
    ],
    ids=["parentheses", "not", "minus", "equalities", "is-null"],
)
def test_nesting_past_the_bound_is_refused_not_a_recursion_error(expression):
    with pytest.raises(SqlFilterError) as e:
        compile_sql92(expression)
    message = str(e.value)
    assert f"nested deeper than the maximum of {MAX_NESTING_DEPTH} levels" in message
    assert f"({len(expression)} characters)" in message and len(message) < SHOWN_PREFIX + 200
    compile_sql92("(" * MAX_NESTING_DEPTH + "a = 1" + ")" * MAX_NESTING_DEPTH)  # at the bound: fine


def test_an_expression_past_the_length_bound_is_refused_before_it_is_read():
    expression = "a = '" + "x" * MAX_EXPRESSION_LENGTH + "'"
    with pytest.raises(SqlFilterError) as e:
        compile_sql92(expression)
    message = str(e.value)
    assert f"longer than the maximum of {MAX_EXPRESSION_LENGTH} characters" in message
    assert f"({len(expression)} characters)" in message and len(message) < SHOWN_PREFIX + 200


def test_an_error_quotes_only_the_start_of_a_long_expression():
    expression = "a = 1 AND " * 100 + "b >> 2"
    with pytest.raises(SqlFilterError) as e:
        compile_sql92(expression)
    assert e.value.position == len(expression) - 3
    assert str(e.value).startswith(f"SQL92 expression {expression[:SHOWN_PREFIX]!r}... ({len(expression)} characters)")
    assert "unexpected '>'" in str(e.value)


@pytest.mark.parametrize(
    "text, value",
    [("1", 1.0), (" 2.5 ", 2.5), ("-3e2", -300.0), (".5", 0.5), ("5.", 5.0), ("1f", 1.0), ("Infinity", float("inf"))],
)
def test_java_double_parsing(text, value):
    assert parse_java_double(text) == value


@pytest.mark.parametrize("text", ["", "1_0", "inf", "nan", "0x10", "1e", "--1"])
def test_what_java_double_parsing_refuses(text):
    with pytest.raises(ValueError):
        parse_java_double(text)
