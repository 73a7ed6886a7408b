"""Set expressions over the search history: syntax errors with positions, precedence, SQL == Python."""

from __future__ import annotations

import random

import pytest

from kmds_desktop.literature.strategy import set_algebra
from kmds_desktop.literature.strategy.history import Member, RowRecord, SearchHistory
from kmds_desktop.literature.strategy.set_algebra import ExpressionError, canonical, evaluate, parse
from kmds_desktop.literature.strategy.workbench import SearchWorkbench

SETS = {1: {1, 2, 3, 4, 5, 6}, 2: {2, 3, 7}, 3: {5, 6, 8}, 4: {3, 6}}


def _eval(text: str) -> set[int]:
    return evaluate(parse(text), lambda tok: SETS[tok.set_number])


@pytest.mark.parametrize(("text", "message", "position"), [
    ("#1 AND", "a set (#N) is missing", 7),
    ("#1 OR OR #2", "expected a set (#N) or '(' but found OR", 7),
    ("#1 #2", "expected AND, OR, NOT or ')' before #2", 4),
    ("(#1 OR #2", "'(' is never closed", 1),
    ("#1 OR #2)", "')' has no matching '('", 9),
    ("NOT #1", "NOT needs a set on its left", 1),
    ("#1 XOR #2", "unknown word 'XOR'", 4),
    ("#1 AND ()", "expected a set (#N) before ')'", 9),
    ("#1 & #2", "unexpected character '&'", 4),
    ("#x", "'#' must be followed by a set number", 1),
    ("#0", "'#0' is not a set in the history", 1),
    ("#2.", "must be followed by a row number", 1),
    # digits to str.isdigit() but not to int() (a ValueError once), or read as another number
    ("#\u00b2", "'#' must be followed by a set number", 1),
    ("#1.\u00b2", "must be followed by a row number", 1),
    ("#1 AND #\u0661", "'#' must be followed by a set number", 8),
])
def test_bad_expressions_name_the_position_in_one_line(text, message, position):
    with pytest.raises(ExpressionError) as info:
        parse(text)
    assert info.value.position == position
    assert message in str(info.value) and f"at position {position}" in str(info.value)
    assert "\n" not in str(info.value)


def test_empty_and_oversized_expressions_are_refused():
    with pytest.raises(ExpressionError, match="empty"):
        parse("   ")
    with pytest.raises(ExpressionError, match="longer than"):
        parse("#1 OR " * 1000 + "#1")
    with pytest.raises(ExpressionError, match="more than 200 sets"):
        parse(" OR ".join(["#1"] * 201))


def test_precedence_and_parentheses_against_hand_computed_sets():
    # AND and NOT bind tighter than OR, left to right.
    assert _eval("#2 OR #3 AND #4") == {2, 3, 7} | ({5, 6, 8} & {3, 6}) == {2, 3, 6, 7}
    assert _eval("(#2 OR #3) AND #4") == {3, 6}
    assert _eval("#1 AND #2 NOT #4") == {2}
    assert _eval("#1 NOT #4 AND #2") == {2}  # (#1 NOT #4) AND #2
    assert _eval("#1 NOT (#4 AND #2)") == {1, 2, 4, 5, 6}
    assert _eval("#1 AND (#2 OR #3) NOT #4") == {2, 5}
    assert _eval("#3 OR #4 NOT #1") == {5, 6, 8}  # #3 OR (#4 NOT #1) = #3 OR {}
    assert canonical(parse("#1 AND (#2 OR #3) not #4")) == "(#1 AND (#2 OR #3)) NOT #4"
    assert canonical(parse("#1 or #2 and #3.2")) == "#1 OR (#2 AND #3.2)"


def test_deep_nesting_parses_without_recursion():
    depth = 190
    text = "(" * depth + "#1" + " OR #2)" * depth
    assert _eval(text) == SETS[1] | SETS[2]


def _history_with_random_sets(tmp_path, seed: int) -> tuple[SearchHistory, dict[int, set[int]]]:
    rng = random.Random(seed)
    history = SearchHistory(tmp_path / f"h{seed}.sqlite3")
    truth: dict[int, set[int]] = {}
    for n in range(1, 6):
        ids = rng.sample(range(1, 60), rng.randint(0, 30))
        number = history.begin_search(f"q{n}", "db")
        half = len(ids) // 2
        rows = [RowRecord(text=f"r{n}a", ids=ids[:half]), RowRecord(text=f"r{n}b", ids=ids[half:])]
        history.complete_search(number, rows, [Member(d, r) for r, d in enumerate(ids, 1)])
        truth[number] = set(ids)
        truth[number * 100 + 1] = set(ids[:half])
        truth[number * 100 + 2] = set(ids[half:])
    return history, truth


def _random_expression(rng: random.Random) -> str:
    parts = []
    for i in range(rng.randint(1, 6)):
        if i:
            parts.append(rng.choice(["AND", "OR", "NOT"]))
        ref = f"#{rng.randint(1, 5)}" + (f".{rng.randint(1, 2)}" if rng.random() < 0.3 else "")
        if rng.random() < 0.3:
            ref = f"({ref} {rng.choice(['AND', 'OR', 'NOT'])} #{rng.randint(1, 5)})"
        parts.append(ref)
    return " ".join(parts)


def test_sql_in_the_history_equals_python_sets(tmp_path):
    history, truth = _history_with_random_sets(tmp_path, seed=1)
    workbench = SearchWorkbench(history)
    rng = random.Random(7)

    def resolve(tok):
        return truth[tok.set_number * 100 + tok.row] if tok.row else truth[tok.set_number]

    for _ in range(150):
        text = _random_expression(rng)
        rpn = parse(text)
        expected = evaluate(rpn, resolve)
        sql, params = set_algebra.to_sql(rpn)
        assert history.expression_ids(sql, params) == expected, text
        assert workbench.count(text).count == len(expected), text
    history.close()


def test_expression_too_deep_for_sqlite_falls_back_to_python(tmp_path):
    history, truth = _history_with_random_sets(tmp_path, seed=2)
    text = "#1 OR (#3 NOT (" * 40 + "#2" + "))" * 40  # nested to the right: one subquery per level
    rpn = parse(text)
    sql, params = set_algebra.to_sql(rpn)
    assert history.expression_ids(sql, params) is None  # SQLite's parser stack overflows
    expected = evaluate(rpn, lambda tok: truth[tok.set_number])
    assert SearchWorkbench(history).count(text).count == len(expected)
    history.close()


def test_unknown_incomplete_and_row_references_are_errors_with_positions(tmp_path):
    history, _ = _history_with_random_sets(tmp_path, seed=3)
    running = history.begin_search("still running", "db")
    workbench = SearchWorkbench(history)
    with pytest.raises(ExpressionError, match=r"at position 8: there is no set #99"):
        workbench.count("#1 AND #99")
    with pytest.raises(ExpressionError, match=rf"at position 7: set #{running} is running"):
        workbench.count(f"#1 OR #{running}")
    with pytest.raises(ExpressionError, match=r"at position 1: search #2 has no row 3"):
        workbench.count("#2.3 OR #1")
    history.close()
