"""Semantic rows on the vectors a BMLibrarian database already holds (its own chunk vectors).

A database in BMLibrarian's layout (``embedding_base`` with an ``emb_<N>`` child table per dimension,
``embedding_models``, ``chunks``) on a real PostgreSQL server with pgvector; the database's model is
an embedding model on a real HTTP server speaking Ollama's API (``/api/embed``), driven through the
real ``ollama`` client. The row embeds its sentence with that model and searches the database's own
vectors (nothing to embed, nothing written); without the model it says what to pull.
"""

from __future__ import annotations

import hashlib
import math

import psycopg
import pytest
from support.bmlibrarian import BMLIBRARIAN_TABLES
from support.fake_ollama import FakeOllama, ModelScript

from kmds_desktop.app.run_facts import retrieval_facts, run_coverage
from kmds_desktop.config import QueryGenerationSettings, RetrievalSettings
from kmds_desktop.literature import open_database
from kmds_desktop.literature.queries.agent import QueryAgent
from kmds_desktop.literature.retrieval.semantic import ROW_SEMANTIC, SearchRow
from kmds_desktop.literature.store import bmlibrarian_vectors

MODEL = "snowflake-arctic-embed2:latest"
DIMENSIONS = 64

SCHEMA = """
CREATE EXTENSION IF NOT EXISTS vector;
""" + BMLIBRARIAN_TABLES + """
CREATE TABLE chunks (id serial PRIMARY KEY, document_id integer, chunking_strategy_id integer,
                     chunktype_id integer, document_title text, text text, chunklength integer,
                     chunk_no integer NOT NULL, page_start integer DEFAULT 0, page_end integer DEFAULT 0,
                     metadata jsonb);
CREATE TABLE embedding_base (id serial, chunk_id integer NOT NULL, model_id integer);
CREATE TABLE emb_64 (embedding vector(64)) INHERITS (embedding_base);
CREATE INDEX emb_64_hnsw ON emb_64 USING hnsw (embedding vector_cosine_ops);
CREATE TABLE embedding_models (id serial PRIMARY KEY, provider_id integer, model_name text NOT NULL,
                               model_description text, model_parameters jsonb);
INSERT INTO sources (name) VALUES ('pubmed'), ('medrxiv');
INSERT INTO embedding_models (model_name) VALUES ('an-older-model'), ('snowflake-arctic-embed2:latest');
"""

#: (source, title, abstract, chunked, withdrawn)
DOCUMENTS = [
    (1, "Malaria vaccine trial in Kenyan children", "A randomised trial of a malaria vaccine in children.",
     True, False),
    (1, "Statins lower cholesterol", "Statin therapy and cholesterol in adults with heart disease.",
     True, False),
    (2, "Deep brain stimulation in Parkinson disease", "Stimulation of the subthalamic nucleus.",
     True, False),
    (1, "Asthma in children", "Inhaled steroids for childhood asthma.", True, False),
    (2, "Malaria parasites resist artemisinin", "Artemisinin resistance of malaria parasites.", True, False),
    (1, "Asthma in Central Europe", "Prevalence of asthma in adults.", False, False),  # no vector yet
    (1, "Malaria vaccine trial children retracted", "A malaria vaccine trial in children.", True, True),
]


def embed(text: str) -> list[float]:
    """The scripted model: words hashed into 64 dimensions, unit length (similar words, similar vectors)."""
    vector = [0.0] * DIMENSIONS
    for word in text.lower().replace(".", " ").split():
        if len(word) > 2:
            vector[int(hashlib.sha1(word.encode()).hexdigest(), 16) % DIMENSIONS] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def _expected_order(question: str, ids: dict[str, int], sources: tuple[int, ...] = (1, 2)) -> list[int]:
    """The documents by their best chunk's cosine similarity to ``question``, computed here."""
    q = embed(question)
    best = {}
    for source, title, abstract, chunked, withdrawn in DOCUMENTS:
        if chunked and not withdrawn and source in sources:
            best[ids[title]] = max(sum(a * b for a, b in zip(q, embed(t), strict=True))
                                   for t in (title, abstract))
    return sorted(best, key=lambda i: (-round(best[i], 5), i))


