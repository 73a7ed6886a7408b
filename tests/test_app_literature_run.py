"""The one search sequence (app.literature_run) and the state the literature session owns: the database's
status, the coverage question, the search history over the session's database, the recorded run.
Real PostgreSQL with pgvector, the real model, a real history file; the CLI through its entry point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kmds_desktop.app import literature_data as lj
from kmds_desktop.app.literature import RECORDED, STATUS_READ, LiteratureSession
from kmds_desktop.app.literature_run import run_search
from kmds_desktop.cli import main
from kmds_desktop.literature.store.vectors import embed_documents

HALF = {"available": True, "with_vectors": 6, "needing": 6}


def test_the_coverage_question_is_the_sessions_and_follows_its_status() -> None:
    session = LiteratureSession()
    heard: list[str] = []
    session.subscribe(lambda change: heard.append(change.kind))
    session.add_semantic("aspirin and stroke")
    plan = session.plan_run("now")
    assert session.coverage_warning(plan) is None  # no status read yet: nothing is known to be missing
    session.apply_database_status(lj.DatabaseStatus(12, vectors=HALF))
    assert STATUS_READ in heard and session.documents_in_database == 12
    warning = session.coverage_warning(plan)
    assert warning is not None and "would search only 6 of 12 documents: 6 have no vector yet" in warning
    session.apply_database_status(lj.DatabaseStatus(12, vectors={"available": True, "with_vectors": 12,
                                                                 "needing": 0}))
    assert session.coverage_warning(plan) is None
    assert session.database_status is not None and session.database_status.everything_embedded
    assert session.database_status.embed_tooltip() == lj.EVERYTHING_EMBEDDED


def test_status_line_names_counts_vectors_and_place() -> None:
    status = lj.DatabaseStatus.from_status({"documents": 8316, "database": "kmds on 127.0.0.1",
                                            "vectors": {"available": True, "with_vectors": 8000,
                                                        "needing": 316}})
    assert status.line() == ("Literature: 8,316 documents, 8,000 with vectors, 316 to embed "
                             "(kmds on 127.0.0.1)")
    assert "now: 8,000 with vectors, 316 to embed" in status.embed_tooltip()
    assert not status.everything_embedded and status.semantic_searchable() == (8000, True)


@pytest.fixture()
def half_embedded(pg_empty_database: Any, literature_data: Path, tmp_path: Path) -> tuple[Any, list[dict]]:
    """12 SciFact documents, 6 of them with a vector."""
    db = pg_empty_database
    records = [json.loads(line) for line in
               (literature_data / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:12]]
    sample = tmp_path / "sample.jsonl"
    sample.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    db.import_files([sample])
    assert embed_documents(db, limit=6).embedded == 6
    return db, records


def test_run_search_plans_warns_runs_applies_and_records(half_embedded, data_home) -> None:
    db, records = half_embedded
    session = LiteratureSession()
    heard: list[str] = []
    session.subscribe(lambda change: heard.append(change.kind))
    session.attach_database(db)
    session.apply_database_status(lj.DatabaseStatus.from_status(
        lj.database_status(db, session.embedding_model)))
    session.set_draft_question(records[2]["title"])
    session.question = records[2]["title"]
    session.add_question_row()
    warned: list[str] = []
    try:
        outcome = run_search(session, session.agent(db), max_rows=50, warn=warned.append)
        assert session.history().database is db  # the session keeps its history on its database
        listed = session.history().history.list_sets()
    finally:
        session.close_history()
    assert len(warned) == 1 and "would search only 6 of 12 documents" in warned[0]
    assert outcome.saved is not None and outcome.saved.number == 1 and outcome.saved.complete
    assert session.last_run is outcome.run and session.documents  # applied to the session
    assert session.last_recorded == 1 and RECORDED in heard
    assert session.recorded_number() == 1  # the screening source of these results is set #1
    assert [s.number for s in listed] == [1] and listed[0].document_count == len(session.documents)


def test_the_cli_prints_the_coverage_question_as_a_note(half_embedded, data_home, capsys) -> None:
    db, records = half_embedded
    code = main(["literature", "search", records[2]["title"], "--models", "builtin:keywords",
                 "--semantic", "--dsn", db.dsn])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "note: The semantic row would search only 6 of 12 documents: 6 have no vector yet" in err
    assert "recorded as #1 in the search history" in err
