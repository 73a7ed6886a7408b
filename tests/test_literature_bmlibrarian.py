"""Writing into a BMLibrarian database follows BMLibrarian's own conventions.

The database is made with the columns of BMLibrarian's baseline schema (``document`` with
``added_date``/``updated_date``/``withdrawn_date`` as timestamps, lower-case source names, a
"PubMed Central" source) and filled as its importers fill it: a medRxiv preprint keyed by its bare
DOI with its medrxiv.org URL, a PubMed article keyed by PMID. Importing the same papers from the
shared JSONL format must find those rows (one document each), fill the columns BMLibrarian's
importers fill, name new sources in lower case, and leave the schema as it was.
"""

from __future__ import annotations

import datetime as dt
import json

import psycopg
import pytest
from support.bmlibrarian import BMLIBRARIAN_TABLES

from kmds_desktop.literature import open_database

DOI = "10.1101/2020.03.01.20029876"

BMLIBRARIAN_BASELINE = f"""
{BMLIBRARIAN_TABLES}INSERT INTO sources (name) VALUES ('pubmed'), ('medrxiv'), ('PubMed Central');
-- as BMLibrarian's importers wrote them, a while ago
INSERT INTO document (source_id, external_id, doi, title, url, publication, updated_date, withdrawn_date)
VALUES
  (1, '100', NULL, 'Asthma in children', 'https://pubmed.ncbi.nlm.nih.gov/100/', 'Pediatrics',
   '2020-01-01 00:00', NULL),
  (2, '{DOI}', '{DOI}', 'Asthma preprint', 'https://www.medrxiv.org/content/{DOI}', 'medRxiv',
   '2020-01-01 00:00', NULL),
  (3, 'PMC7', NULL, 'Asthma in Central', NULL, NULL, '2020-01-01 00:00', NULL),
  (1, '101', NULL, 'Asthma retracted', NULL, NULL, '2020-01-01 00:00', '2021-06-30 12:34:56');
"""


def _snapshot(conn: psycopg.Connection) -> list[tuple]:
    return conn.execute(
        "SELECT c.relname, c.relkind, pg_get_indexdef(c.oid) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' ORDER BY 1"
    ).fetchall()


@pytest.fixture()
def bmlibrarian(pg_external, monkeypatch):
    admin, password = pg_external["admin"], pg_external["password"]
    with psycopg.connect(**admin, password=password, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS bmlib_conv")
        conn.execute("CREATE DATABASE bmlib_conv")
    info = {**admin, "dbname": "bmlib_conv", "password": password}
    with psycopg.connect(**info, autocommit=True) as conn:
        conn.execute(BMLIBRARIAN_BASELINE)
    monkeypatch.setenv("KMDS_DESKTOP_DB_PASSWORD", password)
    port = pg_external["server"].tcp_port
    db = open_database(f"host=127.0.0.1 port={port} dbname=bmlib_conv user=postgres")
    yield db, info
    db.close()


def test_imports_follow_bmlibrarian_conventions(bmlibrarian, tmp_path):
    db, info = bmlibrarian
    assert db.schema_owner == "external"
    with psycopg.connect(**info) as conn:
        before = _snapshot(conn)
    path = tmp_path / "shared.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        # the preprint BMLibrarian already has, in the shared format (id "medrxiv:<doi>")
        {"id": f"medrxiv:{DOI}", "source": "medrxiv", "doi": DOI, "title": "Asthma preprint",
         "abstract": "Wheeze in a preprint cohort.", "year": 2020},
        {"id": "medrxiv:10.1101/2021.05.05.21256789", "source": "medrxiv",
         "title": "A new preprint on asthma", "year": 2021},
        {"id": "pmid:100", "source": "pubmed", "pmid": "100", "title": "Asthma in children",
         "abstract": "An abstract BMLibrarian did not have.", "year": 2019},
        {"id": "pmid:200", "source": "pubmed", "pmid": "200", "title": "Asthma in adults", "year": 2018},
        {"id": "scifact:9", "source": "scifact", "title": "Asthma claim", "year": 2017},
    ]) + "\n")
    started = dt.datetime.now().replace(microsecond=0) - dt.timedelta(seconds=5)
    report = db.import_files([path])
    assert (report.inserted, report.updated, report.skipped) == (3, 2, [])

    with psycopg.connect(**info) as conn:
        rows = {(r[0], r[1]): r[2:] for r in conn.execute(
            "SELECT s.name, d.external_id, d.doi, d.url, d.updated_date, d.abstract FROM document d "
            "JOIN sources s ON s.id = d.source_id").fetchall()}
        sources = [r[0] for r in conn.execute("SELECT name FROM sources ORDER BY id").fetchall()]
        assert _snapshot(conn) == before  # no table, index or column added
    # one document per paper: the preprint is found under its bare DOI, not stored again
    doi_new = "10.1101/2021.05.05.21256789"
    assert sorted(k for k in rows if k[0] == "medrxiv") == [("medrxiv", DOI), ("medrxiv", doi_new)]
    assert rows[("medrxiv", doi_new)][:2] == (doi_new, f"https://www.medrxiv.org/content/{doi_new}")
    assert rows[("medrxiv", DOI)][3] == "Wheeze in a preprint cohort."
    assert rows[("pubmed", "200")][1] == "https://pubmed.ncbi.nlm.nih.gov/200/"
    # updated_date set on every row written (new and changed), as BMLibrarian's importers do
    written = [("medrxiv", DOI), ("medrxiv", doi_new), ("pubmed", "100"), ("pubmed", "200"),
               ("scifact", "scifact:9")]
    for key in written:
        assert rows[key][2] >= started, key
    assert rows[("PubMed Central", "PMC7")][2] == dt.datetime(2020, 1, 1)  # untouched rows keep theirs
    # a new source is named the way BMLibrarian names sources
    assert sources == ["pubmed", "medrxiv", "PubMed Central", "scifact"]


