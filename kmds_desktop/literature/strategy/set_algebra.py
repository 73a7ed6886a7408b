"""Set algebra over the search history: ``#1 AND (#2 OR #3) NOT #4``.

Why hand-written and iterative: the expression comes from a person typing in a box (and from the
command line), so it is parsed with bounded length and no recursion on its nesting depth: a tokenizer
and Dijkstra's shunting-yard algorithm turn it into reverse Polish notation, which is evaluated with
an explicit stack. Every error names the 1-based position of the character where it was found, in one
line, so the window can show it under the box as the user types.

Grammar (case-insensitive operators)::

    expr     := operand (OP operand)*
    operand  := '#' N | '#' N '.' K | '(' expr ')'
    OP       := AND | OR | NOT

``#N`` is set N of the history, ``#N.K`` the documents row K (from 1) of search N found. ``NOT`` is binary:
``#1 NOT #2`` is every document of #1 that is not in #2 (PubMed's meaning). Precedence: ``AND`` and
``NOT`` bind tighter than ``OR`` and group left to right, so ``#1 OR #2 AND #3`` is ``#1 OR (#2 AND
#3)`` and ``#1 AND #2 NOT #3`` is ``(#1 AND #2) NOT #3``. Parentheses override both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kmds_desktop.literature.errors import LiteratureError

#: The digits a set or row number is written with.
_DIGITS = frozenset("0123456789")

#: Longest expression accepted (characters) and most operands in one expression.
MAX_EXPRESSION_CHARS = 2000
MAX_OPERANDS = 200

_PRECEDENCE = {"OR": 1, "AND": 2, "NOT": 2}


class ExpressionError(LiteratureError):
    """A set expression that cannot be read or evaluated; ``position`` is 1-based (0: the whole text)."""

    def __init__(self, message: str, position: int = 0) -> None:
        self.position = position
        self.detail = message
        where = f" at position {position}: " if position else ": "
        super().__init__(f"bad set expression{where}{message}")


@dataclass(frozen=True)
class Token:
    """One token: ``kind`` is ``ref``, ``op``, ``(`` or ``)``; ``position`` is 1-based."""

    kind: str
    text: str
    position: int
    set_number: int = 0
    row: int = 0  # 0: the whole set; K: row K of search N

    @property
    def label(self) -> str:
        return f"#{self.set_number}.{self.row}" if self.row else f"#{self.set_number}"


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens; raises :class:`ExpressionError` naming the first bad character."""
    if not isinstance(text, str):
        raise ExpressionError(f"the expression must be text, not {type(text).__name__}")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        pos = i + 1
        if ch in "()":
            tokens.append(Token(ch, ch, pos))
            i += 1
        elif ch == "#":
            j = i + 1
            while j < n and text[j] in _DIGITS:  # ASCII only: "²" and "١" are digits to isdigit()
                j += 1
            if j == i + 1:
                raise ExpressionError("'#' must be followed by a set number, e.g. #1", pos)
            number = int(text[i + 1:j]) if j - i - 1 <= 9 else -1
            row = 0
            if j < n and text[j] == ".":
                k = j + 1
                while k < n and text[k] in _DIGITS:
                    k += 1
                if k == j + 1:
                    raise ExpressionError(f"'{text[i:j + 1]}' must be followed by a row number, e.g. "
                                          f"{text[i:j]}.1", pos)
                row = int(text[j + 1:k]) if k - j - 1 <= 6 else -1
                if row == 0:  # rows count from 1; "#1.0" would silently read as the whole set #1
                    raise ExpressionError(f"'{text[i:k]}' is not a row: rows are numbered from 1, e.g. "
                                          f"{text[i:j]}.1 (or {text[i:j]} for the whole set)", pos)
                j = k
            if number < 1 or row < 0:
                raise ExpressionError(f"'{text[i:j]}' is not a set in the history", pos)
            tokens.append(Token("ref", text[i:j], pos, number, row))
            i = j
        elif ch.isalpha():
            j = i
            while j < n and text[j].isalpha():
                j += 1
            word = text[i:j].upper()
            if word not in _PRECEDENCE:
                raise ExpressionError(f"unknown word '{text[i:j][:20]}': use AND, OR, NOT, parentheses and "
                                      "#N", pos)
            tokens.append(Token("op", word, pos))
            i = j
        else:
            raise ExpressionError(f"unexpected character {ch!r}: use AND, OR, NOT, parentheses and #N", pos)
    return tokens


