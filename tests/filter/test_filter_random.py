"""SQL92 filter: seeded random expressions checked against a small reference interpreter.

(hypothesis is not installed in the project's virtualenv, so the generator is hand-rolled and
seeded; every failure prints the expression and the properties.)
"""

from __future__ import annotations

import random
import re

import pytest
from rocketmq_broker.filter import compile_expression

NAMES = ["a", "b", "c", "TAGS"]
VALUES = ["1", "2", "-3", "2.5", "10", "abc", "", "TagA", "x'y"]
INTS = [-3, 0, 1, 2, 10]
FLOATS = [-3.0, 0.5, 2.5, 10.0]
STRINGS = ["1", "abc", "TagA", "", "x'y"]

# Reference semantics, written independently of the implementation:
# UNKNOWN is None; a missing property or a property that does not parse as the literal's kind
# gives UNKNOWN; AND/OR/NOT use SQL three-valued logic; only TRUE selects.


def _num(value: str, kind: type) -> float | int | None:
    if kind is int:
        return int(value) if re.fullmatch(r"[+-]?[0-9]+", value) else None
    try:
        return float(value)
    except ValueError:
        return None


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


class Atom:
    def __init__(self, rng: random.Random) -> None:
        self.name = rng.choice(NAMES)
        self.kind = rng.choice(["cmp", "cmp", "eq_str", "in", "between", "null", "contains"])
        self.negated = rng.random() < 0.3
        if self.kind == "cmp":
            self.op = rng.choice(["=", "<>", "!=", ">", ">=", "<", "<="])
            self.lit = rng.choice(INTS + FLOATS)
        elif self.kind == "eq_str":
            self.op = rng.choice(["=", "<>"])
            self.lit = rng.choice(STRINGS)
        elif self.kind == "in":
            self.items = rng.sample(STRINGS, rng.randint(1, 3))
        elif self.kind == "between":
            self.low, self.high = sorted(rng.sample(INTS, 2))
        elif self.kind == "contains":
            self.op = rng.choice(["CONTAINS", "STARTSWITH", "ENDSWITH"])
            self.lit = rng.choice(["a", "b", "Tag", "'"])

    def text(self) -> str:
        not_ = "NOT " if self.negated else ""
        if self.kind == "cmp":
            return f"{self.name} {self.op} {self.lit!r}"
        if self.kind == "eq_str":
            return f"{self.name} {self.op} {_quote(self.lit)}"
        if self.kind == "in":
            return f"{self.name} {not_}IN ({', '.join(_quote(s) for s in self.items)})"
        if self.kind == "between":
            return f"{self.name} {not_}BETWEEN {self.low} AND {self.high}"
        if self.kind == "null":
            return f"{self.name} IS {not_}NULL"
        return f"{self.name} {not_}{self.op} {_quote(self.lit)}"

    def eval(self, props: dict[str, str]) -> bool | None:
        value = props.get(self.name)
        if self.kind == "null":
            return (value is None) != self.negated
        if value is None:
            return None
        if self.kind == "eq_str":
            return (value == self.lit) == (self.op == "=")
        if self.kind == "in":
            return (value in self.items) != self.negated
        if self.kind == "contains":
            test = {"CONTAINS": value.__contains__, "STARTSWITH": value.startswith,
                    "ENDSWITH": value.endswith}[self.op]
            return test(self.lit) != self.negated
        number = _num(value, type(self.lit) if self.kind == "cmp" else int)
        if number is None:
            return None
        if self.kind == "between":
            inside = self.low <= number <= self.high
            return inside != self.negated
        return {"=": number == self.lit, "<>": number != self.lit, "!=": number != self.lit,
                ">": number > self.lit, ">=": number >= self.lit, "<": number < self.lit,
                "<=": number <= self.lit}[self.op]


PREC = {"OR": 1, "AND": 2, "NOT": 3}


def gen(rng: random.Random, depth: int):
    if depth == 0 or rng.random() < 0.3:
        return Atom(rng)
    op = rng.choice(["AND", "OR", "NOT"])
    if op == "NOT":
        return ("NOT", gen(rng, depth - 1))
    return (op, gen(rng, depth - 1), gen(rng, depth - 1))


def render(node, need: int = 0, minimal: bool = True) -> str:
    if isinstance(node, Atom):
        return node.text() if minimal else f"({node.text()})"
    op = node[0]
    if op == "NOT":
        text = f"NOT {render(node[1], PREC['NOT'], minimal)}"
    else:
        # left-associative: the right operand must bind tighter to keep the tree's shape
        text = f"{render(node[1], PREC[op], minimal)} {op} {render(node[2], PREC[op] + 1, minimal)}"
    return f"({text})" if (not minimal or PREC[op] < need) else text


def reference(node, props) -> bool | None:
    if isinstance(node, Atom):
        return node.eval(props)
    if node[0] == "NOT":
        v = reference(node[1], props)
        return None if v is None else not v
    lv, rv = reference(node[1], props), reference(node[2], props)
    if node[0] == "AND":
        if lv is False or rv is False:
            return False
        return None if lv is None or rv is None else True
    if lv is True or rv is True:
        return True
    return None if lv is None or rv is None else False


def random_props(rng: random.Random) -> dict[str, str]:
    return {n: rng.choice(VALUES) for n in NAMES if rng.random() < 0.8}


@pytest.mark.parametrize("seed", range(8))
def test_random_expressions_match_reference(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(250):
        tree = gen(rng, 4)
        minimal = render(tree)
        full = render(tree, minimal=False)
        expr_min = compile_expression(minimal)
        expr_full = compile_expression(full)
        for _ in range(6):
            props = random_props(rng)
            want = reference(tree, props) is True
            assert expr_min.evaluate(props) is want, (minimal, props)
            assert expr_full.evaluate(props) is want, (full, props)


@pytest.mark.parametrize("seed", range(3))
def test_canonical_form_round_trips(seed: int) -> None:
    rng = random.Random(1000 + seed)
    for _ in range(200):
        tree = compile_expression(render(gen(rng, 4))).tree
        assert str(compile_expression(str(tree)).tree) == str(tree)
