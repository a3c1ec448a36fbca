"""RocketMQ's SQL92 message filter: the expression language of ``MessageSelector.bySql``, compiled once
into Python closures over a message's properties (RocketMQ's ``filter`` module: SelectorParser.jj and
the expression classes, ActiveMQ's selector with string conversion on).

Grammar, loosest binding first (as SelectorParser.jj; keywords in any case)::

    or          := and ( OR and )*
    and         := equality ( AND equality )*
    equality    := comparison ( '=' comparison | '<>' comparison | IS NULL | IS NOT NULL )*
    comparison  := unary ( ('>' | '>=' | '<' | '<=') unary
                         | [NOT] BETWEEN unary AND unary
                         | [NOT] IN '(' string (',' string)* ')'
                         | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string )*
    unary       := '+' unary | '-' unary | NOT unary | primary
    primary     := literal | property | '(' or ')'
    literal     := 'str''ing' | 123 | 123L | 1.5 | .5E3 | TRUE | FALSE | NULL
    property    := [A-Za-z_$][A-Za-z0-9_$]*          (comments: -- to end of line, /* ... */)

NOT binds tighter than the comparisons, as in RocketMQ: ``NOT a = 1`` is ``(NOT a) = 1``, which never
holds; write ``NOT (a = 1)``.

Values, as Java objects in RocketMQ: a property is a string (or absent: null); literals are Integer
(in int32 range), Long, Double, String, Boolean. Three-valued logic: a comparison with null is null,
``AND``/``OR`` follow SQL, and a message matches only when the whole expression is TRUE. Comparing
values of different types converts them as RocketMQ's ComparisonExpression.__compare does with
CONVERT_STRING_EXPRESSIONS (which SelectorParser.parse always sets): a string met with an Integer is
parsed with Integer.valueOf, with a Long with Long.valueOf, with a Double with Double.valueOf, with a
Boolean with Boolean.valueOf; so ``a = 1`` holds for the property ``a=1`` and ``'1' = 1`` is TRUE.
Two strings under ``> >= < <=`` are both parsed as doubles. A conversion that fails aborts the
evaluation and the message does not match (RocketMQ catches the exception and answers false).

Checks made when parsing, as RocketMQ's: ``> >= < <=`` and BETWEEN take no string, boolean or NULL
literal; ``=``/``<>`` take no NULL literal (use IS NULL) and no ``TRUE = <non-boolean literal>``;
IN wants a property on its left; a literal BETWEEN range must not be empty; a float literal must lie
in [Double.MIN_VALUE, Double.MAX_VALUE] (so ``0.0`` is refused, as in RocketMQ); an integer literal
must fit a long.

Bounds RocketMQ does not have, so that a client cannot make a broker spend seconds or its stack on
one expression: at most MAX_EXPRESSION_LENGTH characters (checked before anything is read) and at
most MAX_NESTING_DEPTH levels of nesting (parentheses, prefix operators, and operators applied to an
operator's result, as ``a = 1 = TRUE``); a chain of AND or OR is one level however long, and is
evaluated by a loop, not by recursion. A refusal's text quotes at most the first
SHOWN_PREFIX characters of the expression.

Where rmq is stricter: RocketMQ's parser stops after the first complete expression and ignores what
follows (``a = 1 b = 2`` filters by ``a = 1``); here text after a complete expression is an error
with its position. A ``--`` comment may end the text without a newline.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["JavaLong", "SqlFilter", "SqlFilterError", "compile_sql92", "evaluate_sql92", "parse_java_double"]

# What an expression evaluates to: None (SQL NULL), bool, int, JavaLong, float or str.
Value = Any
# A message's properties: strings on a broker; typed values in tests, as RocketMQ's ExpressionTest has
Props = Mapping[str, Any]
Evaluator = Callable[[Props], Value]

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
DOUBLE_MIN_VALUE = 5e-324  # Java's Double.MIN_VALUE: the smallest positive double
DOUBLE_MAX_VALUE = 1.7976931348623157e308

# Real subscriptions are a few hundred characters; compiling 64 Ki of them takes about 0.3 s and
# holds about 4 MB.
MAX_EXPRESSION_LENGTH = 64 * 1024
# Each level costs the parser about 8 Python frames and the evaluator one: 100 stay well inside
# Python's default recursion limit of 1000 whatever thread compiles.
MAX_NESTING_DEPTH = 100
# What an error message quotes of an expression.
SHOWN_PREFIX = 200


class SqlFilterError(ValueError):
    """An expression that does not parse; ``position`` is the 0-based offset of the fault."""

    def __init__(self, expression: str, position: int, reason: str):
        self.expression = expression
        self.position = position
        self.reason = reason
        line = expression.count("\n", 0, position) + 1
        column = position - (expression.rfind("\n", 0, position) + 1) + 1
        self.line, self.column = line, column
        super().__init__(f"SQL92 expression {shown_expression(expression)}, line {line} column {column}: {reason}")


def shown_expression(expression: str) -> str:
    """The expression quoted for a message: at most SHOWN_PREFIX characters, then its length."""
    if len(expression) <= SHOWN_PREFIX:
        return repr(expression)
    return f"{expression[:SHOWN_PREFIX]!r}... ({len(expression)} characters)"


class JavaLong(int):
    """An integer literal outside int32: a Java Long (a string met with it is parsed by Long.valueOf)."""

    __slots__ = ()


class _EvalAbort(Exception):
    """RocketMQ's evaluation threw (a failed conversion): the message does not match."""


