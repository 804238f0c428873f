"""Recursive-descent parser of RocketMQ's SQL92 filter language.

Grammar, loosest binding first (keywords case-insensitive)::

    expression  := or_expr EOF                 -- must be a condition (see below)
    or_expr     := and_expr ( OR and_expr )*
    and_expr    := not_expr ( AND not_expr )*
    not_expr    := NOT not_expr | equality
    equality    := comparison ( ( '=' | '<>' | '!=' ) comparison | IS [NOT] NULL )*
    comparison  := unary ( ( '>' | '>=' | '<' | '<=' ) unary
                         | [NOT] BETWEEN unary AND unary
                         | [NOT] IN '(' string ( ',' string )* ')'
                         | [NOT] ( CONTAINS | STARTSWITH | ENDSWITH ) string )*
    unary       := ( '+' | '-' ) unary | primary
    primary     := literal | identifier | '(' or_expr ')'

Differences from RocketMQ's JavaCC grammar, on purpose: ``NOT`` binds looser than comparisons
as in SQL (RocketMQ/JMS bind it to the next primary, so there ``NOT a = 1`` means
``(NOT a) = 1``), and ``!=`` is accepted as ``<>``. Type rules RocketMQ enforces at parse time are
enforced here too and raise :class:`FilterSyntaxError`:

* ``> >= < <=`` and BETWEEN bounds take numbers or properties, never string/boolean/NULL
  literals or conditions; ``BETWEEN`` with two numeric literals needs ``low <= high``;
* ``=``/``<>`` never take the NULL literal (use ``IS NULL``), nor compare a boolean literal
  with another kind of literal;
* ``IN`` needs a property on the left and string literals in the list;
* AND/OR/NOT operands and the whole expression must be conditions; a bare property is accepted
  as a condition (RocketMQ's boolean cast) but is never true, properties being strings.
"""

from __future__ import annotations

from rocketmq_broker.filter.errors import FilterSyntaxError
from rocketmq_broker.filter.lexer import Token, tokenize
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

__all__ = ["parse"]

LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1

_CONDITIONS = (Not, And, Or, Compare, IsNull, In, Between, StringMatch, BoolCast)
_ORDERING = frozenset({">", ">=", "<", "<="})
_STRING_OPS = frozenset({"CONTAINS", "STARTSWITH", "ENDSWITH"})


def _is_condition(node: Node) -> bool:
    return isinstance(node, _CONDITIONS) or (isinstance(node, Const) and type(node.value) is bool)


def _is_number_const(node: Node) -> bool:
    return isinstance(node, Const) and type(node.value) in (int, float)


