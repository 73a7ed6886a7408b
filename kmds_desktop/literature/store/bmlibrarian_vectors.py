"""The vectors a BMLibrarian database already holds (chunk vectors in ``emb_<N>``), searched by meaning.

Why: a BMLibrarian installation of PubMed and medRxiv (about 36 million documents) keeps chunk
embeddings of its own model (``snowflake-arctic-embed2`` through Ollama, 1024 dimensions, an HNSW
index); embedding it again with the app's model would take two weeks on two cores. Where those vectors
exist and their model answers on the configured Ollama server, a semantic row embeds its sentence with
that model and searches them. Read-only: nothing is written into the database.

The layout (BMLibrarian's baseline schema): ``embedding_base (id, chunk_id, model_id)`` with one child
table per dimension, ``emb_1024 (embedding vector(1024)) INHERITS (embedding_base)``;
``embedding_models (id, model_name)``; ``chunks (id, document_id, ...)``. A document's similarity is
its best chunk's. Table names come from the catalog and are quoted as identifiers; values are bound.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from kmds_desktop.literature.errors import DatabaseUnavailable, LiteratureError, QueryTimeout
from kmds_desktop.literature.store.rows import first_value
from kmds_desktop.literature.store.vectors import (
    MIN_EF_SEARCH,
    has_iterative_scan,
    search_filters,
    vector_literal,
)
from kmds_desktop.tasks import Cancelled, CancelToken, check

log = logging.getLogger(__name__)

#: Up to this many documents (the planner's estimate) the coverage is counted exactly; above it, it is
#: estimated from the tables' statistics and labelled "≈" (an exact count over 36M rows takes minutes).
EXACT_COVERAGE_UP_TO = 200_000
#: Rows read from the start of a vector table to see which models made its vectors (besides a 0.01 %
#: sample of its pages): bounded however large the table is.
MODEL_PROBE_ROWS = 10_000
#: Chunks a search reads from the HNSW index per document asked for (a document has several chunks).
CHUNKS_PER_ROW = 4
#: The most chunks a filtered search widens to (a filter that keeps few documents).
MAX_CANDIDATE_CHUNKS = 64_000

_LAYOUT_SQL = """
SELECT c.relname, a.atttypmod FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'embedding' AND NOT a.attisdropped
WHERE p.relname = 'embedding_base' AND n.nspname = current_schema() AND c.relname ~ '^emb_[0-9]+$'
  AND to_regclass('chunks') IS NOT NULL AND to_regclass('embedding_models') IS NOT NULL
ORDER BY a.atttypmod DESC, c.relname
"""


@dataclass(frozen=True)
class DatabaseVectors:
    """One model's chunk vectors in one ``emb_<N>`` table of the database."""

    table: str
    dimensions: int
    model_id: int
    model_name: str

    def describe(self) -> str:
        return f"the database's own {self.model_name} vectors"


def find_database_vectors(db: Any, *, cancel: CancelToken | None = None) -> list[DatabaseVectors]:
    """Every (table, model) of chunk vectors the database holds, largest dimension first; [] when it
    has no BMLibrarian vector layout. Looked up once per database object."""
    cached = getattr(db, "_kmds_database_vectors", None)
    if cached is not None:
        return list(cached)

    def run(conn: psycopg.Connection) -> list[DatabaseVectors]:
        found: list[DatabaseVectors] = []
        for table, dims in conn.execute(_LAYOUT_SQL).fetchall():
            # Which models' vectors the table holds, from its first rows and a sample of its pages: an
            # EXISTS for a model it lacks would read the whole table (150 GB at 36M chunks).
            rows = conn.execute(sql.SQL(
                "SELECT m.id, m.model_name FROM embedding_models m WHERE m.id IN ("
                "SELECT model_id FROM (SELECT model_id FROM {t} LIMIT %(head)s) head UNION "
                "SELECT model_id FROM {t} TABLESAMPLE SYSTEM (0.01)) ORDER BY m.id").format(
                    t=sql.Identifier(str(table))), {"head": MODEL_PROBE_ROWS}).fetchall()
            found.extend(DatabaseVectors(str(table), int(dims), int(r[0]), str(r[1])) for r in rows)
        return found

    try:
        found = db.run(run, cancel)
    except (Cancelled, QueryTimeout, DatabaseUnavailable):
        raise  # the next search asks again: a cancel or a lost connection says nothing of the layout
    except (psycopg.Error, LiteratureError) as err:  # no pgvector, no rights there: as if there were none
        log.info("the database's own vectors could not be read: %s", err)
        found = []
    db._kmds_database_vectors = tuple(found)  # noqa: SLF001 - cached on the database object
    return found