# -- Java's parsers of a property string --------------------------------------------------------

_JAVA_INT = re.compile(r"[+-]?[0-9]+\Z")
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?)\Z")


def _parse_int(text: str, low: int, high: int) -> int:
    """Integer.valueOf / Long.valueOf: ASCII digits with an optional sign, in range."""
    if _JAVA_INT.match(text):
        value = int(text)
        if low <= value <= high:
            return value
    raise _EvalAbort(f"NumberFormatException: For input string: {text!r}")


def parse_java_double(text: str) -> float:
    """Double.valueOf: surrounding whitespace (chars <= U+0020) ignored, NaN, Infinity, an f/d suffix
    allowed (hexadecimal floats are not read: ValueError, which Java would parse)."""
    stripped = text.strip("".join(chr(c) for c in range(33)))
    m = _JAVA_DOUBLE.match(stripped)
    if m is None:
        raise ValueError(f"NumberFormatException: For input string: {text!r}")
    body = stripped.rstrip("fFdD") if m.group(3) else stripped
    if body.endswith("NaN"):
        return math.nan
    return float(body)  # "Infinity" and signed forms read as Python's inf


def _to_double(text: str) -> float:
    try:
        return parse_java_double(text)
    except ValueError as exc:
        raise _EvalAbort(str(exc)) from None


