"""A literature record made from what an unmatched PDF says: title, DOI, year and authors where found.

Why: a researcher's PDFs are often papers their literature database does not hold (a colleague's
preprint, a paper from a journal outside PubMed). Without a record such a PDF cannot be screened,
included in a review or cited from the knowledge base; with one made from its own first page it can,
and the record says where it came from: its source is :data:`PDF_SOURCE`, its id the file's content
hash (:func:`pdf_external_id`).

Why never twice: a record is looked for by DOI, then by normalised title (in :mod:`.records`), then
by the file's hash, before one is made, and the insert itself is keyed by (source, hash), so a
re-import, a rebuilt store or two runs at once find the record already made.

Why only in the app's own database: a user's BMLibrarian database is theirs, written by their own
importers; the app only reads it (its passages live in the app's SQLite store for the same reason).
There :func:`may_create` says no, and the paper stays without a record, with that reason.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from kmds_desktop.literature.fulltext.identify import find_authors, find_year
from kmds_desktop.literature.fulltext.store import FulltextStore, PaperRow
from kmds_desktop.literature.store.identities import DocumentIdentity, documents_by_key

if TYPE_CHECKING:  # pragma: no cover
    import psycopg

#: The source of records made from PDFs, as users see it ("From PDF 3f9a0c1d2e3f4a5b").
PDF_SOURCE = "From PDF"
#: Why a PDF in a database the app does not own gets no record (shown on the paper's match).
NOT_OWN_DATABASE = ("no record made: the literature database is not the app's own (a BMLibrarian "
                    "database is only read); import the paper's record there, or set it by hand")


def pdf_external_id(sha256: str) -> str:
    """The record's id within :data:`PDF_SOURCE`: the first 16 hex digits of the file's SHA-256 (64 bits:
    no two of a user's files share them; short enough to read in a list)."""
    return sha256[:16]


def may_create(db: Any) -> bool:
    """True for the app's own literature database (the embedded one, or one whose schema the app made)."""
    return getattr(db, "schema_owner", "app") == "app"


def record_of_file(db: Any, paper: PaperRow) -> DocumentIdentity | None:
    """The record made earlier from these very bytes, if any (a re-import, a rebuilt store)."""
    found = documents_by_key(db, [(PDF_SOURCE, pdf_external_id(paper.sha256))])
    doc_id = next(iter(found.values()), None)
    if doc_id is None:
        return None
    return DocumentIdentity(doc_id, PDF_SOURCE, pdf_external_id(paper.sha256), paper.doi, paper.title or "")


def is_made_from(record: DocumentIdentity, paper: PaperRow) -> bool:
    """Whether ``record`` is the one made from ``paper``'s file (found again by DOI or title later)."""
    return record.source == PDF_SOURCE and record.external_id == pdf_external_id(paper.sha256)


def create_record(db: Any, store: FulltextStore, paper: PaperRow) -> tuple[DocumentIdentity, bool]:
    """``(record, made)``: the record of ``paper`` made from its title, DOI, year and authors, or the one
    made from the same bytes before (``made`` False). Raises ValueError where nothing names the paper
    (no title and no DOI) or the database is not the app's own."""
    if not may_create(db):
        raise ValueError(NOT_OWN_DATABASE)
    if not paper.title and not paper.doi:
        raise ValueError("no record made: the PDF shows no title or DOI; set its record by hand")
    info = store.pdf_info(paper.id)
    year = find_year(info, store.page_text(paper.id, 1) or "")
    authors = find_authors(info)
    title = paper.title or f"Untitled PDF (doi:{paper.doi})"
    external = pdf_external_id(paper.sha256)

    def write(conn: psycopg.Connection) -> tuple[int, bool]:
        with conn.transaction():
            conn.execute("INSERT INTO sources (name) VALUES (%s) ON CONFLICT (name) DO NOTHING",
                         (PDF_SOURCE,))
            source = conn.execute("SELECT id FROM sources WHERE name = %s", (PDF_SOURCE,)).fetchone()
            assert source is not None  # noqa: S101 - narrows: inserted or there
            row = conn.execute(
                "INSERT INTO document (source_id, external_id, doi, title, authors, publication_date) "
                "VALUES (%s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (source_id, external_id) DO NOTHING RETURNING id",
                (source[0], external, paper.doi, title, authors or None,
                 dt.date(year, 1, 1) if year else None)).fetchone()
            if row is not None:
                return int(row[0]), True
            again = conn.execute("SELECT id FROM document WHERE source_id = %s AND external_id = %s",
                                 (source[0], external)).fetchone()
            assert again is not None  # noqa: S101 - narrows: the conflict was this row
            return int(again[0]), False

    doc_id, made = db.run(write)
    if made and hasattr(db, "sources"):
        db.sources(fresh=True)  # a source may be new: searches filter by the list of sources
    return DocumentIdentity(doc_id, PDF_SOURCE, external, paper.doi, title), made