def nearest_document_ids(db: Any, vectors: DatabaseVectors, query_vector: Any, max_rows: int = 100,
                         use_pubmed: bool = True, use_medrxiv: bool = True, use_others: bool = True,
                         from_date: Any = None, to_date: Any = None, *,
                         cancel: CancelToken | None = None) -> list[tuple[int, float]]:
    """``(document id, cosine similarity of its best chunk)``, closest first, under the same filters as
    the full-text rows (sources, dates, withdrawn); ID-only, from the table's HNSW index.

    The filters apply to the nearest ``CHUNKS_PER_ROW * max_rows + MIN_EF_SEARCH`` chunks; while they
    leave fewer rows than asked for (one small source, a narrow date range), the search widens to four
    times as many chunks, up to :data:`MAX_CANDIDATE_CHUNKS` (each step an HNSW scan, so the cost stays
    bounded). Only a filter that keeps almost none of the database's chunks returns fewer rows."""
    max_rows = max(0, int(max_rows))
    where_params = search_filters(db, use_pubmed, use_medrxiv, use_others, from_date, to_date)
    if where_params is None or max_rows == 0:
        return []
    where, params = where_params
    first = min(MAX_CANDIDATE_CHUNKS, CHUNKS_PER_ROW * max_rows + MIN_EF_SEARCH)
    params.update(q=vector_literal(query_vector), model=vectors.model_id, limit=max_rows)
    statement = sql.SQL(
        "WITH near AS (SELECT e.chunk_id, e.embedding <=> %(q)s::vector AS distance FROM {table} e "
        "WHERE e.model_id = %(model)s ORDER BY e.embedding <=> %(q)s::vector LIMIT %(candidates)s) "
        "SELECT d.id, 1 - min(near.distance) AS similarity FROM near "
        "JOIN chunks c ON c.id = near.chunk_id JOIN document d ON d.id = c.document_id "
        "WHERE {where} GROUP BY d.id ORDER BY similarity DESC, d.id LIMIT %(limit)s").format(
            table=sql.Identifier(vectors.table), where=sql.SQL(where))

    def run(conn: psycopg.Connection) -> list[tuple[int, float]]:
        iterative = getattr(db, "_kmds_iterative_scan", None)
        if iterative is None:  # once per database object
            iterative = db._kmds_iterative_scan = has_iterative_scan(conn)  # noqa: SLF001 - cached on the database object
        candidates, rows = first, []
        while True:
            step = {**params, "candidates": candidates, "ef": str(min(1000, max(MIN_EF_SEARCH, candidates))),
                    "tuples": str(max(20000, 2 * candidates))}
            with conn.transaction():
                conn.execute("SELECT set_config('hnsw.ef_search', %(ef)s, true)", step)
                if iterative:  # more candidates than ef_search: the scan goes on past it
                    conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                                 "set_config('hnsw.max_scan_tuples', %(tuples)s, true)", step)
                rows = conn.execute(statement, step).fetchall()
            widest = MAX_CANDIDATE_CHUNKS if iterative else 1000  # without iterative scans ef_search caps it
            if len(rows) >= max_rows or candidates >= widest:
                break
            check(cancel)
            candidates = min(MAX_CANDIDATE_CHUNKS, candidates * 4)
        return [(int(r[0]), float(r[1])) for r in rows]

    return db.run(run, cancel)


def database_similarities(db: Any, vectors: DatabaseVectors, query_vector: Any, ids: list[int], *,
                          cancel: CancelToken | None = None) -> dict[int, float]:
    """Cosine similarity of each candidate's best chunk to the query vector (for re-ranking fused
    candidates without embedding them again); candidates without a chunk vector are left out."""
    wanted = sorted({int(i) for i in ids})
    if not wanted:
        return {}
    statement = sql.SQL(
        "SELECT c.document_id, max(1 - (e.embedding <=> %(q)s::vector)) FROM chunks c "
        "JOIN {table} e ON e.chunk_id = c.id WHERE c.document_id = ANY(%(ids)s) AND e.model_id = %(model)s "
        "GROUP BY c.document_id").format(table=sql.Identifier(vectors.table))
    params = {"q": vector_literal(query_vector), "ids": wanted, "model": vectors.model_id}
    rows = db.run(lambda c: c.execute(statement, params).fetchall(), cancel)
    return {int(r[0]): float(r[1]) for r in rows}


