"""What a run's exported log and its report say about it, read back from the files: each row's kind,
the semantic rows' coverage of a partly embedded database, the embedding model, the fusion and the
re-ranking, and the generated / unique query counts.

Real parts: a fresh PostgreSQL database with 12 SciFact documents of which 6 have vectors (the shipped
model), the built-in query generator (no LLM), the search history in a private data folder.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kmds_desktop.app.literature import LiteratureSession, execute_run, generate_round
from kmds_desktop.app.run_facts import VectorCoverage, coverage_warning, generation_counts
from kmds_desktop.app.search_log import write_search_log
from kmds_desktop.app.strategy import begin_recording, finish_recording
from kmds_desktop.config import LiteratureSettings, QueryGenerationSettings, RetrievalSettings
from kmds_desktop.literature.queries.query_cleaning import query_key
from kmds_desktop.literature.store.vectors import embed_documents
from kmds_desktop.literature.strategy.history import SearchHistory
from kmds_desktop.literature.strategy.search_report import build_report, write_report
from kmds_desktop.literature.strategy.workbench import SearchWorkbench

NOW = "2026-01-01T00:00:00+00:00"
OWN_SENTENCE = "proteins that regulate the cell cycle"


@pytest.fixture()
def half_embedded(pg_empty_database, literature_data: Path, tmp_path: Path) -> tuple[Any, list[dict]]:
    records = [json.loads(line) for line in
               (literature_data / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:12]]
    sample = tmp_path / "sample.jsonl"
    sample.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    pg_empty_database.import_files([sample])
    assert embed_documents(pg_empty_database, limit=6).embedded == 6
    return pg_empty_database, records


def test_coverage_warning_is_decided_without_qt() -> None:
    half = VectorCoverage(576, 1239)
    warning = coverage_warning(["tsquery", "semantic"], half)
    assert warning is not None and "576 of 1,239 documents" in warning and "663 have no vector" in warning
    assert coverage_warning(["tsquery"], half) is None  # no semantic row: nothing to warn about
    assert coverage_warning(["semantic"], VectorCoverage(1239, 1239)) is None
    assert coverage_warning(["semantic"], None) is None  # not known yet: the run records it anyway
    assert half.sentence() == "the semantic row searched 576 of 1,239 documents (those with a vector)"


def test_generation_counts_are_the_models_proposals() -> None:
    class Attempt:
        def __init__(self, query: str | None) -> None:
            self.query, self.ok = query, query is not None

    counts = generation_counts([Attempt("a & b"), Attempt("A  &  B"), Attempt("c"), Attempt(None)])
    assert counts == {"queries_generated": 3, "queries_unique": 2}


def test_log_and_report_say_what_ran(half_embedded, data_home: Path, tmp_path: Path) -> None:
    db, records = half_embedded
    question = records[3]["title"]
    qg = QueryGenerationSettings(multi_model_enabled=True, models=["builtin:keywords"], queries_per_model=3)
    session = LiteratureSession(qg, LiteratureSettings(max_rows=20), RetrievalSettings())
    session.database_name = db.display_name
    agent = session.agent(db)
    session.start_round(question, NOW)
    generate_round(agent, question, on_attempt=session.accept_attempt, retrieval_rows=True)
    session.finish_round()
    session.add_hand_written("cell | protein")
    session.add_semantic(OWN_SENTENCE)
    plan = session.plan_run(NOW)
    assert not (set(plan.kinds) - {"tsquery", "semantic"}) and plan.kinds.count("semantic") == 2
    workbench = SearchWorkbench(SearchHistory(), db)
    number = begin_recording(workbench, session, plan)
    result = execute_run(agent, plan, max_rows=20)
    saved = finish_recording(workbench, number, session.apply_run(plan, result, NOW))

    proposals = [a.query for a in session.round.attempts if a.ok]
    assert proposals, "the built-in generator proposes full-text queries"
    generated, unique = len(proposals), len({query_key(q) for q in proposals})

    # The exported log, read back as JSON.
    log_path = write_search_log(session.search_log(), tmp_path / "log.json")
    log = json.loads(log_path.read_text(encoding="utf-8"))
    kinds = [q["row_kind"] for q in log["queries"]]
    assert kinds[0] == "semantic: the question", "the question's semantic row comes first"
    assert kinds[-1] == "semantic: hand-written" and set(kinds[1:-1]) == {"full-text"}
    question_row, own_row = log["queries"][0], log["queries"][-1]
    assert question_row["provenance"]["kind"] == "question" and question_row["query"] == question
    assert own_row["provenance"]["kind"] == "hand-written" and own_row["query"] == OWN_SENTENCE
    assert [q["provenance"]["kind"] for q in log["queries"][1:-1]].count("hand-written") == 1
    for row in (question_row, own_row):
        assert row["coverage"] == {"searched": 6, "documents": 12, "partial": True}
    facts = log["retrieval_run"]
    assert facts["embedding_model"] == "all-MiniLM-L6-v2" and facts["semantic_rows"] == 2
    assert facts["vector_coverage"] == {"searched": 6, "documents": 12, "partial": True}
    assert facts["fusion"] == {"method": "rrf", "k": 20,
                               "weights": {"full-text": 1.0, "semantic": 3.0, "hypothetical abstract": 3.0}}
    assert facts["rerank"]["applied"] and facts["rerank"]["weight"] == 0.7
    assert log["generation"] == {"queries_generated": generated, "queries_unique": unique}
    assert log["row_kinds"] == {"full-text": len(kinds) - 2, "semantic: the question": 1,
                                "semantic: hand-written": 1}
    assert "searched 6 of 12 documents" in session.run_summary()

    # The history keeps the kinds and the coverage; the overlap counts the semantic rows by kind.
    assert [r.row_kind for r in saved.rows] == kinds
    assert saved.rows[0].summary().startswith("semantic: the question, added by the retrieval settings")
    assert saved.coverage_text() == "the 2 semantic rows searched 6 of 12 documents (those with a vector)"
    assert saved.details["queries_generated"] == generated and saved.details["queries_unique"] == unique

    # The report, written as Markdown and read back as text.
    report = build_report(workbench.history, saved.number)
    models = report["overlap"]["models"]
    assert models["hand-written"]["rows"] == 1, "only the hand-written full-text query"
    assert models["semantic: the question"]["rows"] == 1 and models["semantic: hand-written"]["rows"] == 1
    text = write_report(report, tmp_path / "report.md").read_text(encoding="utf-8")
    workbench.history.close()
    methods = text.split("## Methods summary", 1)[1].strip().split("\n\n", 1)[0]
    full_text = len(kinds) - 2
    assert (f"{full_text} full-text quer{'ies' if full_text != 1 else 'y'} (PostgreSQL to_tsquery"
            in methods)
    assert "1 semantic row (the question) and 1 semantic row (a hand-written sentence)" in methods
    assert "embedded with all-MiniLM-L6-v2" in methods
    assert "the 2 semantic rows searched 6 of 12 documents (those with a vector)" in methods
    assert "reciprocal rank fusion (k = 20; weight 1 for full-text rows, 3 for semantic" in methods
    assert "re-ranked by 0.7 × similarity to the question + 0.3 × full-text score" in methods
    assert f"{generated} generated, {unique} after de-duplication of the query text" in text
    table = [line for line in text.splitlines() if re.match(rf"\| #{saved.number}\.\d+ \| ", line)]
    row_lines = [line for line in table if "`" in line]  # the rows table (the overlap has no texts)
    assert [line.split("|")[2].strip() for line in row_lines] == kinds
    assert "added by the retrieval settings" in row_lines[0] and "hand-written" not in row_lines[0]
