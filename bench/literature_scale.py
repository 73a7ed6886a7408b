"""Full-text rows at PubMed scale: today's PostgreSQL ranking vs the top-k index, 1M / 2M / 4M documents.

One run builds a synthetic PubMed-like corpus in stages (the first size, then appended up to each
next size) in the app's embedded PostgreSQL and, at every size, measures on the same database and the
same queries:

- the top-100 ID-only full-text row: ``find_abstract_ids_ranked(..., ranking="idf")`` in PostgreSQL
  (today's default; every match ranked) vs ``ranking="bm25"`` with the top-k index attached
  (:mod:`kmds_desktop.literature.store.topk_index`), p50 and p95 per query set;
- the index alone: the exact walk of the row vs the row as it runs (a broad AND over the row budget
  within an impact tier, :mod:`kmds_desktop.literature.store.topk_tiers`), with the tier's overlap
  with the exact top 100 and its share of the exact top 100's score;
- the live count: ``count_matches`` in PostgreSQL (with the window's 300 ms budget, then the
  planner's estimate) vs from the index (exact);

Every figure of a query is its best of 3 runs (one when it takes over a second; the machine is
shared), p50/p95 over the queries.
- design B, not chosen, up to ``--fts5-up-to`` documents: SQLite FTS5 over the same lexemes,
  ``ORDER BY bm25() LIMIT 100`` (FTS5 scores every match, no block-max skipping);
- the index's build time (read ``search_vector`` from PostgreSQL, write the index), its size per
  document beside PostgreSQL's table + GIN index, and the process's peak memory while querying.

The corpus: the vocabulary and its term frequencies are the lexemes of the shared corpora (SciFact,
CF, the PubMed sample; ``ts_stat``), each document's length is drawn from their lengths, tokens are
drawn by frequency (Zipf-like, as the real ones are) plus rare synthetic terms (so the vocabulary grows
with the corpus as PubMed's does), and about a third of the positions are stop words. The documents
hold lexemes already, so ``search_vector`` is computed with a ``simple`` configuration with English
stop words (the English stemmer's cost on 4M abstracts would dominate the run, not what is measured);
queries use only lexemes the English stemmer leaves as they are, so ``to_tsquery('english', q)``
matches them. The same queries run at every size (drawn at the first). Query sets by how many
documents their terms match: broad (terms in 10-40 % of the
documents, e.g. "cancer & therapy"), medium (0.5-3 %), selective (under 0.05 %).

The last line: ``broad-row p50 at <largest size>: PostgreSQL / top-k index = <ratio>``. Targets
(issue): broad-row p50 <= 100 ms at 4M, growth exponent <= 0.3 between the first and the last size,
count <= 300 ms or an estimate.

Usage: ``.venv/bin/python bench/literature_scale.py [--sizes 1000000,2000000,4000000] [--keep DIR]``
"""

from __future__ import annotations

import argparse
import math
import os
import random
import resource
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kmds_desktop.config import LiteratureSettings  # noqa: E402
from kmds_desktop.literature.store.database import open_database, open_embedded  # noqa: E402
from kmds_desktop.literature.store.server import EmbeddedServer  # noqa: E402
from kmds_desktop.literature.store.topk_build import build_index  # noqa: E402
from kmds_desktop.literature.store.topk_index import TopKIndex  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "literature"
CORPORA = ("scifact/corpus.jsonl", "cf/corpus.jsonl", "pubmed_sample/corpus.jsonl")
RARE_SHARE = 0.04  # share of tokens that are rare synthetic terms
RARE_VOCABULARY = 20_000_000
STOP_SHARE = 0.33  # share of positions that are stop words
CHUNK = 50_000
QUERIES_PER_SET = 10


