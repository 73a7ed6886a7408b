"""Benchmark of a PubMed-baseline-like folder import: the app's path vs a bare COPY of the same rows.

The shared MEDLINE files (``raw/medline16n0902.xml.gz``, 2016 DTD, 604 citations, and
``raw/test_current_medline.xml.gz``, current DTD, 4 articles) are copied ``--copies`` times into a
temp folder, every copy with PMIDs of its own (``copy * 100,000,000`` added to each), gzip'ed as
PubMed ships them. Then, each into a fresh database of an embedded server in a temp folder:

- the folder import: ``LiteratureDatabase.import_files(folder)``, what ``kmds-desktop literature
  import FOLDER`` runs (streamed gzip + XML parsing, each file one transaction through COPY into
  staging and one upsert, the ledger written after each file, the progress line);
- the bare COPY, as ``bench/literature.py`` (a) does it: the same files parsed by the same reader and
  each file's rows COPY'd straight into ``document`` (sources created first, no staging, no upsert,
  no ledger), one transaction per file.

It also prints the parsing alone (records/s of the reader with no database), which bounds both, and
the time of the step ``import_files`` takes after the files (the top-k index kept in step, built for
the app's own database). ``--rounds`` runs of each alternate; the best of each is compared.
The server is not durable (no fsync), as in ``bench/literature.py``; everything is removed at the end.
Files hold ~600 records here, a baseline file ~30,000, so the per-file costs weigh more here.

Run: ``.venv/bin/python bench/pubmed_import.py [--copies N]``. The last line is the time ratio.
"""

from __future__ import annotations

import argparse
import gzip
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kmds_desktop import paths  # noqa: E402
from kmds_desktop.config import LiteratureSettings  # noqa: E402
from kmds_desktop.literature.document import Document  # noqa: E402
from kmds_desktop.literature.store.database import open_database  # noqa: E402
from kmds_desktop.literature.store.importers import read_records  # noqa: E402
from kmds_desktop.literature.store.loading import folder_files  # noqa: E402
from kmds_desktop.literature.store.server import EmbeddedServer  # noqa: E402

RAW = ROOT.parent / "shared" / "data" / "literature" / "raw"
SHARED_FILES = ("medline16n0902.xml.gz", "test_current_medline.xml.gz")
_PMID = re.compile(rb"(<PMID(?: [^>]*)?>)(\d+)(</PMID>)")


def build_folder(folder: Path, copies: int) -> tuple[int, int]:
    """``copies`` copies of the shared files with distinct PMIDs; returns (files, bytes)."""
    texts = {name: gzip.decompress((RAW / name).read_bytes()) for name in SHARED_FILES}
    size = 0
    for copy in range(1, copies + 1):
        offset = copy * 100_000_000
        for name, text in texts.items():
            shifted = _PMID.sub(
                lambda m, o=offset: m.group(1) + str(int(m.group(2)) + o).encode() + m.group(3), text)
            out = folder / f"pubmed{copy:04d}_{name}"
            out.write_bytes(gzip.compress(shifted, compresslevel=6))
            size += out.stat().st_size
    return copies * len(texts), size