def _double_compare(a: float, b: float) -> int:
    """Double.compare: -0.0 < 0.0, NaN equal to itself and above everything."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan, b_nan = a != a, b != b
    if a_nan or b_nan:
        return (1 if a_nan else 0) - (1 if b_nan else 0)
    if a == 0.0 and b == 0.0:
        return (math.copysign(1, a) > 0) - (math.copysign(1, b) > 0)
    return 0


# Java classes of values, for __compare's conversion table.
_BOOL, _INT, _LONG, _DOUBLE, _STR = range(5)


def _jtype(v: Value) -> int:
    t = type(v)
    if t is str:
        return _STR
    if t is bool:
        return _BOOL
    if t is int:
        return _INT
    if t is JavaLong:
        return _LONG
    if t is float:
        return _DOUBLE
    raise TypeError(f"not a filter value: {v!r}")


def _java_compare(lv: Value, rv: Value) -> int:
    """ComparisonExpression.__compare(lv, rv, convertStringExpressions=true) for non-null values."""
    lc, rc = _jtype(lv), _jtype(rv)
    if lc != rc:
        if lc == _BOOL:
            if rc == _STR:  # Java casts the Boolean itself to String: ClassCastException
                raise _EvalAbort("ClassCastException: Boolean cannot be cast to String")
            return -1
        if lc == _INT:
            if rc == _LONG:
                lc = _LONG
            elif rc == _DOUBLE:
                lv, lc = float(lv), _DOUBLE
            elif rc == _STR:
                rv, rc = _parse_int(rv, INT_MIN, INT_MAX), _INT
            else:
                return -1
        elif lc == _LONG:
            if rc == _INT:
                rc = _LONG
            elif rc == _DOUBLE:
                lv, lc = float(lv), _DOUBLE
            elif rc == _STR:
                rv, rc = _parse_int(rv, LONG_MIN, LONG_MAX), _LONG
            else:
                return -1
        elif lc == _DOUBLE:
            if rc in (_INT, _LONG):
                rv, rc = float(rv), _DOUBLE
            elif rc == _STR:
                rv, rc = _to_double(rv), _DOUBLE
            else:
                return -1
        else:  # a String on the left
            if rc == _BOOL:
                lv = lv.lower() == "true"  # Boolean.valueOf
            elif rc == _INT:
                lv = _parse_int(lv, INT_MIN, INT_MAX)
            elif rc == _LONG:
                lv = _parse_int(lv, LONG_MIN, LONG_MAX)
            elif rc == _DOUBLE:
                lv = _to_double(lv)
            lc = rc
    if lc == _DOUBLE:
        return _double_compare(lv, rv)
    return int((lv > rv) - (lv < rv))


# -- tokens ---------------------------------------------------------------------------------------

_KEYWORDS = frozenset(
    {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS", "STARTSWITH", "ENDSWITH"}
)
_SKIP = re.compile(r"(?:[ \t\n\r\f]+|--[^\n\r]*(?:\r\n|\n|\r|\Z)|/\*[^*]*\*+(?:[^/*][^*]*\*+)*/)+")
_TOKEN_PATTERNS = (
    ("FLOAT", re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")),
    ("DECIMAL", re.compile(r"(?:0|[1-9][0-9]*)[lL]?")),
    ("STRING", re.compile(r"'(?:''|[^'])*'")),
    ("ID", re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")),
    ("OP", re.compile(r"<>|>=|<=|[=><(),+-]")),
)


class _Token:
    __slots__ = ("kind", "text", "pos")

    def __init__(self, kind: str, text: str, pos: int):
        self.kind, self.text, self.pos = kind, text, pos

    def describe(self) -> str:
        return "end of the expression" if self.kind == "EOF" else repr(self.text)


_TOO_DEEP = f"nested deeper than the maximum of {MAX_NESTING_DEPTH} levels"


def _tokenize(sql: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos, n = 0, len(sql)
    depth = 0  # parentheses open: refused here, before the parser recurses into them
    while True:
        m = _SKIP.match(sql, pos)
        if m:
            pos = m.end()
        if pos >= n:
            break
        if sql.startswith("/*", pos):
            raise SqlFilterError(sql, pos, "unterminated comment")
        best: tuple[str, str] | None = None
        for kind, pattern in _TOKEN_PATTERNS:  # the longest match wins, as in JavaCC
            m = pattern.match(sql, pos)
            if m and (best is None or len(m.group()) > len(best[1])):
                best = (kind, m.group())
        if best is None:
            if sql[pos] == "'":
                raise SqlFilterError(sql, pos, "unterminated string literal")
            raise SqlFilterError(sql, pos, f"unexpected character {sql[pos]!r}")
        kind, text = best
        if kind == "ID" and text.upper() in _KEYWORDS:
            kind = text.upper()
        elif kind == "OP":
            kind = text
            if kind == "(":
                depth += 1
                if depth > MAX_NESTING_DEPTH:
                    raise SqlFilterError(sql, pos, _TOO_DEEP)
            elif kind == ")":
                depth -= 1
        tokens.append(_Token(kind, text, pos))
        pos += len(text)
    tokens.append(_Token("EOF", "", n))
    return tokens


# -- the expression tree, compiled to closures ----------------------------------------------------


class _Node:
    """A parsed expression: its closure, and what the parser's checks need to know of it."""

    __slots__ = ("fn", "kind", "value", "name", "depth")

    # kind: "const" (a literal: value), "bool_const" (TRUE/FALSE/NULL: value), "prop" (name),
    # "boolean" (a BooleanExpression: comparison, logic, NOT, IN ...), "other" (negation);
    # depth: how many closures deep its evaluation calls (a literal or a property: 1)
    def __init__(self, fn: Evaluator, kind: str, value: Value = None, name: str = "", depth: int = 1):
        self.fn, self.kind, self.value, self.name, self.depth = fn, kind, value, name, depth

    @property
    def is_constant(self) -> bool:
        return self.kind in ("const", "bool_const")

    @property
    def is_boolean(self) -> bool:
        return self.kind in ("boolean", "bool_const")