def table_sizes(conn: psycopg.Connection, names: list[str]) -> dict[str, int]:
    """Each table's row count from PostgreSQL's statistics (one catalog read); a table never analysed
    (``reltuples`` -1: a database loaded in bulk and not yet vacuumed) gets the planner's estimate from
    its size on disk (``EXPLAIN``, no scan), not 0, which would take the exact count of millions."""
    rows = conn.execute(
        "SELECT relname, reltuples::bigint FROM pg_class WHERE relname = ANY(%s) "
        "AND relnamespace = current_schema()::regnamespace", (names,)).fetchall()
    sizes = {}
    for name, tuples in rows:
        if tuples is not None and tuples >= 0:
            sizes[str(name)] = int(tuples)
            continue
        plan = first_value(conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) SELECT 1 FROM {}").format(
            sql.Identifier(str(name)))))
        plan = json.loads(plan) if isinstance(plan, str) else plan
        sizes[str(name)] = max(0, int(plan[0]["Plan"]["Plan Rows"]))
    return sizes


def database_vector_coverage(db: Any, vectors: DatabaseVectors, use_pubmed: bool = True,
                             use_medrxiv: bool = True, use_others: bool = True, from_date: Any = None,
                             to_date: Any = None, *,
                             cancel: CancelToken | None = None) -> tuple[int, int, bool]:
    """``(documents with a chunk vector, documents, estimated)`` under the same filters: exact up to
    :data:`EXACT_COVERAGE_UP_TO` documents, else from the planner's statistics (unfiltered, and
    ``estimated`` True: shown as "≈")."""
    where_params = search_filters(db, use_pubmed, use_medrxiv, use_others, from_date, to_date)
    if where_params is None:
        return 0, 0, False
    where, params = where_params
    params["model"] = vectors.model_id

    def run(conn: psycopg.Connection) -> tuple[int, int, bool]:
        sizes = table_sizes(conn, ["document", "chunks", vectors.table])
        documents = int(sizes.get("document") or 0)
        if documents > EXACT_COVERAGE_UP_TO:
            chunks = max(int(sizes.get("chunks") or 0), 1)
            share = min(1.0, int(sizes.get(vectors.table) or 0) / chunks)
            return int(documents * share), documents, True
        row = conn.execute(sql.SQL(
            "SELECT count(*) FILTER (WHERE EXISTS (SELECT 1 FROM chunks c JOIN {table} e "
            "ON e.chunk_id = c.id WHERE c.document_id = d.id AND e.model_id = %(model)s)), count(*) "
            "FROM document d WHERE {where}"
        ).format(table=sql.Identifier(vectors.table), where=sql.SQL(where)),
            params).fetchone()
        return (int(row[0]), int(row[1]), False) if row else (0, 0, False)

    return db.run(run, cancel)


def database_vector_status(db: Any, *, use_database_vectors: bool = True,
                           cancel: CancelToken | None = None) -> dict[str, Any] | None:
    """What the database's own vectors give semantic rows, for the status line, ``literature status``
    and the generation round's choice to add the question's semantic row: ``{"model", "models",
    "table", "dimensions", "with_vectors", "documents", "estimated", "described"}`` for the first model
    (the one :func:`~kmds_desktop.literature.retrieval.vector_choice.choose_vectors` tries first); None
    on the app's own database, with the setting off, or when the database holds no vectors. Bounded: a
    catalog read, a probe of the vector table's first rows, and the coverage count (an estimate above
    200,000 documents)."""
    if not use_database_vectors or getattr(db, "schema_owner", "app") == "app":
        return None
    found = find_database_vectors(db, cancel=cancel)
    if not found:
        return None
    first = found[0]
    with_vectors, documents, estimated = database_vector_coverage(db, first, cancel=cancel)
    return {"model": first.model_name, "models": list(dict.fromkeys(v.model_name for v in found)),
            "table": first.table, "dimensions": first.dimensions, "with_vectors": with_vectors,
            "documents": documents, "estimated": estimated, "described": first.describe()}