def fresh_db(server: EmbeddedServer, name: str):
    with psycopg.connect(**server.conninfo("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    dsn = " ".join(f"{k}={v}" for k, v in server.conninfo(name).items())
    return open_database(dsn, settings=LiteratureSettings(statement_timeout_ms=0))


def bare_copy(db, files: list[Path]) -> int:
    """COPY the parsed rows straight into ``document``, a transaction per file (bench/literature.py (a))."""
    n = 0
    with psycopg.connect(db.dsn, autocommit=False) as conn:
        row = conn.execute("INSERT INTO sources (name) VALUES ('PubMed') RETURNING id").fetchone()
        conn.commit()
        pubmed = row[0]
        for path in files:
            with conn.cursor().copy(
                "COPY document (source_id, external_id, doi, title, abstract, authors, publication, "
                "publication_date, mesh_terms, keywords, url) FROM STDIN"
            ) as copy:
                for r in read_records(path):
                    if not isinstance(r, Document):
                        continue
                    copy.write_row((pubmed, r.external_id, r.doi or None, r.title or None, r.abstract or None,
                                    r.authors, r.journal or None, r.publication_date, r.mesh_terms,
                                    r.keywords, r.url or None))
                    n += 1
            conn.commit()
    return n


def folder_import(server: EmbeddedServer, folder: Path, n_files: int, parsed: int, name: str) -> dict:
    """One folder import into a fresh database (the step after the files, database.py's top-k index
    kept in step, timed apart), then a second run that must skip every file."""
    db = fresh_db(server, name)
    last: list[str] = []

    def keep(done: int, total: int | None, message: str) -> None:  # what the CLI's line would show
        last[:] = [message]

    after = getattr(db, "_topk_after_import", None)
    t_after = [0.0]
    if after is not None:
        def timed_after(*a, **kw):
            t = time.perf_counter()
            try:
                return after(*a, **kw)
            finally:
                t_after[0] += time.perf_counter() - t

        db._topk_after_import = timed_after
    t0 = time.perf_counter()
    report = db.import_files(folder, progress=keep)
    seconds = time.perf_counter() - t0
    if after is not None:
        db._topk_after_import = after
    assert report.inserted == parsed and len(report.files) == n_files, report.summary()
    t0 = time.perf_counter()
    skipped = db.import_files(folder)
    again = time.perf_counter() - t0
    assert not skipped.files and len(skipped.already_imported) == n_files
    db.close()
    return {"seconds": seconds, "after": t_after[0], "again": again, "line": last[0] if last else ""}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--copies", type=int, default=60,
                        help="copies of the shared MEDLINE files (default 60: 36,480 records, ~30 s of "
                             "folder import on 2 shared cores)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="runs of each, alternating; the best of each is compared (default 2)")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="kmds-bench-pubmed-"))
    paths.set_data_dir(root / "home")  # the import ledger goes here, never into a user's data folder
    folder = root / "baseline"
    folder.mkdir()
    t0 = time.perf_counter()
    n_files, n_bytes = build_folder(folder, args.copies)
    files = folder_files(folder)
    print(f"folder: {n_files} files, {n_bytes / 1e6:.1f} MB gzip'ed "
          f"({time.perf_counter() - t0:.1f} s to write)")

    t0 = time.perf_counter()
    parsed = sum(1 for f in files for r in read_records(f) if isinstance(r, Document))
    t_parse = time.perf_counter() - t0
    print(f"parsing alone: {parsed:,} records in {t_parse:.1f} s ({parsed / t_parse:,.0f} records/s)")

    server = EmbeddedServer(root / "pg", durable=False).start()
    try:
        runs, copies = [], []
        for i in range(args.rounds):
            runs.append(folder_import(server, folder, n_files, parsed, f"bench_folder_{i}"))
            db_copy = fresh_db(server, f"bench_copy_{i}")
            t0 = time.perf_counter()
            copied = bare_copy(db_copy, files)
            copies.append(time.perf_counter() - t0)
            db_copy.close()
            assert copied == parsed
            print(f"round {i + 1}: folder import {runs[-1]['seconds']:.1f} s, bare COPY {copies[-1]:.1f} s")
        best = min(runs, key=lambda r: r["seconds"])
        t_folder, t_after, t_copy = best["seconds"], best["after"], min(copies)
        print(f"last progress line: {best['line']}")
        print(f"folder import: {parsed:,} records in {t_folder:.1f} s ({parsed / t_folder:,.0f} records/s); "
              f"a second run skips all {n_files} files in {best['again']:.2f} s")
        print(f"    of which {t_after:.1f} s after the files: the top-k index kept in step (built for the "
              f"app's own database of up to 300,000 documents); without it {t_folder - t_after:.1f} s "
              f"({parsed / (t_folder - t_after):,.0f} records/s, {(t_folder - t_after) / t_copy:.2f}x the "
              "bare COPY)")
        print(f"bare COPY: {parsed:,} records in {t_copy:.1f} s ({parsed / t_copy:,.0f} records/s)")
        print(f"folder import / bare COPY time ratio: {t_folder / t_copy:.2f}")
    finally:
        server.destroy()
        paths.set_data_dir(None)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