def _const(value: Value) -> _Node:
    return _Node(lambda _p: value, "const", value)


def _bool_const(value: bool | None) -> _Node:
    return _Node(lambda _p: value, "bool_const", value)


def _boolean(fn: Evaluator, *operands: _Node) -> _Node:
    return _Node(fn, "boolean", depth=1 + max((o.depth for o in operands), default=0))


def _as_boolean(node: _Node, tok: _Token, sql: str) -> _Node:
    """SelectorParser.asBooleanExpression: a property is cast (TRUE only for a Boolean value, which
    a string property never is); a number or string is refused."""
    if node.is_boolean:
        return node
    if node.kind == "prop":
        name = node.name

        def cast(p: Props) -> Value:
            v = p.get(name)
            if v is None:
                return None
            return v if type(v) is bool else False

        return _boolean(cast, node)
    raise SqlFilterError(sql, tok.pos, "expression will not result in a boolean value")


def _logic_and(operands: list[Evaluator]) -> Evaluator:
    """``a AND b AND ...``, left to right: what RocketMQ's nested binary ANDs give (the first FALSE
    ends it, else null if any was null), in one loop, so a long chain costs no stack."""
    if len(operands) == 2:
        left, right = operands

        def fn2(p: Props) -> Value:
            lv = left(p)
            if lv is False:
                return False
            rv = right(p)
            if rv is False:
                return False
            if lv is None or rv is None:
                return None
            return True

        return fn2

    def fn(p: Props) -> Value:
        unknown = False
        for operand in operands:
            v = operand(p)
            if v is False:
                return False
            if v is None:
                unknown = True
        return None if unknown else True

    return fn


def _logic_or(operands: list[Evaluator]) -> Evaluator:
    """``a OR b OR ...``: the first TRUE ends it, else null if any was null (as _logic_and)."""
    if len(operands) == 2:
        left, right = operands

        def fn2(p: Props) -> Value:
            lv = left(p)
            if lv is True:
                return True
            rv = right(p)
            if rv is True:
                return True
            if lv is None or rv is None:
                return None
            return False

        return fn2

    def fn(p: Props) -> Value:
        unknown = False
        for operand in operands:
            v = operand(p)
            if v is True:
                return True
            if v is None:
                unknown = True
        return None if unknown else False

    return fn


def _logic_not(inner: Evaluator) -> Evaluator:
    def fn(p: Props) -> Value:
        v = inner(p)
        if v is None:
            return None
        return not v

    return fn


def _equal(left: Evaluator, right: Evaluator) -> Evaluator:
    """doCreateEqual: null = null is TRUE, null = x is null, x = null is FALSE."""

    def fn(p: Props) -> Value:
        lv = left(p)
        rv = right(p)
        if lv is None or rv is None:
            if lv is None and rv is None:
                return True
            return None if lv is None else False
        if type(lv) is type(rv) and type(lv) is not float:
            return lv == rv
        return _java_compare(lv, rv) == 0

    return fn


_ORDER_TESTS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


def _order(op: str, left: Evaluator, right: Evaluator) -> Evaluator:
    """``> >= < <=``: null on a null side; two strings are compared as doubles."""
    test = _ORDER_TESTS[op]

    def fn(p: Props) -> Value:
        lv = left(p)
        if lv is None:
            return None
        rv = right(p)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:
            return test(_double_compare(_to_double(lv), _to_double(rv)))
        return test(_java_compare(lv, rv))

    return fn


def _order_property_number(op: str, name: str, constant: int | float) -> Evaluator:
    """``property OP number-literal``, the common filter, without the generic dispatch: the string
    is parsed as Java would for the literal's type (Integer, Long or Double)."""
    test = _ORDER_TESTS[op]
    if type(constant) is float:

        def fn(p: Props) -> Value:
            v = p.get(name)
            if v is None:
                return None
            if type(v) is not str:
                return test(_java_compare(v, constant))
            return test(_double_compare(_to_double(v), constant))

        return fn
    low, high = (INT_MIN, INT_MAX) if type(constant) is int else (LONG_MIN, LONG_MAX)

    def fn_int(p: Props) -> Value:
        v = p.get(name)
        if v is None:
            return None
        if type(v) is not str:
            return test(_java_compare(v, constant))
        n = _parse_int(v, low, high)
        return test((n > constant) - (n < constant))

    return fn_int


