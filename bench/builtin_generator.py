"""The built-in generator (``builtin:keywords``) at the default settings, against a BM25 reference.

What a new user gets with no LLM: each question goes through the app's own search path
(:func:`kmds_desktop.literature.retrieval.evaluation.run_questions` with the default ``query_generation`` and
``retrieval`` settings, full-text rows only), on each corpus in its own embedded PostgreSQL. Per corpus:

- the share of multi-concept questions (two or more concepts) whose first query is a single term
  (target 0);
- each query's match count (median per attempt; the share of queries that match nothing);
- generation time per question (median, max);
- recall@100 and nDCG@10 (ir-measures) of the merged full-text rows against ``bm25s`` (default
  tokenizer, English stop words) on the same corpus and questions, in the same run.

Questions: SciFact *train* (judged), the CF questions (judged; measured, never tuned on), the PubMed
sample's TREC-COVID topics, and ``bench/questions/researcher_questions.jsonl`` (written as researchers
ask; no judgements: single-term share and counts only).

The last line is the merged recall@100 / bm25s on CF and on SciFact train (target >= 1.0 on both).

``--scale N`` instead times the generation alone on N records resampled from the shared corpora
(``bench/literature.py``'s corpus: the shared records' words, shuffled sentences, new identities),
for the first 100 SciFact train claims, the PubMed topics and the researcher questions: median, p95
and max seconds per question; its last line is p95 / the 1 s target.

Usage: ``python bench/builtin_generator.py [--questions N] [--corpora cf,scifact,pubmed_sample]
[--data-dir DIR] [--show N] [--scale N]`` (all questions by default; about 10 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "literature"
OWN = ROOT / "bench" / "questions" / "researcher_questions.jsonl"

CORPORA = {
    "cf": {"corpus": DATA / "cf" / "corpus.jsonl", "questions": DATA / "cf" / "queries.jsonl",
           "qrels": DATA / "cf" / "qrels.tsv", "split": None},
    "scifact": {"corpus": DATA / "scifact" / "corpus.jsonl", "questions": DATA / "scifact" / "queries.jsonl",
                "qrels": DATA / "scifact" / "qrels.tsv", "split": "train"},
    "pubmed_sample": {"corpus": DATA / "pubmed_sample" / "corpus.jsonl",
                      "questions": DATA / "pubmed_sample" / "topics.jsonl", "qrels": None, "split": None},
}


def bm25_runs(corpus: Path, questions: list) -> dict[str, list[str]]:
    """Top 100 external ids per question from bm25s over title + abstract of the same corpus."""
    import bm25s

    with open(corpus, encoding="utf-8") as lines:
        docs = [json.loads(line) for line in lines]
    ids = [d["id"] for d in docs]
    texts = [f"{d.get('title') or ''} {d.get('abstract') or ''}" for d in docs]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    tokens = bm25s.tokenize([q.text for q in questions], stopwords="en", show_progress=False)
    results, _ = retriever.retrieve(tokens, k=100, show_progress=False)
    return {q.id: [ids[j] for j in results[i]] for i, q in enumerate(questions)}


def own_questions(corpus: str) -> list:
    from kmds_desktop.literature.retrieval.evaluation import Question

    out = []
    for line in OWN.read_text(encoding="utf-8").splitlines():
        data = json.loads(line)
        if data["corpus"] == corpus:
            out.append(Question(data["id"], data["text"]))
    return out


def measure_corpus(name: str, spec: dict, root: Path, limit: int | None, show: int) -> dict:
    from kmds_desktop.config import QueryGenerationSettings, RetrievalSettings
    from kmds_desktop.literature.queries.agent import QueryAgent
    from kmds_desktop.literature.queries.keyword_queries import KeywordQueryBuilder
    from kmds_desktop.literature.retrieval.evaluation import (
        evaluate_runs,
        load_qrels,
        load_questions,
        measure,
        run_questions,
    )
    from kmds_desktop.literature.store.database import open_embedded

    qrels = load_qrels(spec["qrels"]) if spec["qrels"] else {}
    questions = load_questions(spec["questions"], spec["split"])
    if qrels:
        questions = [q for q in questions if q.id in qrels]
    questions = questions[:limit]
    own = own_questions(name)
    db = open_embedded(root / name / "postgres")
    try:
        if db.status()["documents"] == 0:
            db.import_files([spec["corpus"]])
        settings = QueryGenerationSettings()  # the defaults a new user gets
        # Re-ranking only reorders the fused channel (it embeds documents); the full-text channel
        # measured here is the full-text rows' own fusion, the same with it or without.
        agent = QueryAgent(db, settings, retrieval=RetrievalSettings(rerank=False))
        single, multi, counts, empty, gen_times = 0, 0, {1: [], 2: [], 3: []}, 0, []
        shown = 0
        for question in [*questions, *own]:
            started = time.perf_counter()
            generated = agent.convert_question_multi_model(question.text)
            gen_times.append(time.perf_counter() - started)
            builder = KeywordQueryBuilder(db)
            concepts = builder.concepts(question.text) if hasattr(builder, "concepts") else None
            n_concepts = len(concepts) if concepts is not None else len(builder.terms(question.text))
            rows = [r for r in generated.all_queries if r.ok]
            if n_concepts >= 2 and rows:
                multi += 1
                first = rows[0].query
                if not any(op in first for op in ("&", "|", "<->")):
                    single += 1
            for r in rows:
                c = int(db.count_matches(r.query))
                counts.setdefault(r.attempt_number, []).append(c)
                empty += c == 0
            if shown < show:
                shown += 1
                print(f"  [{name}] {question.text}")
                for r in rows:
                    print(f"      {r.attempt_number}: {r.query}  ({int(db.count_matches(r.query))} matches)")
        result = {"questions": len(questions) + len(own), "multi": multi, "single_first": single,
                  "median_counts": {a: statistics.median(v) if v else 0 for a, v in counts.items()},
                  "empty_share": empty / max(1, sum(len(v) for v in counts.values())),
                  "gen_median_s": statistics.median(gen_times) if gen_times else 0.0,
                  "gen_max_s": max(gen_times) if gen_times else 0.0,
                  "documents": db.status()["documents"]}
        if qrels:
            runs = run_questions(agent, questions, ("fulltext",), max_rows=100)
            judged = {q.id: qrels[q.id] for q in questions}
            result["merged"] = evaluate_runs(db, runs, judged, ["fulltext"])["fulltext"]
            result["bm25s"] = measure(bm25_runs(spec["corpus"], questions), judged)
        return result
    finally:
        db.close(stop_server=True)


def scale(records: int, root: Path) -> int:
    """Generation time per question on ``records`` resampled records (see the module docstring)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from literature import build_corpus

    from kmds_desktop.literature.queries.keyword_queries import KeywordQueryBuilder
    from kmds_desktop.literature.retrieval.evaluation import load_questions
    from kmds_desktop.literature.store.database import open_embedded
    from kmds_desktop.literature.store.vectors import encoder_for

    encoder = encoder_for("all-MiniLM-L6-v2")
    encoder(["warm-up"])  # the window loads the model at start; its loading is not generation time
    corpus = build_corpus(records)
    db = open_embedded(root / f"scale_{records}" / "postgres")
    try:
        if db.status()["documents"] == 0:
            started = time.perf_counter()
            db.import_files([corpus])
            print(f"imported {records:,} records in {time.perf_counter() - started:.0f} s")
        questions = [q.text for q in load_questions(CORPORA["scifact"]["questions"], "train")[:100]]
        questions += [q.text for q in load_questions(CORPORA["pubmed_sample"]["questions"])]
        questions += [json.loads(line)["text"] for line in OWN.read_text(encoding="utf-8").splitlines()]
        times = []
        for question in questions:
            # A new builder: nothing cached from an earlier question; with the embedding model, as the
            # default settings have it (query_generation.builtin_embedding_variants).
            builder = KeywordQueryBuilder(db, encoder)
            started = time.perf_counter()
            builder.query(question, 1)
            builder.query(question, 2)
            builder.query(question, 3)
            times.append(time.perf_counter() - started)
        times.sort()
        p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
        print(f"{db.status()['documents']:,} documents, {len(times)} questions: generation median "
              f"{statistics.median(times):.3f} s, p95 {p95:.3f} s, max {times[-1]:.3f} s")
        print(f"generation p95 / 1 s target: {p95:.3f}")
        return 0
    finally:
        db.close(stop_server=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=None, help="only the first N questions per corpus")
    parser.add_argument("--corpora", default="cf,scifact,pubmed_sample")
    parser.add_argument("--data-dir", type=Path, default=None, help="keep the databases here for a rerun")
    parser.add_argument("--show", type=int, default=3, help="print the queries of the first N questions")
    parser.add_argument("--scale", type=int, default=None, help="time the generation on N resampled records")
    args = parser.parse_args()
    root = args.data_dir or Path(tempfile.mkdtemp(prefix="kmds-bench-generator-"))
    if args.scale:
        try:
            return scale(args.scale, root)
        finally:
            if args.data_dir is None:
                shutil.rmtree(root, ignore_errors=True)
    table: dict[str, dict] = {}
    try:
        for name in args.corpora.split(","):
            table[name] = measure_corpus(name, CORPORA[name], root, args.questions, args.show)
    finally:
        if args.data_dir is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\n{'corpus':<15}{'docs':>7}{'qs':>5}{'single-term first':>19}{'median matches 1/2/3':>22}"
          f"{'0-match':>9}{'gen s (med/max)':>17}{'R@100':>8}{'bm25s':>8}{'nDCG@10':>9}{'bm25s':>8}")
    for name, r in table.items():
        med = "/".join(f"{r['median_counts'].get(a, 0):.0f}" for a in (1, 2, 3))
        merged, bm = r.get("merged"), r.get("bm25s")
        quality = (f"{merged['R@100']:>8.3f}{bm['R@100']:>8.3f}{merged['nDCG@10']:>9.3f}{bm['nDCG@10']:>8.3f}"
                   if merged else f"{'-':>8}{'-':>8}{'-':>9}{'-':>8}")
        print(f"{name:<15}{r['documents']:>7}{r['questions']:>5}{r['single_first']:>10} of {r['multi']:<6}"
              f"{med:>22}{r['empty_share']:>9.1%}{r['gen_median_s']:>8.2f}/{r['gen_max_s']:<8.2f}{quality}")
    ratios = [f"{n} {table[n]['merged']['R@100'] / max(1e-9, table[n]['bm25s']['R@100']):.3f}"
              for n in ("cf", "scifact") if n in table and "merged" in table[n]]
    print("merged recall@100 / bm25s: " + ", ".join(ratios))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
