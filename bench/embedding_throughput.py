"""Embedding throughput of ``literature embed`` vs a bare ``encode`` of the same texts.

One run: N SciFact abstracts are imported into a fresh embedded PostgreSQL (not timed), then embedded
twice over: (1) a bare ``kmds_desktop.index.embeddings.encode`` of exactly the texts the database
embeds (``title. abstract``), and (2) :func:`kmds_desktop.literature.store.vectors.embed_documents` (reads
the documents needing a vector, encodes, writes them with their md5, commits per batch). The model
is loaded and warmed before either is timed. Both wall-clock and this process's CPU time are shown
(CPU time is steadier on a shared machine; the server's own work is not in it).

Run: ``.venv/bin/python bench/embedding_throughput.py [--docs N]`` (default 256: about 10 s each on 2
free cores). The last line is (2)/(1) in documents per second (target >= 0.9).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SCIFACT = ROOT.parent / "shared" / "data" / "literature" / "scifact" / "corpus.jsonl"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=256, help="abstracts to embed (default 256)")
    args = parser.parse_args()

    from kmds_desktop.config import LiteratureSettings
    from kmds_desktop.index.embeddings import encode
    from kmds_desktop.literature.store.database import open_database
    from kmds_desktop.literature.store.server import EmbeddedServer
    from kmds_desktop.literature.store.vectors import TEXT_SQL, embed_documents

    root = Path(tempfile.mkdtemp(prefix="kmds-bench-embed-"))
    records = []
    with SCIFACT.open(encoding="utf-8") as fh:
        for line in fh:
            records.append(json.loads(line))
            if len(records) == args.docs:
                break
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    server = EmbeddedServer(root / "pg", durable=False).start()
    try:
        with psycopg.connect(**server.conninfo("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE embed_bench")
        dsn = " ".join(f"{k}={v}" for k, v in server.conninfo("embed_bench").items())
        db = open_database(dsn, settings=LiteratureSettings(statement_timeout_ms=0))
        db.import_files([corpus])
        texts = [r[0] for r in db.run(lambda c: c.execute(
            f"SELECT {TEXT_SQL} FROM document d ORDER BY d.id").fetchall())]
        encode(texts[:64])  # load and warm the model

        wall, cpu = time.perf_counter(), time.process_time()
        encode(texts)
        bare_wall, bare_cpu = time.perf_counter() - wall, time.process_time() - cpu

        wall, cpu = time.perf_counter(), time.process_time()
        report = embed_documents(db)
        db_wall, db_cpu = time.perf_counter() - wall, time.process_time() - cpu
        assert report.embedded == len(texts) and report.remaining == 0, report
        db.close()
    finally:
        server.destroy()

    n = len(texts)
    print(f"{n} SciFact abstracts (title. abstract), batches of 64")
    print(f"bare encode:            {n / bare_wall:6.1f} docs/s wall ({bare_wall:.1f} s), "
          f"CPU {bare_cpu:.1f} s")
    print(f"literature embed (DB):  {n / db_wall:6.1f} docs/s wall ({db_wall:.1f} s), CPU {db_cpu:.1f} s "
          f"(of which encoding {report.encode_seconds:.1f} s)")
    print(f"CPU-time ratio bare/embed = {bare_cpu / db_cpu:.3f}")
    print(f"embed/bare throughput = {(n / db_wall) / (n / bare_wall):.3f}x (target >= 0.9)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