def shared_statistics(root: Path) -> tuple[list[str], np.ndarray, np.ndarray, set[str]]:
    """(lexemes, their token frequencies, document lengths, lexemes the English stemmer keeps)."""
    db = open_embedded(root)
    try:
        db.import_files([SHARED / rel for rel in CORPORA])
        rows = db.run(lambda c: c.execute(
            "SELECT word, nentry FROM ts_stat('SELECT search_vector FROM document') "
            "WHERE word ~ '^[a-z][a-z0-9]{2,}$' ORDER BY nentry DESC").fetchall())
        lengths = db.run(lambda c: c.execute(
            "SELECT length(coalesce(title, '') || ' ' || coalesce(abstract, '')) - "
            "length(replace(coalesce(title, '') || ' ' || coalesce(abstract, ''), ' ', '')) + 1 "
            "FROM document").fetchall())
        words = [str(r[0]) for r in rows]
        fixed = {str(r[0]) for r in db.run(lambda c: c.execute(
            "SELECT w FROM unnest(%s::text[]) w "
            "WHERE to_tsvector('english', w)::text = quote_literal(w) || ':1'",
            (words,)).fetchall())}
    finally:
        db.close(stop_server=True)
    return (words, np.array([float(r[1]) for r in rows]), np.array([int(r[0]) for r in lengths if r[0]]),
            fixed)


class CorpusWriter:
    """Documents drawn from the shared statistics, written to PostgreSQL with COPY."""

    def __init__(self, words: list[str], freqs: np.ndarray, lengths: np.ndarray, seed: int = 11) -> None:
        self.words = np.array(words, dtype=object)
        self.p = freqs / freqs.sum()
        self.cum = np.cumsum(self.p)
        self.lengths = lengths
        self.rng = np.random.default_rng(seed)
        self.next_id = 1

    def chunk(self, n: int) -> list[tuple[int, int, str, str, Any]]:
        rng = self.rng
        lengths = rng.choice(self.lengths, size=n)
        total = int(lengths.sum())
        tokens = self.words[np.minimum(np.searchsorted(self.cum, rng.random(total)), len(self.words) - 1)]
        rare = rng.random(total) < RARE_SHARE
        if rare.any():
            ids = np.minimum(rng.zipf(1.15, size=int(rare.sum())), RARE_VOCABULARY)
            tokens[rare] = np.array([f"zr{i:x}" for i in ids], dtype=object)
        stop = rng.random(total) < STOP_SHARE
        tokens[stop] = "the"
        out = []
        start = 0
        years = rng.integers(1966, 2026, size=n)
        for i, length in enumerate(lengths):
            doc_id = self.next_id
            self.next_id += 1
            body = " ".join(tokens[start:start + length])
            start += length
            out.append((doc_id, 1, f"syn:{doc_id}", body, f"{int(years[i])}-06-01"))
        return out


