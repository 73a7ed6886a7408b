"""One Document for the literature side: a paper read from a file, kept in PostgreSQL, screened and
exported is the same :class:`Document` (volume, issue and pages intact), what a search or a screening
adds wraps it, and the files a data folder already holds (a screening store, a review file) still open
and export as they did.

The fixtures under ``tests/data/legacy_*`` were written by the code before records held a Document:
the screening store as SQL (``sqlite3``'s ``iterdump``), the review file as exported, and the RIS and
CSV files its export wrote for that review."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sqlite3
from pathlib import Path

import pytest

from kmds_desktop.app.reviews import ReviewBook
from kmds_desktop.literature.document import Document
from kmds_desktop.literature.reviews.exchange import import_review_file, merge_returned
from kmds_desktop.literature.reviews.store import ReviewStore
from kmds_desktop.literature.screening.decisions import DecisionStore
from kmds_desktop.literature.screening.records import (
    ScreeningRecord,
    merge_duplicates,
    read_records_file,
    record_from_document,
)
from kmds_desktop.literature.screening.screened_export import export_screened
from kmds_desktop.literature.store.importers import read_records
from kmds_desktop.literature.strategy.reference_files import (
    FoundDocument,
    documents_to_csv,
    documents_to_ris,
    normalize_document,
)

DATA = Path(__file__).parent / "data"

_PAPER = {
    "id": "pubmed:3896327", "source": "pubmed", "pmid": "3896327",
    "title": "Sweat chloride in cystic fibrosis", "abstract": "Sweat chloride was measured in 40 children.",
    "authors": ["Doe J", "Roe R"], "journal": "Acta Paediatr Scand", "publication_date": "1985-03",
    "doi": "10.1111/J.1651-2227.1985.TB10002.X",
    "keywords": ["sweat test"], "mesh_terms": ["Cystic Fibrosis", "Sweat"], "volume": "74", "issue": "3",
    "pages": "123-9",
}


def test_one_paper_is_one_document_from_import_to_export(pg_empty_database, tmp_path):
    path = tmp_path / "paper.jsonl"
    path.write_text(json.dumps(_PAPER) + "\n", encoding="utf-8")
    [imported] = [item for item in read_records(path) if isinstance(item, Document)]
    assert (imported.volume, imported.issue, imported.pages) == ("74", "3", "123-9")
    assert (imported.year, imported.publication_date) == (1985, dt.date(1985, 3, 1))

    db = pg_empty_database
    db.import_files([path])
    [row] = db.fetch_documents_by_ids(db.find_abstract_ids("sweat & chloride"))
    stored = Document.from_row(row)
    # The database names the source as its ``sources`` table does ("PubMed" for the file's "pubmed",
    # matched case-insensitively on import); every other field comes back as it was read.
    assert stored.source == "PubMed"
    assert stored == dataclasses.replace(imported, source="PubMed")

    # A search hands it to a screening: the record wraps that very Document.
    record = record_from_document(row, rank=1, found_by=["#1 row 1: sweat AND chloride"], origin="#1")
    assert record.document == stored and record.doc_id == row["id"]
    assert (record.title, record.volume, record.issue, record.pages) == (stored.title, "74", "3", "123-9")
    assert record.doi == "10.1111/j.1651-2227.1985.tb10002.x"  # matched in one spelling...
    assert record.document.doi == "10.1111/J.1651-2227.1985.TB10002.X"  # ...the paper keeps its own

    store = DecisionStore(tmp_path / "screening.sqlite3")
    store.create_review("sweat", question="sweat chloride in cystic fibrosis")
    unique, _ = merge_duplicates([record])
    store.add_records("sweat", unique, origin="#1")
    store.decide("sweat", record.key, "include")
    [screened] = store.records("sweat")
    # The screening store keeps what it always kept: every field but the full date (its year stays)
    # and the MeSH terms.
    kept = dataclasses.replace(stored, doi=record.doi, publication_date=None, mesh_terms=[])
    assert screened.document == kept

    ris, csv = tmp_path / "included.ris", tmp_path / "included.csv"
    export_screened([screened], store.decisions("sweat"), ris)
    export_screened([screened], store.decisions("sweat"), csv)
    ris_text = ris.read_text(encoding="utf-8")
    for line in ("VL  - 74", "IS  - 3", "SP  - 123", "EP  - 129", "PY  - 1985", "T2  - Acta Paediatr Scand",
                 "ID  - pubmed:3896327", "KW  - screening: include"):
        assert line in ris_text.splitlines()
    header, values = csv.read_text(encoding="utf-8").splitlines()
    assert dict(zip(header.split(","), values.split(","), strict=False))["pages"] == "123-9"
    store.close()

    # The search's own export writes the stored Document the same way (its row id and queries around it).
    found = normalize_document(row, ["#1 row 1: sweat AND chloride"])
    assert found.document == stored and found.id == str(row["id"])
    assert documents_to_ris([found]) == documents_to_ris([row], {row["id"]: ["#1 row 1: sweat AND chloride"]})


def test_a_document_is_changed_only_as_a_new_document():
    doc = Document("cf", "cf:1", title="Sweat", publication_date=dt.date(1979, 5, 1), pages="61-76")
    assert doc.year == 1979 and doc.key == ("cf", "cf:1") and doc.text == "Sweat"
    with pytest.raises(dataclasses.FrozenInstanceError):
        doc.title = "Other"  # type: ignore[misc]
    record = ScreeningRecord(document=doc, rank=2)
    with pytest.raises(AttributeError):
        record.title = "Other"  # type: ignore[misc]
    # The paper's fields or a Document, never both (which would win is not obvious).
    with pytest.raises(TypeError, match="not both"):
        ScreeningRecord("cf", "cf:1", document=doc)
    # Built from the paper's fields (files, scripts), a record holds the same Document.
    built = ScreeningRecord("cf", "cf:1", title="Sweat", year=1979, pages="61-76")
    assert built.document == dataclasses.replace(doc, publication_date=None)


def test_what_a_search_or_a_screening_adds_wraps_the_document():
    doc = Document("pubmed", "1", title="T", keywords=["k"], pmid="1", volume="4")
    found = FoundDocument(doc, id="9", found_by=["#2 row 1"], extra_keywords=["screening: include"])
    assert found.keywords == ["k", "screening: include"] and doc.keywords == ["k"]
    assert (found.title, found.volume, found.pmid) == ("T", "4", "1")
    csv_row = documents_to_csv([found]).splitlines()[1]
    assert csv_row.startswith("9,T,,,4,") and "#2 row 1" in csv_row
    # A Document passed to an export is read as any row is.
    assert normalize_document(doc).document == doc


def _legacy_store(tmp_path: Path) -> Path:
    """The screening store the previous code wrote, rebuilt from its SQL."""
    path = tmp_path / "screening.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript((DATA / "legacy_screening_store.sql").read_text(encoding="utf-8"))
    conn.close()
    return path


def test_a_screening_store_of_the_previous_code_opens_and_exports_as_it_did(tmp_path):
    path = _legacy_store(tmp_path)
    with ReviewBook(path) as book:
        [summary] = book.summaries()
        assert (summary.id, summary.records, summary.screened, summary.included) == ("sweat", 3, 2, 1)
    store = ReviewStore(path)
    records = store.records("sweat")
    first = records[0]
    assert first.key == ("pubmed", "3896327")
    assert first.aliases == [("medrxiv", "10.1111/j.1651-2227.1985.tb10002.x")]
    assert (first.document.volume, first.document.issue, first.document.pages) == ("74", "3", "123-9")
    assert (first.rank, first.doc_id, first.found_by) == (1, 17, ["#1 row 1: sweat AND chloride"])
    assert records[1].document == Document("file:refs.ris", "9f2c", title="Nasal potential difference")
    # Written back unchanged: the stored JSON is the file format.
    raw = sqlite3.connect(path).execute("SELECT data FROM review_record ORDER BY position").fetchall()
    assert [json.loads(r[0]) for r in raw] == [r.to_dict() for r in records]

    decisions = store.decisions("sweat")
    ris, csv = tmp_path / "all.ris", tmp_path / "all.csv"
    export_screened(records, decisions, ris)
    export_screened(records, decisions, csv, scores={first.key: 0.5})
    assert ris.read_bytes() == (DATA / "legacy_screened.ris").read_bytes()
    assert csv.read_bytes() == (DATA / "legacy_screened.csv").read_bytes()
    store.close()


def test_a_review_file_of_the_previous_code_imports_and_merges(tmp_path):
    store = ReviewStore(tmp_path / "fresh.sqlite3")
    imported = import_review_file(store, DATA / "legacy_review_v1.json")
    assert (imported.review_id, imported.rows["review_record"], imported.rows["decision"]) == ("sweat", 3, 2)
    records = store.records("sweat")
    legacy = ReviewStore(_legacy_store(tmp_path))
    assert [r.to_dict() for r in records] == [r.to_dict() for r in legacy.records("sweat")]
    assert records[0].document.pages == "123-9"

    # Returned by a second screener: their decisions match the records by identity.
    report = merge_returned(legacy, "sweat", DATA / "legacy_review_v1.json", reviewer="B")
    assert (report.imported, report.unknown, report.conflicts) == (2, 0, [])
    store.close()
    legacy.close()


def test_a_ris_file_s_citation_reaches_the_record_s_document(tmp_path):
    path = tmp_path / "refs.ris"
    path.write_text((DATA / "legacy_screened.ris").read_text(encoding="utf-8"), encoding="utf-8")
    first = read_records_file(path)[0]
    assert first.key == ("pubmed", "3896327")
    assert (first.document.volume, first.document.issue, first.document.pages) == ("74", "3", "123-129")
