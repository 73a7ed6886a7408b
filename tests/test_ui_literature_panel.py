"""The literature review panel driven like a user would: real Qt widgets (offscreen), the fake Ollama
server through the real client, and the real PostgreSQL test server with the shared corpora."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QLineEdit
from test_export import parse_bibtex, parse_ris

from kmds_desktop.config import Settings
from kmds_desktop.ui.jobs.runner import JobRunner
from kmds_desktop.ui.literature.panel import LiteraturePanel
from kmds_desktop.ui.literature.review_model import CHECKING, FAILED, INVALID, VALID, ReviewModel

QUESTION = "Does azithromycin improve lung function in cystic fibrosis?"
WAIT = 20_000


def _settings(models: list[str], host: str) -> Settings:
    settings = Settings()
    qg = settings.query_generation
    qg.multi_model_enabled = True
    qg.models = models
    qg.verbatim_query_models = [m for m in models if not m.startswith("builtin:")]  # scripted tsqueries
    qg.ollama_host = host
    qg.timeout_s = 30
    qg.queries_per_model = 1  # one query per scripted model: the rows below are counted
    return settings


def _panel(qtbot, settings: Settings, jobs: JobRunner, database: Any, **kw: Any) -> LiteraturePanel:
    panel = LiteraturePanel(settings, jobs, database=database, **kw)
    qtbot.addWidget(panel)
    panel.resize(1100, 800)
    panel.show()
    return panel


def _wait_checked(qtbot, panel: LiteraturePanel) -> None:
    qtbot.waitUntil(lambda: all(r.validity != CHECKING for r in panel.review.rows()), timeout=WAIT)


def _edit_query(qtbot, panel: LiteraturePanel, row: int, text: str) -> None:
    """Edit a query in place through the view's editor, as a user does (F2/double-click, type, Enter)."""
    view = panel.review_view
    index = panel.review.index(row, ReviewModel.COL_QUERY)
    view.setCurrentIndex(index)
    view.edit(index)
    editor = view.viewport().findChild(QLineEdit)
    assert editor is not None, "no in-place editor opened"
    editor.selectAll()
    qtbot.keyClicks(editor, text)
    qtbot.keyClick(editor, Qt.Key.Key_Return)  # the delegate commits on the next event-loop turn
    qtbot.waitUntil(lambda: panel.review.row(row).query == text, timeout=2_000)


