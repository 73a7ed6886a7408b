"""The search history window, by clicking: live count and errors, combine, known papers, report, edits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import rispy
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QLineEdit, QMessageBox

from kmds_desktop.literature.strategy.history import SearchHistory
from kmds_desktop.literature.strategy.workbench import SearchWorkbench
from kmds_desktop.ui.literature.search_history import SearchHistoryDialog

WAIT = 20_000
TITLES = {"h:1": "Aspirin prevents stroke", "h:2": "Aspirin and heart attack",
          "h:3": "Statins prevent stroke", "h:4": "Heart failure and statins", "h:5": "Gardening"}


@pytest.fixture()
def workbench(pg_empty_database, tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": k, "source": "test", "title": v}) + "\n"
                              for k, v in TITLES.items()))
    pg_empty_database.import_files([corpus])
    history = SearchHistory(tmp_path / "history.sqlite3")
    wb = SearchWorkbench(history, pg_empty_database)
    wb.run("aspirin", [("aspirin", {"kind": "hand-written"})], max_rows=50)  # #1: h:1, h:2
    wb.run("statins", [("statin", {"kind": "generated", "model": "m", "attempt": 1})], max_rows=50)  # #2
    yield wb
    history.close()


def _dialog(qtbot, workbench, jobs) -> SearchHistoryDialog:
    dialog = SearchHistoryDialog(workbench, jobs)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: dialog.table.rowCount() == 2, timeout=WAIT)
    return dialog


def _click(qtbot, button) -> None:
    assert button.isEnabled(), button.text()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def test_combine_check_and_export_by_clicking(qtbot, workbench, jobs, tmp_path, monkeypatch):
    dialog = _dialog(qtbot, workbench, jobs)
    assert dialog.table.item(0, 0).text() == "#1" and dialog.table.item(1, 4).text() == "statins"

    # A bad expression: the error names the position, nothing can be saved.
    qtbot.keyClicks(dialog.expression, "#1 OR OR #2")
    qtbot.waitUntil(lambda: "position 7" in dialog.count_label.text(), timeout=WAIT)
    assert not dialog.combine_button.isEnabled()
    dialog.expression.clear()
    qtbot.keyClicks(dialog.expression, "#1 OR #2")
    qtbot.waitUntil(lambda: dialog.count_label.text().startswith("4 documents"), timeout=WAIT)
    _click(qtbot, dialog.combine_button)
    qtbot.waitUntil(lambda: dialog.table.rowCount() == 3, timeout=WAIT)
    assert dialog.selected_number() == 3 and dialog.table.item(2, 3).text() == "combination"
    assert {m.external_id for m in workbench.history.members(3)} == {"h:1", "h:2", "h:3", "h:4"}

    # Known papers on the new set: one in the database and found, one missing from the database.
    for line in ("h:3", "h:5", "PMID 999999999"):
        qtbot.keyClicks(dialog.known_edit, line)
        qtbot.keyClick(dialog.known_edit, Qt.Key.Key_Return)
    _click(qtbot, dialog.check_button)
    qtbot.waitUntil(lambda: dialog.last_check is not None, timeout=WAIT)
    text = dialog.check_view.toPlainText()
    assert "3 known papers: 2 in the database, 1 not in the database" in text
    assert "#3 '#1 OR #2': finds 1 of 2, recall 50.0%" in text and "Gardening" in text
    assert "lacks aspirin" in text and "lacks statin" in text

    report = tmp_path / "report.md"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(report), "Markdown (*.md)"))
    _click(qtbot, dialog.export_button)
    qtbot.waitUntil(lambda: dialog.last_report is not None, timeout=WAIT)
    written = report.read_text()
    assert "# Search report: #1 OR #2" in written and "recall 50.0%" in written
    assert "| #1.1 | full-text | `aspirin` | hand-written | 2 | 2 | 2 |" in written

    # The rows behind the combination: they share nothing; each model's documents are its own.
    _click(qtbot, dialog.overlap_button)
    qtbot.waitUntil(lambda: dialog.check_view.toPlainText().startswith("Rows of #1, #2"), timeout=WAIT)
    overlap = dialog.overlap_markdown
    assert "| #1.1 | full-text | 2 | 2 | — | 0 (0.00) |" in overlap and "| m | 1 | 2 | 2 |" in overlap
    assert "| hand-written | 1 | 2 | 2 |" in overlap
    # Shown as real tables, not Markdown pipes (issue 21, 6).
    from PySide6.QtGui import QTextTable

    shown = dialog.check_view.toPlainText()
    assert "|" not in shown and "---" not in shown, shown
    frames = dialog.check_view.document().rootFrame().childFrames()
    tables = [f for f in frames if isinstance(f, QTextTable)]
    assert tables and tables[0].columns() >= 5
    cells = [tables[0].cellAt(1, c).firstCursorPosition().block().text() for c in range(4)]
    assert cells == ["#1.1", "full-text", "2", "2"], cells


def test_rename_rerun_and_delete_by_clicking(qtbot, workbench, jobs, monkeypatch):
    dialog = _dialog(qtbot, workbench, jobs)
    dialog.select_set(1)
    monkeypatch.setattr("kmds_desktop.ui.literature.search_history.QInputDialog.getText",
                        lambda *a, **k: ("aspirin strategy", True))
    _click(qtbot, dialog.rename_button)
    qtbot.waitUntil(lambda: dialog.table.item(0, 4).text().startswith("aspirin strategy"), timeout=WAIT)

    _click(qtbot, dialog.rerun_button)
    qtbot.waitUntil(lambda: dialog.table.rowCount() == 3, timeout=WAIT)
    assert "re-run of #1" in dialog.status.text() and "0 added, 0 removed" in dialog.status.text()
    assert dialog.table.item(2, 3).text() == "re-run"

    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    dialog.select_set(2)
    _click(qtbot, dialog.delete_button)
    qtbot.waitUntil(lambda: dialog.table.rowCount() == 2, timeout=WAIT)
    assert [dialog.table.item(r, 0).text() for r in range(2)] == ["#1", "#3"]
    assert Path(workbench.history.path).exists()


def test_journey_two_searches_combined_checked_and_reported_in_the_window(
        qtbot, make_window, pg_database, tmp_path, monkeypatch):
    """Run two searches in the literature panel, combine them, check known papers, export the report."""
    from kmds_desktop.config import Settings
    from kmds_desktop.ui.literature.review_model import CHECKING

    settings = Settings()
    settings.query_generation.models = ["builtin:keywords"]
    settings.literature.max_rows = 20
    window = make_window(settings, auto_index=False,
                         literature_kwargs={"database": pg_database, "open_on_start": False})
    panel = window.literature

    def search(query: str) -> None:
        before = panel.session.last_recorded
        if panel.review.rowCount():  # the previous search's row goes: select it, click Remove
            panel.review_view.selectRow(0)
            _click(qtbot, panel.remove_button)
        _click(qtbot, panel.add_button)
        editor = panel.review_view.viewport().findChild(QLineEdit)
        assert editor is not None and editor.isVisible()
        editor.selectAll()
        qtbot.keyClicks(editor, query)
        qtbot.keyClick(editor, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: panel.review.rowCount() == 1 and panel.review.row(0).query == query,
                        timeout=WAIT)
        qtbot.waitUntil(lambda: all(r.validity != CHECKING for r in panel.review.rows()), timeout=WAIT)
        qtbot.waitUntil(panel.run_button.isEnabled, timeout=WAIT)
        _click(qtbot, panel.run_button)
        qtbot.waitUntil(lambda: panel.session.last_recorded not in (None, before), timeout=WAIT)

    search("cystic <-> fibrosis & calcium")
    first = [d.get("external_id") for d in panel.session.documents]
    search("mucus & viscosity")
    second = [d.get("external_id") for d in panel.session.documents]
    assert panel.session.last_recorded == 2 and first and second

    _click(qtbot, panel.history_button)
    dialog = panel.history_dialog
    qtbot.waitUntil(lambda: dialog.table.rowCount() == 2, timeout=WAIT)
    # No question was typed: a search is titled by its rows.
    assert [dialog.table.item(r, 4).text() for r in range(2)] == ["cystic <-> fibrosis & calcium",
                                                                   "mucus & viscosity"]
    qtbot.keyClicks(dialog.expression, "#1 OR #2")
    union = set(first) | set(second)
    qtbot.waitUntil(lambda: dialog.count_label.text().startswith(f"{len(union)} documents"), timeout=WAIT)
    _click(qtbot, dialog.combine_button)
    qtbot.waitUntil(lambda: dialog.table.rowCount() == 3 and dialog.selected_number() == 3, timeout=WAIT)

    # Known papers: one from each search, and one that is in no database here.
    for line in (first[0], second[0], "PMID 999999999"):
        qtbot.keyClicks(dialog.known_edit, line)
        qtbot.keyClick(dialog.known_edit, Qt.Key.Key_Return)
    _click(qtbot, dialog.check_button)
    qtbot.waitUntil(lambda: dialog.last_check is not None, timeout=WAIT)
    assert "3 known papers: 2 in the database, 1 not in the database" in dialog.check_view.toPlainText()
    assert "#3 '#1 OR #2': finds 2 of 2, recall 100.0%" in dialog.check_view.toPlainText()

    report = tmp_path / "strategy.md"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(report), "Markdown (*.md)"))
    _click(qtbot, dialog.export_button)
    qtbot.waitUntil(lambda: dialog.last_report is not None, timeout=WAIT)
    text = report.read_text()
    assert "`cystic <-> fibrosis & calcium` | hand-written" in text and "`mucus & viscosity`" in text
    assert f"- **Documents in the set**: {len(union)}" in text and "recall 100.0%" in text

    # The combination's documents, fetched and exported like any search's; read back with rispy.
    ris = tmp_path / "combined.ris"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(ris), "RIS (*.ris)"))
    _click(qtbot, dialog.documents_button)
    qtbot.waitUntil(lambda: dialog.last_documents is not None, timeout=WAIT)
    assert len(rispy.loads(ris.read_text())) == len(union)


def test_unreadable_pasted_ids_are_reported_and_the_rest_checked(qtbot, workbench, jobs):
    """One typo among the pasted IDs no longer blocks the check: the readable ones are checked and
    the unreadable one is named, with its position, above the check."""
    dialog = _dialog(qtbot, workbench, jobs)
    dialog.table.selectRow(0)
    for line in ("h:3", "not/an id", "h:1"):
        qtbot.keyClicks(dialog.known_edit, line)
        qtbot.keyClick(dialog.known_edit, Qt.Key.Key_Return)
    _click(qtbot, dialog.check_button)
    qtbot.waitUntil(lambda: dialog.last_check is not None, timeout=WAIT)
    text = dialog.check_view.toPlainText()
    assert "Not checked: 2 of 4 pasted items could not be read" in text, text
    assert "pasted item 2: 'not/an' is not a PMID" in text and "'id'" in text
    assert "2 known papers: 2 in the database" in text
    assert "2 pasted items not read" in dialog.status.text()


def test_known_papers_box_keeps_its_text_when_the_window_is_reopened(qtbot, workbench, jobs):
    """What was pasted lives in the literature session: a history window made again shows it."""
    from kmds_desktop.app.literature import LiteratureSession

    session = LiteratureSession()
    first = SearchHistoryDialog(workbench, jobs, known=session.known_papers)
    qtbot.addWidget(first)
    first.show()
    qtbot.mouseClick(first.known_edit.viewport(), Qt.MouseButton.LeftButton)
    qtbot.keyClicks(first.known_edit, "h:3")
    qtbot.keyClick(first.known_edit, Qt.Key.Key_Return)
    qtbot.keyClicks(first.known_edit, "PMID 999999999")
    qtbot.keyClick(first, Qt.Key.Key_Escape)  # closed
    assert not first.isVisible()
    first.deleteLater()

    again = SearchHistoryDialog(workbench, jobs, known=session.known_papers)
    qtbot.addWidget(again)
    again.show()
    assert again.known_edit.toPlainText() == "h:3\nPMID 999999999"


def test_one_set_is_counted_in_the_singular(qtbot, workbench, jobs):
    workbench.history.delete(2)
    dialog = SearchHistoryDialog(workbench, jobs)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: dialog.table.rowCount() == 1, timeout=WAIT)
    assert dialog.status.text() == "1 set in the search history"


def test_one_document_is_counted_in_the_singular(qtbot, workbench, jobs):
    workbench.run("gardening", [("gardening", {"kind": "hand-written"})], max_rows=50)  # #3: h:5
    dialog = SearchHistoryDialog(workbench, jobs)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: dialog.table.rowCount() == 3, timeout=WAIT)
    qtbot.keyClicks(dialog.expression, "#3")
    qtbot.waitUntil(lambda: "read as" in dialog.count_label.text(), timeout=WAIT)
    assert dialog.count_label.text().startswith("1 document  —  read as #3")
    _click(qtbot, dialog.combine_button)
    qtbot.waitUntil(lambda: dialog.status.text().startswith("Saved #4"), timeout=WAIT)
    assert dialog.status.text() == "Saved #4: 1 document (#3)"


def test_the_known_papers_check_shows_questions_and_queries_whole(qtbot, workbench, jobs):
    question = "Does aspirin prevent stroke or heart attack in adults over sixty years of age?"
    query = "(aspirin | acetylsalicylic) & (stroke | heart | attack | infarction)"
    workbench.run(question, [(query, {"kind": "hand-written"})], max_rows=50)  # #3
    dialog = SearchHistoryDialog(workbench, jobs)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: dialog.table.rowCount() == 3, timeout=WAIT)
    dialog.select_set(3)
    qtbot.keyClicks(dialog.known_edit, "h:1")
    _click(qtbot, dialog.check_button)
    qtbot.waitUntil(lambda: dialog.last_check is not None, timeout=WAIT)
    text = dialog.check_view.toPlainText()
    assert f"#3 {question!r}: finds 1 of 1" in text
    assert f"#3.1 {query!r}: 1 of 1" in text
    assert "…" not in text and text.startswith("1 known paper: 1 in the database")


def test_a_check_goes_when_another_set_is_selected(qtbot, workbench, jobs):
    dialog = _dialog(qtbot, workbench, jobs)
    dialog.select_set(1)
    qtbot.keyClicks(dialog.known_edit, "h:1")
    _click(qtbot, dialog.check_button)
    qtbot.waitUntil(lambda: dialog.last_check is not None, timeout=WAIT)
    assert dialog.status.text().startswith("#1 finds 1 of 1")
    dialog.refresh(select=1)  # the same set after a refresh: the check stays
    qtbot.waitUntil(lambda: not jobs.is_busy("history.list"), timeout=WAIT)
    qtbot.wait(100)
    assert "#1 'aspirin': finds 1 of 1" in dialog.check_view.toPlainText()

    dialog.select_set(2)  # e.g. a new search recorded while the window was closed selects it
    assert dialog.check_view.toPlainText() == ""
    assert dialog.status.text() == "2 sets in the search history"
    _click(qtbot, dialog.overlap_button)
    qtbot.waitUntil(lambda: "Rows of #2" in dialog.check_view.toPlainText(), timeout=WAIT)
    dialog.select_set(1)
    assert dialog.check_view.toPlainText() == "" and dialog.overlap_markdown == ""
    assert dialog.known_edit.toPlainText() == "h:1"  # the pasted papers stay for the next check


def test_a_row_overlap_that_ends_after_another_set_was_selected_is_not_shown_under_it(qtbot, workbench, jobs):
    """The overlap of #1 finishing after the user selected #2 was rendered under #2, as #2's."""
    dialog = _dialog(qtbot, workbench, jobs)
    dialog.table.selectRow(0)
    assert dialog.selected_number() == 1
    held = jobs.submit  # the job is started now and its result delivered after the selection changes
    results: list = []

    def submit_later(*args, **kwargs):
        results.append(kwargs.pop("on_result"))
        return held(*args, **kwargs)

    jobs.submit = submit_later
    try:
        _click(qtbot, dialog.overlap_button)
    finally:
        jobs.submit = held
    qtbot.waitUntil(lambda: not jobs.is_busy(), timeout=WAIT)
    dialog.table.selectRow(1)
    assert dialog.selected_number() == 2
    results[0]("| #1.1 | full-text | 2 | 2 |")  # the overlap of #1 arrives now
    assert dialog.check_view.toPlainText() == "" and dialog.overlap_markdown == ""
    assert "finished while #2 was selected" in dialog.status.text()
