"""Document vectors in the literature database (pgvector): create, fill, search by meaning.

Why in PostgreSQL: the semantic row runs beside the full-text rows on the same documents with the same
filters (sources, dates, withdrawn), ID-only like them, and the vectors travel with the database (a
second user of an external database finds them too). Why a table of its own
(``kmds_document_vector``) instead of a column of ``document``: ``document`` stays exactly the
BMLibrarian layout, and on a database the app does not own only this one new table is created, and
only when the user opts in.

What is embedded: ``title. abstract`` (the text :data:`TEXT_SQL` builds in SQL), with the app's
embedding model (the bundled all-MiniLM-L6-v2, 384 dimensions). Each vector stores the md5 of that
exact text and the model's name, so :func:`embed_documents` embeds only documents that are new, whose
title or abstract changed, or that were embedded by another model; it commits every batch, so a
cancelled or crashed run resumes where it stopped. Searches never wait for it: a document without a
vector is still found by the full-text rows.

All SQL here is constant text; values (vectors included) are bound parameters.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from kmds_desktop.crashpoints import crash_point
from kmds_desktop.literature.errors import LiteratureError, VectorsUnavailable
from kmds_desktop.literature.store.dates import coerce_date
from kmds_desktop.literature.store.rows import first_value
from kmds_desktop.tasks import CancelToken, ProgressFn, check, report

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

log = logging.getLogger(__name__)

VECTOR_TABLE = "kmds_document_vector"
#: The bundled model's dimension; the column type (and the HNSW index) need a fixed one.
DIMENSIONS = 384
#: Documents per embedding round trip: read, encode (one forward pass each 64 texts), write, commit.
EMBED_BATCH_SIZE = 64
#: The text a document is embedded from, built by the server so its md5 is taken from the same bytes.
TEXT_SQL = "concat_ws('. ', nullif(btrim(d.title), ''), nullif(btrim(d.abstract), ''))"
#: HNSW candidate list per search: at least this, and at least twice the rows asked for (max 1000).
MIN_EF_SEARCH = 100

_CREATE_TABLE = f"""
CREATE TABLE IF NOT EXISTS {VECTOR_TABLE} (
    document_id bigint PRIMARY KEY,
    model text NOT NULL,
    content_md5 text NOT NULL,
    embedding vector({DIMENSIONS}) NOT NULL,
    embedded_at timestamptz NOT NULL DEFAULT now()
)"""
_CREATE_INDEX = (
    f"CREATE INDEX IF NOT EXISTS idx_{VECTOR_TABLE}_hnsw ON {VECTOR_TABLE} "
    "USING hnsw (embedding vector_cosine_ops)"
)


#: ``encoder(texts) -> unit-length float32 rows``: who computes embeddings. None means this process's
#: model (:func:`kmds_desktop.index.embeddings.encode`); the window passes its index's ``encode`` so
#: the index process embeds and torch never loads in the window's process.
Encoder = Callable[[Sequence[str]], "np.ndarray"]


def encoder_for(model_name: str, encoder: Encoder | None = None) -> Encoder:
    """``encoder`` itself, or one that embeds with ``model_name`` in this process."""
    if encoder is not None:
        return encoder

    def local(texts: Sequence[str]) -> np.ndarray:
        # why: looked up when called, so a replaced function is the one used
        from kmds_desktop.index.embeddings import encode

        return encode(texts, model_name)

    return local


# -- schema ---------------------------------------------------------------------------------------
def _extension_available(conn: psycopg.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    return row is not None


def vector_table_exists(conn: psycopg.Connection) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (VECTOR_TABLE,)).fetchone()
    return bool(row and row[0])


def create_vector_table(conn: psycopg.Connection) -> None:
    """Create the extension (if needed), the table and its HNSW index; idempotent.

    Raises :class:`VectorsUnavailable` with the reason when the server lacks pgvector or the user may
    not create the extension.
    """
    if not _extension_available(conn):
        raise VectorsUnavailable(
            "this PostgreSQL server does not have the pgvector extension ('vector'), so documents "
            "cannot be searched by meaning; install pgvector on the server (the app's embedded server "
            "has it) — full-text rows work without it"
        )
    try:
        with conn.transaction():
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(_CREATE_TABLE)
            conn.execute(_CREATE_INDEX)
    except psycopg.errors.InsufficientPrivilege as err:
        raise VectorsUnavailable(
            f"the database user may not create the vector extension or table ({err.diag.message_primary}); "
            "ask the database owner to run CREATE EXTENSION vector"
        ) from None


def create_vector_table_if_possible(conn: psycopg.Connection) -> bool:
    """Schema upgrade 4: create the vector table when the server allows it; False (logged) when not."""
    try:
        create_vector_table(conn)
    except (VectorsUnavailable, psycopg.Error) as err:  # the savepoint was rolled back; go on without
        log.info("document vectors not set up: %s", err)
        return False
    return True


def ensure_vectors(db: Any, *, allow_external: bool = False) -> None:
    """Make sure ``db`` has the vector table, creating it where the app may.

    On a database the app owns it is created if missing. On a foreign one (BMLibrarian) it is used if
    it exists, and created only with ``allow_external`` (``--allow-schema-changes`` or the setting
    ``retrieval.allow_vectors_in_external_database``); otherwise :class:`VectorsUnavailable` says so.
    """
    def run(conn: psycopg.Connection) -> None:
        if vector_table_exists(conn):
            return
        if db.schema_owner != "app" and not allow_external:
            raise VectorsUnavailable(
                f"this database is not managed by KMDS Desktop (e.g. a BMLibrarian database), so the app "
                f"created nothing in it: document vectors need the extension 'vector' and a new table "
                f"{VECTOR_TABLE} (its own tables are not changed). To allow that, pass "
                "--allow-schema-changes or set retrieval.allow_vectors_in_external_database = true"
            )
        create_vector_table(conn)

    db.run(run)


# -- embedding ------------------------------------------------------------------------------------
@dataclass
class EmbedReport:
    """What one :func:`embed_documents` run did."""

    model: str
    embedded: int = 0  # vectors written in this run
    remaining: int = 0  # documents still needing a vector when the run ended (a cancel leaves some)
    seconds: float = 0.0
    encode_seconds: float = 0.0  # of which the model's forward passes
    cancelled: bool = False

    @property
    def per_second(self) -> float:
        return self.embedded / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "per_second": self.per_second}


#: Documents needing a vector: no vector, another text (md5), or another model. Empty ones never do.
_NEEDING_WHERE = f"""
    d.withdrawn_date IS NULL AND {TEXT_SQL} <> ''
    AND (v.document_id IS NULL OR v.content_md5 <> md5({TEXT_SQL}) OR v.model <> %(model)s)"""
_NEEDING_COUNT = (
    f"SELECT count(*) FROM document d LEFT JOIN {VECTOR_TABLE} v ON v.document_id = d.id "
    f"WHERE {_NEEDING_WHERE}"
)
_NEEDING_BATCH = (
    f"SELECT d.id, {TEXT_SQL}, md5({TEXT_SQL}) FROM document d "
    f"LEFT JOIN {VECTOR_TABLE} v ON v.document_id = d.id "
    f"WHERE d.id > %(after)s AND {_NEEDING_WHERE} ORDER BY d.id LIMIT %(limit)s"
)
_UPSERT = (
    f"INSERT INTO {VECTOR_TABLE} (document_id, model, content_md5, embedding) "
    "VALUES (%s, %s, %s, %s::vector) ON CONFLICT (document_id) DO UPDATE SET model = EXCLUDED.model, "
    "content_md5 = EXCLUDED.content_md5, embedding = EXCLUDED.embedding, embedded_at = now()"
)


def vector_literal(vector: Iterable[float]) -> str:
    """pgvector's text form ``[x,y,...]`` (bound as a parameter and cast, never formatted into SQL)."""
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