def _describe(token: Token) -> str:
    if token.kind == "EOF":
        return "end of expression"
    if token.kind == "STRING":
        return f"string '{token.value}'"
    return repr(str(token.value)) if token.kind != "KEYWORD" else str(token.value)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.index = 0

    # ------------------------------------------------------------------ token helpers

    @property
    def tok(self) -> Token:
        return self.tokens[self.index]

    def _peek(self, offset: int = 1) -> Token:
        return self.tokens[min(self.index + offset, len(self.tokens) - 1)]

    def _advance(self) -> Token:
        token = self.tokens[self.index]
        if token.kind != "EOF":
            self.index += 1
        return token

    def _is_kw(self, word: str, token: Token | None = None) -> bool:
        token = token or self.tok
        return token.kind == "KEYWORD" and token.value == word

    def _is_op(self, op: str) -> bool:
        return self.tok.kind == "OP" and self.tok.value == op

    def _error(self, reason: str, pos: int | None = None) -> FilterSyntaxError:
        return FilterSyntaxError(reason, self.text, self.tok.pos if pos is None else pos)

    def _expect_op(self, op: str, context: str) -> Token:
        if not self._is_op(op):
            raise self._error(f"expected '{op}' {context}, found {_describe(self.tok)}")
        return self._advance()

    def _expect_kw(self, word: str, context: str) -> Token:
        if not self._is_kw(word):
            raise self._error(f"expected {word} {context}, found {_describe(self.tok)}")
        return self._advance()

    def _string_literal(self, context: str) -> str:
        if self.tok.kind != "STRING":
            raise self._error(f"expected a string literal {context}, found {_describe(self.tok)}")
        return str(self._advance().value)

    # ------------------------------------------------------------------ type checks

    def _condition(self, node: Node, context: str) -> Node:
        if _is_condition(node):
            return node
        if isinstance(node, Prop):
            return BoolCast(node.pos, node)
        raise self._error(f"{context} must be a condition, not {node}", node.pos)

    def _orderable(self, node: Node, op: str) -> Node:
        if isinstance(node, Const) and not _is_number_const(node):
            raise self._error(f"literal {node} cannot be compared with '{op}' (only numbers can)", node.pos)
        if _is_condition(node):
            raise self._error(f"condition {node} cannot be compared with '{op}'", node.pos)
        return node

    def _equatable(self, node: Node, op: str) -> Node:
        if isinstance(node, Const) and node.value is None:
            hint = "IS NULL" if op == "=" else "IS NOT NULL"
            raise self._error(f"NULL cannot be compared with '{op}'; use {hint}", node.pos)
        return node

    # ------------------------------------------------------------------ grammar

    def parse(self) -> Node:
        node = self._or()
        if self.tok.kind != "EOF":
            raise self._error(f"unexpected {_describe(self.tok)}")
        return self._condition(node, "the expression")

    def _or(self) -> Node:
        left = self._and()
        while self._is_kw("OR"):
            self._advance()
            right = self._and()
            left = Or(left.pos, self._condition(left, "operand of OR"), self._condition(right, "operand of OR"))
        return left

    def _and(self) -> Node:
        left = self._not()
        while self._is_kw("AND"):
            self._advance()
            right = self._not()
            left = And(left.pos, self._condition(left, "operand of AND"),
                       self._condition(right, "operand of AND"))
        return left

    def _not(self) -> Node:
        if self._is_kw("NOT"):
            start = self._advance().pos
            return Not(start, self._condition(self._not(), "operand of NOT"))
        return self._equality()

    def _equality(self) -> Node:
        left = self._comparison()
        while True:
            tok = self.tok
            if tok.kind == "OP" and tok.value in ("=", "<>", "!="):
                op = "=" if tok.value == "=" else "<>"
                self._advance()
                right = self._comparison()
                self._equatable(left, op)
                self._equatable(right, op)
                if (isinstance(left, Const) and isinstance(right, Const)
                        and (type(left.value) is bool) != (type(right.value) is bool)):
                    raise self._error(f"{left} cannot be compared with {right}", left.pos)
                left = Compare(left.pos, op, left, right)
            elif self._is_kw("IS"):
                self._advance()
                negated = self._is_kw("NOT")
                if negated:
                    self._advance()
                self._expect_kw("NULL", "after IS" + (" NOT" if negated else ""))
                left = IsNull(left.pos, left, negated)
            else:
                return left

    def _comparison(self) -> Node:
        left = self._unary()
        while True:
            tok = self.tok
            if tok.kind == "OP" and tok.value in _ORDERING:
                self._advance()
                right = self._unary()
                left = Compare(left.pos, tok.value, self._orderable(left, tok.value),
                               self._orderable(right, tok.value))
                continue
            negated = False
            if self._is_kw("NOT") and self._peek().kind == "KEYWORD" and (
                    self._peek().value in ("BETWEEN", "IN") or self._peek().value in _STRING_OPS):
                negated = True
                self._advance()
                tok = self.tok
            if self._is_kw("BETWEEN"):
                left = self._between(left, negated)
            elif self._is_kw("IN"):
                left = self._in(left, negated)
            elif tok.kind == "KEYWORD" and tok.value in _STRING_OPS:
                self._advance()
                pattern = self._string_literal(f"after {tok.value}")
                if isinstance(left, Const) and not isinstance(left.value, str) or _is_condition(left):
                    raise self._error(f"{tok.value} needs a string operand, not {left}", left.pos)
                left = StringMatch(left.pos, tok.value, left, pattern, negated)
            else:
                return left

    def _between(self, left: Node, negated: bool) -> Node:
        word = "NOT BETWEEN" if negated else "BETWEEN"
        self._advance()
        low = self._unary()
        self._expect_kw("AND", f"between the bounds of {word}")
        high = self._unary()
        for node in (left, low, high):
            self._orderable(node, word)
        if _is_number_const(low) and _is_number_const(high) and low.value > high.value:  # type: ignore[attr-defined,operator]
            raise self._error(f"{word} bounds are reversed: {low} is greater than {high}", low.pos)
        return Between(left.pos, left, low, high, negated)

    def _in(self, left: Node, negated: bool) -> Node:
        word = "NOT IN" if negated else "IN"
        if not isinstance(left, Prop):
            raise self._error(f"{word} needs a property on its left, not {left}", left.pos)
        self._advance()
        self._expect_op("(", f"after {word}")
        values = [self._string_literal(f"in the {word} list")]
        while self._is_op(","):
            self._advance()
            values.append(self._string_literal(f"in the {word} list"))
        self._expect_op(")", f"to close the {word} list")
        return In(left.pos, left, tuple(values), negated)

    def _unary(self) -> Node:
        tok = self.tok
        if tok.kind == "OP" and tok.value in ("+", "-"):
            self._advance()
            if tok.value == "-" and self.tok.kind == "INT" and self.tok.value == -LONG_MIN:
                self._advance()
                return Const(tok.pos, LONG_MIN)
            operand = self._unary()
            if isinstance(operand, Const):
                if not _is_number_const(operand):
                    raise self._error(f"unary '{tok.value}' needs a number, not {operand}", operand.pos)
                value = operand.value if tok.value == "+" else -operand.value  # type: ignore[operator]
                return Const(tok.pos, value)
            if _is_condition(operand):
                raise self._error(f"unary '{tok.value}' needs a number, not condition {operand}", operand.pos)
            return operand if tok.value == "+" else Negate(tok.pos, operand)
        return self._primary()

    def _primary(self) -> Node:
        tok = self.tok
        kind = tok.kind
        if kind == "INT":
            if tok.value > LONG_MAX:  # type: ignore[operator]
                raise self._error(f"integer literal {tok.value} does not fit in a Java long")
            self._advance()
            return Const(tok.pos, tok.value)
        if kind in ("FLOAT", "STRING"):
            self._advance()
            return Const(tok.pos, tok.value)
        if kind == "IDENT":
            self._advance()
            return Prop(tok.pos, str(tok.value))
        if kind == "KEYWORD" and tok.value in ("TRUE", "FALSE", "NULL"):
            self._advance()
            return Const(tok.pos, {"TRUE": True, "FALSE": False, "NULL": None}[tok.value])  # type: ignore[index]
        if kind == "OP" and tok.value == "(":
            self._advance()
            node = self._or()
            self._expect_op(")", f"to close the '(' at position {tok.pos}")
            return node
        if kind == "EOF":
            raise self._error("unexpected end of expression, expected a value")
        raise self._error(f"unexpected {_describe(tok)}, expected a value")


def parse(text: str) -> Node:
    """Parse ``text`` into a syntax tree whose root is a condition.

    Raises:
        FilterSyntaxError: malformed or ill-typed expression; ``position`` points at the
            offending token.
    """
    if not isinstance(text, str):
        raise TypeError(f"SQL92 expression must be a str, not {type(text).__name__}")
    return _Parser(text).parse()
