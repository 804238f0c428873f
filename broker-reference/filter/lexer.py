"""Tokenizer of RocketMQ's SQL92 filter language.

Lexical rules (those of the RocketMQ/ActiveMQ selector grammar):

* whitespace (space, tab, CR, LF, FF) separates tokens; ``-- ...`` line comments and
  ``/* ... */`` block comments are skipped;
* keywords are case-insensitive: ``NOT AND OR BETWEEN IN IS NULL TRUE FALSE CONTAINS
  STARTSWITH ENDSWITH``;
* identifiers (property names, case-sensitive): ``[A-Za-z_$][A-Za-z0-9_$]*``;
* strings: single quotes, ``''`` inside stands for one quote;
* integers: decimal digits with an optional ``L``/``l`` suffix; decimals: ``1.5``, ``1.``,
  ``.5``, ``1e3``, ``1.5E-3`` (no sign: a leading ``-`` is the unary minus operator);
* operators: ``= <> != > >= < <= ( ) , + -``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from rocketmq_broker.filter.errors import FilterSyntaxError

__all__ = ["KEYWORDS", "Token", "tokenize"]

KEYWORDS = frozenset(
    {"NOT", "AND", "OR", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE", "CONTAINS", "STARTSWITH",
     "ENDSWITH"}
)


class Token(NamedTuple):
    """One token: ``kind`` is ``IDENT``, ``KEYWORD``, ``STRING``, ``INT``, ``FLOAT``, ``OP`` or
    ``EOF``; ``value`` the identifier, upper-case keyword, decoded string, number or operator;
    ``pos`` its 0-based offset in the expression text."""

    kind: str
    value: object
    pos: int


_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\r\n\f]+|--[^\r\n]*(?:\r\n|\r|\n|$)|/\*.*?\*/)
  | (?P<float>(?:[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+))
  | (?P<int>[0-9]+[lL]?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<ident>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|!=|>=|<=|[=<>(),+-])
    """,
    re.VERBOSE | re.DOTALL,
)


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens, ending with one ``EOF`` token.

    Raises:
        FilterSyntaxError: an unterminated string or comment, or a character that starts no token.
    """
    tokens: list[Token] = []
    pos = 0
    end = len(text)
    match = _TOKEN_RE.match
    while pos < end:
        m = match(text, pos)
        if m is None:
            ch = text[pos]
            if ch == "'":
                raise FilterSyntaxError("unterminated string literal", text, pos)
            if text.startswith("/*", pos):
                raise FilterSyntaxError("unterminated comment", text, pos)
            raise FilterSyntaxError(f"unexpected character {ch!r}", text, pos)
        kind = m.lastgroup
        lexeme = m.group()
        if kind == "ident":
            upper = lexeme.upper()
            if upper in KEYWORDS:
                tokens.append(Token("KEYWORD", upper, pos))
            else:
                tokens.append(Token("IDENT", lexeme, pos))
        elif kind == "string":
            tokens.append(Token("STRING", lexeme[1:-1].replace("''", "'"), pos))
        elif kind == "int":
            tokens.append(Token("INT", int(lexeme.rstrip("lL")), pos))
        elif kind == "float":
            tokens.append(Token("FLOAT", float(lexeme), pos))
        elif kind == "op":
            tokens.append(Token("OP", lexeme, pos))
        pos = m.end()
    tokens.append(Token("EOF", None, end))
    return tokens