def test_reading_a_bmlibrarian_database(bmlibrarian):
    db, _ = bmlibrarian
    # "PubMed Central" counts as PubMed (BMLibrarian matches any name containing pubmed)
    pubmed_only = db.find_abstract_ids("asthma", use_medrxiv=False, use_others=False)
    others_only = db.find_abstract_ids("asthma", use_pubmed=False, use_medrxiv=False)
    docs = {d["external_id"]: d for d in db.fetch_documents_by_ids(
        [r[0] for r in db.run(lambda c: c.execute("SELECT id FROM document").fetchall())])}
    assert {docs[k]["id"] for k in ("100", "PMC7")} == pubmed_only  # the withdrawn 101 is left out
    assert others_only == set()
    assert docs["101"]["withdrawn_date"] == "2021-06-30"  # a date, not timestamp text
    assert docs["PMC7"]["pmid"] is None and docs["100"]["pmid"] == "100"


def test_a_bmlibrarian_database_gets_the_top_k_index_and_keeps_it_in_step(bmlibrarian, pg_external, tmp_path,
                                                                         capsys, data_home):
    """Built from the CLI (read-only: the schema is the same after), then new, changed and withdrawn
    documents follow through the import's own step and ``topk refresh``; bm25 rows match PostgreSQL's."""
    from kmds_desktop.cli import main

    db, info = bmlibrarian
    dsn = f"host=127.0.0.1 port={pg_external['server'].tcp_port} dbname=bmlib_conv user=postgres"
    with psycopg.connect(**info) as conn:
        before = _snapshot(conn)
    assert main(["literature", "topk", "status", "--dsn", dsn]) == 0
    assert "not built" in capsys.readouterr().out
    assert main(["literature", "topk", "build", "--dsn", dsn, "--quiet"]) == 0
    assert "top-k index built: 3 documents" in capsys.readouterr().out  # the withdrawn one is left out
    assert main(["literature", "topk", "status", "--dsn", dsn]) == 0
    status = capsys.readouterr().out
    assert "ready, 3 documents" in status and "impact tiers: none (the database was too small" in status

    def rows(query: str) -> tuple[set[int], set[int]]:
        fast = {i for i, _ in db.find_abstract_ids_ranked(query, 100, ranking="bm25")}
        index = db.topk_index()
        db.attach_topk_index(None)
        slow = {i for i, _ in db.find_abstract_ids_ranked(query, 100, ranking="idf")}
        db.attach_topk_index(index)
        return fast, slow

    db.attach_topk_index(False)  # look the index up again, as a fresh window would
    assert db.topk_index() is not None
    fast, slow = rows("asthma")
    assert fast == slow and len(fast) == 3

    path = tmp_path / "new.jsonl"
    path.write_text(json.dumps({"id": "pmid:300", "source": "pubmed", "pmid": "300",
                                "title": "Asthma and wheeze in infants", "year": 2022}) + "\n")
    db.import_files([path])  # new ids: the import adds them to the index itself
    fast, slow = rows("wheez:* & asthma")
    assert fast == slow and len(fast) == 1

    with psycopg.connect(**info, autocommit=True) as conn:  # BMLibrarian's own work meanwhile
        conn.execute("UPDATE document SET withdrawn_date = now() WHERE external_id = '100'")
        conn.execute("UPDATE document SET title = 'Bronchiolitis in Central' WHERE external_id = 'PMC7'")
    assert main(["literature", "topk", "refresh", "--dsn", dsn]) == 0
    out = capsys.readouterr().out
    assert "top-k index refreshed:" in out and ", 1 removed" in out, out
    for query in ("asthma", "bronchiol:*", "central"):
        fast, slow = rows(query)
        assert fast == slow, query
    assert len(rows("asthma")[0]) == 2
    with psycopg.connect(**info) as conn:
        assert _snapshot(conn) == before  # nothing written into the database the app does not own


def test_a_document_without_a_source_is_left_out_of_the_index_and_never_wedges_the_build(
        bmlibrarian, data_home):
    """BMLibrarian's schema lets ``document.source_id`` be NULL. Every search filters by source, so such
    a row is never found; the index leaves it out (it used to stop the build on it at every retry,
    committing the rows before it in its batch once more each time)."""
    from kmds_desktop.literature.store.topk_build import build_index, index_folder, refresh_index
    from kmds_desktop.literature.store.topk_index import TopKIndex

    db, info = bmlibrarian
    with psycopg.connect(**info, autocommit=True) as conn:
        conn.execute("INSERT INTO document (source_id, external_id, title, abstract) "
                     "VALUES (NULL, 'orphan', 'Asthma without a source', 'asthma')")
    index = TopKIndex(index_folder(db))
    state = build_index(db, index, batch=2)
    assert state.complete and state.documents == 3 == len(set(index.all_ids())) == len(index.all_ids())
    fast = {i for i, _ in db.find_abstract_ids_ranked("asthma", 100, ranking="bm25")}
    db.attach_topk_index(None)
    slow = {i for i, _ in db.find_abstract_ids_ranked("asthma", 100, ranking="idf")}
    assert fast == slow and len(fast) == 3
    with psycopg.connect(**info, autocommit=True) as conn:  # a source given to it later: found then
        conn.execute("UPDATE document SET source_id = (SELECT min(id) FROM sources) "
                     "WHERE external_id = 'orphan'")
    assert refresh_index(db, index).indexed == 1 and index.documents() == 4
