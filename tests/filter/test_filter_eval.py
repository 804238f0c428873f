"""SQL92 filter: evaluation semantics (RocketMQ's), one table of cases plus focused checks."""

from __future__ import annotations

import pytest
from rocketmq_broker.filter import compile_expression

P = {
    "a": "10",
    "b": "abc",
    "c": "3.5",
    "neg": "-7",
    "big": "9223372036854775807",
    "huge": "9223372036854775808",
    "t": "TRUE",
    "f": "false",
    "empty": "",
    "q": "it's",
    "TAGS": "TagA",
    "KEYS": "order-1 order-2",
    "n1": "5",
    "n2": "20",
    "sp": " 12 ",
    "plus": "+3",
    "exp": "3.1E3",
    "fl": "1.5f",
}

CASES: list[tuple[str, dict[str, str], bool]] = [
    # equality of strings
    ("b = 'abc'", P, True),
    ("b = 'ABC'", P, False),
    ("b <> 'abc'", P, False),
    ("b != 'xyz'", P, True),
    ("'abc' = b", P, True),
    ("empty = ''", P, True),
    ("q = 'it''s'", P, True),
    ("TAGS = 'TagA'", P, True),
    ("tags = 'TagA'", P, False),  # property names are case-sensitive
    ("KEYS = 'order-1 order-2'", P, True),
    # numeric comparisons with coercion of the property
    ("a > 5", P, True),
    ("a >= 10", P, True),
    ("a > 10", P, False),
    ("a < 10.5", P, True),
    ("a <= 9", P, False),
    ("a = 10", P, True),
    ("a = 10.0", P, True),
    ("a <> 10", P, False),
    ("a <> 11", P, True),
    ("5 < a", P, True),
    ("10 = a", P, True),
    ("c > 3", P, False),  # "3.5" is not a Java long: UNKNOWN
    ("c > 3.0", P, True),
    ("c < 4.0", P, True),
    ("neg < 0", P, True),
    ("neg = -7", P, True),
    ("neg > -8", P, True),
    ("plus = 3", P, True),  # Long.valueOf accepts a leading '+'
    ("sp = 12", P, False),  # ... but not spaces
    ("sp = 12.0", P, True),  # Double.valueOf trims
    ("exp > 3000.0", P, True),
    ("exp > 3000", P, False),
    ("fl = 1.5", P, True),  # Double.valueOf accepts the f suffix
    ("big = 9223372036854775807", P, True),
    ("huge > 0", P, False),  # out of long range
    ("huge > 0.0", P, True),
    ("a > 1e1", P, False),
    ("a >= 1e1", P, True),
    ("a > -5", P, True),
    ("a > - -5", P, True),
    ("a > +5", P, True),
    # a property that is not a number never satisfies a numeric comparison...
    ("b > 5", P, False),
    ("b < 5", P, False),
    ("b = 5", P, False),
    ("b <> 5", P, False),
    ("NOT (b > 5)", P, False),  # ... not even negated: UNKNOWN
    ("b > 5 OR a = 10", P, True),
    # two properties
    ("n2 > n1", P, True),  # both parsed as doubles: 20 > 5 (not string order)
    ("n1 > n2", P, False),
    ("a > b", P, False),
    ("b = b", P, True),
    ("a = n2", P, False),
    # booleans
    ("t = TRUE", P, True),
    ("f = FALSE", P, True),
    ("b = FALSE", P, True),  # Boolean.valueOf("abc") is false
    ("TRUE", P, True),
    ("FALSE", P, False),
    ("TRUE = TRUE", P, True),
    ("(a > 5) = TRUE", P, True),
    ("(a > 5) <> (b = 'abc')", P, False),
    # IN / NOT IN
    ("TAGS IN ('TagA', 'TagB')", P, True),
    ("TAGS IN ('TagB', 'TagC')", P, False),
    ("TAGS NOT IN ('TagB', 'TagC')", P, True),
    ("TAGS NOT IN ('TagA')", P, False),
    ("a IN ('10')", P, True),
    ("a IN ('10.0', '1', '2', '3', '4', '5')", P, False),
    ("q IN ('it''s')", P, True),
    ("TAGS in ('TagA')", P, True),  # keywords are case-insensitive
    # BETWEEN
    ("a BETWEEN 10 AND 20", P, True),
    ("a BETWEEN 1 AND 9", P, False),
    ("a BETWEEN 10 AND 10", P, True),
    ("a NOT BETWEEN 1 AND 9", P, True),
    ("a NOT BETWEEN 10 AND 20", P, False),
    ("c BETWEEN 3.4 AND 3.6", P, True),
    ("a BETWEEN n1 AND n2", P, True),
    ("a BETWEEN 1 AND 20 AND b = 'abc'", P, True),
    ("b BETWEEN 1 AND 20", P, False),
    ("b NOT BETWEEN 1 AND 20", P, False),
    ("a BETWEEN 1 AND 20.5", P, True),
    ("c BETWEEN 1 AND 4.0", P, False),  # "3.5" is no long for the lower bound: UNKNOWN
    ("c NOT BETWEEN 1 AND 4.0", P, False),
    ("c NOT BETWEEN 1 AND 3.0", P, True),  # UNKNOWN OR TRUE
    ("a BETWEEN -10 AND -1", P, False),
    # IS [NOT] NULL
    ("missing IS NULL", P, True),
    ("a IS NULL", P, False),
    ("a IS NOT NULL", P, True),
    ("missing IS NOT NULL", P, False),
    ("empty IS NOT NULL", P, True),
    ("NULL IS NULL", P, True),
    ("(a > 5) IS NOT NULL", P, True),
    ("(missing > 5) IS NULL", P, True),
    # missing properties: every comparison is UNKNOWN, so never selects
    ("missing = 'x'", P, False),
    ("missing <> 'x'", P, False),
    ("NOT missing = 'x'", P, False),
    ("missing > 1", P, False),
    ("NOT (missing > 1)", P, False),
    ("missing IN ('x')", P, False),
    ("missing NOT IN ('x')", P, False),
    ("missing BETWEEN 1 AND 2", P, False),
    ("missing NOT BETWEEN 1 AND 2", P, False),
    ("missing = other", P, False),
    # three-valued AND / OR
    ("missing = 'x' OR a = 10", P, True),
    ("missing = 'x' AND a = 10", P, False),
    ("missing = 'x' AND a = 11", P, False),
    ("NOT (missing = 'x' AND a = 11)", P, True),  # UNKNOWN AND FALSE is FALSE
    ("NOT (missing = 'x' OR a = 11)", P, False),  # UNKNOWN OR FALSE is UNKNOWN
    ("NOT (missing = 'x' OR a = 10)", P, False),
    ("(missing IS NULL OR missing = 'x') AND a = 10", P, True),
    # NOT and precedence
    ("NOT a = 10", P, False),
    ("NOT a = 11", P, True),
    ("NOT NOT a = 10", P, True),
    ("a = 10 AND NOT b = 'x'", P, True),
    ("a = 1 OR a = 10 AND b = 'abc'", P, True),
    ("(a = 1 OR a = 10) AND b = 'x'", P, False),
    ("a = 1 OR b = 'x' AND a = 10", P, False),
    ("a = 10 OR b = 'x' AND a = 1", P, True),
    # a bare property is RocketMQ's boolean cast: never TRUE for a string value
    ("t", P, False),
    ("NOT t", P, True),
    ("missing", P, False),
    ("NOT missing", P, False),
    # string functions
    ("KEYS CONTAINS 'order-2'", P, True),
    ("KEYS CONTAINS 'order-3'", P, False),
    ("KEYS NOT CONTAINS 'order-3'", P, True),
    ("KEYS STARTSWITH 'order'", P, True),
    ("KEYS ENDSWITH '-1'", P, False),
    ("KEYS NOT ENDSWITH '-1'", P, True),
    ("missing CONTAINS 'x'", P, False),
    ("missing NOT CONTAINS 'x'", P, False),
    # comments and whitespace
    ("a = 10 -- trailing comment", P, True),
    ("a /* inline */ = /**/ 10", P, True),
    ("\ta\n=\r\n10\f", P, True),
    ("a=10AND b='abc'", P, True),  # a number ends where a letter starts
]


