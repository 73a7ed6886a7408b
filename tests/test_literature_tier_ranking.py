"""A broad AND row ranked within the fast index's impact tier, as a user meets it on a database the
size of PubMed: the row returns true matches with their exact scores, and the window, the CLI and
the search report say that its order is the tier's, not the one ranking every match would give.

The shared corpora are small, so the row budget is lowered here (to one posting) to put their broad
rows over it, as a broad row at PubMed size is (real PostgreSQL, the real tantivy index, real Qt
offscreen, the CLI's own entry point)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit

from kmds_desktop.app.literature_data import build_topk_index
from kmds_desktop.config import Settings
from kmds_desktop.literature.store import topk_tiers

WAIT = 60_000
LEFT = Qt.MouseButton.LeftButton
TIERED = "was ranked within the fast index's impact tier"


def _broad_row(db: Any) -> str:
    """Two of the most frequent words whose lexeme is the word itself, as a user types them."""
    index = db.topk_index()
    rows = db.run(lambda c: c.execute(
        "SELECT word FROM ts_stat('SELECT search_vector FROM document') ORDER BY ndoc DESC LIMIT 200"
    ).fetchall())
    words = []
    for (word,) in rows:
        word = str(word)
        printed = db.run(lambda c, w=word: c.execute("SELECT to_tsquery('english', %s)::text",
                                                     (w,)).fetchone()[0])
        if word.isalpha() and len(word) > 4 and printed == f"'{word}'" and word in index.tiers.thresholds:
            words.append(word)
    assert len(words) >= 2, words
    return f"{words[0]} & {words[1]}"


@pytest.fixture()
def tiered(pg_database: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    before = pg_database.topk_index()
    build_topk_index(pg_database)  # in this test's data folder, where the CLI finds it too
    monkeypatch.setattr(topk_tiers, "ROW_BUDGET", 1)
    yield pg_database
    pg_database.attach_topk_index(before)


def _postgres_ids(db: Any, query: str) -> set[int]:
    return {int(r[0]) for r in db.run(lambda c: c.execute(
        "SELECT id FROM document WHERE withdrawn_date IS NULL AND "
        "search_vector @@ to_tsquery('english', %s)", (query,)).fetchall())}


def test_a_broad_row_over_the_budget_is_ranked_in_a_tier_and_says_so(
        tiered: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    query = _broad_row(tiered)
    ranked = tiered.find_abstract_ids_ranked(query, 20, ranking="bm25")
    assert ranked.approximate and len(ranked) == 20
    assert {i for i, _ in ranked} <= _postgres_ids(tiered, query)
    assert int(tiered.count_matches(query)) == len(_postgres_ids(tiered, query))  # counts stay exact
    monkeypatch.setattr(topk_tiers, "ROW_BUDGET", 200_000)  # the default: these rows fit it
    exact = tiered.find_abstract_ids_ranked(query, 20, ranking="bm25")
    assert not exact.approximate and len(exact) == 20
    assert not tiered.find_abstract_ids_ranked(query, 20, ranking="idf").approximate


def test_the_window_the_cli_and_the_report_say_the_row_was_ranked_in_a_tier(
        qtbot, make_window, tiered: Any, pg_dsn: str, tmp_path: Path, capsys) -> None:
    from kmds_desktop.cli import main

    query = _broad_row(tiered)
    settings = Settings()
    settings.retrieval.fulltext_ranking = "bm25"
    settings.literature.max_rows = 20
    window = make_window(settings, auto_index=False,
                         literature_kwargs={"database": tiered, "open_on_start": False})
    window.resize(1600, 1000)
    panel = window.literature
    messages: list[tuple[str, str]] = []
    window.messages.message_shown.connect(lambda msg: messages.append((msg.level, msg.text)))

    qtbot.mouseClick(panel.add_button, LEFT)
    editor = panel.review_view.viewport().findChild(QLineEdit)
    assert editor is not None and editor.isVisible()
    editor.selectAll()
    qtbot.keyClicks(editor, query)
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: panel.review.row(0).query == query and panel.review.row(0).matches, timeout=WAIT)
    qtbot.waitUntil(lambda: panel.run_button.isEnabled(), timeout=WAIT)
    qtbot.mouseClick(panel.run_button, LEFT)
    qtbot.waitUntil(lambda: panel.session.last_run is not None, timeout=WAIT)
    qtbot.waitUntil(lambda: any(TIERED in text for _, text in messages), timeout=WAIT)
    level, text = next(m for m in messages if TIERED in m[1])
    assert level == "info" and text.startswith("Row #1 was ranked") and "exact BM25 score" in text
    assert panel.documents.rowCount() == 20
    assert panel.session.last_run.result.queries[0].ranked_in_tier
    # the row's IDs cell says it too, and its tooltip says what it means and how to change it
    from kmds_desktop.ui.literature.review_model import ReviewModel

    cell = panel.review.index(0, ReviewModel.COL_RETURNED)
    assert cell.data() == "20 (tier)"
    tip = cell.data(Qt.ItemDataRole.ToolTipRole)
    assert tip.startswith("Ranked within the fast index's impact tier") and "Preferences > Retrieval" in tip
    view = panel.review_view
    assert view.columnWidth(ReviewModel.COL_RETURNED) >= view.fontMetrics().horizontalAdvance("20 (tier)")

    # the search is in the history: its report says how the row was ranked, in both places
    out = tmp_path / "report.md"
    assert main(["literature", "report", "1", "--out", str(out)]) == 0, capsys.readouterr().err
    report = out.read_text(encoding="utf-8")
    assert f"- Full-text ranking: Row #1 {TIERED}" in report
    methods = report.split("## Methods summary", 1)[1].split("## Search #1", 1)[0]
    assert f"Row #1 {TIERED}" in methods  # a methods section must not claim an exact order

    # the CLI's history says it of the set
    assert main(["literature", "history", "show", "1"]) == 0
    shown = capsys.readouterr().out
    assert f"ranking:    Row #1 {TIERED}" in shown, shown
    assert main(["literature", "topk", "status", "--dsn", pg_dsn]) == 0
    status = capsys.readouterr().out
    terms = len(tiered.topk_index().tiers.thresholds)
    assert f"impact tiers: {terms:,} terms; a broad AND row walking more than 1 postings" in status, status


def test_the_exact_order_setting_walks_every_match(tiered: Any) -> None:
    """``retrieval.exact_broad_rows``: the agent's row is the exact walk, not the tier's."""
    from kmds_desktop.config import RetrievalSettings
    from kmds_desktop.literature.queries.agent import QueryAgent

    query = _broad_row(tiered)
    exact = tiered.find_abstract_ids_ranked(query, 20, ranking="bm25", exact_order=True)
    assert not exact.approximate
    for setting, tier in ((False, True), (True, False)):
        agent = QueryAgent(tiered, retrieval=RetrievalSettings(exact_broad_rows=setting))
        stat = agent.run_reviewed_queries([query], max_rows=20, fetch=False).queries[0]
        assert stat.ok and stat.ranked_in_tier is tier
        if setting:
            assert stat.ids == [i for i, _ in exact]
