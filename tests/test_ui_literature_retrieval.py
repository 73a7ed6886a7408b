"""Hybrid retrieval in the real main window, driven by clicks and typing (pytest-qt, offscreen).

Journeys: import documents and watch them embedded in the background (the status bar counts the
vectors; Cancel in the one progress area stops it; Embed documents goes on from there); generate with
an LLM configured and get the question's semantic row and a hypothetical abstract beside the
queries, edit and tick them, run, and read the fused documents with "found by"; the LLM failing the
abstract; the retrieval settings in Preferences.

Real parts: the window, PostgreSQL with pgvector (a fresh database per test), the shipped embedding
model in the index process, the fake Ollama server through the real ``ollama`` client.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QLineEdit, QPushButton, QStyle, QStyleOptionViewItem
from support.fake_ollama import ModelScript

from kmds_desktop.config import Settings, load_settings
from kmds_desktop.literature.store.vectors import vector_status
from kmds_desktop.ui.literature.documents_model import DocumentsModel
from kmds_desktop.ui.literature.panel import LiteraturePanel
from kmds_desktop.ui.literature.review_model import CHECKING, ReviewModel
from kmds_desktop.ui.preferences.dialog import PreferencesDialog

WAIT = 180_000
LEFT = Qt.MouseButton.LeftButton
QUERY = "cell | protein"


def _abstract(title: str) -> str:
    return (f"{title}. We studied this question in a cohort and measured the outcome with standard "
            "methods. The main finding supports the hypothesis.")


def _sample(literature_data: Path, tmp_path: Path, n: int) -> tuple[Path, list[dict[str, Any]]]:
    lines = (literature_data / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:n]
    records = [json.loads(line) for line in lines]
    path = tmp_path / "sample.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path, records


def _window(make_window, database: Any, models: list[str], host: str = "http://127.0.0.1:9",
            batch: int = 64) -> tuple[Any, LiteraturePanel]:
    settings = Settings()
    qg = settings.query_generation
    qg.multi_model_enabled, qg.models, qg.queries_per_model, qg.ollama_host = True, models, 1, host
    qg.verbatim_query_models = [m for m in models if not m.startswith("builtin:")]  # scripted tsqueries
    settings.literature.max_rows = 20
    settings.retrieval.embed_batch_size = batch
    window = make_window(settings, auto_index=False,
                         literature_kwargs={"database": database, "open_on_start": False})
    window.resize(1600, 1000)
    return window, window.literature


def _click(qtbot, button: QPushButton) -> None:
    assert button.isVisible() and button.isEnabled(), f"{button.text()!r} cannot be clicked"
    qtbot.mouseClick(button, LEFT)


def _import_and_embed(qtbot, window: Any, panel: LiteraturePanel, path: Path, n: int) -> None:
    panel.import_files([path])  # File > Import literature asks for the file; this is its answer
    qtbot.waitUntil(lambda: f"{n:,} with vectors" in window.lit_status.text(), timeout=WAIT)
    assert not panel.embedding


def _tick_box(qtbot, panel: LiteraturePanel, row: int) -> None:
    """Click the check box in the Run column of ``row``, where the style draws it."""
    view = panel.review_view
    index = panel.review.index(row, ReviewModel.COL_INCLUDE)
    option = QStyleOptionViewItem()
    view.initViewItemOption(option)
    option.rect = view.visualRect(index)
    option.features |= QStyleOptionViewItem.ViewItemFeature.HasCheckIndicator
    box = view.style().subElementRect(QStyle.SubElement.SE_ItemViewItemCheckIndicator, option, view)
    qtbot.mouseClick(view.viewport(), LEFT, pos=box.center())


def _edit_cell(qtbot, panel: LiteraturePanel, row: int, text: str) -> None:
    view = panel.review_view
    centre = view.visualRect(panel.review.index(row, ReviewModel.COL_QUERY)).center()
    qtbot.mouseClick(view.viewport(), LEFT, pos=centre)
    qtbot.mouseDClick(view.viewport(), LEFT, pos=centre)
    editor = view.viewport().findChild(QLineEdit)
    assert editor is not None and editor.isVisible(), "no in-place editor opened"
    editor.selectAll()
    qtbot.keyClicks(editor, text)
    qtbot.keyClick(editor, Qt.Key.Key_Return)


def _generate(qtbot, panel: LiteraturePanel, question: str) -> None:
    panel.question.clear()
    qtbot.mouseClick(panel.question, LEFT)
    qtbot.keyClicks(panel.question, question)
    _click(qtbot, panel.generate_button)
    qtbot.waitUntil(lambda: panel.session.round is not None and panel.session.round.finished, timeout=WAIT)
    qtbot.waitUntil(lambda: not panel.generating, timeout=WAIT)
    qtbot.waitUntil(lambda: all(r.validity != CHECKING for r in panel.review.rows()), timeout=WAIT)


def test_semantic_and_hypothetical_rows_are_generated_edited_ticked_and_fused(
        qtbot, make_window, fake_ollama, pg_empty_database, literature_data, tmp_path) -> None:
    path, records = _sample(literature_data, tmp_path, 16)
    target = records[5]
    fake_ollama.models["m"] = ModelScript(
        [lambda prompt, _body: _abstract(target["title"]) if "Write the abstract" in prompt else QUERY])
    window, panel = _window(make_window, pg_empty_database, ["m"], fake_ollama.url)
    _import_and_embed(qtbot, window, panel, path, 16)

    _generate(qtbot, panel, target["title"])
    labels = [panel.review.index(r, ReviewModel.COL_MODEL).data() for r in range(panel.review.rowCount())]
    assert labels == ["[semantic] question", "m", "[hypothetical] m"]
    assert panel.review.row(0).query == target["title"]
    assert panel.review.row(2).query.startswith(target["title"])
    assert "hypothetical abstract: ✓ m" in panel.progress_label.text()
    assert window.messages.current.text.endswith("; a hypothetical abstract from m")

    # The hypothetical abstract is edited like any row: the model's text is kept as the original.
    edited = _abstract(target["title"]) + " Children were included."
    _edit_cell(qtbot, panel, 2, edited)
    qtbot.waitUntil(lambda: panel.review.row(2).query == edited, timeout=WAIT)
    assert panel.review.index(2, ReviewModel.COL_MODEL).data() == "[hypothetical] m (edited)"
    # ... and ticked like any row.
    _tick_box(qtbot, panel, 2)
    assert not panel.review.row(2).included and panel.run_button.text() == "Run selected (2)"
    _tick_box(qtbot, panel, 2)
    assert panel.review.row(2).included and panel.run_button.text() == "Run selected (3)"

    _click(qtbot, panel.run_button)
    qtbot.waitUntil(lambda: panel.session.last_run is not None and panel.run_button.isEnabled(), timeout=WAIT)
    # Each row has its own statistics.
    for r in range(3):
        row = panel.review.row(r)
        assert row.returned and row.returned > 0 and row.run_error is None, row.kind
        assert panel.review.index(r, ReviewModel.COL_RETURNED).data() == f"{row.returned:,}"
    assert panel.review.index(0, ReviewModel.COL_MATCHES).data() == "16"
    # Fused, best first, with the rows that found each document.
    first = panel.documents.document(panel.proxy.mapToSource(panel.proxy.index(0, 0)).row())
    assert first.title == target["title"]
    found_by = panel.proxy.index(0, DocumentsModel.COL_FOUND_BY).data()
    assert found_by.startswith(f"semantic: {target['title'][:30]}") and found_by.endswith(
        "hypothetical abstract (m (edited))"), found_by
    log = panel.search_log()
    assert [q["kind"] for q in log["queries"]] == ["semantic", "tsquery", "hypothetical"]
    assert log["queries"][2]["provenance"]["edited_from"].startswith(target["title"])
    # Readable at 1600 x 1000: the found-by column is on screen, not scrolled away, and as wide as its
    # names need up to 30 % of the table (the title keeps the rest).
    view = panel.documents_view
    column = DocumentsModel.COL_FOUND_BY
    assert not view.horizontalScrollBar().isVisible()
    assert view.columnViewportPosition(column) + view.columnWidth(column) <= view.viewport().width()
    need = view.fontMetrics().horizontalAdvance(found_by)
    assert view.columnWidth(column) >= min(need, int(view.viewport().width() * 0.3)) > 150


def test_a_failing_llm_keeps_the_other_rows(qtbot, make_window, fake_ollama, pg_empty_database,
                                            literature_data, tmp_path) -> None:
    path, records = _sample(literature_data, tmp_path, 8)
    fake_ollama.models["m"] = ModelScript([QUERY], statuses=[200, 500])
    window, panel = _window(make_window, pg_empty_database, ["m"], fake_ollama.url)
    _import_and_embed(qtbot, window, panel, path, 8)
    _generate(qtbot, panel, records[0]["title"])
    assert [r.kind for r in panel.review.rows()] == ["semantic", "tsquery"]
    message = window.messages.current
    assert message.level == "warning"
    assert "no hypothetical-abstract row: model 'm' could not write" in message.text
    assert "hypothetical abstract: ✗" in panel.progress_label.text()
    assert panel.run_button.isEnabled() and panel.run_button.text() == "Run selected (2)"


def test_stop_generating_while_the_llm_writes_the_abstract(qtbot, make_window, fake_ollama, pg_empty_database,
                                                          literature_data, tmp_path) -> None:
    """The abstract is written on the generation worker: the progress area and the status line say so,
    and Stop generating aborts it; the rows already there stay."""
    path, records = _sample(literature_data, tmp_path, 8)
    release = threading.Event()

    def reply(prompt: str, _body: dict[str, Any]) -> str:
        if "Write the abstract" in prompt:
            release.wait(WAIT / 1000)  # a slow model: answers only when the test lets it
            return _abstract(records[0]["title"])
        return QUERY

    fake_ollama.models["m"] = ModelScript([reply])
    window, panel = _window(make_window, pg_empty_database, ["m"], fake_ollama.url)
    try:
        _import_and_embed(qtbot, window, panel, path, 8)
        panel.question.clear()
        qtbot.mouseClick(panel.question, LEFT)
        qtbot.keyClicks(panel.question, records[0]["title"])
        _click(qtbot, panel.generate_button)
        writing = "hypothetical abstract: m writing"
        qtbot.waitUntil(lambda: writing in panel.progress_label.text(), timeout=WAIT)
        strip = window.progress_strip
        qtbot.waitUntil(lambda: "writing a hypothetical abstract" in strip.label.text(), timeout=WAIT)
        assert [r.kind for r in panel.review.rows()] == ["semantic", "tsquery"]
        assert panel.generate_button.text() == "Stop generating"
        _click(qtbot, panel.generate_button)
        qtbot.waitUntil(lambda: not panel.generating, timeout=WAIT)
    finally:
        release.set()
    assert [r.kind for r in panel.review.rows()] == ["semantic", "tsquery"]
    assert "hypothetical abstract: not written" in panel.progress_label.text()
    assert window.messages.current.text.startswith("Generation cancelled: 1 query from 1 of 1 model")
    assert panel.run_button.isEnabled() and panel.run_button.text() == "Run selected (2)"


def test_embedding_is_cancelled_from_the_progress_area_and_resumed(qtbot, make_window, pg_empty_database,
                                                                   literature_data, tmp_path) -> None:
    n = 100
    path, _records = _sample(literature_data, tmp_path, n)
    window, panel = _window(make_window, pg_empty_database, ["builtin:keywords"], batch=4)
    panel.import_files([path])
    strip = window.progress_strip
    qtbot.waitUntil(lambda: strip.row_for("literature.embed") is not None, timeout=WAIT)
    qtbot.waitUntil(lambda: vector_status(pg_empty_database)["with_vectors"] >= 4, timeout=WAIT)
    assert strip.isVisible() and "Embedding documents" in strip.label.text()
    assert not panel.embed_button.isEnabled()
    _click(qtbot, strip.cancel_button)
    qtbot.waitUntil(lambda: not panel.embedding, timeout=WAIT)
    assert "Embedding cancelled" in panel.progress_label.text()
    done = vector_status(pg_empty_database)["with_vectors"]
    assert 4 <= done < n
    expected = f"Literature: {n} documents, {done} with vectors, {n - done} to embed"
    qtbot.waitUntil(lambda: window.lit_status.text() == expected, timeout=WAIT)  # read when it stopped

    _click(qtbot, panel.embed_button)  # goes on from there
    qtbot.waitUntil(lambda: f"{n} with vectors" in window.lit_status.text(), timeout=WAIT)
    assert window.lit_status.text() == f"Literature: {n} documents, {n} with vectors"
    assert "Embedded " in panel.progress_label.text()


def _retrieval_tab(qtbot, dialog: PreferencesDialog) -> None:
    bar = dialog.tabs.tabBar()
    index = next(i for i in range(dialog.tabs.count()) if dialog.tabs.tabText(i) == "Retrieval")
    qtbot.mouseClick(bar, LEFT, pos=bar.tabRect(index).center())
    assert dialog.tabs.currentIndex() == index


def _type(qtbot, field: QLineEdit, text: str) -> None:
    qtbot.mouseClick(field, LEFT)
    field.selectAll()
    qtbot.keyClicks(field, text)
    qtbot.keyClick(field, Qt.Key.Key_Return)


def test_retrieval_preferences_are_validated_on_enter_and_saved(qtbot, make_window, data_home) -> None:
    window = make_window(Settings(), auto_index=False)
    window.open_preferences()
    dialog = window.active_dialog
    page = dialog.retrieval_page
    assert isinstance(dialog, PreferencesDialog)
    _retrieval_tab(qtbot, dialog)
    assert page.ret_semantic.isChecked() and page.ret_fusion_k.text() == "20"
    assert page.ret_rerank.isChecked() and page.ret_rerank_weight.isEnabled(), "re-ranking: on by default"
    assert page.ret_ranking.currentData() == "bm25"

    _type(qtbot, page.ret_fusion_k, "0")
    assert dialog.isVisible() and dialog.result() == 0, "Enter closed the dialog"
    assert not (data_home / "settings.json").exists(), "Enter saved the settings"
    error = dialog.field_errors["retrieval.fusion_k"]
    assert error.isVisible() and "1" in error.text()
    _type(qtbot, page.ret_semantic_weight, "eleven")
    assert dialog.field_errors["retrieval.semantic_weight"].isVisible()

    _type(qtbot, page.ret_fusion_k, "40")
    _type(qtbot, page.ret_semantic_weight, "2.5")
    assert not dialog.field_errors["retrieval.fusion_k"].isVisible()
    assert not dialog.field_errors["retrieval.semantic_weight"].isVisible()
    qtbot.mouseClick(page.ret_hypothetical, LEFT)
    qtbot.mouseClick(page.ret_rerank, LEFT)
    assert not page.ret_rerank_weight.isEnabled(), "the weight is for re-ranking, now off"
    qtbot.mouseClick(page.ret_rerank, LEFT)
    assert page.ret_rerank_weight.isEnabled()
    _type(qtbot, page.ret_rerank_weight, "0.3")
    page.ret_ranking.setCurrentIndex(page.ret_ranking.findData("ts_rank_cd"))
    qtbot.mouseClick(page.ret_external, LEFT)
    qtbot.mouseClick(page.ret_embed, LEFT)
    assert page.ret_database_vectors.isChecked()  # on by default
    qtbot.mouseClick(page.ret_database_vectors, LEFT)
    page.ret_fusion.setCurrentIndex(page.ret_fusion.findData("best_rank"))
    assert dialog.isVisible()

    _click(qtbot, dialog.buttons.button(dialog.buttons.StandardButton.Save))
    qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=10_000)
    saved = load_settings(data_home / "settings.json").retrieval
    assert (saved.fusion_k, saved.semantic_weight, saved.rerank, saved.rerank_weight) == (40, 2.5, True, 0.3)
    assert (saved.semantic_row, saved.hypothetical_row, saved.fusion) == (True, False, "best_rank")
    assert saved.fulltext_ranking == "ts_rank_cd"
    assert saved.allow_vectors_in_external_database and not saved.embed_after_import
    assert not saved.use_database_vectors
    # The window uses them at once: the literature session merges by the new settings.
    panel = window.literature
    panel._update_buttons()
    assert panel.session.retrieval == saved


FOREIGN_DDL = """
CREATE TABLE sources (id serial PRIMARY KEY, name text UNIQUE NOT NULL, url text, is_reputable boolean,
                      is_free boolean);
