"""Syntax tree of an SQL92 filter expression.

Every node is immutable and renders (``str``) as a fully parenthesised canonical form, e.g.
``a > 1 AND NOT b IN ('x')`` becomes ``((a > 1) AND (NOT (b IN ('x'))))``; tests use it to check
precedence. ``pos`` is the 0-based offset of the node's first token in the expression text.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "And",
    "Between",
    "BoolCast",
    "Compare",
    "Const",
    "In",
    "IsNull",
    "Negate",
    "Node",
    "Not",
    "Or",
    "Prop",
    "StringMatch",
    "render_literal",
]


def render_literal(value: object) -> str:
    """Render a constant the way it is written in an expression (strings quoted, ``''`` escaped)."""
    if value is None:
        return "NULL"
    if value is True:
        return "TRUE"
    if value is False:
        return "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


@dataclass(frozen=True, slots=True)
class Node:
    """Base of every syntax node."""

    pos: int


@dataclass(frozen=True, slots=True)
class Const(Node):
    """A literal: ``None`` (NULL), ``bool``, ``int`` (Java long), ``float`` (double) or ``str``."""

    value: object

    def __str__(self) -> str:
        return render_literal(self.value)


@dataclass(frozen=True, slots=True)
class Prop(Node):
    """A message property looked up by name (``TAGS``, ``KEYS``, user properties...)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Negate(Node):
    """Unary minus of a non-constant operand (constants are folded by the parser)."""

    operand: Node

    def __str__(self) -> str:
        return f"(-{self.operand})"


@dataclass(frozen=True, slots=True)
class Not(Node):
    """Logical NOT (NOT of UNKNOWN stays UNKNOWN)."""

    operand: Node

    def __str__(self) -> str:
        return f"(NOT {self.operand})"


@dataclass(frozen=True, slots=True)
class BoolCast(Node):
    """A bare property used as a condition (RocketMQ's boolean cast of a property)."""

    operand: Prop

    def __str__(self) -> str:
        return str(self.operand)


@dataclass(frozen=True, slots=True)
class And(Node):
    """Logical AND with SQL three-valued logic."""

    left: Node
    right: Node

    def __str__(self) -> str:
        return f"({self.left} AND {self.right})"


@dataclass(frozen=True, slots=True)
class Or(Node):
    """Logical OR with SQL three-valued logic."""

    left: Node
    right: Node

    def __str__(self) -> str:
        return f"({self.left} OR {self.right})"


@dataclass(frozen=True, slots=True)
class Compare(Node):
    """A comparison; ``op`` is one of ``= <> > >= < <=`` (``!=`` is stored as ``<>``)."""

    op: str
    left: Node
    right: Node

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


@dataclass(frozen=True, slots=True)
class IsNull(Node):
    """``operand IS NULL`` (or ``IS NOT NULL`` when ``negated``)."""

    operand: Node
    negated: bool

    def __str__(self) -> str:
        return f"({self.operand} IS {'NOT ' if self.negated else ''}NULL)"


@dataclass(frozen=True, slots=True)
class In(Node):
    """``prop IN ('a', 'b')`` / ``NOT IN``; RocketMQ allows only a property on the left and string
    literals in the list."""

    operand: Prop
    values: tuple[str, ...]
    negated: bool

    def __str__(self) -> str:
        items = ", ".join(render_literal(v) for v in self.values)
        return f"({self.operand} {'NOT ' if self.negated else ''}IN ({items}))"


@dataclass(frozen=True, slots=True)
class Between(Node):
    """``operand BETWEEN low AND high`` (inclusive) or ``NOT BETWEEN``."""

    operand: Node
    low: Node
    high: Node
    negated: bool

    def __str__(self) -> str:
        word = "NOT BETWEEN" if self.negated else "BETWEEN"
        return f"({self.operand} {word} {self.low} AND {self.high})"


@dataclass(frozen=True, slots=True)
class StringMatch(Node):
    """``operand CONTAINS 'x'`` / ``STARTSWITH`` / ``ENDSWITH``, optionally negated."""

    op: str
    operand: Node
    pattern: str
    negated: bool

    def __str__(self) -> str:
        return f"({self.operand} {'NOT ' if self.negated else ''}{self.op} {render_literal(self.pattern)})"
