"""A review's strategy: the searches it runs (question, rows as they ran, documents per row), as text.

Why saved with the review and not only read from the search history: a history set can be deleted or
renamed, and an update must re-run exactly what the review searched; the report must say what was searched
when. A strategy is a list of searches (a review may have added several runs); each search is the plain
dict ``{"question", "rows": [{"text", "provenance"}], "max_rows", "from_set"}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kmds_desktop.literature.strategy.history import HistoryError, SavedSet, SearchHistory, describe_row

#: Documents per row when a search did not record its own limit (the literature setting's default).
DEFAULT_MAX_ROWS = 100


def search_of_set(saved: SavedSet) -> dict[str, Any]:
    """The search a complete history set ran, as a strategy's search (rows that never ran are left out:
    an update re-runs what found the records)."""
    rows = [{"text": r.text, "provenance": dict(r.provenance)} for r in saved.rows if not r.invalid]
    return {
        "question": saved.question,
        "rows": rows,
        "max_rows": int(saved.details.get("max_rows") or DEFAULT_MAX_ROWS),
        "from_set": saved.number,
    }


def searches_of_sets(history: SearchHistory, numbers: Sequence[int]) -> list[dict[str, Any]]:
    """The searches of history sets ``numbers`` (a combination stands for the searches it combines)."""
    out: list[dict[str, Any]] = []
    seen: set[int] = set()
    pending = list(numbers)
    while pending:
        number = pending.pop(0)
        if number in seen:
            continue
        seen.add(number)
        saved = history.complete_set(number)
        if saved.kind == "combination":
            pending += [int(n) for n in saved.details.get("operands", [])]
            continue
        search = search_of_set(saved)
        if search["rows"] and search not in out:
            out.append(search)
    if not out:
        raise HistoryError(f"set{'s' if len(numbers) != 1 else ''} "
                           f"{', '.join('#' + str(n) for n in numbers)} ran no row to save as a strategy")
    return out


def strategy_text(searches: Sequence[Mapping[str, Any]]) -> str:
    """The strategy as a report prints it: each search's question, then its numbered rows and kind."""
    lines = []
    for n, search in enumerate(searches, start=1):
        origin = f" (from history set #{search['from_set']})" if search.get("from_set") else ""
        lines.append(f"Search {n}{origin}: {search.get('question') or '(no question)'}; "
                     f"up to {int(search.get('max_rows') or DEFAULT_MAX_ROWS):,} documents per row")
        for i, row in enumerate(search.get("rows") or [], start=1):
            lines.append(f"  {i}. {row.get('text', '')}  [{describe_row(dict(row.get('provenance') or {}))}]")
    return "\n".join(lines)


def rows_of(search: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(text, provenance) of a search's rows, as the workbench runs them."""
    return [(str(r.get("text", "")), dict(r.get("provenance") or {})) for r in search.get("rows") or []]