def test_generate_review_run_export(
    qtbot, qtmodeltester, jobs, fake_ollama, pg_database, tmp_path: Path
) -> None:
    from support.fake_ollama import ModelScript

    fake_ollama.models.update({
        "fenced": ModelScript(["Sure! Here is the query:\n```sql\ncystic & fibrosis & lung\n```"]),
        "missing": ModelScript(status=404, error="model 'missing' not found"),
        "slow": ModelScript(["azithromycin | (lung <-> function)"], delay=0.6),
    })
    settings = _settings(["fenced", "missing", "slow"], fake_ollama.url)
    panel = _panel(qtbot, settings, jobs, pg_database)
    panel.question.setText(QUESTION)

    seen_rows: list[int] = []
    panel.review.rowsInserted.connect(lambda *_: seen_rows.append(panel.review.rowCount()))
    job = panel.generate()
    assert job is not None
    qtbot.waitUntil(lambda: panel.review.rowCount() == 1, timeout=WAIT)
    assert not job.done, "the first row must appear while the slow model is still running"
    qtbot.waitUntil(lambda: job.done, timeout=WAIT)
    assert job.state == "done"
    assert seen_rows == [1, 2], "a model that failed adds no row"
    assert fake_ollama.max_active == 1, "models must run strictly one after another"

    rows = panel.review.rows()
    assert [r.model for r in rows] == ["fenced", "slow"]
    assert rows[0].query == "cystic & fibrosis & lung"  # preamble and fence removed
    assert rows[1].generation_time >= 0.5
    progress = panel.progress_label.text()
    assert "fenced: ✓ 1" in progress and "missing: ✗" in progress and "slow: ✓ 1" in progress
    level, text = panel.last_message
    assert level == "warning"
    assert text.startswith("Generated: 2 queries from 2 of 3 models; failed: missing: ")
    assert "LLMModelNotFound" not in text

    # Each query is validated and counted in the database before anything is fetched.
    _wait_checked(qtbot, panel)
    assert rows[0].validity == VALID and rows[0].matches > 0
    assert rows[1].validity == VALID and rows[1].matches > 0
    shown = panel.review.data(panel.review.index(0, ReviewModel.COL_MATCHES))
    assert shown.replace(",", "").lstrip("~") == str(rows[0].matches)

    # Edit a query into an invalid one: the server's error shows in place.
    _edit_query(qtbot, panel, 0, "cystic & (fibrosis")
    _wait_checked(qtbot, panel)
    assert rows[0].validity == INVALID
    assert "syntax error" in panel.review.data(panel.review.index(0, ReviewModel.COL_ERROR))
    assert rows[0].matches is None
    # Running only invalid queries is refused with a message; nothing is lost.
    panel.review.set_all_included(False)
    panel.review.setData(panel.review.index(0, ReviewModel.COL_INCLUDE), Qt.CheckState.Checked.value,
                         Qt.ItemDataRole.CheckStateRole)
    assert panel.run_selected() is None
    assert "Every ticked query is invalid" in panel.last_message[1]
    assert rows[0].query == "cystic & (fibrosis" and rows[0].included
    panel.review.set_all_included(True)
    # Fix it again, untick the slow model's query, add a hand-written one.
    _edit_query(qtbot, panel, 0, "cystic & fibrosis & lung")
    panel.review.setData(panel.review.index(1, ReviewModel.COL_INCLUDE), Qt.CheckState.Unchecked.value,
                         Qt.ItemDataRole.CheckStateRole)
    panel.add_query("pseudomonas & aeruginosa")
    _wait_checked(qtbot, panel)
    assert [r.query for r in panel.review.included_rows()] == ["cystic & fibrosis & lung",
                                                               "pseudomonas & aeruginosa"]
    assert panel.run_button.text() == "Run selected (2)"

    run = panel.run_selected()
    assert run is not None
    qtbot.waitUntil(lambda: run.done, timeout=WAIT)
    assert run.state == "done", panel.last_message
    first, hand = panel.review.row(0), panel.review.row(2)
    assert first.returned and hand.returned
    assert panel.review.row(1).returned is None, "an unticked query must not run"
    assert fake_ollama.completion_requests().__len__() == 3, "running must never regenerate"

    docs = panel.documents.documents()
    assert len(docs) == len(set(first.ids) | set(hand.ids)) > 0
    only_one = [d for d in docs if len(d.found_by) == 1]
    assert first.unique + hand.unique == len(only_one)
    assert all(set(d.found_by) <= {first.query, hand.query} for d in docs)
    assert panel.results_stack.currentWidget() is not panel.empty_hint
    # Every item model the panel shows, with real rows: review, documents, and the sorting proxy.
    qtmodeltester.check(panel.review, force_py=True)
    qtmodeltester.check(panel.documents, force_py=True)
    qtmodeltester.check(panel.proxy, force_py=True)

    panel.select_document(0)
    top = panel.documents.document(panel.proxy.mapToSource(panel.proxy.index(0, 0)).row())
    assert top.title[:30] in panel.detail.toPlainText()

    # Export every format and read each back.
    out = {fmt: tmp_path / f"docs.{fmt}" for fmt in ("csv", "ris", "bibtex")}
    export_jobs = [panel.export_documents(fmt, path) for fmt, path in out.items()]
    export_jobs.append(panel.export_log(tmp_path / "log.json"))
    qtbot.waitUntil(lambda: all(j is not None and j.done for j in export_jobs), timeout=WAIT)
    assert all(j.state == "done" for j in export_jobs)
    ids = [d.id for d in docs]
    rows_csv = list(csv.DictReader(io.StringIO(out["csv"].read_text(encoding="utf-8"), newline="")))
    assert [r["id"] for r in rows_csv] == ids
    assert len(parse_ris(out["ris"].read_text(encoding="utf-8"))) == len(docs)
    assert len(parse_bibtex(out["bibtex"].read_text(encoding="utf-8"))) == len(docs)
    log = json.loads((tmp_path / "log.json").read_text(encoding="utf-8"))
    assert log["question"] == QUESTION and log["models"] == ["fenced", "missing", "slow"]
    assert "tsquery" in log["system_prompt"] and log["temperature"] == settings.query_generation.temperature
    assert [q["query"] for q in log["queries"]] == [first.query, hand.query]
    assert [q["model"] for q in log["queries"]] == ["fenced", "hand-written"]
    assert log["queries"][0]["ids"] == first.ids and len(log["queries"][1]["unique_ids"]) == hand.unique
    assert sorted(log["merged_ids"]) == sorted(int(i) for i in ids)
    assert log["run_started_at"] and log["run_finished_at"] and log["generated_at"]


def test_cancel_slow_generation(qtbot, jobs, fake_ollama, pg_database) -> None:
    from support.fake_ollama import ModelScript

    fake_ollama.models["slow"] = ModelScript(["never & seen"], delay=20)
    fake_ollama.models["later"] = ModelScript(["never & asked"])
    settings = _settings(["slow", "later"], fake_ollama.url)
    panel = _panel(qtbot, settings, jobs, pg_database, open_on_start=False)
    panel.add_query("kept & query")
    panel.question.setText(QUESTION)
    job = panel.generate()
    qtbot.waitUntil(lambda: len(fake_ollama.completion_requests()) == 1, timeout=WAIT)
    assert panel.generate_button.text() == "Stop generating"
    qtbot.mouseClick(panel.generate_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: job.done, timeout=WAIT)
    assert job.state == "cancelled"
    assert len(fake_ollama.completion_requests()) == 1, "no model may be asked after a cancel"
    assert panel.last_message == ("warning", "Generation cancelled: 0 queries from 0 of 2 models")
    assert [r.query for r in panel.review.rows()] == ["kept & query"]
    assert panel.generate_button.isEnabled()