def _string_test(kind: str, negate: bool, inner: Evaluator, search: str) -> Evaluator:
    """CONTAINS / STARTSWITH / ENDSWITH and their NOT forms: FALSE for an empty search, a null or a
    non-string value, whichever form (RocketMQ 5.x)."""
    if not search:
        return lambda _p: False
    test: Callable[[str], bool] = {
        "CONTAINS": lambda v: search in v,
        "STARTSWITH": lambda v: v.startswith(search),
        "ENDSWITH": lambda v: v.endswith(search),
    }[kind]

    def fn(p: Props) -> Value:
        v = inner(p)
        if type(v) is not str:
            return False
        return test(v) != negate

    return fn


def _negate_value(v: Value) -> Value:
    if type(v) is int:
        return JavaLong(-v) if -v > INT_MAX else -v  # -Integer.MIN_VALUE overflows in Java; rare
    if type(v) is JavaLong:
        return JavaLong(-v)
    if type(v) is float:
        return -v
    return None  # a null, string or boolean negates to null


class _Parser:
    def __init__(self, sql: str):
        self.sql = sql
        if len(sql) > MAX_EXPRESSION_LENGTH:
            raise SqlFilterError(
                sql,
                MAX_EXPRESSION_LENGTH,
                f"the expression is longer than the maximum of {MAX_EXPRESSION_LENGTH} characters",
            )
        self.tokens = _tokenize(sql)
        self.i = 0
        self.nesting = 0  # parentheses and prefix operators open around the token being read
        # every property the expression reads: a record's other properties need not be decoded
        self.property_names: set[str] = set()

    @property
    def tok(self) -> _Token:
        return self.tokens[self.i]

    def peek(self, ahead: int = 1) -> _Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def take(self) -> _Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def error(self, tok: _Token, expected: str) -> SqlFilterError:
        return SqlFilterError(self.sql, tok.pos, f"unexpected {tok.describe()}, expected {expected}")

    def too_deep(self, tok: _Token) -> SqlFilterError:
        return SqlFilterError(self.sql, tok.pos, _TOO_DEEP)

    def nest(self, tok: _Token) -> None:
        """Enter a parenthesis or a prefix operator: refused past MAX_NESTING_DEPTH before the
        parser recurses into it."""
        self.nesting += 1
        if self.nesting > MAX_NESTING_DEPTH:
            raise self.too_deep(tok)

    def checked(self, node: _Node, tok: _Token) -> _Node:
        """``node``, unless evaluating it would call closures deeper than MAX_NESTING_DEPTH."""
        if node.depth > MAX_NESTING_DEPTH:
            raise self.too_deep(tok)
        return node

    def expect(self, kind: str, expected: str) -> _Token:
        if self.tok.kind != kind:
            raise self.error(self.tok, expected)
        return self.take()

    def parse(self) -> Evaluator:
        start = self.tok
        node = self.or_expr()
        if self.tok.kind != "EOF":
            raise self.error(self.tok, "AND, OR, a comparison or the end of the expression")
        return _as_boolean(node, start, self.sql).fn

    def or_expr(self) -> _Node:
        return self._logic_chain("OR", self.and_expr, _logic_or)

    def and_expr(self) -> _Node:
        return self._logic_chain("AND", self.equality, _logic_and)

    def _logic_chain(
        self, keyword: str, operand: Callable[[], _Node], combine: Callable[[list[Evaluator]], Evaluator]
    ) -> _Node:
        """``operand (keyword operand)*``, each operand cast to a boolean: one node, however long."""
        start = self.tok
        left = operand()
        operands: list[_Node] = []
        while self.tok.kind == keyword:
            self.take()
            right_tok = self.tok
            right = operand()
            if not operands:
                operands.append(_as_boolean(left, start, self.sql))
            operands.append(_as_boolean(right, right_tok, self.sql))
        if not operands:
            return left
        return self.checked(_boolean(combine([o.fn for o in operands]), *operands), start)

    def equality(self) -> _Node:
        start = self.tok
        left = self.comparison()
        while True:
            kind = self.tok.kind
            if kind in ("=", "<>"):
                op = self.take()
                right_tok = self.tok
                right = self.comparison()
                self._check_equal_operand(left, start)
                self._check_equal_operand(right, right_tok)
                if left.is_constant and right.is_constant and left.kind == "bool_const" and right.kind != "bool_const":
                    raise SqlFilterError(self.sql, op.pos, f"{start.text!r} cannot be compared with {right_tok.text!r}")
                left = self._negated(_boolean(_equal(left.fn, right.fn), left, right), kind == "<>", op)
            elif kind == "IS":
                op = self.take()
                negate = self.tok.kind == "NOT"
                if negate:
                    self.take()
                self.expect("NULL", "NULL" if negate else "NULL or NOT NULL")
                left = self._negated(_boolean(_equal(left.fn, lambda _p: None), left), negate, op)
            else:
                return left

    def _negated(self, node: _Node, negate: bool, tok: _Token) -> _Node:
        if negate:
            node = _boolean(_logic_not(node.fn), node)
        return self.checked(node, tok)

    def _check_equal_operand(self, node: _Node, tok: _Token) -> None:
        if node.is_constant and node.value is None:
            raise SqlFilterError(self.sql, tok.pos, "NULL cannot be compared with '=' or '<>': use IS NULL")

    def _check_order_operand(self, node: _Node, tok: _Token) -> None:
        """checkLessThanOperand: a literal must be a number; a boolean expression is refused."""
        if node.is_constant:
            if type(node.value) in (int, JavaLong, float):
                return
            raise SqlFilterError(self.sql, tok.pos, f"value {tok.text!r} cannot be compared with > >= < <=")
        if node.is_boolean:
            raise SqlFilterError(self.sql, tok.pos, "a boolean expression cannot be compared with > >= < <=")

    def _order_node(self, op: str, left: _Node, left_tok: _Token, right: _Node, right_tok: _Token) -> _Node:
        self._check_order_operand(left, left_tok)
        self._check_order_operand(right, right_tok)
        if left.kind == "prop" and right.kind == "const":
            return _boolean(_order_property_number(op, left.name, right.value), left, right)
        return self.checked(_boolean(_order(op, left.fn, right.fn), left, right), left_tok)

    def comparison(self) -> _Node:
        start = self.tok
        left = self.unary()
        while True:
            kind = self.tok.kind
            negate = False
            if kind == "NOT" and self.peek().kind in ("BETWEEN", "IN", "CONTAINS", "STARTSWITH", "ENDSWITH"):
                self.take()
                negate, kind = True, self.tok.kind
            if kind in _ORDER_TESTS:
                self.take()
                right_tok = self.tok
                right = self.unary()
                left = self._order_node(kind, left, start, right, right_tok)
            elif kind == "BETWEEN":
                self.take()
                low_tok = self.tok
                low = self.unary()
                self.expect("AND", "AND of BETWEEN ... AND ...")
                high_tok = self.tok
                high = self.unary()
                left = self._between(left, start, low, low_tok, high, high_tok, negate)
            elif kind == "IN":
                in_tok = self.take()
                if left.kind != "prop":
                    raise SqlFilterError(self.sql, in_tok.pos, "IN needs a property on its left")
                self.expect("(", "'(' after IN")
                items = [self.string_literal()]
                while self.tok.kind == ",":
                    self.take()
                    items.append(self.string_literal())
                self.expect(")", "',' or ')' in the IN list")
                left = _boolean(_in(left.name, frozenset(items), negate), left)
            elif kind in ("CONTAINS", "STARTSWITH", "ENDSWITH"):
                self.take()
                left = self.checked(_boolean(_string_test(kind, negate, left.fn, self.string_literal()), left), start)
            else:
                return left

    def _between(
        self, value: _Node, tok: _Token, low: _Node, low_tok: _Token, high: _Node, high_tok: _Token, negate: bool
    ) -> _Node:
        if not negate and low.is_constant and high.is_constant:
            if low.value is None or high.value is None:
                raise SqlFilterError(self.sql, low_tok.pos, "BETWEEN values cannot be NULL")
            try:
                empty = _java_compare(high.value, low.value) < 0
            except _EvalAbort as exc:
                raise SqlFilterError(self.sql, low_tok.pos, f"BETWEEN values cannot be compared ({exc})") from None
            if empty:
                raise SqlFilterError(
                    self.sql,
                    low_tok.pos,
                    f"BETWEEN {low_tok.text} AND {high_tok.text}: the low value is above the high",
                )
        if negate:  # NOT BETWEEN = value < low OR value > high
            below = self._order_node("<", value, tok, low, low_tok)
            above = self._order_node(">", value, tok, high, high_tok)
            return self.checked(_boolean(_logic_or([below.fn, above.fn]), below, above), tok)
        at_least = self._order_node(">=", value, tok, low, low_tok)
        at_most = self._order_node("<=", value, tok, high, high_tok)
        return self.checked(_boolean(_logic_and([at_least.fn, at_most.fn]), at_least, at_most), tok)

    def string_literal(self) -> str:
        tok = self.expect("STRING", "a string literal ('...')")
        return tok.text[1:-1].replace("''", "'")

    def unary(self) -> _Node:
        tok = self.tok
        if tok.kind not in ("+", "-", "NOT"):
            return self.primary()
        self.take()
        self.nest(tok)
        operand_tok = self.tok
        operand = self.unary()
        self.nesting -= 1
        if tok.kind == "+":
            return operand
        if tok.kind == "-":
            inner = operand.fn
            return self.checked(_Node(lambda p: _negate_value(inner(p)), "other", depth=operand.depth + 1), tok)
        operand = _as_boolean(operand, operand_tok, self.sql)
        return self.checked(_boolean(_logic_not(operand.fn), operand), tok)

    def primary(self) -> _Node:
        tok = self.tok
        kind = tok.kind
        if kind == "STRING":
            return _const(self.string_literal())
        if kind == "DECIMAL":
            self.take()
            value = int(tok.text.rstrip("lL"))
            if value > LONG_MAX:
                raise SqlFilterError(self.sql, tok.pos, f"{tok.text} does not fit a long")
            return _const(value if value <= INT_MAX else JavaLong(value))
        if kind == "FLOAT":
            self.take()
            f = float(tok.text)
            if f > DOUBLE_MAX_VALUE:
                raise SqlFilterError(self.sql, tok.pos, f"{tok.text} is greater than {DOUBLE_MAX_VALUE!r}")
            if f < DOUBLE_MIN_VALUE:
                raise SqlFilterError(self.sql, tok.pos, f"{tok.text} is less than Double.MIN_VALUE 4.9E-324")
            return _const(f)
        if kind in ("TRUE", "FALSE", "NULL"):
            self.take()
            return _bool_const({"TRUE": True, "FALSE": False, "NULL": None}[kind])
        if kind == "ID":
            self.take()
            name = tok.text
            self.property_names.add(name)
            return _Node(lambda p: p.get(name), "prop", name=name)
        if kind == "(":
            self.take()
            self.nest(tok)
            node = self.or_expr()
            self.expect(")", "')'")
            self.nesting -= 1
            return node
        raise self.error(tok, "a literal, a property or '('")


