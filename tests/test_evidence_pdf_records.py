"""A PDF no literature record matches gets a record made from what it says (title, DOI, year, authors),
in the app's own database only, once: re-imports, a rebuilt store and match runs find it again; the
user's correction still wins; a BMLibrarian database is only read. Real embedded PostgreSQL, the shared
PDFs, through the CLI (the same session code as the window)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import psycopg
import pytest
from support.bmlibrarian import BMLIBRARIAN_TABLES
from support.fulltext import link_pdfs, manifest

from kmds_desktop.cli import main
from kmds_desktop.literature.fulltext.pdf_records import NOT_OWN_DATABASE, PDF_SOURCE, pdf_external_id
from kmds_desktop.literature.store.identities import find_known

BPJ = "j.bpj.2021.11.1119.pdf"  # its DOI is in the database
JCTC = "acs.jctc.2c00401.pdf"  # not in it; the document info names two authors
PNAS = "pnas.0403760101.pdf"  # not in it; no authors in the document info


def _import(capsys, folder: Path, dsn: str) -> dict:
    assert main(["literature", "fulltext", "import", str(folder), "--match", "--dsn", dsn, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _cli_json(capsys, *argv: str) -> dict:
    assert main(["literature", "fulltext", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _by_file(report: dict) -> dict[str, dict]:
    return {Path(p["file"]).name: p for p in report["papers"]}


def _made_from_pdfs(db) -> dict[str, tuple]:
    """external id -> (title, doi, authors, year) of the records made from PDFs."""
    rows = db.fetch_all("SELECT d.external_id, d.title, d.doi, d.authors, "
                        "extract(year FROM d.publication_date)::int FROM document d JOIN sources s "
                        "ON s.id = d.source_id WHERE s.name = %s", (PDF_SOURCE,))
    return {r[0]: tuple(r[1:]) for r in rows}


def test_unmatched_pdfs_get_a_record_once_and_a_correction_by_hand_wins(
        tmp_path: Path, data_home: Path, pg_empty_database, capsys) -> None:
    db = pg_empty_database
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"pmid": "111", "title": "A record known by the biophysics paper's DOI",
                                   "abstract": "x", "doi": "10.1016/j.bpj.2021.11.1119"}) + "\n",
                       encoding="utf-8")
    db.import_files([records])
    bpj_record = find_known(db, pmids=["111"])[0].doc_id
    dsn = str(db.dsn)
    folder = link_pdfs([BPJ, JCTC, PNAS], tmp_path / "pdfs")
    sha = {name: manifest()[name]["sha256"] for name in (JCTC, PNAS)}

    first = _import(capsys, folder, dsn)
    assert first["new_records"] == 2
    assert "2 new records made from PDFs" in first["summary"]
    papers = _by_file(first["records"])
    assert (papers[BPJ]["record_id"], papers[BPJ]["match"], papers[BPJ]["new_record"]) == (bpj_record, "doi",
                                                                                         False)
    for name in (JCTC, PNAS):
        assert (papers[name]["match"], papers[name]["new_record"]) == ("created", True)
        assert papers[name]["record"] == f"{PDF_SOURCE} {pdf_external_id(sha[name])}"
    made = _made_from_pdfs(db)
    title, doi, authors, year = made[pdf_external_id(sha[JCTC])]
    assert doi == "10.1021/acs.jctc.2c00401" and year == 2022 and authors == ["Sam Cox", "Andrew D. White"]
    assert "Symmetric Molecular Dynamics" in title
    title, doi, authors, year = made[pdf_external_id(sha[PNAS])]
    assert doi == "10.1073/pnas.0403760101" and year == 2004 and authors is None and len(title.split()) >= 4
    # what the records are for: screening and a review's scope find the paper by the record's key
    status = _by_file(_cli_json(capsys, "status"))
    assert (status[JCTC]["record_id"], status[JCTC]["record_match"]) == (papers[JCTC]["record_id"], "created")

    # Imported again, matched again, or the store rebuilt from the same files: no record made twice.
    again = _import(capsys, folder, dsn)
    assert again["new_records"] == 0 and "0 new records made from PDFs" in again["summary"]
    assert {n: p["record_id"] for n, p in _by_file(again["records"]).items()} == \
        {n: p["record_id"] for n, p in papers.items()}
    assert _by_file(_cli_json(capsys, "match", "--dsn", dsn))[JCTC]["match"] == "created"
    (data_home / "fulltext" / "fulltext.sqlite").unlink()
    rebuilt = _import(capsys, folder, dsn)
    assert rebuilt["new_records"] == 0
    assert _by_file(rebuilt["records"])[JCTC]["record_id"] == papers[JCTC]["record_id"]
    assert len(_made_from_pdfs(db)) == 2

    # The user's word wins over a record made from the PDF: "none of them", or another record.
    _cli_json(capsys, "record", JCTC, "--none")
    _cli_json(capsys, "record", PNAS, str(bpj_record), "--dsn", dsn)
    after = _by_file(_import(capsys, folder, dsn)["records"])
    assert (after[JCTC]["record_id"], after[JCTC]["match"]) == (None, "manual")
    assert (after[PNAS]["record_id"], after[PNAS]["match"]) == (bpj_record, "manual")
    assert len(_made_from_pdfs(db)) == 2

    # --no-new-records only reads; --dsn without --match is refused in one line.
    _cli_json(capsys, "record", JCTC, "--clear")
    assert _by_file(_cli_json(capsys, "match", "--dsn", dsn, "--no-new-records"))[JCTC]["match"] == "created"
    assert main(["literature", "fulltext", "import", str(folder), "--dsn", dsn]) == 1
    assert "add --match" in capsys.readouterr().err


@pytest.fixture()
def bmlibrarian_database(pg_server):
    """A database with BMLibrarian's tables (not the app's schema) on the session server."""
    from kmds_desktop.config import LiteratureSettings
    from kmds_desktop.literature.store.database import open_database

    name = f"kmds_bml_{secrets.token_hex(4)}"
    admin = pg_server.conninfo("postgres")
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # generated identifier, not user input
    info = pg_server.conninfo(name)
    with psycopg.connect(**info, autocommit=True) as conn:
        conn.execute(BMLIBRARIAN_TABLES + "INSERT INTO sources (name) VALUES ('pubmed');")
    db = open_database(" ".join(f"{k}={v}" for k, v in info.items()),
                       settings=LiteratureSettings(statement_timeout_ms=30_000))
    yield db, info
    db.close()
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_bmlibrarian_database_is_never_written(tmp_path: Path, data_home: Path, bmlibrarian_database,
                                                 capsys) -> None:
    db, info = bmlibrarian_database
    assert db.schema_owner == "external"
    folder = link_pdfs([JCTC], tmp_path / "pdfs")
    report = _import(capsys, folder, str(db.dsn))
    assert report["new_records"] == 0
    assert "not the app's own: nothing written there" in report["summary"]
    paper = _by_file(report["records"])[JCTC]
    assert (paper["record_id"], paper["note"]) == (None, NOT_OWN_DATABASE)
    with psycopg.connect(**info) as conn:
        assert conn.execute("SELECT count(*) FROM document").fetchone()[0] == 0
        assert conn.execute("SELECT array_agg(name) FROM sources").fetchone()[0] == ["pubmed"]


def test_authors_and_year_only_where_the_pdf_says_them() -> None:
    """Document info as the shared PDFs carry it: a file's maker is no author; page one's copyright year
    comes before the citation line's, which comes before the file's creation date."""
    from kmds_desktop.literature.fulltext.identify import find_authors, find_title, find_year

    assert find_authors({"Author": "Administrator"}) == []
    assert find_authors({"Author": "McVey, Mitch"}) == ["Mitch McVey"]
    assert find_authors({"Author": "Sam Cox and Andrew D. White"}) == ["Sam Cox", "Andrew D. White"]
    assert find_authors({"Author": "Yasuhiro Oda;Madelyn M. Shapiro"}) == ["Yasuhiro Oda",
                                                                         "Madelyn M. Shapiro"]
    assert find_authors({"Author": "lab-pc 3"}) == [] and find_authors({}) == []
    info = {"Subject": "Science 2019.363:1463-1467", "CreationDate": "D:20190326103914+08'00'"}
    assert find_year(info, "Received 2 May 2018; accepted 1 Feb 2019 ... \u00a9 2019 The Authors") == 2019
    assert find_year(info, "no year printed") == 2019
    assert find_year({"CreationDate": "D:20230926094855-07'00'"}, "") == 2023
    assert find_year({}, "") is None
    stamp = ("Downloaded via UNIV OF CAMBRIDGE on June 25, 2025 at 16:13:17 (UTC). See "
             "https://pubs.acs.org/sharingguidelines for options", 9.0)
    # the ACS PDF's page one: every line at one (scaled) size, so the page names no title of its own
    lines = [stamp, ("Symmetric Molecular Dynamics", 1.0), ("Sam Cox and Andrew D. White*", 1.0),
             *[("We derive a formulation of molecular dynamics that is symmetric.", 1.0)] * 8]
    assert find_title({"Title": "Symmetric Molecular Dynamics"}, lines) == "Symmetric Molecular Dynamics"
    assert find_title({}, [stamp]) is None