def prepare_schema(server: EmbeddedServer, name: str) -> str:
    with psycopg.connect(**server.conninfo("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    dsn = " ".join(f"{k}={v}" for k, v in server.conninfo(name).items())
    db = open_database(dsn, settings=LiteratureSettings(statement_timeout_ms=0))  # the app's schema
    db.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TEXT SEARCH DICTIONARY bench_simple_dict (TEMPLATE = pg_catalog.simple, "
                     "STOPWORDS = english)")
        conn.execute("CREATE TEXT SEARCH CONFIGURATION bench_simple (COPY = pg_catalog.simple)")
        conn.execute("ALTER TEXT SEARCH CONFIGURATION bench_simple ALTER MAPPING FOR asciiword, word, "
                     "numword, asciihword, hword, numhword, hword_asciipart, hword_part, hword_numpart "
                     "WITH bench_simple_dict")
        conn.execute("ALTER TABLE document DROP COLUMN search_vector")
        conn.execute("ALTER TABLE document ADD COLUMN search_vector tsvector GENERATED ALWAYS AS "
                     "(to_tsvector('bench_simple'::regconfig, coalesce(abstract, ''))) STORED")
        conn.execute("ALTER TABLE document ALTER COLUMN search_vector SET STORAGE MAIN")
        conn.execute("INSERT INTO sources (name) VALUES ('PubMed') ON CONFLICT DO NOTHING")
    return dsn


def append(dsn: str, writer: CorpusWriter, count: int) -> float:
    """COPY ``count`` more documents (GIN index dropped and rebuilt: a bulk build is the fast way)."""
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP INDEX IF EXISTS idx_document_search_vector")
        source = conn.execute("SELECT id FROM sources WHERE name = 'PubMed'").fetchone()[0]
        done = 0
        while done < count:
            rows = writer.chunk(min(CHUNK, count - done))
            with conn.cursor().copy("COPY document (id, source_id, external_id, abstract, publication_date) "
                                    "FROM STDIN") as copy:
                for doc_id, _, ext, body, day in rows:
                    copy.write_row((doc_id, source, ext, body, day))
            done += len(rows)
            print(f"\r  corpus: {done:,} of {count:,} more documents", end="", flush=True)
        print()
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("CREATE INDEX idx_document_search_vector ON document USING gin (search_vector)")
        conn.execute("VACUUM ANALYZE document")
    return time.perf_counter() - started


def query_sets(dsn: str, usable: set[str], documents: int, rng: random.Random) -> dict[str, list[str]]:
    """Queries whose terms match the wanted shares of the documents (document frequencies from the
    database's own statistics on a sample)."""
    percent = min(100.0, 100_000 / documents * 100)  # about 100,000 documents
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT setseed(0.5)")
        rows = conn.execute(
            f"SELECT word, ndoc FROM ts_stat('SELECT search_vector FROM document TABLESAMPLE SYSTEM "
            f"({percent:.3f}) REPEATABLE (7)') ORDER BY ndoc DESC").fetchall()
        sample = conn.execute(f"SELECT count(*) FROM document TABLESAMPLE SYSTEM ({percent:.3f}) "
                              "REPEATABLE (7)").fetchone()[0] or 1
    share = {str(w): n / sample for w, n in rows if str(w) in usable}

    def band(low: float, high: float) -> list[str]:
        return [w for w, s in share.items() if low <= s <= high]

    broad, medium, selective = band(0.10, 0.40), band(0.005, 0.03), band(0.00005, 0.0005)
    if len(selective) < 5:  # a small corpus: the rarest terms seen
        selective = [w for w, s in sorted(share.items(), key=lambda item: item[1]) if s > 0][:200]

    def shapes(a: list[str], b: list[str]) -> list[str]:
        out = []
        for i in range(QUERIES_PER_SET):
            x, y, z = rng.sample(a, 3) if len(a) >= 3 else (a * 3)[:3]
            kind = i % 5
            out.append([f"{x} & {y}", f"{x} | {y}", f"({x} | {y}) & {z}", f"{x} & {y} & {z}",
                        f"{x[:4]}:* & {rng.choice(b)}"][kind])
        return out

    return {"broad": shapes(broad, broad), "medium": shapes(medium, medium),
            "selective": [f"{rng.choice(selective)} & {rng.choice(broad)}" if i % 2 else
                          f"{rng.choice(selective)} | {rng.choice(selective)}"
                          for i in range(QUERIES_PER_SET)]}


REPEATS = 3


def timed(fn: Any) -> float:
    """Best of :data:`REPEATS` runs, in ms (the machine is shared: the best run is the query's cost);
    a run over a second is not repeated (its noise is small beside it, and the run stays short)."""
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - started) * 1000)
        if best > 1000:
            break
    return best


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(math.ceil(q * len(ordered))) - 1)]


def fts5_build(dsn: str, path: Path) -> float:
    started = time.perf_counter()
    if path.exists():
        path.unlink()
    lite = sqlite3.connect(path)
    lite.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize = 'unicode61')")
    with psycopg.connect(dsn) as conn, conn.cursor(name="fts5") as cur:
        cur.itersize = 20_000
        cur.execute("SELECT id, replace(abstract, 'the ', '') FROM document ORDER BY id")
        batch = []
        for row in cur:
            batch.append(row)
            if len(batch) >= 20_000:
                lite.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)", batch)
                batch.clear()
        lite.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)", batch)
    lite.commit()
    lite.close()
    return time.perf_counter() - started


def fts5_query(tsquery: str) -> str:
    return (tsquery.replace("&", " AND ").replace("|", " OR ").replace(":*", "*"))


