"""A normalised tsquery, as PostgreSQL prints it, read into a tree the top-k index can run.

Why PostgreSQL's printed form: ``to_tsquery('english', q)::text`` has already stemmed every word,
dropped stop words, resolved ``<->`` chains and checked the syntax, so the index matches exactly
the lexemes ``search_vector @@ to_tsquery('english', q)`` does (PostgreSQL stays the judge of query
syntax). The printed grammar is small: quoted lexemes (``'it''s'``) with an optional ``:*`` prefix
flag and weight letters, ``!``, ``<->`` / ``<N>``, ``&``, ``|`` and parentheses, with PostgreSQL's
precedence (``!`` over ``<N>`` over ``&`` over ``|``).

The reader is a shunting-yard over a token list, with no recursion: a query nested ten thousand
parentheses deep is read in linear time and never hits Python's recursion limit. Input is bounded by
:data:`MAX_PRINTED_CHARS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: A printed query longer than this is not read (the row runs in PostgreSQL as before).
MAX_PRINTED_CHARS = 64 * 1024
_TOKEN = re.compile(r"\s*(?:'((?:[^']|'')*)'(?::([*A-D]+))?|(<->|<\d+>)|([&|!()]))")


@dataclass(frozen=True)
class Term:
    """One lexeme; ``prefix`` for ``'word':*``; ``weights`` the weight letters a query restricts to."""

    lexeme: str
    prefix: bool = False
    weights: str = ""


@dataclass(frozen=True)
class Node:
    """An operator over its operands: ``and``/``or`` (two or more), ``not`` (one), ``phrase``
    (two, ``distance`` apart: PostgreSQL's ``<N>``)."""

    op: str
    children: tuple[Term | Node, ...] = field(default_factory=tuple)
    distance: int = 0


Tree = Term | Node
_PRECEDENCE = {"|": 1, "&": 2, "phrase": 3, "!": 4}


class UnreadableQuery(ValueError):  # noqa: N818 - a public name: renaming it would break callers
    """The printed text is not a tsquery this reader knows (never expected from PostgreSQL)."""


def read_tree(printed: str) -> Tree | None:
    """The tree of a printed tsquery; None for the empty query (only stop words: matches nothing)."""
    text = printed.strip()
    if not text:
        return None
    if len(text) > MAX_PRINTED_CHARS:
        raise UnreadableQuery(f"the query is longer than {MAX_PRINTED_CHARS:,} characters")
    operands: list[Tree] = []
    operators: list[tuple[str, int]] = []  # (operator, distance)
    position = 0
    expect_operand = True
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            if text[position:].strip() == "":
                break
            snippet = text[position:position + 20]
            raise UnreadableQuery(f"unexpected text at character {position}: {snippet!r}")
        position = match.end()
        lexeme, flags, phrase, symbol = match.groups()
        if lexeme is not None:
            flags = flags or ""
            operands.append(Term(lexeme.replace("''", "'"), "*" in flags, flags.replace("*", "")))
            expect_operand = False
        elif symbol == "(":
            operators.append(("(", 0))
            expect_operand = True
        elif symbol == ")":
            while operators and operators[-1][0] != "(":
                _apply(operators.pop(), operands)
            if not operators:
                raise UnreadableQuery("unbalanced parentheses")
            operators.pop()
            expect_operand = False
        elif symbol == "!":
            operators.append(("!", 0))
            expect_operand = True
        else:
            if expect_operand:
                raise UnreadableQuery(f"an operator where a term belongs, at character {position}")
            if phrase:
                name, distance = "phrase", 1 if phrase == "<->" else int(phrase[1:-1])
            else:
                name, distance = symbol, 0
            # left-associative binary operators: pop those of higher or equal precedence
            while (operators and operators[-1][0] != "("
                   and _PRECEDENCE[operators[-1][0]] >= _PRECEDENCE[name]):
                _apply(operators.pop(), operands)
            operators.append((name, distance))
            expect_operand = True
    while operators:
        operator = operators.pop()
        if operator[0] == "(":
            raise UnreadableQuery("unbalanced parentheses")
        _apply(operator, operands)
    if len(operands) != 1:
        raise UnreadableQuery("the query does not read as one expression")
    return operands[0]


def _apply(operator: tuple[str, int], operands: list[Tree]) -> None:
    name, distance = operator
    if name == "!":
        if not operands:
            raise UnreadableQuery("! without a term")
        operands.append(Node("not", (operands.pop(),)))
        return
    if len(operands) < 2:
        raise UnreadableQuery(f"{name} without two operands")
    right, left = operands.pop(), operands.pop()
    if name == "phrase":
        operands.append(Node("phrase", (left, right), distance))
        return
    op = "and" if name == "&" else "or"
    parts: list[Tree] = []
    for side in (left, right):  # flatten a & (b & c) into one node
        if isinstance(side, Node) and side.op == op:
            parts.extend(side.children)
        else:
            parts.append(side)
    operands.append(Node(op, tuple(parts)))