def _check_dimensions(model_name: str, encode: Encoder) -> None:
    dim = int(encode(["dimension check"]).shape[1])
    if dim != DIMENSIONS:
        raise VectorsUnavailable(
            f"embedding model {model_name!r} makes {dim}-dimensional vectors, but the literature "
            f"database stores {DIMENSIONS} (all-MiniLM-L6-v2); use a {DIMENSIONS}-dimensional model"
        )


def embed_documents(
    db: Any,
    *,
    model_name: str = "all-MiniLM-L6-v2",
    batch_size: int = EMBED_BATCH_SIZE,
    limit: int | None = None,
    allow_external: bool = False,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
    encoder: Encoder | None = None,
) -> EmbedReport:
    """Embed every document that needs a vector (new, changed, or another model), batch by batch.

    Runs on its own connection, so searches on ``db`` keep working. Each batch is committed: a cancel
    (``cancel``, checked between batches and cancelling the statement in flight) or a crash loses at
    most the batch in progress, and the next run goes on from there. ``limit`` stops after that many
    documents. A cancel returns the report with ``cancelled=True`` instead of raising. ``encoder``
    computes the vectors (default: ``model_name`` in this process; see :data:`Encoder`).
    """
    encode = encoder_for(model_name, encoder)
    ensure_vectors(db, allow_external=allow_external)
    _check_dimensions(model_name, encode)
    batch_size = max(1, int(batch_size))
    rep = EmbedReport(model=model_name)
    started = time.perf_counter()
    conn = db._connect()  # noqa: SLF001 - the store package's own database
    remove_hook = cancel.add_hook(lambda: conn.cancel_safe(timeout=5)) if cancel is not None else None
    try:
        total = int(conn.execute(_NEEDING_COUNT, {"model": model_name}).fetchone()[0])
        if limit is not None:
            total = min(total, max(0, int(limit)))
        report(progress, 0, total, f"embedding {total:,} documents")
        after = 0
        while rep.embedded < total:
            check(cancel)
            want = min(batch_size, total - rep.embedded)
            params = {"model": model_name, "after": after, "limit": want}
            rows = conn.execute(_NEEDING_BATCH, params).fetchall()
            if not rows:
                break
            t0 = time.perf_counter()
            vectors = encode([r[1] for r in rows])
            rep.encode_seconds += time.perf_counter() - t0
            check(cancel)
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(_UPSERT, [(int(r[0]), model_name, r[2], vector_literal(vec))
                                          for r, vec in zip(rows, vectors, strict=True)])
            crash_point("embed.batch-committed")
            rep.embedded += len(rows)
            after = int(rows[-1][0])
            report(progress, rep.embedded, total, f"embedded {rep.embedded:,} of {total:,} documents")
    except Exception as err:
        if cancel is not None and cancel.cancelled:
            rep.cancelled = True
        elif isinstance(err, psycopg.Error):
            message = f"embedding documents in {db.display_name} failed: {err}"
            raise LiteratureError(db._redact(message)) from None  # noqa: SLF001 - the store package's own database
        else:
            raise
    finally:
        if remove_hook is not None:
            remove_hook()
        rep.seconds = time.perf_counter() - started
        with contextlib.suppress(Exception):
            if not conn.closed and not conn.broken:
                rep.remaining = int(conn.execute(_NEEDING_COUNT, {"model": model_name}).fetchone()[0])
        with contextlib.suppress(Exception):
            conn.close()
    return rep


