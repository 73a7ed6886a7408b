"""The window says so when a run loses a query: real widgets (offscreen), the real PostgreSQL server.

The first ticked query's connection is cut while it waits inside the server (another session holds
the document table); the second query runs. The failed row shows its error in the Error column, the
results line says INCOMPLETE, the message bar names the lost query, and the exported search log
records ``incomplete`` with the failed query. Nothing of what ran is lost.
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg

from kmds_desktop.config import Settings
from kmds_desktop.ui.literature.panel import LiteraturePanel
from kmds_desktop.ui.literature.review_model import CHECKING, ReviewModel

WAIT = 20_000


def _search_waiting(watcher: psycopg.Connection) -> int | None:
    row = watcher.execute(
        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() "
        "AND query LIKE '%search_vector @@%'").fetchone()
    return int(row[0]) if row else None


def test_a_run_that_loses_a_query_is_shown_incomplete(qtbot, jobs, pg_empty_database, tmp_path: Path):
    db = pg_empty_database
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "t:1", "source": "test", "title": "Cystic fibrosis airway infection"},
        {"id": "t:2", "source": "test", "title": "Pseudomonas aeruginosa in cystic fibrosis"},
        {"id": "t:3", "source": "test", "title": "Pseudomonas aeruginosa in burns"},
    ]))
    assert db.import_files([corpus]).inserted == 3
    panel = LiteraturePanel(Settings(), jobs, database=db)
    qtbot.addWidget(panel)
    panel.show()
    qtbot.waitUntil(lambda: panel.session.documents_in_database == 3, timeout=WAIT)
    panel.add_query("cystic & fibrosis")
    panel.add_query("pseudomonas & aeruginosa")
    qtbot.waitUntil(lambda: all(r.validity != CHECKING for r in panel.review.rows()), timeout=WAIT)

    with psycopg.connect(db.dsn) as holder, psycopg.connect(db.dsn, autocommit=True) as watcher:
        holder.execute("LOCK TABLE document IN ACCESS EXCLUSIVE MODE")
        try:
            run = panel.run_selected()
            assert run is not None
            backend = None
            for _ in range(2000):  # bounded: at most ~20 s; the event loop keeps running meanwhile
                backend = _search_waiting(watcher)
                if backend is not None:
                    break
                qtbot.wait(10)
            assert backend is not None, "the first query never reached the server"
            watcher.execute("SELECT pg_terminate_backend(%s)", (backend,))
        finally:
            holder.rollback()
    qtbot.waitUntil(lambda: run.done, timeout=WAIT)
    assert run.state == "done", panel.last_message

    lost, ran = panel.review.row(0), panel.review.row(1)
    error_cell = panel.review.data(panel.review.index(0, ReviewModel.COL_ERROR))
    assert "lost the connection" in error_cell and lost.returned is None
    assert ran.returned == 2 and panel.documents.rowCount() == 2  # what ran is all there
    assert "INCOMPLETE" in panel.results_label.text()
    level, text = panel.last_message
    assert level == "error" and text.startswith("The search is incomplete: 1 of 2 queries could not run")
    assert "cystic & fibrosis" in text

    job = panel.export_log(tmp_path / "log.json")
    qtbot.waitUntil(lambda: job.done, timeout=WAIT)
    log = json.loads((tmp_path / "log.json").read_text(encoding="utf-8"))
    assert log["incomplete"] is True
    assert [(f["query"], f["kind"]) for f in log["failed_queries"]] == [("cystic & fibrosis", "failed")]
