"""A second search in the same window, and the documents and review tables between runs, driven by
clicks and typing on the real window (pytest-qt, offscreen) with the PostgreSQL test server.

Issue 21: a new question must not keep the previous search's rows ticked (Run selected would mix two
searches), New search clears the rows (asking before it discards queries that exist nowhere else),
and a new run clears the detail of a document of the previous one.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QLineEdit, QMessageBox, QPushButton

from kmds_desktop.config import Settings
from kmds_desktop.ui.literature.panel import LiteraturePanel
from kmds_desktop.ui.literature.review_model import CHECKING, ReviewModel

QUESTION = "Does azithromycin improve lung function in cystic fibrosis?"
OTHER = "Is tobramycin inhaled against Pseudomonas aeruginosa in children?"
WAIT = 30_000
LEFT = Qt.MouseButton.LeftButton


def _window(make_window, database: Any) -> tuple[Any, LiteraturePanel]:
    settings = Settings()
    qg = settings.query_generation
    qg.multi_model_enabled = True
    qg.models = ["builtin:keywords"]
    qg.queries_per_model = 2
    settings.literature.max_rows = 20
    window = make_window(settings, auto_index=False,
                         literature_kwargs={"database": database, "open_on_start": False})
    window.resize(1600, 1000)
    return window, window.literature


def _click(qtbot, button: QPushButton) -> None:
    assert button.isVisible() and button.isEnabled(), f"{button.text()!r} cannot be clicked"
    qtbot.mouseClick(button, LEFT)


def _ask(qtbot, panel: LiteraturePanel, question: str) -> None:
    qtbot.mouseClick(panel.question, LEFT)
    panel.question.selectAll()
    qtbot.keyClick(panel.question, Qt.Key.Key_Delete)
    qtbot.keyClicks(panel.question, question)


def _generate(qtbot, panel: LiteraturePanel) -> None:
    _click(qtbot, panel.generate_button)
    qtbot.waitUntil(lambda: panel.session.round is not None and panel.session.round.finished, timeout=WAIT)
    qtbot.waitUntil(lambda: not panel.generating, timeout=WAIT)
    _wait_checked(qtbot, panel)


def _wait_checked(qtbot, panel: LiteraturePanel) -> None:
    qtbot.waitUntil(lambda: all(r.validity != CHECKING for r in panel.review.rows()), timeout=WAIT)


def _run(qtbot, panel: LiteraturePanel) -> None:
    before = panel.session.last_run
    _click(qtbot, panel.run_button)
    qtbot.waitUntil(lambda: panel.session.last_run is not before, timeout=WAIT)
    qtbot.waitUntil(lambda: panel.run_button.isEnabled(), timeout=WAIT)


def _editor(panel: LiteraturePanel) -> QLineEdit | None:
    """The open in-place editor (a closed one lingers until its deferred delete)."""
    return next((e for e in panel.review_view.viewport().findChildren(QLineEdit) if e.isVisible()), None)


def _cell(panel: LiteraturePanel, row: int, column: int) -> QPoint:
    return panel.review_view.visualRect(panel.review.index(row, column)).center()


def _edit_row(qtbot, panel: LiteraturePanel, row: int, text: str) -> None:
    view = panel.review_view
    qtbot.mouseClick(view.viewport(), LEFT, pos=_cell(panel, row, ReviewModel.COL_QUERY))
    qtbot.mouseDClick(view.viewport(), LEFT, pos=_cell(panel, row, ReviewModel.COL_QUERY))
    editor = _editor(panel)
    assert editor is not None and editor.isVisible(), "no in-place editor opened"
    editor.selectAll()
    qtbot.keyClicks(editor, text)
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: panel.review.row(row).query == text, timeout=WAIT)


def _add_hand_written(qtbot, panel: LiteraturePanel, text: str) -> None:
    _click(qtbot, panel.add_button)
    editor = _editor(panel)
    assert editor is not None and editor.isVisible()
    qtbot.keyClicks(editor, text)
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: panel.review.row(panel.review.rowCount() - 1).query == text, timeout=WAIT)


def _click_document(qtbot, panel: LiteraturePanel, row: int) -> None:
    view = panel.documents_view
    pos = view.visualRect(panel.proxy.index(row, 1)).center()
    qtbot.mouseClick(view.viewport(), LEFT, pos=pos)


def test_a_new_question_unticks_the_previous_rows_and_new_search_clears_them(
        qtbot, make_window, pg_database) -> None:
    _window_, panel = _window(make_window, pg_database)
    _ask(qtbot, panel, QUESTION)
    _generate(qtbot, panel)
    first_round = [r.uid for r in panel.review.rows()]
    assert len(first_round) == 2
    _edit_row(qtbot, panel, 0, "cystic <-> fibrosis & lung")
    _add_hand_written(qtbot, panel, "azithromycin & cystic <-> fibrosis")
    _wait_checked(qtbot, panel)
    _run(qtbot, panel)
    assert panel.documents.rowCount() > 0
    _click_document(qtbot, panel, 0)
    assert panel.detail.toPlainText(), "a clicked document shows its detail"

    # Another question, Generate: the previous question's rows that stay are unticked.
    _ask(qtbot, panel, OTHER)
    _generate(qtbot, panel)
    rows = panel.review.rows()
    old = [r for r in rows if r.uid in first_round or r.query == "azithromycin & cystic <-> fibrosis"]
    assert old and all(not r.included for r in old), [(r.query, r.included) for r in old]
    new = [r for r in rows if r not in old]
    assert new and all(r.included and r.question == OTHER for r in new)
    assert panel.run_button.text() == f"Run selected ({len(new)})"
    assert "of the previous question were unticked" in panel.last_message[1]

    # A new run clears the detail of the previous search's document (issue 21, 4).
    _run(qtbot, panel)
    assert panel.detail.toPlainText() == "", "the detail still shows a document of the previous search"

    # New search: asks first (an edited row of this search has not run); Cancel keeps everything.
    _add_hand_written(qtbot, panel, "tobramycin & child:*")
    _click(qtbot, panel.new_search_button)
    box = panel.confirm_box
    assert isinstance(box, QMessageBox) and box.isVisible()
    assert "tobramycin & child:*" in box.text()
    qtbot.mouseClick(box.button(QMessageBox.StandardButton.Cancel), LEFT)
    qtbot.waitUntil(lambda: panel.confirm_box is None, timeout=WAIT)
    assert panel.review.rowCount() == len(rows) + 1 and panel.question.text() == OTHER

    _click(qtbot, panel.new_search_button)
    qtbot.mouseClick(panel.confirm_box.button(QMessageBox.StandardButton.Discard), LEFT)
    qtbot.waitUntil(lambda: panel.review.rowCount() == 0, timeout=WAIT)
    assert panel.question.text() == "" and panel.documents.rowCount() == 0
    assert panel.run_button.text() == "Run selected (0)" and not panel.run_button.isEnabled()
    assert panel.session.last_run is None and panel.detail.toPlainText() == ""

    # Nothing unrun to lose: New search clears at once, without asking.
    _ask(qtbot, panel, QUESTION)
    _generate(qtbot, panel)
    _click(qtbot, panel.new_search_button)
    assert panel.confirm_box is None and panel.review.rowCount() == 0


def test_leaving_wide_gives_the_title_its_room_back(qtbot, make_window, pg_database) -> None:
    """Run in Wide mode, leave Wide: "Found by" shrinks to its share and the Title stays readable, with
    no sideways scroll bar (issue 21, 3)."""
    window, panel = _window(make_window, pg_database)
    _click(qtbot, panel.wide_button)
    qtbot.waitUntil(lambda: not window.browser.isVisible(), timeout=WAIT)
    long_query = "(cystic <-> fibrosis | mucoviscidosis | pancreatic <-> insufficiency) & (lung | pulmonary)"
    _add_hand_written(qtbot, panel, long_query)
    _wait_checked(qtbot, panel)
    _run(qtbot, panel)
    view = panel.documents_view
    assert panel.documents.rowCount() > 0
    wide_found_by = view.columnWidth(panel.documents.COL_FOUND_BY)

    _click(qtbot, panel.wide_button)
    qtbot.waitUntil(lambda: window.browser.isVisible(), timeout=WAIT)
    qtbot.waitUntil(lambda: view.columnWidth(panel.documents.COL_FOUND_BY) < wide_found_by, timeout=WAIT)
    width = view.viewport().width()
    title = view.columnWidth(panel.documents.COL_TITLE)
    assert view.columnWidth(panel.documents.COL_FOUND_BY) <= width * 0.3 + 1
    assert title >= width * 0.25, (title, width)
    assert not view.horizontalScrollBar().isVisible()


def test_a_query_is_checked_while_it_is_typed(qtbot, make_window, pg_database) -> None:
    """While the editor is open, typing marks the row's check stale at once and the text is checked
    0.4 s after the last key, before Enter (issue 21, 7); Escape puts the old text back."""
    _window_, panel = _window(make_window, pg_database)
    _add_hand_written(qtbot, panel, "pseudomonas")
    _wait_checked(qtbot, panel)
    row = panel.review.row(0)
    assert row.validity == "valid" and row.matches

    view = panel.review_view
    qtbot.mouseClick(view.viewport(), LEFT, pos=_cell(panel, 0, ReviewModel.COL_QUERY))
    qtbot.mouseDClick(view.viewport(), LEFT, pos=_cell(panel, 0, ReviewModel.COL_QUERY))
    editor = _editor(panel)
    assert editor is not None and editor.isVisible()
    editor.end(False)
    qtbot.keyClicks(editor, " & (")
    status = panel.review.index(0, ReviewModel.COL_VALID)
    assert status.data() == "checking", "the old '✓ valid' stays beside a half-typed query"
    assert panel.review.index(0, ReviewModel.COL_MATCHES).data() == ""
    qtbot.waitUntil(lambda: status.data() == "✗ invalid", timeout=WAIT)
    assert editor.isVisible(), "checked while the editor is still open"
    assert editor.text() == "pseudomonas & ("

    qtbot.keyClicks(editor, "aeruginosa)")
    qtbot.waitUntil(lambda: status.data() == "✓ valid", timeout=WAIT)
    assert editor.isVisible() and editor.cursorPosition() == len("pseudomonas & (aeruginosa)")

    qtbot.keyClick(editor, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not editor.isVisible(), timeout=WAIT)
    assert panel.review.row(0).query == "pseudomonas", "Escape puts the text of before back"
    _wait_checked(qtbot, panel)
    assert panel.review.row(0).validity == "valid"


def test_a_slow_model_names_the_limit_that_applied_and_stop_ends_waiting(qtbot, make_window, fake_ollama,
                                                                         pg_database) -> None:
    """A model past Query generation's time limit per attempt is told so (not "Preferences → LLM"),
    and after Stop generating no model is still "waiting" (issue 21, 8)."""
    from support.fake_ollama import ModelScript

    fake_ollama.models["hung:1b"] = ModelScript(hang=True)
    fake_ollama.models["slow:1b"] = ModelScript(["never & seen"], delay=20)
    fake_ollama.models["later:1b"] = ModelScript(["never & asked"])
    window, panel = _window(make_window, pg_database)
    qg = window.settings.query_generation
    qg.models, qg.ollama_host, qg.queries_per_model, qg.timeout_s = ["hung:1b"], fake_ollama.url, 1, 1
    _ask(qtbot, panel, QUESTION)
    _generate(qtbot, panel)
    level, text = panel.last_message
    assert "within 1 s" in text and "Preferences → Query generation → Time limit per attempt" in text, text
    assert "Preferences → LLM" not in text

    qg.models, qg.timeout_s = ["slow:1b", "later:1b"], 60
    _click(qtbot, panel.generate_button)
    qtbot.waitUntil(lambda: any(r.model == "slow:1b" for r in fake_ollama.completion_requests()),
                    timeout=WAIT)
    assert "later:1b: waiting" in panel.progress_label.text()
    assert panel.generate_button.text() == "Stop generating"
    _click(qtbot, panel.generate_button)
    qtbot.waitUntil(lambda: not panel.generating, timeout=WAIT)
    line = panel.progress_label.text()
    assert "waiting" not in line, line
    assert "slow:1b: stopped" in line and "later:1b: not asked (stopped)" in line, line


def test_weak_queries_are_flagged_in_the_review_table(qtbot, make_window, pg_database) -> None:
    """Issue 25, 4: a valid query with a term no document has, or matching nothing, is not just
    "✓ valid": the row says which term, in the status, its tooltip and the note column."""
    _window_, panel = _window(make_window, pg_database)
    _add_hand_written(qtbot, panel, "pseudomonas | fungalxyzzy:*")
    _add_hand_written(qtbot, panel, "pseudomonas & qqqzzzy")
    _add_hand_written(qtbot, panel, "pseudomonas")
    _wait_checked(qtbot, panel)
    review = panel.review
    invented = review.index(0, ReviewModel.COL_VALID)
    assert invented.data() == "⚠ valid, weak"
    assert "no document has 'fungalxyzzi:*'" in invented.data(Qt.ItemDataRole.ToolTipRole)
    assert int(review.index(0, ReviewModel.COL_MATCHES).data().replace(",", "")) > 0
    empty = review.index(1, ReviewModel.COL_VALID)
    assert empty.data() == "⚠ valid, weak"
    assert "no document matches" in empty.data(Qt.ItemDataRole.ToolTipRole)
    assert "Weak: no document matches" in review.index(1, ReviewModel.COL_ERROR).data()
    assert review.index(2, ReviewModel.COL_VALID).data() == "✓ valid"