def vector_status(db: Any, model_name: str = "all-MiniLM-L6-v2") -> dict[str, Any]:
    """How far the vectors are: ``{"available", "extension", "with_vectors", "needing", "model"}``."""

    def collect(conn: psycopg.Connection) -> dict[str, Any]:
        extension = _extension_available(conn)
        if not vector_table_exists(conn):
            return {"available": False, "extension": extension, "with_vectors": 0, "needing": None,
                    "model": model_name}
        with_vectors = first_value(conn.execute(
            f"SELECT count(*) FROM {VECTOR_TABLE} v JOIN document d ON d.id = v.document_id "
            "WHERE d.withdrawn_date IS NULL"))
        needing = first_value(conn.execute(_NEEDING_COUNT, {"model": model_name}))
        return {"available": True, "extension": extension, "with_vectors": int(with_vectors),
                "needing": int(needing), "model": model_name}

    return db.run(collect)


# -- searching ------------------------------------------------------------------------------------
def embed_text(text: str, model_name: str = "all-MiniLM-L6-v2", encoder: Encoder | None = None) -> np.ndarray:
    """The unit-length vector of one sentence (a semantic row's text, a hypothetical abstract)."""
    return encoder_for(model_name, encoder)([text])[0]


def search_filters(db: Any, use_pubmed: bool, use_medrxiv: bool, use_others: bool, from_date: Any,
             to_date: Any) -> tuple[str, dict[str, Any]] | None:
    """(WHERE clause, parameters) of the same filters the full-text rows apply; None: nothing selected."""
    sources = db.resolve_source_ids(use_pubmed, use_medrxiv, use_others)
    if not sources:
        return None
    params: dict[str, Any] = {
        "sources": sources,
        "from_date": coerce_date(from_date, end=False, name="from_date"),
        "to_date": coerce_date(to_date, end=True, name="to_date"),
    }
    where = "d.source_id = ANY(%(sources)s) AND d.withdrawn_date IS NULL"
    if params["from_date"] is not None:
        where += " AND d.publication_date >= %(from_date)s"
    if params["to_date"] is not None:
        where += " AND d.publication_date <= %(to_date)s"
    return where, params