def measure(db: Any, index: TopKIndex, queries: dict[str, list[str]], fts5: Path | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    lite = sqlite3.connect(fts5) if fts5 else None
    for name, qs in queries.items():
        pg, fast, pg_count, fast_count, lite_ms, estimated = [], [], [], [], [], 0
        walk, tiered, overlaps, shares, in_tier = [], [], [], [], 0
        for q in qs:
            db.attach_topk_index(None)
            pg.append(timed(lambda q=q: db.find_abstract_ids_ranked(q, 100, ranking="idf")))
            counted: list[Any] = []
            pg_count.append(timed(lambda q=q, out=counted: out.append(db.count_matches(q, timeout_ms=300))))
            estimated += counted[-1].estimated
            db.attach_topk_index(index)
            fast.append(timed(lambda q=q: db.find_abstract_ids_ranked(q, 100, ranking="bm25")))
            fast_count.append(timed(lambda q=q: db.count_matches(q)))
            # the index alone: the exact walk vs the row as it runs (within an impact tier when the
            # walk is over the row budget), and how far the tier's top 100 is from the exact one
            printed = db.run(lambda c, q=q: c.execute("SELECT to_tsquery('english', %s)::text",
                                                       (q,)).fetchone()[0])
            plan = index.plan(str(printed or ""))
            if plan is not None:
                walk.append(timed(lambda plan=plan: index.top(plan.query, 100)))
                tiered.append(timed(lambda plan=plan: index.top_ranked(plan, 100)))
                exact = index.top(plan.query, 100)
                ranked, tier = index.top_ranked(plan, 100)
                if tier is not None and exact:
                    in_tier += 1
                    overlaps.append(len({i for i, _ in ranked} & {i for i, _ in exact}) / len(exact))
                    shares.append(sum(x for _, x in ranked) / sum(x for _, x in exact))
            if lite is not None:
                lite_ms.append(timed(lambda q=q: lite.execute(
                    "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 100",
                    (fts5_query(q),)).fetchall()))
        out[name] = {"pg": pg, "fast": fast, "pg_count": pg_count, "fast_count": fast_count,
                     "fts5": lite_ms, "estimated": estimated, "walk": walk, "tiered": tiered,
                     "overlaps": overlaps, "shares": shares, "in_tier": in_tier}
    if lite is not None:
        lite.close()
    return out


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,2000000,4000000")
    parser.add_argument("--fts5-up-to", type=int, default=2_000_000,
                        help="measure design B (SQLite FTS5) up to this size (its build is slow)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the server and index here")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    root = args.keep or Path(tempfile.mkdtemp(prefix="kmds-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    print(f"statistics of the shared corpora ({root})", flush=True)
    words, freqs, lengths, fixed = shared_statistics(root / "shared-pg")
    print(f"  {len(words):,} lexemes, median length {int(np.median(lengths))} words", flush=True)
    server = EmbeddedServer(root / "pg", durable=False).start()
    rng = random.Random(5)
    results: list[tuple[int, dict[str, Any], dict[str, float]]] = []
    try:
        dsn = prepare_schema(server, "scale")
        writer = CorpusWriter(words, freqs, lengths)
        index = TopKIndex(root / "topk")
        have = 0
        for size in sizes:
            added = size - have
            load_s = append(dsn, writer, added)
            have = size
            db = open_database(dsn, settings=LiteratureSettings(statement_timeout_ms=0))
            t0 = time.perf_counter()
            build_index(db, index)
            build_s = time.perf_counter() - t0
            fts5 = root / "fts5.sqlite3" if size <= args.fts5_up_to else None
            fts5_s = fts5_build(dsn, fts5) if fts5 else 0.0
            if not results:  # drawn once, at the first size: every size runs the same queries
                queries = query_sets(dsn, fixed, size, rng)
            for qs in queries.values():  # warm both paths (caches, first-use costs) on one query
                db.attach_topk_index(None)
                db.find_abstract_ids_ranked(qs[0], 100, ranking="idf")
                db.attach_topk_index(index)
                db.find_abstract_ids_ranked(qs[0], 100, ranking="bm25")
            rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            figures = measure(db, index, queries, fts5)
            rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            with psycopg.connect(dsn) as conn:
                pg_bytes = conn.execute("SELECT pg_total_relation_size('document')").fetchone()[0]
            facts = {"added": added, "load_s": load_s, "build_s": build_s, "fts5_s": fts5_s,
                     "pg_bytes": pg_bytes,
                     "index_bytes": folder_bytes(root / "topk" / "tantivy"), "rss_mb": rss1 / 1024,
                     "rss_growth_mb": (rss1 - rss0) / 1024}
            results.append((size, figures, facts))
            db.close()
            report(results, queries)
            print(f"  ({(time.perf_counter() - started) / 60:.1f} min so far)", flush=True)
    finally:
        server.stop()
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


def report(results: list[tuple[int, dict[str, Any], dict[str, float]]],
           queries: dict[str, list[str]]) -> None:
    print("\nsize       set        p50/p95 ms: PostgreSQL idf | top-k bm25 | FTS5    "
          "count ms p50/p95: PG | top-k")
    for size, figures, _ in results:
        for name, f in figures.items():
            lite = f"{pct(f['fts5'], .5):7.1f}/{pct(f['fts5'], .95):7.1f}" if f["fts5"] else "      -        "
            est = f" ({f['estimated']} estimated)" if f["estimated"] else ""
            print(f"{size:>9,}  {name:<9}  {pct(f['pg'], .5):7.1f}/{pct(f['pg'], .95):7.1f} | "
                  f"{pct(f['fast'], .5):6.1f}/{pct(f['fast'], .95):6.1f} | {lite}   "
                  f"{pct(f['pg_count'], .5):7.1f}/{pct(f['pg_count'], .95):7.1f} | "
                  f"{pct(f['fast_count'], .5):6.1f}/{pct(f['fast_count'], .95):6.1f}{est}")
    print("\nsize       set        index only p50/p95 ms: exact walk | as run (tiers) ; rows in a tier, "
          "overlap with the exact top 100 (median, least), score share (least)")
    for size, figures, _ in results:
        for name, f in figures.items():
            if not f["walk"]:
                continue
            quality = (f"overlap {float(np.median(f['overlaps'])):.2f}, {min(f['overlaps']):.2f}; "
                       f"score share {min(f['shares']):.3f}") if f["overlaps"] else "-"
            print(f"{size:>9,}  {name:<9}  {pct(f['walk'], .5):6.1f}/{pct(f['walk'], .95):6.1f} | "
                  f"{pct(f['tiered'], .5):6.1f}/{pct(f['tiered'], .95):6.1f} ; {f['in_tier']} of "
                  f"{len(f['walk'])} in a tier, {quality}")
    for size, _, facts in results:
        print(f"{size:>9,}: load of {facts['added']:,.0f} more {facts['load_s']:.0f} s, index build of them "
              f"{facts['build_s']:.0f} s ({facts['added'] / max(facts['build_s'], 1e-9):,.0f} docs/s), "
              f"FTS5 build {facts['fts5_s']:.0f} s; "
              f"PostgreSQL table+GIN {facts['pg_bytes'] / size:,.0f} B/doc, top-k index "
              f"{facts['index_bytes'] / size:,.0f} B/doc; peak RSS {facts['rss_mb']:,.0f} MB "
              f"(+{facts['rss_growth_mb']:,.0f} MB while querying)")
    if len(results) >= 2:
        (n0, f0, _), (n1, f1, _) = results[0], results[-1]
        for name in f0:
            for key, label in (("pg", "PostgreSQL"), ("fast", "top-k"), ("fts5", "FTS5"),
                               ("walk", "exact walk"), ("tiered", "index+tiers")):
                if not f0[name][key] or not f1[name][key]:
                    continue
                a, b = pct(f0[name][key], .5), pct(f1[name][key], .5)
                exponent = math.log(b / a) / math.log(n1 / n0) if a > 0 and b > 0 else float("nan")
                extra = ", ".join(f"{m // 1_000_000}M ~{b * (m / n1) ** exponent:,.0f} ms"
                                  for m in (10_000_000, 36_000_000))
                print(f"growth exponent {name:<9} {label:<10} {exponent:5.2f} ({n0:,} -> {n1:,}); {extra}")
    size, figures, _ = results[-1]
    ratio = pct(figures["broad"]["pg"], .5) / max(pct(figures["broad"]["fast"], .5), 1e-9)
    print(f"queries: {queries}")
    print(f"broad-row p50 at {size:,}: PostgreSQL / top-k index = {ratio:.1f}", flush=True)


if __name__ == "__main__":
    threading.stack_size(0)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
