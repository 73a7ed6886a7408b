"""Literature journeys on the real main window, driven by clicks and typing (pytest-qt, offscreen).

Real parts: the window and its widgets, the PostgreSQL test server with the shared corpora, the
fake Ollama server through the real ``ollama`` client, the built-in keyword generator, and the CLI.
Each test is one journey a researcher makes; waits are on the window's own state, never on time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QFileDialog, QLineEdit, QPushButton
from support.fake_ollama import ModelScript

from kmds_desktop.app.search_log import load_search_log, without_volatile
from kmds_desktop.config import Settings
from kmds_desktop.ui.literature.documents_model import DocumentsModel
from kmds_desktop.ui.literature.panel import LiteraturePanel
from kmds_desktop.ui.literature.review_model import CHECKING, VALID, ReviewModel

QUESTION = "Does azithromycin improve lung function in cystic fibrosis?"
WAIT = 30_000
LEFT = Qt.MouseButton.LeftButton


def _settings(models: list[str], host: str = "http://127.0.0.1:9", per_model: int = 1,
              timeout_s: float = 30, max_rows: int = 20) -> Settings:
    settings = Settings()
    qg = settings.query_generation
    qg.multi_model_enabled = True
    qg.models = models
    qg.verbatim_query_models = [m for m in models if not m.startswith("builtin:")]  # scripted tsqueries
    qg.queries_per_model = per_model
    qg.ollama_host = host
    qg.timeout_s = timeout_s
    settings.literature.max_rows = max_rows
    return settings


def _window(make_window, settings: Settings, database: Any) -> tuple[Any, LiteraturePanel]:
    window = make_window(settings, auto_index=False,
                         literature_kwargs={"database": database, "open_on_start": False})
    window.resize(1600, 1000)
    panel = window.literature
    return window, panel


def _click(qtbot, button: QPushButton) -> None:
    assert button.isVisible() and button.isEnabled(), f"{button.text()!r} cannot be clicked"
    qtbot.mouseClick(button, LEFT)


def _ask(qtbot, panel: LiteraturePanel, question: str = QUESTION) -> None:
    panel.question.clear()
    qtbot.mouseClick(panel.question, LEFT)
    qtbot.keyClicks(panel.question, question)


def _wait_generated(qtbot, panel: LiteraturePanel) -> None:
    qtbot.waitUntil(lambda: panel.session.round is not None and panel.session.round.finished, timeout=WAIT)
    qtbot.waitUntil(lambda: not panel.generating, timeout=WAIT)


def _wait_checked(qtbot, panel: LiteraturePanel) -> None:
    qtbot.waitUntil(lambda: all(r.validity != CHECKING for r in panel.review.rows()), timeout=WAIT)


def _wait_run(qtbot, panel: LiteraturePanel, runs_before: Any) -> None:
    qtbot.waitUntil(lambda: panel.session.last_run is not runs_before, timeout=WAIT)
    qtbot.waitUntil(lambda: panel.run_button.isEnabled(), timeout=WAIT)


def _cell_centre(panel: LiteraturePanel, row: int, column: int) -> QPoint:
    return panel.review_view.visualRect(panel.review.index(row, column)).center()


def _type_into_editor(qtbot, panel: LiteraturePanel, text: str) -> None:
    editor = panel.review_view.viewport().findChild(QLineEdit)
    assert editor is not None and editor.isVisible(), "no in-place editor opened"
    editor.selectAll()
    qtbot.keyClicks(editor, text)
    qtbot.keyClick(editor, Qt.Key.Key_Return)


def _export_log_by_menu(qtbot, panel: LiteraturePanel, path: Path, monkeypatch) -> None:
    """Export > Search log as JSON, with the file dialog answered (the one part not clicked)."""
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *_a, **_k: (str(path), "JSON (*.json)"))
    action = next(a for a in panel.export_button.menu().actions() if a.text().startswith("Search log"))
    assert panel.export_button.isEnabled()
    action.trigger()
    qtbot.waitUntil(path.exists, timeout=WAIT)
    qtbot.waitUntil(lambda: "Search log written" in panel.progress_label.text(), timeout=WAIT)


def test_hand_written_query_runs_and_every_column_is_readable(qtbot, make_window, pg_database) -> None:
    window, panel = _window(make_window, _settings(["builtin:keywords"]), pg_database)
    _click(qtbot, panel.wide_button)
    assert panel.wide_button.isChecked() and not window.browser.isVisible() and not window.ask.isVisible()

    # Add query: the button's click carries a bool; the row opens for typing.
    _click(qtbot, panel.add_button)
    assert panel.review.rowCount() == 1 and panel.review.row(0).model == "hand-written"
    _type_into_editor(qtbot, panel, "cystic <-> fibrosis & pseudomonas")
    qtbot.waitUntil(lambda: panel.review.row(0).query == "cystic <-> fibrosis & pseudomonas", timeout=WAIT)
    _wait_checked(qtbot, panel)
    row = panel.review.row(0)
    assert row.validity == VALID and row.included and row.matches > 0
    assert panel.run_button.text() == "Run selected (1)"

    _click(qtbot, panel.run_button)
    _wait_run(qtbot, panel, None)
    docs = panel.documents
    assert docs.rowCount() == row.returned > 0
    # Best first: the view lists the merged rank order, with a rank column.
    shown = [panel.proxy.index(r, DocumentsModel.COL_RANK).data() for r in range(panel.proxy.rowCount())]
    assert shown == [str(i) for i in range(1, docs.rowCount() + 1)]
    first = docs.document(panel.proxy.mapToSource(panel.proxy.index(0, 0)).row())
    assert int(first.id) == panel.session.last_run.result.ids[0]
    # Sorting by another column still works, and clicking Rank brings the rank order back.
    header = panel.documents_view.horizontalHeader()
    qtbot.mouseClick(header.viewport(), LEFT, pos=QPoint(header.sectionViewportPosition(
        DocumentsModel.COL_YEAR) + 5, header.height() // 2))
    assert header.sortIndicatorSection() == DocumentsModel.COL_YEAR

    # Every review column readable in the window's width: no sideways scrolling, no column squeezed
    # below what its header and contents need.
    qtbot.waitUntil(lambda: panel.review_view.viewport().width() > 1200, timeout=WAIT)
    view = panel.review_view
    assert not view.horizontalScrollBar().isVisible()
    total = sum(view.columnWidth(c) for c in range(panel.review.columnCount()))
    assert total <= view.viewport().width()
    for column in range(panel.review.columnCount()):
        if column in (ReviewModel.COL_QUERY, ReviewModel.COL_ERROR):
            continue
        need = max(view.horizontalHeader().sectionSizeHint(column), view.sizeHintForColumn(column))
        assert view.columnWidth(column) >= need, ReviewModel.HEADERS[column]
    assert view.columnWidth(ReviewModel.COL_QUERY) >= view.fontMetrics().horizontalAdvance(row.query)

    _click(qtbot, panel.wide_button)
    assert window.browser.isVisible() and window.ask.isVisible()


def test_generating_twice_gives_the_same_rows_not_duplicates(qtbot, make_window, fake_ollama,
                                                             pg_database) -> None:
    fake_ollama.models["m"] = ModelScript(["cystic & fibrosis & azithromycin", "cystic & fibrosis & lung"])
    window, panel = _window(make_window, _settings(["m", "builtin:keywords"], fake_ollama.url, per_model=2),
                            pg_database)
    messages: list[str] = []
    window.messages.message_shown.connect(lambda msg: messages.append(msg.text))
    _ask(qtbot, panel)
    _click(qtbot, panel.generate_button)
    _wait_generated(qtbot, panel)
    first = [(r.model, r.attempt, r.query, r.included) for r in panel.review.rows()]
    assert [(m, a) for m, a, *_ in first] == [("m", 1), ("m", 2), ("builtin:keywords", 1),
                                                ("builtin:keywords", 2)]
    assert all(inc for *_, inc in first)
    assert messages[-1] == "Generated: 4 queries from 2 of 2 models"

    fake_ollama._calls.clear()  # the model answers the same again
    _click(qtbot, panel.generate_button)
    _wait_generated(qtbot, panel)
    again = [(r.model, r.attempt, r.query, r.included) for r in panel.review.rows()]
    assert again == first, "a second round replaces the first one's untouched rows"
    assert messages[-1].startswith("Generated: ") and "cancel" not in messages[-1].lower()
    assert len(messages) == 2, messages
    assert window.messages.current.text == messages[-1], "one message surface: the window's bar"


def test_edit_run_export_and_read_the_log_back(qtbot, make_window, fake_ollama, pg_database, tmp_path,
                                               monkeypatch) -> None:
    original = "cystic & fibrosis"
    fake_ollama.models["m"] = ModelScript([original])
    _window_, panel = _window(make_window, _settings(["m"], fake_ollama.url), pg_database)
    _ask(qtbot, panel)
    qtbot.keyClick(panel.question, Qt.Key.Key_Return)  # Enter in the question generates
    _wait_generated(qtbot, panel)
    assert [r.query for r in panel.review.rows()] == [original]

    view = panel.review_view
    qtbot.mouseClick(view.viewport(), LEFT, pos=_cell_centre(panel, 0, ReviewModel.COL_QUERY))
    qtbot.mouseDClick(view.viewport(), LEFT, pos=_cell_centre(panel, 0, ReviewModel.COL_QUERY))
    edited = "cystic & fibrosis & azithromycin"
    _type_into_editor(qtbot, panel, edited)
    qtbot.waitUntil(lambda: panel.review.row(0).query == edited, timeout=WAIT)
    model_cell = panel.review.index(0, ReviewModel.COL_MODEL)
    assert model_cell.data() == "m (edited)"
    assert original in panel.review.index(0, ReviewModel.COL_QUERY).data(Qt.ItemDataRole.ToolTipRole)
    _wait_checked(qtbot, panel)

    _click(qtbot, panel.run_button)
    _wait_run(qtbot, panel, None)
    path = tmp_path / "search-log.json"
    _export_log_by_menu(qtbot, panel, path, monkeypatch)
    log = load_search_log(path)
    (query,) = log["queries"]
    assert query["query"] == edited and query["model"] == "m (edited)"
    assert query["provenance"]["kind"] == "edited" and query["provenance"]["edited_from"] == original
    assert query["provenance"]["model"] == "m" and query["provenance"]["attempt"] == 1
    assert log["attempts"][0]["query"] == original
    assert [d["id"] for d in log["documents"]] == log["merged_ids"] == query["ids"]
    assert all(d["ref"] == f"{d['source']}:{d['external_id']}" for d in log["documents"])
    assert query["refs"] == [d["ref"] for d in log["documents"]]
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_window_log_equals_the_cli_json(qtbot, make_window, pg_database, pg_dsn, tmp_path, capsys,
                                        monkeypatch) -> None:
    """The same reviewed queries give the same search log in the window and on the command line."""
    from kmds_desktop.app.literature_data import build_topk_index
    from kmds_desktop.cli import main

    # the CLI runs in this test's data folder: both faces use the top-k index kept there (bm25 rows)
    session_index = pg_database.topk_index()
    build_topk_index(pg_database)
    try:
        _window_, panel = _window(make_window, _settings(["builtin:keywords"], per_model=3, max_rows=20),
                                  pg_database)
        _ask(qtbot, panel)
        _click(qtbot, panel.generate_button)
        _wait_generated(qtbot, panel)
        _wait_checked(qtbot, panel)
        _click(qtbot, panel.run_button)
        _wait_run(qtbot, panel, None)
        path = tmp_path / "window-log.json"
        _export_log_by_menu(qtbot, panel, path, monkeypatch)
        window_log = load_search_log(path)
        code = main(["literature", "search", QUESTION, "--models", "builtin:keywords", "--queries-per-model",
                     "3", "--max-rows", "20", "--dsn", pg_dsn, "--json"])
        out = capsys.readouterr()
        assert code == 0, out.err
        cli_log = json.loads(out.out)
    finally:
        pg_database.attach_topk_index(session_index)
    assert len(window_log["queries"]) == 3 and window_log["documents"]
    assert without_volatile(window_log) == without_volatile(cli_log)
    assert window_log["run_started_at"] and cli_log["run_started_at"]


def test_a_hung_model_among_three(qtbot, make_window, fake_ollama, pg_database) -> None:
    """A model that accepts and never replies: ready rows run meanwhile, the status names the model
    answering, and after its time limit the next model goes on; it is asked once, not per attempt."""
    fake_ollama.models["first"] = ModelScript(["cystic & fibrosis"])
    fake_ollama.models["hung"] = ModelScript(hang=True)
    fake_ollama.models["last"] = ModelScript(["azithromycin & lung"])
    window, panel = _window(make_window, _settings(["first", "hung", "last"], fake_ollama.url, per_model=2,
                                                   timeout_s=120), pg_database)
    # The time limit of one attempt is set in Preferences > Query generation.
    window.open_preferences()
    dialog = window.active_dialog
    page = dialog.query_page
    dialog.tabs.setCurrentIndex(1)
    qtbot.mouseClick(page.qg_timeout, LEFT)
    page.qg_timeout.selectAll()
    qtbot.keyClicks(page.qg_timeout, "8")
    _click(qtbot, dialog.buttons.button(dialog.buttons.StandardButton.Save))
    assert window.settings.query_generation.timeout_s == 8
    _ask(qtbot, panel)
    _click(qtbot, panel.generate_button)
    qtbot.waitUntil(lambda: any(r.model == "hung" for r in fake_ollama.completion_requests()), timeout=WAIT)
    # the rows before the hung model arrive although no attempt finishes after them
    qtbot.waitUntil(lambda: "hung: query 1 of 2" in panel.progress_label.text(), timeout=WAIT)
    assert panel.generating
    assert "first: ✓ 2" in panel.progress_label.text() and "last: waiting" in panel.progress_label.text()
    _wait_checked(qtbot, panel)

    # Run selected works while the hung model holds the generation.
    assert panel.run_button.isEnabled() and panel.run_button.text() == "Run selected (1)"
    _click(qtbot, panel.run_button)
    _wait_run(qtbot, panel, None)
    assert panel.documents.rowCount() > 0
    assert panel.generating, "the run finished before the hung model's time limit"

    _wait_generated(qtbot, panel)
    requests = [r.model for r in fake_ollama.completion_requests()]
    assert requests == ["first", "first", "hung", "last", "last"], requests
    rows = panel.review.rows()
    assert [r.model for r in rows if r.included] == ["first", "last"]
    text = window.messages.current.text
    assert text.startswith("Generated: ") and "from 2 of 3 models; failed: hung: " in text
    assert "LLMTimeout" not in text and "hung: ✗" in panel.progress_label.text()


def test_generate_then_stop_keeps_the_rows_and_the_log_keeps_every_attempt(
        qtbot, make_window, fake_ollama, pg_database, tmp_path, monkeypatch) -> None:
    """Issue 25, 4: Generate again and Stop generating before anything came lose no row; a row the
    user unticked stays unticked; the exported log keeps the first round's attempts (not an empty
    list of the stopped round), each with its round."""
    fake_ollama.models["m"] = ModelScript(["cystic & fibrosis", "lung & function"])
    window, panel = _window(make_window, _settings(["m"], fake_ollama.url, per_model=2), pg_database)
    _ask(qtbot, panel)
    _click(qtbot, panel.generate_button)
    _wait_generated(qtbot, panel)
    assert [r.query for r in panel.review.rows()] == ["cystic & fibrosis", "lung & function"]
    from test_ui_literature_retrieval import _tick_box

    _tick_box(qtbot, panel, 1)  # the user unticks the second
    assert not panel.review.row(1).included

    fake_ollama.models["m"] = ModelScript(["never & seen"], delay=20)
    _click(qtbot, panel.generate_button)
    qtbot.waitUntil(lambda: len(fake_ollama.completion_requests()) >= 3, timeout=WAIT)
    assert panel.generate_button.text() == "Stop generating"
    _click(qtbot, panel.generate_button)
    qtbot.waitUntil(lambda: not panel.generating, timeout=WAIT)
    rows = panel.review.rows()
    assert [r.query for r in rows] == ["cystic & fibrosis", "lung & function"], "stopping lost rows"
    assert [r.included for r in rows] == [True, False], "an unticked row came back ticked"
    _wait_checked(qtbot, panel)

    _click(qtbot, panel.run_button)
    _wait_run(qtbot, panel, None)
    path = tmp_path / "search-log.json"
    _export_log_by_menu(qtbot, panel, path, monkeypatch)
    log = load_search_log(path)
    first_round = [a["query"] for a in log["attempts"] if a["round"] == 1]
    assert first_round == ["cystic & fibrosis", "lung & function"]
    assert [r["round"] for r in log["rounds"]] == [1, 2] and log["rounds"][1]["stopped"]
    assert log["generated_at"] <= log["run_started_at"]
    assert [q["query"] for q in log["queries"]] == ["cystic & fibrosis"]
