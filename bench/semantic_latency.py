"""Semantic row vs full-text row latency on one literature database, and storage per document.

One run: the resampled corpus of ``bench/literature.py`` is imported into a fresh embedded PostgreSQL,
every document gets a synthetic unit vector (384 dimensions, made by the server: embedding 200,000
abstracts with the real model would take about two hours on 2 cores, and the latency of an HNSW
search does not depend on where the vectors came from), the HNSW index is built, and then 20 queries
run both ways as the app runs them (ID-only, 100 rows, the same filters): the full-text row
(``find_abstract_ids_ranked``, the queries of ``bench/literature.py``) and the nearest-neighbour row
(``nearest_ids`` with a random query vector). Medians are printed, and the on-disk size of the
vectors (table, TOAST and HNSW index) per document beside that of the ``document`` table.

Run: ``.venv/bin/python bench/semantic_latency.py [--records N]`` (default 50,000 so that it runs in a
few minutes on 2 cores; ``--records 200000`` is the size the targets are stated for). The last line is
semantic median / full-text median (target <= 2).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from literature import QUERIES, build_corpus, fresh_db  # noqa: E402

from kmds_desktop.literature.store.server import EmbeddedServer  # noqa: E402
from kmds_desktop.literature.store.vectors import DIMENSIONS, VECTOR_TABLE, nearest_ids  # noqa: E402

SYNTHETIC_SQL = f"""
INSERT INTO {VECTOR_TABLE} (document_id, model, content_md5, embedding)
SELECT d.id, 'synthetic', md5(d.id::text),
       l2_normalize((SELECT array_agg(random() - 0.5) FROM generate_series(1, {DIMENSIONS})
                     WHERE d.id IS NOT NULL)::vector)  -- correlated: a new vector per row
FROM document d
"""


def timed(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=50_000,
                        help="documents (default 50,000; the stated target is for 200,000)")
    parser.add_argument("--max-rows", type=int, default=100)
    args = parser.parse_args()

    corpus = build_corpus(args.records)
    root = Path(tempfile.mkdtemp(prefix="kmds-bench-semantic-"))
    server = EmbeddedServer(root, durable=False).start()
    try:
        db = fresh_db(server, "semantic_bench")
        t0 = time.perf_counter()
        db.import_files([corpus])
        print(f"imported {args.records} documents in {time.perf_counter() - t0:.0f} s")
        t0 = time.perf_counter()
        with psycopg.connect(db.dsn, autocommit=True) as conn:
            conn.execute(f"DROP INDEX IF EXISTS idx_{VECTOR_TABLE}_hnsw")  # bulk load, then one build
            conn.execute(SYNTHETIC_SQL)
            loaded = time.perf_counter() - t0
            conn.execute("SET maintenance_work_mem = '1GB'")
            conn.execute(f"CREATE INDEX idx_{VECTOR_TABLE}_hnsw ON {VECTOR_TABLE} "
                         "USING hnsw (embedding vector_cosine_ops)")
            conn.execute(f"VACUUM ANALYZE {VECTOR_TABLE}")
            conn.execute("VACUUM ANALYZE document")
            sizes = conn.execute(
                f"SELECT pg_total_relation_size('{VECTOR_TABLE}'), "
                f"pg_relation_size('idx_{VECTOR_TABLE}_hnsw'), "
                "pg_total_relation_size('document'), (SELECT count(*) FROM document)").fetchone()
        built = time.perf_counter() - t0 - loaded
        print(f"synthetic vectors in {loaded:.0f} s, HNSW index built in {built:.0f} s")

        rng = np.random.default_rng(7)
        vectors = rng.normal(size=(len(QUERIES), DIMENSIONS)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        for q, v in zip(QUERIES[:3], vectors[:3], strict=True):  # warm the caches both ways
            db.find_abstract_ids_ranked(q, max_rows=args.max_rows)
            db.find_abstract_ids_ranked(q, max_rows=args.max_rows, ranking="idf")
            nearest_ids(db, v, max_rows=args.max_rows)
        fulltext, by_idf, semantic = [], [], []
        returned = []
        for q, v in zip(QUERIES, vectors, strict=True):
            fulltext.append(timed(lambda q=q: db.find_abstract_ids_ranked(q, max_rows=args.max_rows)))
            by_idf.append(timed(lambda q=q: db.find_abstract_ids_ranked(q, max_rows=args.max_rows,
                                                                        ranking="idf")))
            semantic.append(timed(lambda v=v: nearest_ids(db, v, max_rows=args.max_rows)))
            returned.append(len(nearest_ids(db, v, max_rows=args.max_rows)))
        db.close()
    finally:
        server.destroy()

    total, index, document, count = (int(x) for x in sizes)
    ft, sem, idf = statistics.median(fulltext), statistics.median(semantic), statistics.median(by_idf)
    print(f"{count} documents; {args.max_rows} rows per query; 20 queries, best of 3 each, median shown")
    print(f"storage per document: vectors {total / count:.0f} B (of which HNSW index {index / count:.0f} B), "
          f"document table {document / count:.0f} B")
    ms = 1000.0
    print(f"full-text row (ID-only, ts_rank_cd): median {ft * ms:.1f} ms, max {max(fulltext) * ms:.1f} ms")
    print(f"full-text row (ID-only, idf):        median {idf * ms:.1f} ms, max {max(by_idf) * ms:.1f} ms "
          f"({idf / ft:.2f}x ts_rank_cd; the app's default ranking)")
    print(f"semantic row (ID-only, HNSW):        median {sem * ms:.1f} ms, max {max(semantic) * ms:.1f} ms "
          f"(each returned {min(returned)}-{max(returned)} ids)")
    print(f"semantic/full-text median latency = {sem * ms:.1f}/{ft * ms:.1f} ms = {sem / ft:.2f}x against "
          f"ts_rank_cd, {sem / idf:.2f}x against idf (target <= 2)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
