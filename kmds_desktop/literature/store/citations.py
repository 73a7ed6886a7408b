"""Volume, issue and pages of the documents, kept in the app's own table beside ``document``.

Why a table of its own (``kmds_document_citation``, keyed by document id): a reference manager cites an
article by journal, volume, issue and pages, and a RIS or BibTeX export without them cannot be cited.
The BMLibrarian-compatible ``document`` table has no such columns, and a schema the app shares with
another program is never altered, so the fields live beside it, as the document vectors do. The app's
own database gets the table with its schema (upgrade 5); a database the app does not own (a
BMLibrarian one) gets nothing new: its imports keep the fields only where the table already exists.

Pages are kept as the source writes them (MEDLINE's "123-9"); :func:`page_range` reads the first and
last page from that text, so an export writes ``SP 123`` and ``EP 129``.

All statements here are constant text: no value from a user or a file is ever formatted in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import psycopg

CITATION_TABLE = "kmds_document_citation"

CREATE_TABLE = f"""
    CREATE TABLE IF NOT EXISTS {CITATION_TABLE} (
        document_id bigint PRIMARY KEY REFERENCES document(id) ON DELETE CASCADE,
        volume text,
        issue text,
        pages text
    )
"""

#: Staging columns the loader adds for the three fields (after its own).
STAGING_COLUMNS = ("volume", "issue", "pages")

#: From the loader's staging table (``{staging}``) into the citation table: the last row of a key in
#: the file wins, and a field the file does not have never erases the stored one.
_UPSERT = (
    "WITH map AS (SELECT * FROM unnest(%s::text[], %s::int[]) AS m(key, sid)), "
    "src AS (SELECT DISTINCT ON (m.sid, st.external_id) m.sid AS source_id, st.external_id, st.volume, "
    "st.issue, st.pages FROM {staging} st JOIN map m ON m.key = st.source "
    "WHERE coalesce(st.volume, st.issue, st.pages) IS NOT NULL ORDER BY m.sid, st.external_id, st.seq DESC) "
    f"INSERT INTO {CITATION_TABLE} AS c (document_id, volume, issue, pages) "
    "SELECT d.id, src.volume, src.issue, src.pages FROM src "
    "JOIN document d ON d.source_id = src.source_id AND d.external_id = src.external_id "
    "ON CONFLICT (document_id) DO UPDATE SET "
    "volume = COALESCE(NULLIF(EXCLUDED.volume, ''), c.volume), "
    "issue = COALESCE(NULLIF(EXCLUDED.issue, ''), c.issue), "
    "pages = COALESCE(NULLIF(EXCLUDED.pages, ''), c.pages) "
    "WHERE (c.volume, c.issue, c.pages) IS DISTINCT FROM (COALESCE(NULLIF(EXCLUDED.volume, ''), c.volume), "
    "COALESCE(NULLIF(EXCLUDED.issue, ''), c.issue), COALESCE(NULLIF(EXCLUDED.pages, ''), c.pages))"
)


def create_table(conn: psycopg.Connection) -> None:
    """Upgrade 5 of the app's own schema (see the module docstring)."""
    conn.execute(CREATE_TABLE)


def table_exists(conn: psycopg.Connection) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (CITATION_TABLE,)).fetchone()
    return bool(row and row[0])


def write_from_staging(conn: psycopg.Connection, staging: str, source_ids: dict[str, int]) -> int:
    """Keep the staged rows' volume, issue and pages (inside the loader's transaction, after its
    upsert gave every row its document id); nothing where the table does not exist. Returns the rows
    written. ``staging`` is the loader's constant table name."""
    if not source_ids or not table_exists(conn):
        return 0
    cur = conn.execute(_UPSERT.format(staging=staging), (list(source_ids), list(source_ids.values())))
    return max(0, cur.rowcount)


def fetch(conn: psycopg.Connection, document_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """``{id: {"volume", "issue", "pages"}}`` of the documents that have any ({} without the table)."""
    ids = [int(i) for i in document_ids]
    if not ids or not table_exists(conn):
        return {}
    rows = conn.execute(
        f"SELECT document_id, volume, issue, pages FROM {CITATION_TABLE} WHERE document_id = ANY(%s)", (ids,)
    ).fetchall()
    return {int(r[0]): {"volume": r[1], "issue": r[2], "pages": r[3]} for r in rows}


_PAGE = re.compile(r"^([A-Za-z]*)(\d+)([A-Za-z]*)$")


def page_range(pages: str | None) -> tuple[str, str]:
    """(first page, last page) of a pages text, the last written out in full: MEDLINE abbreviates it
    ("123-9" is 123 to 129, "e9-18" is e9 to e18, "35987-6000" is 35987 to 36000). A single page
    gives ("123", ""); a list ("66, 68-70, 73 passim") gives its first range; an empty text ("", "")."""
    text = (pages or "").strip()
    if not text:
        return "", ""
    first_part = re.split(r"[,;]", text, maxsplit=1)[0].strip()
    start, sep, end = first_part.partition("-")
    start, end = start.strip(), end.strip()
    if not sep or not end:
        return start, ""
    m_start, m_end = _PAGE.match(start), _PAGE.match(end)
    if m_start and m_end and end.isdigit():
        prefix, digits, _suffix = m_start.groups()
        if len(end) < len(digits):
            end = digits[: len(digits) - len(end)] + end
        if int(end) < int(digits):  # not an abbreviation after all: keep what the source wrote
            return start, m_end.group(0)
        return start, prefix + end
    return start, end