def parse(text: str) -> list[Token]:
    """The expression in reverse Polish notation (operands and operators), checked for syntax.

    Shunting-yard with an explicit "operand expected" state, so a missing or doubled operand, an
    unbalanced parenthesis or an empty expression is reported where it occurs.
    """
    tokens = tokenize(text)
    if not tokens:
        raise ExpressionError("the expression is empty: type sets like #1 AND #2")
    out: list[Token] = []
    ops: list[Token] = []
    expect_operand = True
    operands = 0
    for tok in tokens:
        if tok.kind == "ref":
            if not expect_operand:
                raise ExpressionError(f"expected AND, OR, NOT or ')' before {tok.text}", tok.position)
            operands += 1
            if operands > MAX_OPERANDS:
                raise ExpressionError(f"more than {MAX_OPERANDS} sets in one expression", tok.position)
            out.append(tok)
            expect_operand = False
        elif tok.kind == "(":
            if not expect_operand:
                raise ExpressionError("expected AND, OR or NOT before '('", tok.position)
            ops.append(tok)
        elif tok.kind == ")":
            if expect_operand:
                raise ExpressionError("expected a set (#N) before ')'", tok.position)
            while ops and ops[-1].kind != "(":
                out.append(ops.pop())
            if not ops:
                raise ExpressionError("')' has no matching '('", tok.position)
            ops.pop()
        else:  # operator
            if expect_operand:
                if tok.text == "NOT" and not out:
                    raise ExpressionError("NOT needs a set on its left: '#1 NOT #2' is #1 without #2",
                                          tok.position)
                raise ExpressionError(f"expected a set (#N) or '(' but found {tok.text}", tok.position)
            prec = _PRECEDENCE[tok.text]
            while ops and ops[-1].kind == "op" and _PRECEDENCE[ops[-1].text] >= prec:
                out.append(ops.pop())
            ops.append(tok)
            expect_operand = True
    if expect_operand:
        last = tokens[-1]
        raise ExpressionError(f"the expression ends after {last.text}: a set (#N) is missing",
                              last.position + len(last.text))
    while ops:
        tok = ops.pop()
        if tok.kind == "(":
            raise ExpressionError("'(' is never closed", tok.position)
        out.append(tok)
    return out


def references(rpn: Iterable[Token]) -> list[Token]:
    """The operand tokens in order of appearance (each once per occurrence)."""
    return [t for t in rpn if t.kind == "ref"]


def evaluate(rpn: list[Token], resolve: Callable[[Token], set[int]]) -> set[int]:
    """Evaluate reverse Polish ``rpn`` with ``resolve(token) -> ids`` for each operand.

    Each distinct operand is resolved once. The history counts and combines with :func:`to_sql`
    instead (measured faster in ``bench/set_algebra.py``); this is the fallback for expressions nested
    deeper than SQLite's parser accepts, and the benchmark's other side.
    """
    cache: dict[tuple[int, int], set[int]] = {}
    stack: list[set[int]] = []
    for tok in rpn:
        if tok.kind == "ref":
            key = (tok.set_number, tok.row)
            if key not in cache:
                cache[key] = resolve(tok)
            stack.append(cache[key])
            continue
        right = stack.pop()
        left = stack.pop()
        if tok.text == "AND":
            stack.append(left & right)
        elif tok.text == "OR":
            stack.append(left | right)
        else:
            stack.append(left - right)
    if len(stack) != 1:  # parse() guarantees one value; kept as a guard for hand-built input
        raise ExpressionError("the expression does not reduce to one set")
    return stack[0]


_SQL_OPERATOR = {"AND": "INTERSECT", "OR": "UNION", "NOT": "EXCEPT"}
_SET_LEAF = "SELECT doc_id FROM set_member WHERE set_number = ?"
_ROW_LEAF = "SELECT doc_id FROM row_member WHERE set_number = ? AND position = ?"


def to_sql(rpn: list[Token]) -> tuple[str, list[int]]:
    """One SQLite compound ``SELECT doc_id`` for the expression, with its parameters (numbers only).

    SQLite's compound operators have equal precedence and group left to right, so a right operand that
    is a single set is appended without nesting (``A UNION B INTERSECT C`` is ``(A UNION B) INTERSECT
    C``); only a compound right operand becomes a subquery. Built from the RPN with an explicit stack.
    """
    stack: list[tuple[str, list[int], bool]] = []  # (sql, params, compound)
    for tok in rpn:
        if tok.kind == "ref":
            if tok.row:
                stack.append((_ROW_LEAF, [tok.set_number, tok.row], False))
            else:
                stack.append((_SET_LEAF, [tok.set_number], False))
            continue
        right, right_params, right_compound = stack.pop()
        left, left_params, _ = stack.pop()
        if right_compound:
            right = f"SELECT doc_id FROM ({right})"
        stack.append((f"{left} {_SQL_OPERATOR[tok.text]} {right}", left_params + right_params, True))
    sql, params, _ = stack[0]
    return sql, params


def canonical(rpn: list[Token]) -> str:
    """The expression written back with every grouping explicit (for the report), built iteratively."""
    stack: list[tuple[str, bool]] = []  # (text, is_compound)
    for tok in rpn:
        if tok.kind == "ref":
            stack.append((tok.label, False))
            continue
        right, r_compound = stack.pop()
        left, l_compound = stack.pop()
        left = f"({left})" if l_compound else left
        right = f"({right})" if r_compound else right
        stack.append((f"{left} {tok.text} {right}", True))
    return stack[0][0] if stack else ""