@pytest.mark.parametrize(("text", "props", "expected"), CASES, ids=[c[0] for c in CASES])
def test_case_table(text: str, props: dict[str, str], expected: bool) -> None:
    assert compile_expression(text).evaluate(props) is expected


def test_table_is_large():
    assert len(CASES) >= 60


def test_evaluate_returns_a_bool_for_empty_properties():
    expr = compile_expression("a > 1 OR b IS NULL")
    assert expr.evaluate({}) is True
    assert expr({"b": "x"}) is False  # __call__ is evaluate


def test_properties_lists_every_name_read():
    expr = compile_expression("TAGS IN ('x') AND (price BETWEEN lo AND 10 OR NOT flag) AND -neg < 0")
    assert expr.properties == {"TAGS", "price", "lo", "flag", "neg"}


def test_rocketmq_readme_example():
    expr = compile_expression("a > 5 AND b = 'abc'")
    assert expr.evaluate({"a": "10", "b": "abc", "c": "true"})
    assert not expr.evaluate({"a": "1", "b": "abc", "c": "true"})


def test_rocketmq_example_consumer_expression():
    expr = compile_expression(
        "(TAGS is not null and TAGS in ('TagA', 'TagB'))and (a is not null and a between 0 and 3)"
    )
    hits = [i for i in range(6) for tag in ("TagA", "TagC") if expr.evaluate({"TAGS": tag, "a": str(i)})]
    assert hits == [0, 1, 2, 3]


def test_negated_property_is_never_a_number():
    # RocketMQ negates only Number values; a property is a String, so -a is NULL.
    assert not compile_expression("-a < 0").evaluate({"a": "5"})
    assert compile_expression("-a IS NULL").evaluate({"a": "5"})


def test_long_min_literal_and_double_compare():
    expr = compile_expression("a = -9223372036854775808")
    assert expr.evaluate({"a": "-9223372036854775808"})
    assert compile_expression("a > 1.0E-3").evaluate({"a": "0.01"})
    assert compile_expression("a = 2L").evaluate({"a": "2"})
    assert compile_expression("a > .5").evaluate({"a": "0.75"})


def test_nan_and_infinity_properties():
    assert compile_expression("a > 1.0").evaluate({"a": "Infinity"})
    assert compile_expression("a < 0.0").evaluate({"a": "-Infinity"})
    assert not compile_expression("a > 1.0").evaluate({"a": "inf"})  # Java spells it Infinity
    assert not compile_expression("a = 1.0").evaluate({"a": "NaN"})