def _require_table(conn: psycopg.Connection) -> None:
    if not vector_table_exists(conn):
        raise VectorsUnavailable(
            "this database has no document vectors yet: run 'kmds-desktop literature embed' (or let the "
            "app embed after an import); full-text rows work meanwhile"
        )


def nearest_ids(
    db: Any,
    query_vector: Any,
    max_rows: int = 100,
    use_pubmed: bool = True,
    use_medrxiv: bool = True,
    use_others: bool = True,
    from_date: Any = None,
    to_date: Any = None,
    *,
    cancel: CancelToken | None = None,
) -> list[tuple[int, float]]:
    """``(id, cosine similarity)`` of the nearest documents, closest first (ID-only, HNSW index).

    The HNSW scan keeps ``max(MIN_EF_SEARCH, 2 * max_rows)`` candidates (at most 1000) and, on
    pgvector 0.8+, scans on iteratively when filters drop candidates, so a filtered search still
    returns ``max_rows`` documents when that many exist.
    """
    max_rows = max(0, int(max_rows))
    where_params = search_filters(db, use_pubmed, use_medrxiv, use_others, from_date, to_date)
    if where_params is None or max_rows == 0:
        return []
    where, params = where_params
    params.update(q=vector_literal(query_vector), limit=max_rows,
                  ef=str(min(1000, max(MIN_EF_SEARCH, 2 * max_rows))))
    sql = (
        f"SELECT v.document_id, 1 - (v.embedding <=> %(q)s::vector) AS similarity FROM {VECTOR_TABLE} v "
        f"JOIN document d ON d.id = v.document_id WHERE {where} "
        "ORDER BY v.embedding <=> %(q)s::vector LIMIT %(limit)s"
    )

    def run(conn: psycopg.Connection) -> list[tuple[int, float]]:
        iterative = _iterative_scan(db, conn)
        with conn.transaction():
            if iterative:
                conn.execute("SELECT set_config('hnsw.ef_search', %(ef)s, true), "
                             "set_config('hnsw.iterative_scan', 'relaxed_order', true)", params)
            else:
                conn.execute("SELECT set_config('hnsw.ef_search', %(ef)s, true)", params)
            rows = conn.execute(sql, params).fetchall()  # constant SQL
        # relaxed_order may return neighbours slightly out of order: sort by similarity, then id.
        return sorted(((int(r[0]), float(r[1])) for r in rows), key=lambda p: (-p[1], p[0]))

    return db.run(run, cancel)


def _iterative_scan(db: Any, conn: psycopg.Connection) -> bool:
    """Whether pgvector has iterative index scans (0.8+); raises :class:`VectorsUnavailable` when the
    database has no vector table. Looked up once per database object (a search saves round trips)."""
    cached = getattr(db, "_kmds_vector_iterative", None)
    if cached is not None:
        return bool(cached)
    _require_table(conn)
    supported = has_iterative_scan(conn)
    db._kmds_vector_iterative = supported  # noqa: SLF001 - cached on the database object
    return supported


