"""Document vectors on the real embedded PostgreSQL (pgvector) with the real bundled model."""

from __future__ import annotations

import json
import secrets as pysecrets
from pathlib import Path

import numpy as np
import psycopg
import pytest

from kmds_desktop.cli import main
from kmds_desktop.config import LiteratureSettings
from kmds_desktop.index.embeddings import encode
from kmds_desktop.literature.store.database import open_database
from kmds_desktop.literature.store.schema import LATEST_VERSION, UPGRADES, VERSION_TABLE
from kmds_desktop.literature.store.vectors import (
    VECTOR_TABLE,
    VectorsUnavailable,
    embed_documents,
    nearest_ids,
    stored_vectors,
    vector_status,
)
from kmds_desktop.tasks import CancelToken


def _scifact_sample(literature_data: Path, tmp_path: Path, n: int) -> tuple[Path, list[dict]]:
    records = []
    with open(literature_data / "scifact" / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            records.append(json.loads(line))
            if len(records) == n:
                break
    path = tmp_path / "sample.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path, records


def _sql(db, sql: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(db.dsn) as conn:
        return conn.execute(sql, params).fetchall()


def test_embedded_server_ships_pgvector_and_upgrade_creates_the_table(pg_empty_database):
    db = pg_empty_database
    assert db.schema_version == LATEST_VERSION >= 4
    assert _sql(db, "SELECT extname FROM pg_extension WHERE extname = 'vector'") == [("vector",)]
    index = _sql(db, "SELECT indexdef FROM pg_indexes WHERE tablename = %s AND indexdef LIKE %s",
                 (VECTOR_TABLE, "%hnsw%"))
    assert index and "vector_cosine_ops" in index[0][0]
    assert vector_status(db) == {"available": True, "extension": True, "with_vectors": 0, "needing": 0,
                                 "model": "all-MiniLM-L6-v2"}


def test_upgrade_from_version_3_keeps_documents(pg_server, literature_data, tmp_path):
    name = f"kmds_v3_{pysecrets.token_hex(4)}"
    admin = pg_server.conninfo("postgres")
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # generated name
    info = pg_server.conninfo(name)
    try:
        with psycopg.connect(**info, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {VERSION_TABLE} (version integer PRIMARY KEY, description text "
                         "NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
            for number, description, steps in UPGRADES[:3]:
                for step in steps:
                    conn.execute(step)
                conn.execute(f"INSERT INTO {VERSION_TABLE} VALUES (%s, %s)", (number, description))
            conn.execute("INSERT INTO sources (name) VALUES ('SciFact')")
            conn.execute("INSERT INTO document (source_id, external_id, title) VALUES (1, 'x:1', 'Old')")
            assert conn.execute("SELECT to_regclass(%s)", (VECTOR_TABLE,)).fetchone()[0] is None
        dsn = " ".join(f"{k}={v}" for k, v in info.items())
        db = open_database(dsn, settings=LiteratureSettings())
        try:
            assert db.schema_version == LATEST_VERSION
            assert vector_status(db)["available"] and vector_status(db)["needing"] == 1
            assert db.status()["documents"] == 1
        finally:
            db.close()
    finally:
        with psycopg.connect(**admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_embed_is_batched_resumable_and_only_embeds_new_or_changed(pg_empty_database, literature_data,
                                                                    tmp_path):
    db = pg_empty_database
    path, records = _scifact_sample(literature_data, tmp_path, 20)
    db.import_files([path])

    # Cancel after the second batch: committed batches stay, the report says how many are left.
    cancel = CancelToken()
    seen: list[tuple[int, int | None]] = []

    def progress(done: int, total: int | None, _message: str) -> None:
        seen.append((done, total))
        if done >= 8:
            cancel.cancel()

    first = embed_documents(db, batch_size=4, progress=progress, cancel=cancel)
    assert first.cancelled and first.embedded == 8 and first.remaining == 12
    assert seen[0] == (0, 20) and (4, 20) in seen
    assert vector_status(db)["with_vectors"] == 8

    second = embed_documents(db, batch_size=4)
    assert not second.cancelled and second.embedded == 12 and second.remaining == 0
    assert embed_documents(db).embedded == 0  # nothing new or changed

    # The stored vector is the model's vector of "title. abstract".
    rec = records[3]
    doc_id = _sql(db, "SELECT id FROM document WHERE external_id = %s", (rec["id"],))[0][0]
    stored = stored_vectors(db, [doc_id])[doc_id]
    expected = encode([f"{rec['title'].strip()}. {rec['abstract'].strip()}"])[0]
    assert float(np.dot(stored, expected)) > 0.9999

    # A changed title is embedded again; the others are not.
    changed = dict(rec, title="Zebrafish models: " + rec["title"])
    path.write_text(json.dumps(changed) + "\n", encoding="utf-8")
    db.import_files([path])
    assert vector_status(db)["needing"] == 1
    again = embed_documents(db)
    assert again.embedded == 1
    assert float(np.dot(stored_vectors(db, [doc_id])[doc_id], expected)) < 0.9999


def test_nearest_ids_rank_by_meaning_with_filters(pg_empty_database, literature_data, tmp_path):
    db = pg_empty_database
    path, records = _scifact_sample(literature_data, tmp_path, 30)
    db.import_files([path])
    embed_documents(db)
    target = records[7]
    query = encode([target["title"]])[0]
    ranked = nearest_ids(db, query, max_rows=5)
    assert len(ranked) == 5
    top_external = _sql(db, "SELECT external_id FROM document WHERE id = %s", (ranked[0][0],))[0][0]
    assert top_external == target["id"]
    sims = [s for _, s in ranked]
    assert sims == sorted(sims, reverse=True) and sims[0] > 0.5
    assert nearest_ids(db, query, max_rows=5, use_others=False) == []  # SciFact is an "other" source
    with psycopg.connect(db.dsn) as conn:
        conn.execute("UPDATE document SET withdrawn_date = '2020-01-01' WHERE id = %s", (ranked[0][0],))
    assert ranked[0][0] not in {i for i, _ in nearest_ids(db, query, max_rows=5)}


def test_status_and_embed_commands(pg_empty_database, literature_data, tmp_path, capsys):
    db = pg_empty_database
    path, _ = _scifact_sample(literature_data, tmp_path, 6)
    db.import_files([path])
    assert main(["literature", "status", "--dsn", db.dsn]) == 0
    assert "vectors:   0 documents have vectors (all-MiniLM-L6-v2), 6 to embed" in capsys.readouterr().out
    assert main(["literature", "embed", "--dsn", db.dsn, "--limit", "4", "--batch-size", "2"]) == 0
    captured = capsys.readouterr()
    assert "embedded 4 documents" in captured.out and "2 still need a vector" in captured.out
    assert "embedded 4 of 4 documents" in captured.err  # progress
    assert main(["literature", "embed", "--dsn", db.dsn, "-q"]) == 0
    assert "embedded 2 documents" in capsys.readouterr().out
    assert main(["literature", "status", "--json", "--dsn", db.dsn]) == 0
    assert json.loads(capsys.readouterr().out)["vectors"]["with_vectors"] == 6


BMLIBRARIAN_DDL = """
CREATE TABLE sources (id serial PRIMARY KEY, name text UNIQUE NOT NULL, url text, is_reputable boolean,
                      is_free boolean);
CREATE TABLE document (id serial PRIMARY KEY, source_id integer REFERENCES sources(id),
  external_id text NOT NULL, doi text, title text, abstract text, authors text[], publication text,
  publication_date date, mesh_terms text[], keywords text[], url text, withdrawn_date date,
  search_vector tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', coalesce(title,'')),'A') ||
    setweight(to_tsvector('english', coalesce(abstract,'')),'B')) STORED,
  UNIQUE (source_id, external_id));
INSERT INTO sources (name) VALUES ('pubmed');
INSERT INTO document (source_id, external_id, title, abstract) VALUES
  (1, '100', 'Asthma in children', 'Inhaled corticosteroids reduce exacerbations.'),
  (1, '101', 'Heart failure', 'Beta blockers lower mortality.');
"""


@pytest.fixture()
def bmlibrarian_dsn(pg_server):
    name = f"bmlib_{pysecrets.token_hex(4)}"
    admin = pg_server.conninfo("postgres")
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # generated name
    info = pg_server.conninfo(name)
    with psycopg.connect(**info, autocommit=True) as conn:
        conn.execute(BMLIBRARIAN_DDL)
    yield " ".join(f"{k}={v}" for k, v in info.items())
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_foreign_database_gets_vectors_only_when_the_user_opts_in(bmlibrarian_dsn, capsys):
    def tables() -> list[str]:
        with psycopg.connect(bmlibrarian_dsn) as conn:
            rows = conn.execute("SELECT relname FROM pg_class c JOIN pg_namespace n "
                                "ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND relkind = 'r' "
                                "ORDER BY 1").fetchall()
            ext = conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        return [r[0] for r in rows] + (["+vector"] if ext else [])

    before = tables()
    assert main(["literature", "status", "--dsn", bmlibrarian_dsn]) == 0
    assert "not created in a database the app does not own" in capsys.readouterr().out
    assert main(["literature", "embed", "--dsn", bmlibrarian_dsn]) == 1
    err = capsys.readouterr().err
    assert "not managed by KMDS Desktop" in err and "--allow-schema-changes" in err
    db = open_database(bmlibrarian_dsn, settings=LiteratureSettings())
    try:
        with pytest.raises(VectorsUnavailable, match="no document vectors"):
            nearest_ids(db, encode(["asthma"])[0])
    finally:
        db.close()
    assert tables() == before  # nothing created

    assert main(["literature", "embed", "--dsn", bmlibrarian_dsn, "--allow-schema-changes", "-q"]) == 0
    assert "embedded 2 documents" in capsys.readouterr().out
    assert tables() == sorted([*before[:], VECTOR_TABLE]) + ["+vector"]
    db = open_database(bmlibrarian_dsn, settings=LiteratureSettings())
    try:
        assert db.schema_owner == "external"  # still not the app's schema: no version table
        ranked = nearest_ids(db, encode(["corticosteroids for asthma"])[0], max_rows=2)
        assert [t for t in db.fetch_documents_by_ids([ranked[0][0]])][0]["title"] == "Asthma in children"
    finally:
        db.close()
