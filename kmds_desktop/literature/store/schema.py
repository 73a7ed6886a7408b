"""The literature schema (compatible with BMLibrarian) and its versioned upgrades.

The app records which upgrades it applied in ``kmds_schema_version``; upgrades run in order, each in
its own transaction, so a database is always at one known version. A database that already has
``sources`` and ``document`` but no version table was created by someone else (a BMLibrarian
database): the app then uses the tables as they are and creates or alters nothing, because changing a
schema it does not own could break the other program.

All statements here are constant text: no value from a user, a file or an LLM is ever formatted in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from kmds_desktop.literature.errors import SchemaError
from kmds_desktop.literature.store.citations import create_table as _create_citation_table
from kmds_desktop.literature.store.vectors import create_vector_table_if_possible

VERSION_TABLE = "kmds_schema_version"

#: One step of an upgrade: constant SQL, or a function given the connection (inside the transaction).
Step = str | Callable[[psycopg.Connection], None]


def _document_vectors(conn: psycopg.Connection) -> None:
    """Upgrade 4: the document vector table, when the server has pgvector (see ``vectors``)."""
    create_vector_table_if_possible(conn)


#: (version, description, steps) in the order they must run.
UPGRADES: list[tuple[int, str, tuple[Step, ...]]] = [
    (
        1,
        "sources and document with the weighted search vector and its GIN index",
        (
            """
            CREATE TABLE IF NOT EXISTS sources (
                id serial PRIMARY KEY,
                name text NOT NULL UNIQUE,
                url text,
                is_reputable boolean NOT NULL DEFAULT true,
                is_free boolean NOT NULL DEFAULT true
            )
            """,
            """
            CREATE TABLE IF NOT EXISTS document (
                id bigserial PRIMARY KEY,
                source_id integer NOT NULL REFERENCES sources(id),
                external_id text NOT NULL,
                doi text,
                title text,
                abstract text,
                authors text[],
                publication text,
                publication_date date,
                mesh_terms text[],
                keywords text[],
                url text,
                withdrawn_date date,
                search_vector tsvector GENERATED ALWAYS AS (
                    setweight(to_tsvector('english', coalesce(title, '')), 'A') ||
                    setweight(to_tsvector('english', coalesce(abstract, '')), 'B')
                ) STORED,
                CONSTRAINT document_source_external_key UNIQUE (source_id, external_id)
            )
            """,
            "CREATE INDEX IF NOT EXISTS idx_document_search_vector ON document USING gin (search_vector)",
        ),
    ),
    (
        2,
        "index on publication_date for date filters and newest-first ordering",
        (
            "CREATE INDEX IF NOT EXISTS idx_document_publication_date "
            "ON document (publication_date DESC NULLS LAST, id)",
        ),
    ),
    (
        3,
        "keep search_vector inside the table row (storage MAIN) for rows written from now on",
        # Ranking reads search_vector of every match. Left to the default (EXTENDED) it is moved out
        # of line into the TOAST table, so each match costs an extra index lookup and page visit;
        # with MAIN the long abstract is compressed or moved out instead, and the ID-only search
        # reads the vector from the row it already visits (about 1.5x faster on the resampled
        # corpus). Catalog-only: rows already stored keep their layout until they are rewritten.
        ("ALTER TABLE document ALTER COLUMN search_vector SET STORAGE MAIN",),
    ),
    (
        4,
        "document vectors (pgvector): kmds_document_vector with an HNSW cosine index, when the server "
        "has the vector extension",
        # A server without pgvector still gets version 4: the table is created later, by
        # ``literature embed``, once the extension is installed (the step is idempotent).
        (_document_vectors,),
    ),
    (
        5,
        "volume, issue and pages of the documents (kmds_document_citation, keyed by document id), for "
        "exports a reference manager can cite",
        (_create_citation_table,),
    ),
]

LATEST_VERSION = UPGRADES[-1][0]

#: Well-known sources, created on first use. ``key`` is the ``source`` field of the shared JSONL.
KNOWN_SOURCES: dict[str, tuple[str, str | None]] = {
    "pubmed": ("PubMed", "https://pubmed.ncbi.nlm.nih.gov/"),
    "medrxiv": ("medRxiv", "https://www.medrxiv.org/"),
    "scifact": ("SciFact", "https://github.com/allenai/scifact"),
    "cf": ("CF", None),
}


@dataclass(frozen=True)
class SchemaState:
    """What :func:`ensure_schema` found or did."""

    version: int | None  # None for a database the app does not own
    owner: str  # "app" or "external"
    applied: tuple[int, ...] = ()


def _table_exists(conn: psycopg.Connection, name: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
    return bool(row and row[0])


def current_version(conn: psycopg.Connection) -> int | None:
    if not _table_exists(conn, VERSION_TABLE):
        return None
    row = conn.execute(f"SELECT max(version) FROM {VERSION_TABLE}").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def ensure_schema(conn: psycopg.Connection) -> SchemaState:
    """Create or upgrade the schema the app owns; leave a foreign one untouched.

    ``conn`` must be in autocommit mode: each upgrade runs in its own transaction. A transaction-level
    advisory lock makes two app instances opening a fresh database at once apply each upgrade once.
    """
    has_version = _table_exists(conn, VERSION_TABLE)
    has_tables = _table_exists(conn, "document") and _table_exists(conn, "sources")
    if has_tables and not has_version:
        _check_foreign_schema(conn)
        return SchemaState(version=None, owner="external")

    applied: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (0x4B4D4453,))
        conn.execute(
            f"""CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (
                   version integer PRIMARY KEY,
                   description text NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
    version = current_version(conn) or 0
    if version > LATEST_VERSION:
        raise SchemaError(
            f"the literature database has schema version {version}, newer than this app knows "
            f"({LATEST_VERSION}); update KMDS Desktop"
        )
    for number, description, statements in UPGRADES:
        if number <= version:
            continue
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (0x4B4D4453,))
            if (current_version(conn) or 0) >= number:  # another instance got there first
                continue
            for statement in statements:
                if callable(statement):
                    statement(conn)
                else:
                    conn.execute(statement)
            conn.execute(
                f"INSERT INTO {VERSION_TABLE} (version, description) VALUES (%s, %s)", (number, description)
            )
        applied.append(number)
    return SchemaState(version=current_version(conn), owner="app", applied=tuple(applied))


_REQUIRED_COLUMNS = {
    "sources": {"id", "name"},
    "document": {
        "id", "source_id", "external_id", "doi", "title", "abstract", "authors", "publication",
        "publication_date", "mesh_terms", "withdrawn_date", "search_vector",
    },
}


def _check_foreign_schema(conn: psycopg.Connection) -> None:
    """Fail early, naming the missing columns, when a foreign database lacks what searches need."""
    for table, needed in _REQUIRED_COLUMNS.items():
        rows = conn.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = %s AND table_schema = ANY(current_schemas(false))",
            (table,),
        ).fetchall()
        missing = needed - {r[0] for r in rows}
        if missing:
            raise SchemaError(
                f"table {table!r} in this database lacks column(s) {', '.join(sorted(missing))}; "
                "it is not a BMLibrarian-compatible literature database"
            )
