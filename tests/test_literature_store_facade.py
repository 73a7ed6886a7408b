"""The literature store as the application layer sees it (``LiteratureStore``) and the reviewed rows' run
(``QueryRun``), on the real embedded PostgreSQL with pgvector and the real tantivy index.

What is checked: each facade operation gives what the engine module it stands for gives on the same
database (documents, import, vectors, embedding, the fast index); a ``QueryRun`` returns what the query
agent's documented ``run_reviewed_queries`` returns for the same rows.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import psycopg
import pytest

from kmds_desktop.config import RetrievalSettings
from kmds_desktop.literature import QueryAgent
from kmds_desktop.literature.errors import QueryAgentError, VectorsUnavailable
from kmds_desktop.literature.retrieval.query_run import QueryRun
from kmds_desktop.literature.store import vectors as vector_engine
from kmds_desktop.literature.store.facade import LiteratureStore


def _word_hash_vectors(texts: list[str]) -> np.ndarray:
    """384-dimensional unit vectors from each text's hashed words: real rows for the vector table
    without loading the embedding model (their values do not matter here)."""
    out = np.zeros((len(texts), 384), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in text.lower().split():
            out[row, zlib.crc32(word.encode()) % 384] += 1.0
        out[row] /= max(float(np.linalg.norm(out[row])), 1e-9)
    return out


def _sample(literature_data: Path, tmp_path: Path, n: int) -> Path:
    lines = []
    with open(literature_data / "scifact" / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            lines.append(json.dumps(json.loads(line)) + "\n")
            if len(lines) == n:
                break
    path = tmp_path / "sample.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def test_the_store_answers_as_each_engine_does(
        pg_empty_database, literature_data, tmp_path, data_home) -> None:
    store = LiteratureStore(pg_empty_database)
    assert store.documents() == 0 and store.topk_state() == {"state": "none", "documents": 0}

    report = store.import_files([str(_sample(literature_data, tmp_path, 12))])
    assert report.files[0].inserted == 12
    assert store.documents() == 12 == store.status()["documents"]
    assert store.own_vectors() is None  # the app's own database: no BMLibrarian vectors to search

    model = "all-MiniLM-L6-v2"
    assert store.vector_status(model) == vector_engine.vector_status(pg_empty_database, model)
    assert store.documents_with_vectors() == 0
    store.embed(model, _word_hash_vectors, batch_size=5)
    assert store.documents_with_vectors() == 12 == store.vector_status(model)["with_vectors"]
    with psycopg.connect(pg_empty_database.dsn) as conn:
        ids = [int(r[0]) for r in conn.execute("SELECT id FROM document ORDER BY id LIMIT 3").fetchall()]
    got = store.vectors_for(ids)
    want = vector_engine.stored_vectors(pg_empty_database, ids)
    assert sorted(got) == sorted(want) == sorted(ids)
    assert all(np.array_equal(got[i], want[i]) for i in ids)

    state = store.build_topk()
    assert state.complete and store.topk_state() == {"state": "ready", "documents": 12}
    assert pg_empty_database.topk_index() is not None  # the database searches with it from now on
    assert LiteratureStore.topk_built_by_import_up_to() > 12


def test_vectors_unavailable_is_one_class_wherever_it_is_imported_from() -> None:
    # The application layer catches it from literature.errors without loading the vector engine.
    assert vector_engine.VectorsUnavailable is VectorsUnavailable


def test_a_query_run_returns_what_the_agent_returns(pg_database) -> None:
    rows = ["cystic <-> fibrosis & pseudomonas", "(antibiotic:* | tobramycin) & cystic <-> fibrosis",
            "this is not & & a query"]
    retrieval = RetrievalSettings()
    by_agent = QueryAgent(pg_database, retrieval=retrieval).run_reviewed_queries(rows, max_rows=20)
    by_run = QueryRun(pg_database, retrieval).run(rows, max_rows=20)
    assert by_run.ids == by_agent.ids and by_run.ids
    assert by_run.found_by == by_agent.found_by and by_run.fusion == by_agent.fusion
    assert [d["id"] for d in by_run.documents] == by_run.ids
    assert [(q.error_kind, q.ids) for q in by_run.queries] == [
        (q.error_kind, q.ids) for q in by_agent.queries]
    assert by_run.queries[2].error_kind == "invalid" and not by_run.incomplete


def test_a_query_run_without_a_database_says_what_to_do() -> None:
    with pytest.raises(QueryAgentError, match="no literature database is open"):
        QueryRun(None).run(["cystic"])
