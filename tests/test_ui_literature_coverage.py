"""The window warns before a semantic row runs on a half-embedded database, and says afterwards what
the row searched: real Qt offscreen, real PostgreSQL with pgvector, the real model, real clicks."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import Qt

from kmds_desktop.config import Settings
from kmds_desktop.literature.store.vectors import embed_documents, vector_status
from kmds_desktop.ui.literature.panel import LiteraturePanel

WAIT = 120_000


def test_semantic_row_on_a_half_embedded_database(qtbot, jobs, pg_empty_database, literature_data: Path,
                                                  tmp_path: Path, data_home: Path) -> None:
    db = pg_empty_database
    records = [json.loads(line) for line in
               (literature_data / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:12]]
    sample = tmp_path / "sample.jsonl"
    sample.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    db.import_files([sample])
    assert embed_documents(db, limit=6).embedded == 6  # half of the documents have a vector
    panel = LiteraturePanel(Settings(), jobs, database=db)
    qtbot.addWidget(panel)
    panel.show()
    qtbot.waitUntil(lambda: panel.session.documents_in_database == 12, timeout=WAIT)

    panel.question.setText(records[2]["title"])
    qtbot.mouseClick(panel.semantic_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    bar = panel.coverage_bar
    assert bar.isVisible(), "the window asks before the semantic row runs"
    assert "6 of 12 documents" in bar.label.text() and "6 have no vector yet" in bar.label.text()
    assert panel.session.last_run is None, "nothing ran yet"

    qtbot.mouseClick(bar.run_button, Qt.MouseButton.LeftButton)  # Run anyway
    qtbot.waitUntil(lambda: panel.session.last_run is not None and not panel._working(), timeout=WAIT)
    assert not bar.isVisible()
    said = "The semantic row searched 6 of 12 documents (those with a vector)"
    assert panel.last_message is not None and panel.last_message[1].startswith(said)
    assert panel.results_label.toolTip() == said
    log = panel.search_log()
    assert log["queries"][0]["row_kind"] == "semantic: the question"
    assert log["retrieval_run"]["vector_coverage"] == {"searched": 6, "documents": 12, "partial": True}

    # Embed first: the rest is embedded, then the same rows run on every document.
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    assert bar.isVisible()
    first = panel.session.last_run
    qtbot.mouseClick(bar.embed_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.session.last_run is not first and not panel._working(), timeout=WAIT)
    assert vector_status(db)["with_vectors"] == 12 and not bar.isVisible()
    assert "searched all 12 documents" in panel.results_label.toolTip()
    assert panel.search_log()["retrieval_run"]["vector_coverage"]["partial"] is False
