"""With the default settings (no LLM), Generate writes the built-in generator's three queries and the
review table says, per query, which concepts and variants it used and why (clicked as a user does)."""

from __future__ import annotations

from PySide6.QtCore import Qt

from kmds_desktop.config import Settings
from kmds_desktop.ui.literature.panel import LiteraturePanel
from kmds_desktop.ui.literature.review_model import CHECKING, VALID, ReviewModel

WAIT = 30_000


def test_default_generation_gives_three_explained_queries(qtbot, jobs, pg_empty_database, literature_data):
    pg_empty_database.import_files([literature_data / "cf" / "corpus.jsonl"])
    settings = Settings()  # the defaults a new user gets: builtin:keywords, 3 queries
    settings.retrieval.semantic_row = False
    panel = LiteraturePanel(settings, jobs, database=pg_empty_database)
    qtbot.addWidget(panel)
    panel.resize(1600, 900)
    panel.show()
    qtbot.mouseClick(panel.question, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(panel.question, "Does Pseudomonas aeruginosa infection worsen lung function in cystic "
                                    "fibrosis patients?")
    qtbot.mouseClick(panel.generate_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.review.rowCount() == 3 and not panel.generating, timeout=WAIT)
    qtbot.waitUntil(lambda: all(r.validity != CHECKING for r in panel.review.rows()), timeout=WAIT)
    rows = panel.review.rows()
    assert [r.model for r in rows] == ["builtin:keywords"] * 3
    assert all(r.validity == VALID and (r.matches or 0) > 0 for r in rows)
    assert "&" in rows[0].query and "pseudomonas <-> aeruginosa" in rows[0].query.lower()
    tips = [panel.review.data(panel.review.index(i, ReviewModel.COL_QUERY), Qt.ItemDataRole.ToolTipRole)
            for i in range(3)]
    assert "Why: precise:" in tips[0] and "'Pseudomonas aeruginosa'" in tips[0]
    assert "Why: medium:" in tips[1] and "Why: broad:" in tips[2]
