"""Why a broad AND row's cost grows with the corpus even with an exact top-k engine.

The top-k index answers an OR of plain terms with block-max WAND (cost follows k), but an AND of
broad terms is an intersection tantivy 0.27 (the latest tantivy-py on PyPI) walks whole. This bench
measures, on synthetic corpora whose terms occur independently of each other (as in
``bench/literature_scale.py``), two ways at two sizes:

- **walk**: tantivy's exact top-100 of the AND (``Must`` term queries), best of 3, in ms;
- **bound**: the least work *any* exact top-k algorithm that reads each term's postings best first
  (Fagin's threshold algorithm, instance-optimal among them) must do: the depth ``d`` at which the
  sum of the terms' d-th best BM25 scores falls to the 100th best AND score (nothing deeper can
  enter the top 100), from each term's own ranked list.

For independent terms the bound grows as ``N ** (1 - 1/m)`` for ``m`` terms (0.5 for two, 0.67
for three): an exact broad AND cannot reach a growth exponent of 0.3 on such a corpus, whatever the
engine; block-max AND (in tantivy's main branch, not yet in a tantivy-py release) lowers the
constant, not that law. The last line is the exponent of the bound over the walk's (for two terms).

Usage: ``.venv/bin/python bench/conjunction_depth.py [--sizes 250000,1000000]``
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import tantivy

VOCABULARY = 30_000
K = 100
PAIRS = [("w3", "w5"), ("w10", "w20"), ("w7", "w8"), ("w15", "w40"), ("w4", "w60"), ("w12", "w30")]
TRIPLES = [("w3", "w5", "w9"), ("w10", "w20", "w6"), ("w7", "w8", "w11")]


def schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_unsigned_field("id", stored=True, indexed=True, fast=True)
    builder.add_text_field("body", stored=False, tokenizer_name="whitespace", index_option="position")
    return builder.build()


def build(folder: Path, documents: int, seed: int = 1) -> tantivy.Index:
    """Documents of 40-120 tokens drawn independently from a Zipf-like vocabulary."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, VOCABULARY + 1) ** 1.05
    p /= p.sum()
    index = tantivy.Index(schema(), path=str(folder))
    writer = index.writer(heap_size=400_000_000, num_threads=1)
    batch = 10_000
    for start in range(0, documents, batch):
        lengths = rng.integers(40, 120, batch)
        tokens = rng.choice(VOCABULARY, size=int(lengths.sum()), p=p)
        offset = 0
        for i, length in enumerate(lengths):
            doc = tantivy.Document()
            doc.add_unsigned("id", start + i)
            doc.add_text("body", " ".join(f"w{t}" for t in tokens[offset:offset + length]))
            offset += length
            writer.add_document(doc)
        print(f"\r  {documents:,} documents: {start + batch:,} written", end="", flush=True)
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    print()
    return index


def walk_ms(searcher: tantivy.Searcher, query: tantivy.Query) -> float:
    best = math.inf
    for _ in range(3):
        started = time.perf_counter()
        searcher.search(query, K, count=False)
        best = min(best, time.perf_counter() - started)
    return best * 1000


def bound_depth(searcher: tantivy.Searcher, sch: tantivy.Schema, terms: tuple[str, ...],
                threshold: float, cap: int) -> int:
    """The least depth at which the terms' d-th best scores sum to no more than ``threshold``."""
    lists = [np.array([h[0] for h in searcher.search(tantivy.Query.term_query(sch, "body", t), cap,
                                                     count=False).hits]) for t in terms]
    depth = min(len(x) for x in lists)
    frontier = sum(x[:depth] for x in lists)
    below = np.nonzero(frontier <= threshold)[0]
    return int(below[0]) + 1 if len(below) else depth


def measure(index: tantivy.Index, documents: int) -> dict[str, list[tuple[float, int]]]:
    sch = schema()
    searcher = index.searcher()
    occur = tantivy.Occur
    out: dict[str, list[tuple[float, int]]] = {"pairs": [], "triples": []}
    for name, sets in (("pairs", PAIRS), ("triples", TRIPLES)):
        for terms in sets:
            query = tantivy.Query.boolean_query(
                [(occur.Must, tantivy.Query.term_query(sch, "body", t)) for t in terms])
            hits = searcher.search(query, K, count=False).hits
            ms = walk_ms(searcher, query)
            depth = bound_depth(searcher, sch, terms, float(hits[-1][0]), cap=min(documents, 400_000))
            shares = ", ".join(f"{searcher.doc_freq('body', t) / documents:.0%}" for t in terms)
            print(f"  {' & '.join(terms):<16} (in {shares}): walk {ms:6.1f} ms, bound depth {depth:,}")
            out[name].append((ms, depth))
    return out


def exponent(small: float, large: float, ratio: float) -> float:
    return math.log(max(large, 1e-9) / max(small, 1e-9)) / math.log(ratio)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="250000,1000000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    with tempfile.TemporaryDirectory(prefix="kmds-conjunction-") as tmp:
        for size in sizes:
            folder = Path(tmp) / str(size)
            folder.mkdir()
            print(f"{size:,} documents")
            results.append(measure(build(folder, size), size))
    ratio = sizes[-1] / sizes[0]
    figures = {}
    for name, theory in (("pairs", 0.5), ("triples", 2 / 3)):
        pairs = list(zip(results[0][name], results[-1][name], strict=True))
        walks = [exponent(a[0], b[0], ratio) for a, b in pairs]
        depths = [exponent(a[1], b[1], ratio) for a, b in pairs]
        figures[name] = (float(np.median(walks)), float(np.median(depths)))
        print(f"{name}: growth exponent {sizes[0]:,} -> {sizes[-1]:,}: walk {figures[name][0]:.2f}, "
              f"bound {figures[name][1]:.2f} (independent terms, theory {theory:.2f})")
    walk, bound = figures["pairs"]
    print(f"two-term AND growth exponent, least any exact sorted-access top-k must do / tantivy's walk: "
          f"{bound:.2f} / {walk:.2f} = {bound / max(walk, 1e-9):.2f}")


if __name__ == "__main__":
    main()
