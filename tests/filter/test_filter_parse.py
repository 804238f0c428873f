"""SQL92 filter: grammar, precedence, syntax/type errors with positions, compile cache."""

from __future__ import annotations

import pytest
from rocketmq_broker.filter import CACHE_SIZE, FilterSyntaxError, clear_cache, compile_expression
from rocketmq_broker.filter.lexer import tokenize

PRECEDENCE = [
    ("a = 1 OR b = 2 AND c = 3", "((a = 1) OR ((b = 2) AND (c = 3)))"),
    ("a = 1 AND b = 2 OR c = 3", "(((a = 1) AND (b = 2)) OR (c = 3))"),
    ("a = 1 OR b = 2 OR c = 3", "(((a = 1) OR (b = 2)) OR (c = 3))"),
    ("NOT a = 1 AND b = 2", "((NOT (a = 1)) AND (b = 2))"),
    ("NOT a = 1 OR NOT b = 2", "((NOT (a = 1)) OR (NOT (b = 2)))"),
    ("NOT NOT a > 1", "(NOT (NOT (a > 1)))"),
    ("NOT (a = 1 OR b = 2)", "(NOT ((a = 1) OR (b = 2)))"),
    ("a > 1 = TRUE", "((a > 1) = TRUE)"),
    ("a BETWEEN 1 AND 2 AND b = 'x'", "((a BETWEEN 1 AND 2) AND (b = 'x'))"),
    ("a NOT BETWEEN -1 AND +2", "(a NOT BETWEEN -1 AND 2)"),
    ("a NOT IN ('x', 'y''z') OR b IS NOT NULL", "((a NOT IN ('x', 'y''z')) OR (b IS NOT NULL))"),
    ("a IS NULL AND NOT b IS NULL", "((a IS NULL) AND (NOT (b IS NULL)))"),
    ("-a <= -1.5", "((-a) <= -1.5)"),
    ("a != 'x'", "(a <> 'x')"),
    ("k contains 'x' and k not startswith 'y'", "((k CONTAINS 'x') AND (k NOT STARTSWITH 'y'))"),
    ("((((a = 1))))", "(a = 1)"),
    ("a", "a"),
    ("true AND NOT false", "(TRUE AND (NOT FALSE))"),
]


@pytest.mark.parametrize(("text", "tree"), PRECEDENCE, ids=[p[0] for p in PRECEDENCE])
def test_precedence(text: str, tree: str) -> None:
    assert str(compile_expression(text).tree) == tree


def test_canonical_form_parses_back_to_itself():
    for text, tree in PRECEDENCE:
        assert str(compile_expression(tree).tree) == tree, text