def has_iterative_scan(conn: psycopg.Connection) -> bool:
    """Whether the server's pgvector scans an HNSW index on past ``ef_search`` when filters drop
    candidates (``hnsw.iterative_scan``, pgvector 0.8+)."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    try:
        version = tuple(int(p) for p in str(row[0]).split(".")[:2]) if row else (0, 0)
    except ValueError:
        version = (0, 0)
    return version >= (0, 8)


def count_with_vectors(db: Any, use_pubmed: bool = True, use_medrxiv: bool = True, use_others: bool = True,
                       from_date: Any = None, to_date: Any = None, *,
                       cancel: CancelToken | None = None) -> int:
    """Documents a semantic row searches: those with a vector, under the same filters."""
    where_params = search_filters(db, use_pubmed, use_medrxiv, use_others, from_date, to_date)
    if where_params is None:
        return 0
    where, params = where_params

    def run(conn: psycopg.Connection) -> int:
        _require_table(conn)
        row = conn.execute(  # constant SQL, values bound
            f"SELECT count(*) FROM {VECTOR_TABLE} v JOIN document d ON d.id = v.document_id WHERE {where}",
            params).fetchone()
        return int(row[0]) if row else 0

    return db.run(run, cancel)


def vector_coverage(db: Any, use_pubmed: bool = True, use_medrxiv: bool = True, use_others: bool = True,
                    from_date: Any = None, to_date: Any = None, *,
                    cancel: CancelToken | None = None) -> tuple[int, int]:
    """``(documents with a vector, documents)`` under the same filters, in one statement: what a
    semantic row searched of what it could have searched (a partly embedded database misses the rest)."""
    where_params = search_filters(db, use_pubmed, use_medrxiv, use_others, from_date, to_date)
    if where_params is None:
        return 0, 0
    where, params = where_params

    def run(conn: psycopg.Connection) -> tuple[int, int]:
        _require_table(conn)
        row = conn.execute(  # constant SQL, values bound
            f"SELECT count(v.document_id), count(*) FROM document d "
            f"LEFT JOIN {VECTOR_TABLE} v ON v.document_id = d.id WHERE {where}", params).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    return db.run(run, cancel)


def stored_vectors(db: Any, ids: Iterable[int], *,
                   cancel: CancelToken | None = None) -> dict[int, np.ndarray]:
    """The stored vectors of ``ids`` that have one (for re-ranking candidates)."""
    import numpy as np  # why: numpy loads on first use, not at start-up

    wanted = sorted({int(i) for i in ids})
    if not wanted:
        return {}

    def run(conn: psycopg.Connection) -> dict[int, np.ndarray]:
        if not vector_table_exists(conn):
            return {}
        rows = conn.execute(
            f"SELECT document_id, embedding::text FROM {VECTOR_TABLE} WHERE document_id = ANY(%s)",
            (wanted,)).fetchall()
        return {int(r[0]): np.asarray(r[1][1:-1].split(","), dtype=np.float32) for r in rows}

    return db.run(run, cancel)


def document_texts(db: Any, ids: Iterable[int], *, cancel: CancelToken | None = None) -> dict[int, str]:
    """The embedding text of ``ids`` (to embed candidates that lack a stored vector, on demand)."""
    wanted = sorted({int(i) for i in ids})
    if not wanted:
        return {}
    rows = db.run(lambda c: c.execute(
        f"SELECT d.id, {TEXT_SQL} FROM document d WHERE d.id = ANY(%s)", (wanted,)).fetchall(), cancel)
    return {int(r[0]): str(r[1] or "") for r in rows}


def store_vectors(db: Any, vectors: dict[int, Any], texts: dict[int, str], model_name: str, *,
                  cancel: CancelToken | None = None) -> int:
    """Keep vectors computed on demand (a search's candidates without one) in the vector table, so
    the semantic row finds them next time and no search computes them twice.

    Why: on a database too large to embed whole (36M abstracts at ~27 per second on two cores is two
    weeks), the documents researchers' searches actually reach get vectors as they are met. Only where
    the table already exists (the app's own database, or one whose owner opted in): nothing is created
    here. Returns how many were stored; a failure stores nothing and is no search's failure."""
    if not vectors:
        return 0
    rows = [(int(i), model_name, hashlib.md5(texts[i].encode("utf-8")).hexdigest(),  # noqa: S324 - a change mark
             vector_literal(v)) for i, v in vectors.items() if texts.get(i)]

    def write(conn: psycopg.Connection) -> int:
        if not vector_table_exists(conn):
            return 0
        with conn.transaction(), conn.cursor() as cur:
            cur.executemany(_UPSERT, rows)
        return len(rows)

    try:
        return int(db.run(write, cancel))
    except psycopg.Error as err:
        log.info("vectors computed for candidates not kept: %s", err)
        return 0