CREATE TABLE document (
  id serial PRIMARY KEY, source_id integer REFERENCES sources(id), external_id text NOT NULL, doi text,
  title text, abstract text, authors text[], publication text, publication_date date, mesh_terms text[],
  keywords text[], url text, withdrawn_date date,
  search_vector tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', coalesce(title,'')),'A') ||
    setweight(to_tsvector('english', coalesce(abstract,'')),'B')) STORED,
  UNIQUE (source_id, external_id));
INSERT INTO sources (name) VALUES ('pubmed');
INSERT INTO document (source_id, external_id, title, abstract) VALUES
  (1, '100', 'Asthma in children', 'Inhaled corticosteroids reduce exacerbations.'),
  (1, '101', 'Heart failure', 'Beta blockers lower mortality.');
"""


def test_a_database_the_app_does_not_manage_gets_vectors_only_after_opting_in(qtbot, make_window, pg_server,
                                                                             data_home) -> None:
    """A BMLibrarian-like database: Embed documents creates nothing and says where to opt in; after
    ticking the opt-in in Preferences > Retrieval, the same click embeds."""
    import secrets as pysecrets

    import psycopg

    from kmds_desktop.config import LiteratureSettings
    from kmds_desktop.literature.store.database import open_database

    name = f"foreign_{pysecrets.token_hex(4)}"
    admin = pg_server.conninfo("postgres")
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # generated name
    info = pg_server.conninfo(name)
    with psycopg.connect(**info, autocommit=True) as conn:
        conn.execute(FOREIGN_DDL)
    db = open_database(" ".join(f"{k}={v}" for k, v in info.items()), settings=LiteratureSettings())
    try:
        assert db.schema_owner != "app"
        window = make_window(Settings(), auto_index=False, literature_kwargs={"database": db})
        panel = window.literature
        before = "Literature: 2 documents, no vectors"
        qtbot.waitUntil(lambda: window.lit_status.text() == before, timeout=WAIT)

        _click(qtbot, panel.embed_button)
        qtbot.waitUntil(lambda: not panel.embedding and window.messages.current is not None, timeout=WAIT)
        message = window.messages.current
        assert message.level == "warning" and "not managed by KMDS Desktop" in message.text
        where = "tick 'Allow a vector table in an external database' in Preferences > Retrieval"
        assert where in message.text
        assert vector_status(db)["available"] is False, "nothing was created"

        window.open_preferences()
        dialog = window.active_dialog
        _retrieval_tab(qtbot, dialog)
        opt_in = dialog.retrieval_page.ret_external
        assert opt_in.text().startswith("Allow a vector table in an external database")
        qtbot.mouseClick(opt_in, LEFT)
        _click(qtbot, dialog.buttons.button(dialog.buttons.StandardButton.Save))
        qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=10_000)
        assert window.settings.retrieval.allow_vectors_in_external_database

        _click(qtbot, panel.embed_button)
        qtbot.waitUntil(lambda: window.lit_status.text() == "Literature: 2 documents, 2 with vectors",
                        timeout=WAIT)
    finally:
        db.close()
        with psycopg.connect(**admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_window_log_equals_the_cli_json_with_semantic_rows(qtbot, make_window, fake_ollama, pg_empty_database,
                                                           literature_data, tmp_path, data_home, capsys,
                                                           monkeypatch) -> None:
    """The same question with vectors and an LLM: the window's exported log and ``literature search
    --json`` list the same rows (semantic, full-text, hypothetical) in the same order, and the same
    fused documents."""
    from kmds_desktop.app.search_log import load_search_log, without_volatile
    from kmds_desktop.cli import main
    from kmds_desktop.config import save_settings

    path, records = _sample(literature_data, tmp_path, 16)
    target = records[5]
    fake_ollama.models["m"] = ModelScript(
        [lambda prompt, _body: _abstract(target["title"]) if "Write the abstract" in prompt else QUERY])
    window, panel = _window(make_window, pg_empty_database, ["m"], fake_ollama.url)
    _import_and_embed(qtbot, window, panel, path, 16)
    _generate(qtbot, panel, target["title"])
    _click(qtbot, panel.run_button)
    qtbot.waitUntil(lambda: panel.session.last_run is not None and panel.run_button.isEnabled(), timeout=WAIT)
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        lambda *_a, **_k: (str(tmp_path / "window-log.json"), "JSON (*.json)"))
    action = next(a for a in panel.export_button.menu().actions() if a.text().startswith("Search log"))
    action.trigger()
    qtbot.waitUntil((tmp_path / "window-log.json").exists, timeout=WAIT)
    qtbot.waitUntil(lambda: "Search log written" in panel.progress_label.text(), timeout=WAIT)
    window_log = load_search_log(tmp_path / "window-log.json")

    save_settings(window.settings, data_home / "settings.json")  # the CLI reads the same settings
    code = main(["literature", "search", target["title"], "--dsn", str(pg_empty_database.dsn), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    cli_log = json.loads(out.out)
    assert [q["kind"] for q in window_log["queries"]] == ["semantic", "tsquery", "hypothetical"]
    assert [q["model"] for q in window_log["queries"]] == ["[semantic] question", "m", "[hypothetical] m"]
    assert without_volatile(window_log) == without_volatile(cli_log)
