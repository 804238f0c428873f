"""Compiled SQL92 filter expressions and the per-text compile cache."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping

from rocketmq_broker.filter.compiler import compile_node
from rocketmq_broker.filter.nodes import Node, Prop
from rocketmq_broker.filter.parser import parse

__all__ = ["CACHE_SIZE", "Expression", "clear_cache", "compile_expression"]

CACHE_SIZE = 1024
"""How many distinct expression texts :func:`compile_expression` keeps compiled (LRU)."""


def _property_names(node: Node) -> frozenset[str]:
    names: set[str] = set()
    stack: list[Node] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, Prop):
            names.add(item.name)
            continue
        for field in dataclasses.fields(item):
            child = getattr(item, field.name)
            if isinstance(child, Node):
                stack.append(child)
    return frozenset(names)


class Expression:
    """A compiled SQL92 filter: ``evaluate(properties)`` says whether a message matches.

    Attributes:
        text: the expression text it was compiled from.
        tree: the syntax tree (``str(tree)`` is a fully parenthesised canonical form).
        properties: names of the message properties the expression reads.
    """

    __slots__ = ("text", "tree", "properties", "_fn")

    def __init__(self, text: str, tree: Node) -> None:
        self.text = text
        self.tree = tree
        self.properties = _property_names(tree)
        self._fn = compile_node(tree)

    def evaluate(self, properties: Mapping[str, str]) -> bool:
        """Return True when the message with these properties is selected.

        Args:
            properties: the message properties (``TAGS``, ``KEYS``, user properties...), str to
                str, as decoded from the stored message.

        Returns:
            True only when the expression is TRUE; FALSE and UNKNOWN (a missing property, a
            property that is not a number where one is needed) both give False, as RocketMQ
            does not deliver the message then.
        """
        return self._fn(properties) is True

    __call__ = evaluate

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"


@functools.lru_cache(maxsize=CACHE_SIZE)
def _compile_cached(text: str) -> Expression:
    return Expression(text, parse(text))


def compile_expression(text: str) -> Expression:
    """Compile an SQL92 filter expression (RocketMQ ``ExpressionType.SQL92``).

    Compiled expressions are cached by text in a bounded LRU cache (:data:`CACHE_SIZE`
    entries), so a broker can call this for every pull request. Failures are not cached.

    Args:
        text: the subscription expression, e.g. ``"TAGS IN ('a', 'b') AND price > 100"``.

    Raises:
        FilterSyntaxError: malformed or ill-typed expression (a ``ValueError``); ``position`` is
            the 0-based offset of the offending token.
        TypeError: ``text`` is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"SQL92 expression must be a str, not {type(text).__name__}")
    return _compile_cached(text)


def clear_cache() -> None:
    """Drop every cached compiled expression."""
    _compile_cached.cache_clear()
