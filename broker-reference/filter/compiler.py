"""Turns a syntax tree into nested closures ``fn(properties) -> value``.

A value is ``None`` (NULL / UNKNOWN), ``bool``, ``int``, ``float`` or ``str``. Logic follows
RocketMQ (SQL three-valued): ``FALSE AND x`` is FALSE, ``TRUE OR x`` is TRUE, otherwise a NULL
operand makes the result NULL; ``NOT NULL`` is NULL. The common shapes ``prop <op> literal`` get
specialised closures that parse the property once and compare directly.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping

from rocketmq_broker.filter.nodes import (
    And,
    Between,
    BoolCast,
    Compare,
    Const,
    In,
    IsNull,
    Negate,
    Node,
    Not,
    Or,
    Prop,
    StringMatch,
)
from rocketmq_broker.filter.values import compare, equals, java_double, java_long

__all__ = ["Evaluator", "compile_node"]

Evaluator = Callable[[Mapping[str, str]], object]

_ORDER_TESTS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}
_ORDER_OPS: dict[str, Callable[[object, object], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
_MIRROR = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "=": "=", "<>": "<>"}
_STRING_TESTS: dict[str, Callable[[str, str], bool]] = {
    "CONTAINS": str.__contains__,
    "STARTSWITH": str.startswith,
    "ENDSWITH": str.endswith,
}


def compile_node(node: Node) -> Evaluator:
    """Return a closure computing ``node``'s value for a property mapping."""
    kind = type(node)
    if kind is Const:
        value = node.value  # type: ignore[attr-defined]
        return lambda props: value
    if kind is Prop:
        name = node.name  # type: ignore[attr-defined]
        return lambda props: props.get(name)
    if kind is Negate:
        return _negate(compile_node(node.operand))  # type: ignore[attr-defined]
    if kind is Not:
        return _not(compile_node(node.operand))  # type: ignore[attr-defined]
    if kind is BoolCast:
        name = node.operand.name  # type: ignore[attr-defined]
        # RocketMQ casts only java.lang.Boolean values; a property is a String, hence FALSE.
        return lambda props: None if props.get(name) is None else False
    if kind is And:
        return _and(compile_node(node.left), compile_node(node.right))  # type: ignore[attr-defined]
    if kind is Or:
        return _or(compile_node(node.left), compile_node(node.right))  # type: ignore[attr-defined]
    if kind is Compare:
        return _compare(node)  # type: ignore[arg-type]
    if kind is IsNull:
        return _is_null(node)  # type: ignore[arg-type]
    if kind is In:
        return _in(node)  # type: ignore[arg-type]
    if kind is Between:
        return _between(node)  # type: ignore[arg-type]
    if kind is StringMatch:
        return _string_match(node)  # type: ignore[arg-type]
    raise TypeError(f"cannot compile {kind.__name__}")


def _negate(inner: Evaluator) -> Evaluator:
    def negate(props: Mapping[str, str]) -> object:
        value = inner(props)
        return -value if type(value) in (int, float) else None  # type: ignore[operator]
    return negate


def _not(inner: Evaluator) -> Evaluator:
    def not_(props: Mapping[str, str]) -> object:
        value = inner(props)
        return None if value is None else not value
    return not_


def _junction(left: Evaluator, right: Evaluator, decisive: bool) -> Evaluator:
    """AND (``decisive`` False) or OR (``decisive`` True) in SQL three-valued logic: a side that
    is ``decisive`` decides (the right side is not evaluated when the left one does), otherwise
    NULL (None) when either side is NULL, otherwise ``not decisive``."""
    def junction(props: Mapping[str, str]) -> object:
        lv = left(props)
        if lv is decisive:
            return decisive
        rv = right(props)
        if rv is decisive:
            return decisive
        if lv is None or rv is None:
            return None
        return not decisive
    return junction


def _and(left: Evaluator, right: Evaluator) -> Evaluator:
    return _junction(left, right, False)


def _or(left: Evaluator, right: Evaluator) -> Evaluator:
    return _junction(left, right, True)