ERRORS = [
    # (expression, position, fragment of the message)
    ("", 0, "unexpected end of expression"),
    ("   ", 3, "unexpected end of expression"),
    ("a >", 3, "unexpected end of expression"),
    ("a > 1 AND", 9, "unexpected end of expression"),
    ("a = 1)", 5, "unexpected ')'"),
    ("(a = 1", 6, "expected ')' to close the '(' at position 0"),
    ("a = 1 b = 2", 6, "unexpected 'b'"),
    ("a NOT b", 2, "unexpected NOT"),
    ("a = 'abc", 4, "unterminated string literal"),
    ("a = 1 /* comment", 6, "unterminated comment"),
    ("a # 1", 2, "unexpected character '#'"),
    ("a == 1", 3, "unexpected '=', expected a value"),
    ("a = \"x\"", 4, "unexpected character '\"'"),
    ("1", 0, "must be a condition"),
    ("'abc'", 0, "must be a condition"),
    ("NULL", 0, "must be a condition"),
    ("a + 1 > 2", 2, "unexpected '+'"),
    ("a > 'x'", 4, "literal 'x' cannot be compared with '>'"),
    ("'x' <= a", 0, "literal 'x' cannot be compared with '<='"),
    ("a > TRUE", 4, "literal TRUE cannot be compared"),
    ("a < NULL", 4, "literal NULL cannot be compared"),
    ("(a = 1) > 2", 1, "condition (a = 1) cannot be compared"),
    ("a = NULL", 4, "use IS NULL"),
    ("NULL <> a", 0, "use IS NOT NULL"),
    ("TRUE = 1", 0, "TRUE cannot be compared with 1"),
    ("'x' = FALSE", 0, "'x' cannot be compared with FALSE"),
    ("a IN ()", 6, "expected a string literal in the IN list"),
    ("a IN (1, 2)", 6, "expected a string literal in the IN list"),
    ("a IN ('x', b)", 11, "expected a string literal in the IN list"),
    ("a IN 'x'", 5, "expected '(' after IN"),
    ("a NOT IN ('x'", 13, "expected ')' to close the NOT IN list"),
    ("'v' IN ('x')", 0, "IN needs a property on its left"),
    ("a BETWEEN 1", 11, "expected AND between the bounds of BETWEEN"),
    ("a BETWEEN 5 AND 1", 10, "bounds are reversed"),
    ("a NOT BETWEEN 'a' AND 'b'", 14, "literal 'a' cannot be compared with 'NOT BETWEEN'"),
    ("a BETWEEN 1 AND NULL", 16, "literal NULL cannot be compared with 'BETWEEN'"),
    ("a IS 1", 5, "expected NULL after IS"),
    ("a IS NOT TRUE", 9, "expected NULL after IS NOT"),
    ("a = 1 AND 2", 10, "operand of AND must be a condition"),
    ("1 OR a = 1", 0, "operand of OR must be a condition"),
    ("NOT 5", 4, "operand of NOT must be a condition"),
    ("-'x' = a", 1, "unary '-' needs a number"),
    ("-(a = 1)", 2, "unary '-' needs a number, not condition"),
    ("a = 9223372036854775808", 4, "does not fit in a Java long"),
    ("a CONTAINS 1", 11, "expected a string literal after CONTAINS"),
    ("5 CONTAINS 'x'", 0, "CONTAINS needs a string operand"),
    ("a.b = 1", 1, "unexpected character '.'"),
    ("AND = 1", 0, "unexpected AND, expected a value"),
    ("a = 1 OR", 8, "unexpected end of expression"),
    ("a = 'x' -- comment\n)", 19, "unexpected ')'"),
]


@pytest.mark.parametrize(("text", "position", "fragment"), ERRORS, ids=[e[0] for e in ERRORS])
def test_syntax_errors(text: str, position: int, fragment: str) -> None:
    with pytest.raises(FilterSyntaxError) as info:
        compile_expression(text)
    err = info.value
    assert isinstance(err, ValueError)
    assert fragment in err.reason, err.reason
    assert err.position == position, str(err)
    assert err.expression == text
    assert f"at position {position}" in str(err)


def test_non_str_expression_is_a_type_error():
    with pytest.raises(TypeError):
        compile_expression(b"a = 1")  # type: ignore[arg-type]


def test_tokens():
    kinds = [(t.kind, t.value, t.pos) for t in tokenize("TAGS in ('a''b') and x>=1.5e2 OR y<>-3L")]
    assert kinds == [
        ("IDENT", "TAGS", 0), ("KEYWORD", "IN", 5), ("OP", "(", 8), ("STRING", "a'b", 9),
        ("OP", ")", 15), ("KEYWORD", "AND", 17), ("IDENT", "x", 21), ("OP", ">=", 22),
        ("FLOAT", 150.0, 24), ("KEYWORD", "OR", 30), ("IDENT", "y", 33), ("OP", "<>", 34),
        ("OP", "-", 36), ("INT", 3, 37), ("EOF", None, 39),
    ]


def test_identifiers_allow_dollar_and_underscore():
    expr = compile_expression("$x = '1' AND _y_2 = '2'")
    assert expr.evaluate({"$x": "1", "_y_2": "2"})


def test_compile_cache_returns_the_same_object():
    clear_cache()
    first = compile_expression("a = 1")
    assert compile_expression("a = 1") is first
    assert compile_expression("a = 2") is not first
    clear_cache()
    assert compile_expression("a = 1") is not first


def test_compile_cache_is_bounded():
    clear_cache()
    first = compile_expression("n = 0")
    for i in range(1, CACHE_SIZE + 1):
        compile_expression(f"n = {i}")
    assert compile_expression("n = 0") is not first  # evicted (least recently used)
    clear_cache()


def test_errors_are_raised_every_time():
    for _ in range(2):
        with pytest.raises(FilterSyntaxError):
            compile_expression("a >")
