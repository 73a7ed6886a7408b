"""Importing JSONL, MEDLINE/PubMed XML and PubMedQA into a real PostgreSQL database."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import psycopg
import pytest

from kmds_desktop.literature.document import Document
from kmds_desktop.literature.errors import ImportFileError
from kmds_desktop.literature.store.importers import Withdrawal, read_records
from kmds_desktop.tasks import Cancelled, CancelToken


def _first_lines(src: Path, dst: Path, n: int) -> Path:
    with src.open(encoding="utf-8") as fh:
        dst.write_text("".join(next(fh) for _ in range(n)), encoding="utf-8")
    return dst


def _xmin(dsn: str) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT id, xmin::text FROM document ORDER BY id").fetchall()


def test_reimporting_the_same_file_changes_nothing(pg_empty_database, literature_data, tmp_path):
    path = _first_lines(literature_data / "pubmed_sample/corpus.jsonl", tmp_path / "p.jsonl", 200)
    first = pg_empty_database.import_files([path])
    assert (first.inserted, first.updated, first.unchanged) == (200, 0, 0)
    rows_before = _xmin(pg_empty_database.dsn)
    second = pg_empty_database.import_files([path])
    assert (second.inserted, second.updated, second.unchanged) == (0, 0, 200)
    assert _xmin(pg_empty_database.dsn) == rows_before  # not even rewritten


def test_jsonl_and_medline_xml_copies_of_a_pmid_are_one_document(pg_empty_database, literature_data):
    db = pg_empty_database
    db.import_files([literature_data / "pubmed_sample/corpus.jsonl"])
    xml = db.import_files([literature_data / "raw/medline16n0902.xml.gz"])
    assert xml.files[0].records == 604 and xml.inserted + xml.updated + xml.unchanged == 604
    with psycopg.connect(db.dsn) as conn:
        total = conn.execute("SELECT count(*), count(DISTINCT external_id) FROM document").fetchone()
    assert total[0] == total[1] == 1290 + xml.inserted
    # PMID 17942999 is in both files: JSONL gave the DOI-less record, the XML adds MeSH terms
    (doc_id,) = db.find_abstract_ids("neuroplasticity & pitch & mismatch")
    doc = db.fetch_documents_by_ids([doc_id])[0]
    assert doc["pmid"] == "17942999" and doc["source_name"] == "PubMed"
    assert "Pitch Perception" in doc["mesh_terms"]
    assert doc["abstract"].startswith("PURPOSE: An auditory electrophysiological study")
    assert doc["authors"][:2] == ["Chandrasekaran B", "Gandour JT"]
    assert doc["publication"] == "Restorative neurology and neuroscience"
    assert doc["publication_date"].startswith("2007")


def test_current_pubmed_xml_fields(pg_empty_database, literature_data):
    report = pg_empty_database.import_files(literature_data / "raw/test_current_medline.xml.gz")
    assert report.inserted >= 1 and not report.skipped
    (doc_id,) = pg_empty_database.find_abstract_ids("back & pain & differential & diagnosis")
    doc = pg_empty_database.fetch_documents_by_ids([doc_id])[0]
    assert doc["pmid"] == "36400559"
    assert doc["doi"] == "10.1016/j.ncl.2022.07.002"
    assert doc["authors"] == ["Gibbs D", "McGahan BG", "Ropper AE", "Xu DS"]
    assert doc["publication"] == "Neurologic clinics"
    assert doc["publication_date"] == "2023-02-01"  # partial date: year and month only
    assert "Low Back Pain" in doc["mesh_terms"] and "Outpatient" in doc["keywords"]


def test_medline_2016_structured_abstracts_and_medline_dates(literature_data):
    items = list(read_records(literature_data / "raw/medline16n0902.xml.gz"))
    records = [r for r in items if isinstance(r, Document)]
    assert len(records) == 604
    # The file's DeleteCitation list comes as one withdrawal.
    withdrawals = [(w.source, w.external_ids) for w in items if isinstance(w, Withdrawal)]
    assert withdrawals == [("pubmed", ["26432306"])]
    labelled = [r for r in records if r.abstract and r.abstract.startswith("PURPOSE: ")]
    assert labelled and all(" METHODS: " in r.abstract or " RESULTS: " in r.abstract for r in labelled[:5])
    assert all(r.publication_date is not None for r in records)
    assert all(r.source == "pubmed" and r.external_id.isdigit() for r in records)


def _medline(path: Path, articles: dict[str, str], deleted: list[str] = ()) -> Path:
    body = "".join(
        f"<PubmedArticle><MedlineCitation><PMID>{pmid}</PMID><Article><ArticleTitle>{title}</ArticleTitle>"
        "</Article></MedlineCitation></PubmedArticle>"
        for pmid, title in articles.items()
    )
    if deleted:
        pmids = "".join(f'<PMID Version="1">{p}</PMID>' for p in deleted)
        body += f"<DeleteCitation>{pmids}</DeleteCitation>"
    path.write_text(f"<PubmedArticleSet>{body}</PubmedArticleSet>", encoding="utf-8")
    return path


def test_deleted_citations_are_withdrawn_not_erased(pg_empty_database, tmp_path):
    db = pg_empty_database
    base = _medline(tmp_path / "base.xml", {
        "90000001": "Zinc supplements in infants", "90000002": "Zinc deficiency in adolescents",
        "90000003": "Iron and zinc in pregnancy",
    })
    assert db.import_files([base]).inserted == 3
    before = db.find_abstract_ids("zinc")
    assert len(before) == 3

    update = _medline(tmp_path / "update.xml", {"90000004": "Zinc and copper balance"},
                      deleted=["90000002", "99999999", "90000002"])
    report = db.import_files([update])
    assert report.inserted == 1 and report.withdrawn == 1 and "1 withdrawn" in report.summary()
    notes = report.files[0].notes
    assert any("2 deleted citation(s) listed: 1 document(s) marked withdrawn" in n for n in notes), notes

    # New searches leave it out; a saved search's ids still fetch it, with the date it was withdrawn.
    after = db.find_abstract_ids("zinc")
    assert len(after) == 3  # 90000001, 90000003 and the new 90000004
    (gone,) = set(before) - set(after)
    (doc,) = db.fetch_documents_by_ids([gone])
    assert doc["external_id"] == "90000002" and doc["withdrawn_date"] is not None
    assert db.status()["withdrawn"] == 1
    # Applying the same update again changes nothing.
    again = db.import_files([update])
    assert again.withdrawn == 0 and again.inserted == 0 and db.status()["withdrawn"] == 1


def test_pubmedqa_json_import(pg_empty_database, literature_data):
    report = pg_empty_database.import_files(literature_data / "pubmedqa/ori_pqal.json")
    assert report.inserted == 1000 and not report.skipped
    (doc_id,) = pg_empty_database.find_abstract_ids("lace & plant & mitochondria & areole")
    doc = pg_empty_database.fetch_documents_by_ids([doc_id])[0]
    assert doc["pmid"] == "21645374" and doc["title"] == ""
    assert doc["abstract"].startswith("BACKGROUND: Programmed cell death")
    assert doc["mesh_terms"] and doc["publication_date"] == "2011-01-01"


def test_malformed_records_are_skipped_with_their_position(pg_empty_database, tmp_path):
    lines = [
        json.dumps({"id": "x:1", "source": "x", "title": "good one", "abstract": "fine"}),
        "{not json",
        json.dumps({"id": "pmid:1", "source": "pubmed", "title": "no pmid", "pmid": None}),
        json.dumps(["a", "list"]),
        "",
        json.dumps({"id": "x:2", "source": "x", "title": None, "abstract": None}),
        json.dumps({"id": "x:3", "source": "x", "title": "good two", "authors": "Solo A", "year": 1999}),
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    report = pg_empty_database.import_files([path])
    assert report.inserted == 2
    assert [s.position for s in report.skipped] == ["line 2", "line 3", "line 4", "line 6"]
    assert "not valid JSON" in report.skipped[0].message and "pmid" in report.skipped[1].message
    xml = tmp_path / "bad.xml"
    xml.write_text(
        "<PubmedArticleSet>"
        "<PubmedArticle><MedlineCitation><PMID>111</PMID><Article><ArticleTitle>Good article</ArticleTitle>"
        "</Article></MedlineCitation></PubmedArticle>"
        "<PubmedArticle><MedlineCitation><Article><ArticleTitle>No PMID</ArticleTitle></Article>"
        "</MedlineCitation></PubmedArticle>"
        "<PubmedArticle><MedlineCitation><PMID>222</PMID><Article><ArticleTitle>Second good</ArticleTitle>"
        "<Journal><JournalIssue><PubDate><MedlineDate>1998 Dec-1999 Jan</MedlineDate></PubDate>"
        "</JournalIssue></Journal></Article></MedlineCitation></PubmedArticle>"
        "</PubmedArticleSet>",
        encoding="utf-8",
    )
    report = pg_empty_database.import_files([xml])
    assert report.inserted == 2
    assert [(s.position, s.message) for s in report.skipped] == [("record 2", "citation has no PMID")]
    docs = pg_empty_database.fetch_documents_by_ids(pg_empty_database.find_abstract_ids("second"))
    assert docs[0]["publication_date"] == "1998-12-01"


def test_unreadable_files_leave_nothing_half_written(pg_empty_database, literature_data, tmp_path):
    db = pg_empty_database
    data = (literature_data / "raw/medline16n0902.xml.gz").read_bytes()
    truncated = tmp_path / "truncated.xml.gz"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ImportFileError, match="truncated.xml.gz"):
        db.import_files([truncated])
    broken = tmp_path / "broken.xml"
    broken.write_bytes(gzip.decompress(data)[:200_000] + b"<<<")
    with pytest.raises(ImportFileError, match="not well-formed"):
        db.import_files([broken])
    wrong_root = tmp_path / "other.xml"
    wrong_root.write_text("<html><body/></html>")
    with pytest.raises(ImportFileError, match="not MEDLINE"):
        db.import_files([wrong_root])
    with pytest.raises(ImportFileError, match="unknown file type"):
        db.import_files([tmp_path / "notes.txt"])
    assert db.status()["documents"] == 0
    # the file before a failing one stays imported (one transaction per file)
    good = _first_lines(literature_data / "scifact/corpus.jsonl", tmp_path / "s.jsonl", 30)
    with pytest.raises(ImportFileError, match="missing.jsonl"):
        db.import_files([good, tmp_path / "missing.jsonl"])
    assert db.status()["documents"] == 30


def test_import_can_be_cancelled_and_rolls_the_file_back(pg_empty_database, literature_data):
    token = CancelToken()
    messages: list[str] = []

    def progress(done: int, total: int | None, message: str) -> None:
        messages.append(message)
        if done >= 2000:
            token.cancel()

    with pytest.raises(Cancelled):
        pg_empty_database.import_files([literature_data / "scifact/corpus.jsonl"], progress=progress,
                                       cancel=token)
    assert messages and pg_empty_database.status()["documents"] == 0
    report = pg_empty_database.import_files([literature_data / "cf/corpus.jsonl"])
    assert report.inserted == 1239