def _prop_vs_const(op: str, name: str, const: object) -> Evaluator | None:
    """Specialised ``prop <op> literal`` closures for number and string literals."""
    kind = type(const)
    if kind is str and op in ("=", "<>"):
        want = op == "="

        def str_eq(props: Mapping[str, str]) -> object:
            value = props.get(name)
            return None if value is None else (value == const) is want
        return str_eq
    if kind is int or kind is float:
        parse = java_long if kind is int else java_double
        if op in _ORDER_OPS:
            test = _ORDER_OPS[op]
        else:
            test = operator.eq if op == "=" else operator.ne

        def num_cmp(props: Mapping[str, str]) -> object:
            value = props.get(name)
            if value is None:
                return None
            number = parse(value)
            return None if number is None else test(number, const)
        return num_cmp
    return None


def _compare(node: Compare) -> Evaluator:
    op = node.op
    left, right = node.left, node.right
    if isinstance(left, Const) and isinstance(right, Prop):
        left, right, op = right, left, _MIRROR[op]
    if isinstance(left, Prop) and isinstance(right, Const):
        special = _prop_vs_const(op, left.name, right.value)
        if special is not None:
            return special
    lf = compile_node(left)
    rf = compile_node(right)
    if op == "=" or op == "<>":
        want = op == "="

        def eq(props: Mapping[str, str]) -> object:
            result = equals(lf(props), rf(props))
            return None if result is None else result is want
        return eq
    test = _ORDER_TESTS[op]

    def order(props: Mapping[str, str]) -> object:
        result = compare(lf(props), rf(props))
        return None if result is None else test(result)
    return order


def _is_null(node: IsNull) -> Evaluator:
    negated = node.negated
    if isinstance(node.operand, Prop):
        name = node.operand.name
        if negated:
            return lambda props: props.get(name) is not None
        return lambda props: props.get(name) is None
    inner = compile_node(node.operand)
    return lambda props: (inner(props) is None) is not negated


def _in(node: In) -> Evaluator:
    name = node.operand.name
    values = frozenset(node.values)
    negated = node.negated

    def in_(props: Mapping[str, str]) -> object:
        value = props.get(name)
        if value is None:
            return None
        return (value in values) is not negated
    return in_


def _between(node: Between) -> Evaluator:
    # RocketMQ: BETWEEN is (v >= low AND v <= high); NOT BETWEEN is (v < low OR v > high).
    low, high = node.low, node.high
    if (isinstance(node.operand, Prop) and isinstance(low, Const) and isinstance(high, Const)
            and type(low.value) in (int, float) and type(high.value) in (int, float)):
        return _prop_between(node.operand.name, low.value, high.value, node.negated)  # type: ignore[arg-type]
    if node.negated:
        return _or(_compare(Compare(node.pos, "<", node.operand, node.low)),
                   _compare(Compare(node.pos, ">", node.operand, node.high)))
    return _and(_compare(Compare(node.pos, ">=", node.operand, node.low)),
                _compare(Compare(node.pos, "<=", node.operand, node.high)))


def _prop_between(name: str, low: float, high: float, negated: bool) -> Evaluator:
    """``prop [NOT] BETWEEN n AND m`` with numeric literals: the property is parsed once, per
    bound as a long or a double like the two comparisons RocketMQ builds."""
    low_parse = java_long if type(low) is int else java_double
    high_parse = java_long if type(high) is int else java_double

    def between(props: Mapping[str, str]) -> object:
        value = props.get(name)
        if value is None:
            return None
        lv = low_parse(value)
        hv = lv if high_parse is low_parse else high_parse(value)
        below = None if lv is None else lv < low
        above = None if hv is None else hv > high
        if negated:  # below OR above
            if below or above:
                return True
            return None if below is None or above is None else False
        if below is False and above is False:  # NOT below AND NOT above
            return True
        return False if below or above else None
    return between


def _string_match(node: StringMatch) -> Evaluator:
    inner = compile_node(node.operand)
    test = _STRING_TESTS[node.op]
    pattern = node.pattern
    negated = node.negated

    def match(props: Mapping[str, str]) -> object:
        value = inner(props)
        if type(value) is not str:
            return None
        return test(value, pattern) is not negated
    return match