def _centre(panel: LiteraturePanel) -> QPoint:
    # QDragEnterEvent takes a QPoint (its QPointF overload exists only from PySide6 6.12, which the
    # project does not use); QDropEvent takes a QPointF.
    return panel.rect().center()


def _drop(panel: LiteraturePanel, path: Path) -> None:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    enter = QDragEnterEvent(_centre(panel), Qt.DropAction.CopyAction, mime,
                            Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    panel.dragEnterEvent(enter)
    assert enter.isAccepted()
    drop = QDropEvent(QPointF(_centre(panel)), Qt.DropAction.CopyAction, mime,
                      Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    panel.dropEvent(drop)


def _queries_waiting_on_a_lock(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.filterwarnings("ignore:Function.*QDragEnterEvent:DeprecationWarning")
def test_empty_database_drop_import_and_server_down(
    qtbot, jobs, pg_own_server, literature_data: Path, tmp_path: Path
) -> None:
    """On a server of the test's own (stopping the session's would break every later test)."""
    database, server = pg_own_server["database"], pg_own_server["server"]
    settings = Settings()
    panel = _panel(qtbot, settings, jobs, database)
    statuses: list[str] = []
    panel.status_changed.connect(statuses.append)
    qtbot.waitUntil(lambda: panel.session.documents_in_database == 0, timeout=WAIT)
    assert panel.results_stack.currentWidget() is panel.empty_hint
    assert "File > Import literature" in panel.empty_hint.text().replace("&gt;", ">")
    assert statuses and "0 documents" in statuses[-1]

    # Dropping a JSONL file imports it on a worker; the hint gives way to the results view.
    lines = (literature_data / "cf" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:60]
    sample = tmp_path / "cf_sample.jsonl"
    sample.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _drop(panel, sample)
    qtbot.waitUntil(lambda: panel.session.documents_in_database == 60, timeout=WAIT)
    assert panel.results_stack.currentWidget() is not panel.empty_hint
    assert "60 documents" in statuses[-1]
    assert "60 records" in panel.last_message[1]

    panel.add_query("cystic & fibrosis")
    panel.add_query("pseudomonas")
    _edit_query(qtbot, panel, 1, "pseudomonas & aeruginosa")
    panel.review.setData(panel.review.index(0, ReviewModel.COL_INCLUDE), Qt.CheckState.Unchecked.value,
                         Qt.ItemDataRole.CheckStateRole)
    _wait_checked(qtbot, panel)
    before = [(r.query, r.included) for r in panel.review.rows()]
    assert before == [("cystic & fibrosis", False), ("pseudomonas & aeruginosa", True)]

    # Stopped in the middle of the run: another session holds the document table, so the run's
    # query waits inside the server, and the server is stopped while it waits.
    holder = psycopg.connect(database.dsn)
    holder.execute("LOCK TABLE document IN ACCESS EXCLUSIVE MODE")
    try:
        run = panel.run_selected()
        qtbot.waitUntil(lambda: _queries_waiting_on_a_lock(database.dsn) > 0, timeout=WAIT)
        assert not run.done and run.state == "running"
        server.stop()
        qtbot.waitUntil(lambda: run.done, timeout=WAIT)
        assert run.state == "failed"
        level, text = panel.last_message
        assert level == "error" and text.startswith("The search failed: ") and "connection" in text.lower()
        assert [(r.query, r.included) for r in panel.review.rows()] == before
        assert panel.run_button.isEnabled()
        # An edit while the server is down: the row says it could not be checked, the text stays.
        _edit_query(qtbot, panel, 0, "cystic & fibrosis & child:*")
        _wait_checked(qtbot, panel)
        assert panel.review.row(0).validity == FAILED
        assert panel.review.row(0).query == "cystic & fibrosis & child:*"
    finally:
        with contextlib.suppress(Exception):
            holder.close()
        server.start()
    panel.refresh_status()  # the database answers again: rows that could not be checked are re-checked
    qtbot.waitUntil(lambda: panel.review.row(0).validity == VALID, timeout=WAIT)
    run = panel.run_selected()
    qtbot.waitUntil(lambda: run.done, timeout=WAIT)
    assert run.state == "done", panel.last_message
    assert panel.documents.rowCount() == panel.review.row(1).returned > 0
