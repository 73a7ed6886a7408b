"""Retrieval quality on SciFact *train* claims: full-text rows, the semantic row, fused, and BM25.

One command, one run: the SciFact corpus is imported into the app's embedded PostgreSQL, embedded with
``literature embed``'s code (only documents without a vector: with ``--data-dir`` a second run reuses
the vectors), and every judged train claim runs through the app's own search path
(:func:`kmds_desktop.literature.retrieval.evaluation.run_questions`: ``builtin:keywords`` full-text rows, the
claim as a semantic row, merged with the default ``retrieval`` settings). The same claims go to a
BM25 reference (``bm25s`` on the same corpus: its default tokenizer with English stop words, and with
a Snowball stemmer as a stronger variant). Fusion variants (plain RRF k=60, the defaults without re-ranking)
are computed from the same rows. Measures: ir-measures nDCG@10 and recall@100 over all judged claims.

The last line is fused nDCG@10 / BM25 nDCG@10 (target >= 1.05) and the same for recall@100.
Only the *train* split is used: the test split is for honest measurement elsewhere, never for tuning.

Usage: ``python bench/retrieval_quality.py [--claims N] [--data-dir DIR]`` (all 809 claims by default;
embedding 5,183 abstracts takes about 3 minutes on 2 free cores, the claims about 3 more).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SCIFACT = ROOT.parent / "shared" / "data" / "literature" / "scifact"


def bm25_runs(claims: list, stemmed: bool) -> dict[str, list[str]]:
    """Top 100 external ids per claim from bm25s over title + abstract of the same corpus."""
    import bm25s

    stemmer = None
    if stemmed:
        import Stemmer

        stemmer = Stemmer.Stemmer("english")
    with open(SCIFACT / "corpus.jsonl", encoding="utf-8") as lines:
        docs = [json.loads(line) for line in lines]
    ids = [d["id"] for d in docs]
    texts = [f"{d.get('title') or ''} {d.get('abstract') or ''}" for d in docs]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)
    tokens = bm25s.tokenize([c.text for c in claims], stopwords="en", stemmer=stemmer, show_progress=False)
    results, _ = retriever.retrieve(tokens, k=100, show_progress=False)
    return {c.id: [ids[j] for j in results[i]] for i, c in enumerate(claims)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=None, help="only the first N judged train claims")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="keep the benchmark's PostgreSQL here (vectors are reused by the next run)")
    args = parser.parse_args()

    from kmds_desktop.config import QueryGenerationSettings, RetrievalSettings
    from kmds_desktop.literature.queries.agent import QueryAgent
    from kmds_desktop.literature.retrieval.evaluation import (
        evaluate_runs,
        external_ids,
        load_qrels,
        load_questions,
        measure,
        run_questions,
    )
    from kmds_desktop.literature.retrieval.fusion import reciprocal_rank_fusion
    from kmds_desktop.literature.store.database import open_embedded
    from kmds_desktop.literature.store.vectors import embed_documents

    qrels = load_qrels(SCIFACT / "qrels.tsv")
    claims = [q for q in load_questions(SCIFACT / "queries.jsonl", "train") if q.id in qrels][: args.claims]
    judged = {c.id: qrels[c.id] for c in claims}
    root = args.data_dir or Path(tempfile.mkdtemp(prefix="kmds-bench-quality-"))
    db = open_embedded(root / "postgres")
    try:
        started = time.perf_counter()
        if db.status()["documents"] == 0:
            db.import_files([SCIFACT / "corpus.jsonl"])
        rep = embed_documents(db)
        print(f"corpus: {db.status()['documents']} SciFact abstracts; embedded {rep.embedded} now "
              f"({rep.per_second:.1f}/s) in {time.perf_counter() - started:.0f} s")
        defaults = RetrievalSettings()
        agent = QueryAgent(db, QueryGenerationSettings(multi_model_enabled=True, models=["builtin:keywords"],
                                                       queries_per_model=3), retrieval=defaults)
        started = time.perf_counter()
        runs = run_questions(agent, claims, ("fulltext", "semantic"), max_rows=100)
        took = time.perf_counter() - started
        print(f"{len(claims)} train claims run through the app's search in {took:.0f} s "
              f"(3 builtin:keywords rows + 1 semantic row each)")
        table = evaluate_runs(db, runs, judged, ["fulltext", "semantic", "fused"])

        # Variants from the same rows: plain RRF (k=60, equal weights), and re-ranked by similarity.
        names = external_ids(db, {i for r in runs for _, ids in r.rows for i in ids})

        def variant(fuse) -> dict[str, float]:
            ranked = {}
            for r in runs:
                ranked[r.question.id] = [names[i] for i in fuse(r) if i in names][:100]
            return measure(ranked, judged)

        def plain(r):
            return reciprocal_rank_fusion([ids for _, ids in r.rows], k=60)[0]

        def unranked(r):
            weights = [1.0 if kind == "tsquery" else defaults.semantic_weight for kind, _ in r.rows]
            return reciprocal_rank_fusion([ids for _, ids in r.rows], k=defaults.fusion_k, weights=weights)[0]

        table["rrf k=60 w=1"] = variant(plain)
        table["fused, no rerank"] = variant(unranked)
        table["BM25 (bm25s)"] = measure(bm25_runs(claims, stemmed=False), judged)
        table["BM25+stemmer"] = measure(bm25_runs(claims, stemmed=True), judged)
    finally:
        db.close(stop_server=True)
        if args.data_dir is None:
            shutil.rmtree(root, ignore_errors=True)

    print(f"fused = full-text rows ranked by {defaults.fulltext_ranking}, RRF k={defaults.fusion_k}, "
          f"semantic weight {defaults.semantic_weight}, re-ranking {'on' if defaults.rerank else 'off'} "
          f"(weight {defaults.rerank_weight}; the retrieval defaults)")
    print(f"{'channel':<18}{'nDCG@10':>9}{'R@100':>9}")
    for name, values in table.items():
        print(f"{name:<18}{values['nDCG@10']:>9.3f}{values['R@100']:>9.3f}")
    bm25, fused = table["BM25 (bm25s)"], table["fused"]
    stem = table["BM25+stemmer"]
    print(f"vs BM25+stemmer: nDCG@10 {fused['nDCG@10'] / stem['nDCG@10']:.3f}x, "
          f"recall@100 {fused['R@100'] / stem['R@100']:.3f}x")
    print(f"fused/BM25 nDCG@10 = {fused['nDCG@10']:.3f}/{bm25['nDCG@10']:.3f} = "
          f"{fused['nDCG@10'] / bm25['nDCG@10']:.3f}x (target >= 1.05); recall@100 "
          f"{fused['R@100'] / bm25['R@100']:.3f}x (target >= 1.05)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
