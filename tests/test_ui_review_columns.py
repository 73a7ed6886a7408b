"""The literature review table's Error column on the real window: a duplicate query's note is whole
in Wide mode, and its tooltip holds it (two scripted models propose the same query)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from support.fake_ollama import ModelScript

from kmds_desktop.config import Settings
from kmds_desktop.ui.literature.review_model import CHECKING, ReviewModel

WAIT = 30_000
LEFT = Qt.MouseButton.LeftButton
QUERY = "cystic & fibrosis & azithromycin"


def test_a_duplicate_querys_note_is_whole_in_wide_mode(qtbot, make_window, fake_ollama, pg_database) -> None:
    fake_ollama.models["first-model"] = ModelScript([QUERY])
    fake_ollama.models["second-model"] = ModelScript([QUERY.upper()])
    settings = Settings()
    qg = settings.query_generation
    qg.multi_model_enabled = True
    qg.models = ["first-model", "second-model"]
    qg.verbatim_query_models = list(qg.models)  # the models reply with their own tsqueries
    qg.ollama_host = fake_ollama.url
    qg.timeout_s = 30
    qg.queries_per_model = 1
    window = make_window(settings, auto_index=False,
                         literature_kwargs={"database": pg_database, "open_on_start": False})
    window.resize(1600, 1000)
    window.show()
    panel = window.literature
    qtbot.mouseClick(panel.question, LEFT)
    qtbot.keyClicks(panel.question, "Does azithromycin help in cystic fibrosis?")
    qtbot.mouseClick(panel.generate_button, LEFT)
    qtbot.waitUntil(lambda: panel.session.round is not None and panel.session.round.finished, timeout=WAIT)
    qtbot.waitUntil(lambda: all(r.validity != CHECKING for r in panel.review.rows()), timeout=WAIT)
    row = next(i for i, r in enumerate(panel.review.rows()) if r.note)
    note = panel.review.rows()[row].note
    assert "runs once" in note

    qtbot.mouseClick(panel.wide_button, LEFT)
    qtbot.waitUntil(lambda: not window.browser.isVisible(), timeout=WAIT)
    view = panel.review_view
    cell = panel.review.index(row, ReviewModel.COL_ERROR)
    shown = cell.data()  # the note, after a weak-match flag when the query matches nothing here
    assert shown.endswith(note) and cell.data(Qt.ItemDataRole.ToolTipRole) == shown
    need = view.fontMetrics().horizontalAdvance(shown)
    qtbot.waitUntil(lambda: view.columnWidth(ReviewModel.COL_ERROR) >= need, timeout=WAIT)
    assert view.columnWidth(ReviewModel.COL_QUERY) >= view.fontMetrics().horizontalAdvance(QUERY)
    assert not view.horizontalScrollBar().isVisible()