def _literal(vector: list[float]) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in vector) + "]"


def _tables(info: dict) -> list[tuple]:
    with psycopg.connect(**info) as conn:
        return conn.execute("SELECT relname, relkind FROM pg_class c JOIN pg_namespace n "
                            "ON n.oid = c.relnamespace WHERE n.nspname = 'public' ORDER BY 1").fetchall()


@pytest.fixture()
def bmlibrarian_with_vectors(pg_external, monkeypatch):
    admin, password = pg_external["admin"], pg_external["password"]
    with psycopg.connect(**admin, password=password, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS bmlib_vectors")
        conn.execute("CREATE DATABASE bmlib_vectors")
    info = {**admin, "dbname": "bmlib_vectors", "password": password}
    ids: dict[str, int] = {}
    with psycopg.connect(**info, autocommit=True) as conn:
        conn.execute(SCHEMA)
        model_id = conn.execute("SELECT id FROM embedding_models WHERE model_name = %s",
                                (MODEL,)).fetchone()[0]
        for n, (source, title, abstract, chunked, withdrawn) in enumerate(DOCUMENTS):
            doc_id = conn.execute(
                "INSERT INTO document (source_id, external_id, title, abstract, publication_date, "
                "withdrawn_date) VALUES (%s, %s, %s, %s, '2020-05-01', CASE WHEN %s THEN now() END) "
                "RETURNING id",
                (source, str(1000 + n), title, abstract, withdrawn)).fetchone()[0]
            ids[title] = doc_id
            if not chunked:
                continue
            for chunk_no, text in enumerate((title, abstract)):
                chunk_id = conn.execute(
                    "INSERT INTO chunks (document_id, document_title, text, chunk_no) "
                    "VALUES (%s, %s, %s, %s) RETURNING id", (doc_id, title, text, chunk_no)).fetchone()[0]
                conn.execute("INSERT INTO emb_64 (chunk_id, model_id, embedding) VALUES (%s, %s, %s::vector)",
                             (chunk_id, model_id, _literal(embed(text))))
        conn.execute("ANALYZE")
    monkeypatch.setenv("KMDS_DESKTOP_DB_PASSWORD", password)
    port = pg_external["server"].tcp_port
    db = open_database(f"host=127.0.0.1 port={port} dbname=bmlib_vectors user=postgres")
    yield db, info, ids
    db.close()


def _agent(db, url: str, **retrieval) -> QueryAgent:
    return QueryAgent(db, QueryGenerationSettings(ollama_host=url, timeout_s=10),
                      retrieval=RetrievalSettings(**retrieval))


def test_semantic_row_searches_the_databases_own_vectors_with_their_model(bmlibrarian_with_vectors):
    db, info, ids = bmlibrarian_with_vectors
    assert db.schema_owner == "external"
    found = bmlibrarian_vectors.find_database_vectors(db)  # the model listed without vectors is not one
    assert [(v.table, v.dimensions, v.model_name) for v in found] == [("emb_64", 64, MODEL)]
    before = _tables(info)
    with FakeOllama({MODEL: ModelScript(embed=embed)}) as fake:
        result = _agent(db, fake.url).run_reviewed_queries(
            [SearchRow("malaria vaccine trial in children", ROW_SEMANTIC)], fetch=False)
        embedded = fake.requests_for("/api/embed")
    stat = result.queries[0]
    assert stat.ok, stat.error
    assert stat.ids[0] == ids["Malaria vaccine trial in Kenyan children"]
    assert ids["Malaria vaccine trial children retracted"] not in stat.ids  # withdrawn: never found
    assert ids["Asthma in Central Europe"] not in stat.ids  # no chunk vector
    assert stat.ids == _expected_order("malaria vaccine trial in children", ids)  # best chunk per document
    assert [r.model for r in embedded] == [MODEL]  # the sentence embedded by the database's model
    assert (stat.matches, stat.searchable, stat.coverage_estimated) == (5, 6, False)
    sentence = run_coverage(result.queries).sentence()
    assert sentence == ("the semantic row searched 5 of 6 documents (those with a vector: the database's "
                        f"own {MODEL} vectors)")
    assert retrieval_facts(RetrievalSettings(), "all-MiniLM-L6-v2", result)["embedding_model"] == MODEL
    assert _tables(info) == before  # read-only: nothing created in a database the app does not own


def test_filters_apply_to_the_databases_vectors(bmlibrarian_with_vectors):
    db, _, ids = bmlibrarian_with_vectors
    with FakeOllama({MODEL: ModelScript(embed=embed)}) as fake:
        result = _agent(db, fake.url).run_reviewed_queries(
            [SearchRow("malaria vaccine trial in children", ROW_SEMANTIC)], fetch=False,
            use_pubmed=False, use_others=False)  # medRxiv only
    stat = result.queries[0]
    assert stat.ok, stat.error
    assert stat.ids == _expected_order("malaria vaccine trial in children", ids, sources=(2,))
    assert stat.ids[0] == ids["Malaria parasites resist artemisinin"]
    assert (stat.matches, stat.searchable) == (2, 2)


def test_a_narrow_filter_widens_the_search_past_the_nearest_chunks(bmlibrarian_with_vectors):
    """600 PubMed chunks nearer the sentence than any medRxiv one: the first scan (the nearest
    4 x 100 + 100) holds no medRxiv chunk, so the row widens until it finds both medRxiv documents."""
    db, info, ids = bmlibrarian_with_vectors
    question = "malaria vaccine trial in children"
    with psycopg.connect(**info, autocommit=True) as conn:
        model_id = conn.execute("SELECT id FROM embedding_models WHERE model_name = %s",
                                (MODEL,)).fetchone()[0]
        for n in range(150):
            doc_id = conn.execute(
                "INSERT INTO document (source_id, external_id, title, abstract, publication_date) "
                "VALUES (1, %s, %s, %s, '2021-01-01') RETURNING id",
                (f"near-{n}", f"{question} {n}", question)).fetchone()[0]
            for chunk_no in range(4):
                chunk_id = conn.execute(
                    "INSERT INTO chunks (document_id, text, chunk_no) VALUES (%s, %s, %s) RETURNING id",
                    (doc_id, question, chunk_no)).fetchone()[0]
                conn.execute("INSERT INTO emb_64 (chunk_id, model_id, embedding) VALUES (%s, %s, %s::vector)",
                             (chunk_id, model_id, _literal(embed(question))))
        conn.execute("ANALYZE")
    with FakeOllama({MODEL: ModelScript(embed=embed)}) as fake:
        result = _agent(db, fake.url).run_reviewed_queries(
            [SearchRow(question, ROW_SEMANTIC)], fetch=False, use_pubmed=False, use_others=False)
    stat = result.queries[0]
    assert stat.ok, stat.error
    assert stat.ids == _expected_order(question, ids, sources=(2,))  # both medRxiv documents, in order
    found = bmlibrarian_vectors.nearest_document_ids(
        db, bmlibrarian_vectors.find_database_vectors(db)[0], embed(question), max_rows=100, use_pubmed=False,
        use_others=False)
    assert [i for i, _ in found] == stat.ids


def test_a_large_database_gets_an_estimated_coverage(bmlibrarian_with_vectors, monkeypatch):
    db, _, _ = bmlibrarian_with_vectors
    monkeypatch.setattr(bmlibrarian_vectors, "EXACT_COVERAGE_UP_TO", 0)  # as if it held millions
    with FakeOllama({MODEL: ModelScript(embed=embed)}) as fake:
        result = _agent(db, fake.url).run_reviewed_queries(
            [SearchRow("statins and cholesterol", ROW_SEMANTIC)], fetch=False)
    stat = result.queries[0]
    assert stat.ok and stat.coverage_estimated
    assert stat.searchable == 7  # the planner's row count of document (withdrawn ones too)
    assert 0 < stat.matches <= stat.searchable
    assert "≈" in run_coverage(result.queries).sentence()


def test_without_the_model_the_row_says_what_to_pull(bmlibrarian_with_vectors):
    db, info, _ = bmlibrarian_with_vectors
    before = _tables(info)
    with FakeOllama({"llama3.1:8b": ModelScript()}) as fake:  # a server without the embedding model
        url = fake.url
        result = _agent(db, url).run_reviewed_queries(
            [SearchRow("malaria vaccine", ROW_SEMANTIC), "malaria & vaccine"], fetch=False)
        assert not fake.requests_for("/api/embed")
    semantic, full_text = result.queries
    assert not semantic.ok and semantic.error_kind == "invalid"
    assert f"ollama pull {MODEL}" in semantic.error and url in semantic.error
    assert full_text.ok and full_text.ids  # the other rows run as before
    assert _tables(info) == before


def test_the_setting_turns_the_databases_vectors_off(bmlibrarian_with_vectors):
    db, _, _ = bmlibrarian_with_vectors
    with FakeOllama({MODEL: ModelScript(embed=embed)}) as fake:
        result = _agent(db, fake.url, use_database_vectors=False).run_reviewed_queries(
            [SearchRow("malaria vaccine", ROW_SEMANTIC), "malaria"], fetch=False)
        assert not fake.requests_for("/api/embed")
    assert not result.queries[0].ok  # the app's own vectors: none in this database
    assert "ollama pull" not in result.queries[0].error


def test_a_model_of_another_size_is_a_clear_error(bmlibrarian_with_vectors):
    db, _, _ = bmlibrarian_with_vectors
    with FakeOllama({MODEL: ModelScript(embed=lambda text: [1.0] * 8)}) as fake:
        result = _agent(db, fake.url).run_reviewed_queries(
            [SearchRow("malaria vaccine", ROW_SEMANTIC), "malaria"], fetch=False)
    stat = result.queries[0]
    assert not stat.ok
    assert "8-dimensional" in stat.error and "emb_64 holds 64" in stat.error


def test_the_ollama_backend_embeds_through_the_real_client():
    from kmds_desktop.llm.errors import LLMError
    from kmds_desktop.llm.ollama_backend import OllamaBackend

    with FakeOllama({MODEL: ModelScript(embed=embed)}) as fake:
        backend = OllamaBackend(fake.url, MODEL, timeout=10)
        vectors = backend.embed(["malaria vaccine", "statins"])
        assert [len(v) for v in vectors] == [DIMENSIONS, DIMENSIONS]
        assert vectors[0] == pytest.approx(embed("malaria vaccine"))
        with pytest.raises(LLMError, match="nomic-embed-text"):
            backend.embed(["malaria"], model="nomic-embed-text")


def test_reranking_uses_the_databases_vectors_and_embeds_only_the_question(bmlibrarian_with_vectors):
    db, _, ids = bmlibrarian_with_vectors

    def app_model(texts):  # the app's own model must not be asked for anything here
        raise AssertionError(f"embedded {len(texts)} texts with the app's model")

    with FakeOllama({MODEL: ModelScript(embed=embed)}) as fake:
        agent = QueryAgent(db, QueryGenerationSettings(ollama_host=fake.url, timeout_s=10),
                           retrieval=RetrievalSettings(rerank=True, rerank_weight=1.0), encoder=app_model)
        result = agent.run_reviewed_queries(["statin | asthma | malaria | stimulation"], fetch=False,
                                            question="malaria vaccine trial in children")
        embedded = fake.requests_for("/api/embed")
    assert result.fusion.endswith("+rerank")
    assert [r.prompt for r in embedded] == ["malaria vaccine trial in children"]
    assert result.queries[0].ids  # the full-text row found them; the order is the similarity's
    ranked = [i for i in _expected_order("malaria vaccine trial in children", ids) if i in set(
        result.queries[0].ids)]
    assert len(ranked) == 5  # the lowest scales to 0, as a document without a vector: compare the others
    assert result.ids[:4] == ranked[:4]


def test_the_cli_reports_the_databases_vectors_and_its_search_adds_the_semantic_row(
        bmlibrarian_with_vectors, data_home, capsys):
    """``literature status`` says what the database's own vectors cover; ``literature search`` adds the
    question's semantic row on them by the window's rule (the app itself has embedded nothing here)."""
    import json

    from kmds_desktop.cli import main
    from kmds_desktop.config import load_settings, save_settings

    db, _, ids = bmlibrarian_with_vectors
    dsn = db.dsn
    assert main(["literature", "status", "--dsn", dsn]) == 0
    out = capsys.readouterr().out
    assert (f"database vectors: 5 of 6 documents have the database's own {MODEL} vectors (emb_64, 64 "
            "dimensions)") in out
    with FakeOllama({MODEL: ModelScript(embed=embed)}) as fake:
        settings = load_settings()
        settings.query_generation.ollama_host = fake.url
        save_settings(settings)
        code = main(["literature", "search", "malaria vaccine trial in children", "--models",
                     "builtin:keywords", "--queries-per-model", "1", "--max-rows", "5", "--dsn", dsn,
                     "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    semantic = [q for q in json.loads(out)["queries"] if q["provenance"].get("row_type") == "semantic"]
    assert len(semantic) == 1 and semantic[0]["provenance"]["kind"] == "question"
    assert semantic[0]["ids"][0] == ids["Malaria vaccine trial in Kenyan children"]
    assert semantic[0]["error"] is None


def test_a_cancelled_lookup_is_not_remembered_as_no_vectors(bmlibrarian_with_vectors, monkeypatch):
    """A query cancelled, timed out or cut off while looking for the database's vectors says nothing of
    its layout: the next search looks again and finds them (it used to remember "none" for the session).
    The failures are the database's own error types, raised in place of its ``run`` once each."""
    from kmds_desktop.literature.errors import DatabaseUnavailable, QueryCancelled, QueryTimeout

    db, _, _ = bmlibrarian_with_vectors
    real_run = db.run
    for error in (QueryCancelled("cancelled by the user"), QueryTimeout("the query took too long"),
                  DatabaseUnavailable("lost the connection")):
        def failing(fn, cancel=None, error=error):
            raise error

        monkeypatch.setattr(db, "run", failing)
        with pytest.raises(type(error)):
            bmlibrarian_vectors.find_database_vectors(db)
        monkeypatch.setattr(db, "run", real_run)
    assert [v.model_name for v in bmlibrarian_vectors.find_database_vectors(db)] == [MODEL]


def test_a_table_never_analysed_is_sized_by_the_planner_not_as_empty(pg_empty_database):
    """A database loaded in bulk and not yet analysed (``reltuples`` -1) is sized by the planner's
    estimate from its pages, not taken for an empty one (whose coverage would be counted exactly)."""
    with psycopg.connect(pg_empty_database.dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS never_analysed")
        conn.execute("CREATE TABLE never_analysed (x int, t text)")
        conn.execute("INSERT INTO never_analysed SELECT g, repeat('x', 40) FROM generate_series(1, 5000) g")
        tuples = conn.execute("SELECT reltuples FROM pg_class WHERE relname = 'never_analysed'").fetchone()[0]
        assert tuples < 0
        sizes = bmlibrarian_vectors.table_sizes(conn, ["never_analysed", "document"])
        conn.execute("DROP TABLE never_analysed")
    assert 2_000 <= sizes["never_analysed"] <= 20_000, sizes
    assert sizes["document"] >= 0
