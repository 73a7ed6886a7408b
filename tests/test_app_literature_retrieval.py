"""The rows the retrieval settings add to a generation round, without Qt: the question as a semantic
row and an LLM's hypothetical abstract, in the session the window and the CLI share.

Real parts: a fresh PostgreSQL database with SciFact documents and their vectors (the shipped model),
the fake Ollama server through the real ``ollama`` client.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_ollama import ModelScript

from kmds_desktop.app.literature import (
    HAND_WRITTEN,
    HypotheticalAttempt,
    LiteratureSession,
    RetrievalRows,
    execute_run,
    generate_round,
    plan_retrieval_rows,
)
from kmds_desktop.config import LiteratureSettings, QueryGenerationSettings, RetrievalSettings
from kmds_desktop.literature.store.vectors import embed_documents

NOW = "2026-01-01T00:00:00+00:00"
QUERY = "cell | protein"


def _abstract(title: str) -> str:
    return (f"{title}. We studied this question in a cohort and measured the outcome with standard "
            "methods. The main finding supports the hypothesis.")


def _replies(abstract: str, query: str = QUERY):
    """A model that answers query prompts with ``query`` and the abstract prompt with ``abstract``."""
    return [lambda prompt, _body: abstract if "Write the abstract" in prompt else query]


@pytest.fixture()
def embedded_db(pg_empty_database, literature_data: Path, tmp_path: Path) -> tuple[Any, list[dict]]:
    records = [json.loads(line) for line in
               (literature_data / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:12]]
    sample = tmp_path / "sample.jsonl"
    sample.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    pg_empty_database.import_files([sample])
    assert embed_documents(pg_empty_database).embedded == 12
    return pg_empty_database, records


def _session(url: str, models: list[str], **retrieval: Any) -> LiteratureSession:
    qg = QueryGenerationSettings(multi_model_enabled=True, models=models, queries_per_model=1,
                                 ollama_host=url, timeout_s=10,
                                 verbatim_query_models=[m for m in models if not m.startswith("builtin:")])
    return LiteratureSession(qg, LiteratureSettings(max_rows=20), RetrievalSettings(**retrieval))


def _round(session: LiteratureSession, db: Any, question: str) -> list[Any]:
    items: list[Any] = []
    session.start_round(question, NOW)

    def accept(item: Any) -> None:
        items.append(item)
        session.accept_attempt(item)

    generate_round(session.agent(db), question, on_attempt=accept, retrieval_rows=True)
    session.finish_round()
    return items


def test_a_round_adds_the_semantic_row_and_the_hypothetical_abstract(fake_ollama, embedded_db) -> None:
    db, records = embedded_db
    target = records[3]
    fake_ollama.models["m"] = ModelScript(_replies(_abstract(target["title"])))
    session = _session(fake_ollama.url, ["m"])
    question = target["title"]
    items = _round(session, db, question)

    assert isinstance(items[0], RetrievalRows) and items[0].with_vectors == 12
    assert isinstance(items[-1], HypotheticalAttempt) and items[-1].ok
    kinds = [(r.kind, r.model, r.query[:30]) for r in session.rows]
    assert kinds == [("semantic", HAND_WRITTEN, question[:30]), ("tsquery", "m", QUERY),
                     ("hypothetical", "m", target["title"][:30])]
    assert session.rows[0].source_label == "[semantic] question"
    session.edit(session.rows[0].uid, question + " In adults?")
    assert session.rows[0].source_label == "[semantic] hand-written", "edited: the user's sentence now"
    session.edit(session.rows[0].uid, question)
    hypothetical = session.rows[2]
    assert hypothetical.included and hypothetical.source_label == "[hypothetical] m"
    made = hypothetical.provenance()
    assert made["row_type"] == "hypothetical" and made["model"] == "m"
    rnd = session.round
    assert "hypothetical abstract: ✓ m" in rnd.status_line()
    assert rnd.summary() == "Generated: 1 query from 1 of 1 model; a hypothetical abstract from m"

    # Every row runs with its own statistics; the target paper comes first by meaning.
    plan = session.plan_run(NOW)
    assert plan.kinds == ["semantic", "tsquery", "hypothetical"]
    session.apply_run(plan, execute_run(session.agent(db), plan, max_rows=20), NOW)
    assert session.documents[0]["title"] == target["title"]
    for row in session.rows:
        assert row.returned is not None and row.returned > 0 and row.matches is not None, row.kind
    assert session.rows[0].matches == 12, "a semantic row's matches: the documents with a vector"


def test_generating_again_adds_no_duplicate_and_replaces_only_the_old_questions_semantic_row(
        fake_ollama, embedded_db) -> None:
    db, records = embedded_db
    fake_ollama.models["m"] = ModelScript(_replies(_abstract(records[0]["title"])))
    session = _session(fake_ollama.url, ["m"])
    _round(session, db, records[0]["title"])
    _round(session, db, records[0]["title"])
    assert [r.kind for r in session.rows] == ["semantic", "tsquery", "hypothetical"], "no duplicates"

    semantic, _query, hypothetical = session.rows
    session.edit(hypothetical.uid, hypothetical.query + " In children.")
    _round(session, db, records[1]["title"])  # another question
    kinds = [(r.kind, r.query == records[1]["title"]) for r in session.rows]
    # The old question's semantic row went (untouched), the edited abstract stayed.
    assert semantic not in session.rows and hypothetical in session.rows
    assert kinds.count(("semantic", True)) == 1 and [k for k, _ in kinds].count("hypothetical") == 2


def test_a_failing_llm_leaves_the_other_rows_usable(fake_ollama, embedded_db) -> None:
    db, records = embedded_db
    fake_ollama.models["m"] = ModelScript([QUERY], statuses=[200, 500])
    session = _session(fake_ollama.url, ["m"])
    _round(session, db, records[0]["title"])
    assert [r.kind for r in session.rows] == ["semantic", "tsquery"]
    rnd = session.round
    assert rnd.hypothetical_failed and "hypothetical abstract: ✗ model 'm'" in rnd.status_line()
    assert "; no hypothetical-abstract row: model 'm' could not write" in rnd.summary()
    assert "Error" not in rnd.summary().split(";")[-1].split(":")[0]
    assert session.plan_run(NOW).kinds == ["semantic", "tsquery"]


def test_no_vectors_or_no_llm_means_no_such_rows(fake_ollama, pg_database, embedded_db) -> None:
    db, records = embedded_db
    fake_ollama.models["m"] = ModelScript([QUERY])
    without = plan_retrieval_rows(_session(fake_ollama.url, ["m"]).agent(pg_database), "vitamin D")
    assert without == RetrievalRows(reason=without.reason) and "no document has a vector" in without.reason
    builtin = plan_retrieval_rows(_session(fake_ollama.url, ["builtin:keywords"]).agent(db), "vitamin D")
    assert builtin.semantic == "vitamin D" and builtin.hypothetical_model is None
    off = plan_retrieval_rows(_session(fake_ollama.url, ["m"], semantic_row=False).agent(db), "vitamin D")
    assert off.semantic is None and off.hypothetical_model == "m"