def _in(name: str, items: frozenset[str], negate: bool) -> Evaluator:
    def fn(p: Props) -> Value:
        v = p.get(name)
        if type(v) is not str:
            return None
        return (v in items) != negate

    return fn


class SqlFilter:
    """A compiled expression: called with a message's properties, True when it matches (null and a
    failed evaluation do not). ``property_names``: the properties it reads."""

    __slots__ = ("expression", "property_names", "_evaluate")

    def __init__(self, expression: str):
        parser = _Parser(expression)
        self._evaluate = parser.parse()
        self.expression = expression
        self.property_names = frozenset(parser.property_names)

    def __call__(self, properties: Props) -> bool:
        try:
            return self._evaluate(properties) is True
        except _EvalAbort:
            return False

    def __repr__(self) -> str:
        return f"SqlFilter({self.expression!r})"


def compile_sql92(expression: str) -> SqlFilter:
    """The filter of ``expression``; raises SqlFilterError (with the position) when it does not parse."""
    return SqlFilter(expression)


def evaluate_sql92(expression: str, properties: Props) -> Value:
    """The raw three-valued result (True, False or None), or "error" when RocketMQ's evaluation
    throws; for tests that compare with the Java expression classes case by case."""
    evaluate = _Parser(expression).parse()
    try:
        return evaluate(properties)
    except _EvalAbort:
        return "error"
