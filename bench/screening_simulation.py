"""Screening order by simulation on the CF collection: this project's order against ASReview, rank and random.

For every CF question with at least 10 relevant records (a record is relevant when it has any qrels row),
two pools: (a) the whole corpus (1,239 records), (b) the bm25s top 500 for the question in rank order
(relevant = relevant in the pool; questions with fewer than 2 there are skipped). Each replay screens one
random relevant and one random irrelevant record first (seed = the question id), then follows its order:

- ``ours``: the session's model (:data:`~kmds_desktop.literature.screening.ordering.DEFAULT_MODEL`,
  TF-IDF 1–2-grams and the document vectors of the shipped embedding model, all-MiniLM-L6-v2, as the
  literature database holds them + linear SVM, includes weighted, the question as an extra include);
- ``ours, no question``: the same without the question (neither its words nor its vector);
- ``ours, no vectors``: TF-IDF alone (records from a file, or a database not yet embedded);
- ``ASReview``: ASReview LAB's default model (``elas_u4``: TF-IDF 1–2-grams, SVM C=0.11, balanced
  sample weights ratio 9.8, max query) from the ``asreview`` package itself; where the package cannot be
  imported, a labelled re-implementation of it (``ASReview (reference)``);
- ``rank``: the search's rank (bm25s) order; ``random``: a seeded random order.

Model orders retrain after every decision up to 20, then each time the labelled set grew by a tenth
(:func:`~kmds_desktop.literature.screening.simulation.retrain_due`): the same for every model, so they
compare fairly; the session itself retrains after every decision.

The model was chosen on the **odd** question ids; the **even** ones are held out and reported apart.
Figures per pool kind: WSS@95, recall after 10% and 25% screened, records to 95% recall (means over the
questions). Then the session's decision → next record latency (p95) and training time at 1k and 10k records.
The last line: ours / ASReview WSS@95 on the held-out questions (both pool kinds together).

ASReview is a benchmark-only dependency and is not installed into the app's environment (its pins would
downgrade rispy): ``pip install --no-deps --target .venv/bench-asreview asreview==3.0.8 pandas pytz`` and
its import-time dependencies into ``.venv/bench-asreview-deps``;
this script adds both folders to ``sys.path`` when they exist.

The corpus and the questions are embedded once per run (about a minute on 2 cores).

Usage: ``python bench/screening_simulation.py [--questions N] [--split odd|even|both] [--skip-latency]``
(about 10 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CF = ROOT.parent / "shared" / "data" / "literature" / "cf"
for extra in (ROOT / ".venv" / "bench-asreview", ROOT / ".venv" / "bench-asreview-deps"):
    if extra.is_dir():
        sys.path.append(str(extra))

from kmds_desktop.literature.screening.ordering import (  # noqa: E402
    DEFAULT_MODEL,
    ModelConfig,
    TextFeatures,
    train,
)
from kmds_desktop.literature.screening.simulation import (  # noqa: E402
    model_scorer,
    pick_priors,
    simulate,
)

METRICS = ("wss95", "recall10", "recall25", "records95")


def load_cf() -> tuple[list[dict], dict[str, str], dict[str, set[str]]]:
    with open(CF / "corpus.jsonl", encoding="utf-8") as lines:
        docs = [json.loads(line) for line in lines]
    queries = {}
    with open(CF / "queries.jsonl", encoding="utf-8") as lines:
        for line in lines:
            q = json.loads(line)
            queries[str(q["id"])] = q["text"]
    relevant: dict[str, set[str]] = collections.defaultdict(set)
    with open(CF / "qrels.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, doc_id, *_ = line.rstrip("\n").split("\t")
            relevant[qid].add(doc_id)
    return docs, queries, relevant


_SCRATCH: list[tempfile.TemporaryDirectory] = []


def _scratch_dir() -> str:
    """A temporary folder for the run's stray files (removed when the process ends)."""
    if not _SCRATCH:
        _SCRATCH.append(tempfile.TemporaryDirectory(prefix="kmds-screening-bench-"))
    return _SCRATCH[0].name


def asreview_factory() -> tuple[
    str, Callable[[list[str]], Callable[[Mapping[int, bool]], np.ndarray | None]]
]:
    """ASReview's default model as a scorer factory (texts -> scorer); the package when importable."""
    try:
        # asreview imports synergy_dataset, which opens a requests cache ("synergy_cache.sqlite") in the
        # working directory at import time: import it from a temporary folder, never the repository.
        with contextlib.chdir(_scratch_dir()):
            import asreview
            from asreview.learner import ActiveLearningCycle
            from asreview.models.models import AI_MODEL_CONFIGURATIONS

        meta = next(c["value"] for c in AI_MODEL_CONFIGURATIONS if c["name"] == "elas_u4")

        label = f"ASReview {asreview.__version__} (elas_u4)"

        def make(texts: list[str]) -> Callable[[Mapping[int, bool]], np.ndarray | None]:
            cycle = ActiveLearningCycle.from_meta(meta)
            import pandas as pd

            parts = [t.split("\n", 1) + [""] for t in texts]
            x = cycle.transform(
                pd.DataFrame({"title": [p[0] for p in parts], "abstract": [p[1] for p in parts]})
            )

            def score(labels: Mapping[int, bool]) -> np.ndarray | None:
                idx = np.fromiter(labels.keys(), dtype=np.int64)
                y = np.fromiter((int(labels[i]) for i in idx), dtype=np.int64)
                cycle.fit(x[idx], y)
                ranking = np.asarray(cycle.rank(x))
                values = np.empty(len(texts))
                values[ranking] = -np.arange(len(ranking), dtype=float)
                return values

            return score

        return label, make
    except Exception:  # noqa: BLE001 - any import problem: the documented default, re-implemented
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.svm import LinearSVC

        def make_ref(texts: list[str]) -> Callable[[Mapping[int, bool]], np.ndarray | None]:
            x = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, max_df=0.95).fit_transform(texts)

            def score(labels: Mapping[int, bool]) -> np.ndarray | None:
                idx = np.fromiter(labels.keys(), dtype=np.int64)
                y = np.fromiter((int(labels[i]) for i in idx), dtype=np.int64)
                w = np.where(y == 1, 1.0, y.sum() / (9.8 * max(1, (y == 0).sum())))
                w *= len(y) / w.sum()
                return LinearSVC(C=0.11).fit(x[idx], y, sample_weight=w).decision_function(x)

            return score

        return "ASReview (reference: elas_u4 re-implemented, package not importable)", make_ref


def run(args: argparse.Namespace) -> int:
    import bm25s

    started = time.perf_counter()
    docs, queries, relevant = load_cf()
    ids = [d["id"] for d in docs]
    texts = [f"{d.get('title') or ''}\n{d.get('abstract') or ''}" for d in docs]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    asr_label, asr_make = asreview_factory()
    chosen = sorted((q for q in queries if len(relevant[q]) >= 10), key=int)
    if args.split != "both":
        chosen = [q for q in chosen if int(q) % 2 == (1 if args.split == "odd" else 0)]
    if args.questions:
        chosen = chosen[: args.questions]
    from kmds_desktop.index.embeddings import encode

    vectors = encode(texts)
    question_vectors = dict(zip(chosen, encode([queries[q] for q in chosen]), strict=True))
    print(f"  embedded {len(texts):,} records ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    whole = TextFeatures.build(texts, "", DEFAULT_MODEL.ngram_max, vectors=vectors)
    whole_text = TextFeatures.build(texts, "", DEFAULT_MODEL.ngram_max)
    asr_whole = asr_make(texts)
    methods = ("ours", "ours, no question", "ours, no vectors", "ASReview", "rank", "random")
    results: dict[tuple[str, str, str], list[dict[str, float]]] = collections.defaultdict(list)
    no_question = ModelConfig(**{**DEFAULT_MODEL.__dict__, "question_prior": False})
    no_vectors = ModelConfig(**{**DEFAULT_MODEL.__dict__, "vector_weight": 0.0})
    for qid in chosen:
        split = "odd (dev)" if int(qid) % 2 else "even (held out)"
        tokens = bm25s.tokenize([queries[qid]], stopwords="en", show_progress=False)
        hits, _ = retriever.retrieve(tokens, k=len(docs), show_progress=False)
        ranking = [int(j) for j in hits[0]]
        for pool_kind in ("whole corpus", "bm25s top 500"):
            qv = question_vectors[qid]
            if pool_kind == "whole corpus":
                pool = list(range(len(docs)))
                feats = whole.with_question(queries[qid], qv)
                feats_text = whole_text.with_question(queries[qid])
                asr = asr_whole
                rank_order = ranking
            else:
                pool = ranking[:500]
                pool_texts = [texts[j] for j in pool]
                feats = TextFeatures.build(
                    pool_texts, queries[qid], DEFAULT_MODEL.ngram_max, vectors=vectors[pool],
                    question_vector=qv,
                )
                feats_text = TextFeatures.build(pool_texts, queries[qid], DEFAULT_MODEL.ngram_max)
                asr = asr_make(pool_texts)
                rank_order = list(range(500))
            truth = np.array([ids[j] in relevant[qid] for j in pool])
            if truth.sum() < 2:
                continue
            priors = pick_priors(truth, int(qid))
            rng = np.random.default_rng(int(qid))
            random_order = [int(i) for i in rng.permutation(len(pool))]
            scorers = {
                "ours": model_scorer(feats, DEFAULT_MODEL),
                "ours, no question": model_scorer(feats, no_question),
                "ours, no vectors": model_scorer(feats_text, no_vectors),
                "ASReview": asr,
            }
            for method in methods:
                result = simulate(
                    truth,
                    scorer=scorers.get(method),
                    priors=priors,
                    fallback=random_order if method == "random" else rank_order,
                )
                results[(split, pool_kind, method)].append(result.figures())
        print(
            f"  question {qid:>3} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True
        )

    print(
        f"CF screening simulation: {len(chosen)} questions with >= 10 relevant; priors 1 relevant + "
        f"1 irrelevant (seed = question id); ours = {DEFAULT_MODEL.describe()}; ASReview = {asr_label}"
    )
    header = (
        f"{'split':<16} {'pool':<14} {'order':<18} {'n':>3} {'WSS@95':>7} {'R@10%':>6} {'R@25%':>6} "
        f"{'n95':>6}"
    )
    print(header)
    print("-" * len(header))
    for split in ("odd (dev)", "even (held out)"):
        for pool_kind in ("whole corpus", "bm25s top 500"):
            for method in methods:
                rows = results.get((split, pool_kind, method), [])
                if not rows:
                    continue
                mean = {m: statistics.fmean(r[m] for r in rows) for m in METRICS}
                print(
                    f"{split:<16} {pool_kind:<14} {method:<18} {len(rows):>3} {mean['wss95']:>7.3f} "
                    f"{mean['recall10']:>6.3f} {mean['recall25']:>6.3f} {mean['records95']:>6.0f}"
                )
    if not args.skip_latency:
        latency_and_training(docs, texts, queries, relevant, vectors)
    print(f"(run took {time.perf_counter() - started:.0f} s)")
    split = "even (held out)" if any(int(q) % 2 == 0 for q in chosen) else "odd (dev)"
    parts = []
    for kind in ("whole corpus", "bm25s top 500"):
        ours = results.get((split, kind, "ours"), [])
        ref = results.get((split, kind, "ASReview"), [])
        if ours and ref:
            wss = statistics.fmean(r["wss95"] for r in ours) / statistics.fmean(r["wss95"] for r in ref)
            n95 = statistics.fmean(r["records95"] for r in ours) / statistics.fmean(
                r["records95"] for r in ref
            )
            parts.append(f"{kind}: WSS@95 {wss:.2f}x, records to 95% {n95:.2f}x")
    if parts:
        print(f"{split} ours / {asr_label}: " + "; ".join(parts) + " (target >= 1.10x and <= 0.90x)")
    return 0


def latency_and_training(
    docs: list[dict],
    texts: list[str],
    queries: dict[str, str],
    relevant: dict[str, set[str]],
    vectors: np.ndarray,
) -> None:
    """Decision -> next record in the session (background training on), and train() at 1k and 10k."""
    from kmds_desktop.app.screening import TRAINING_WANTED, ScreeningSession, latency_p95
    from kmds_desktop.literature.screening.decisions import DecisionStore
    from kmds_desktop.literature.screening.records import ScreeningRecord

    qid = "3"
    with tempfile.TemporaryDirectory() as tmp:
        store = DecisionStore(Path(tmp) / "screening.sqlite3")
        store.create_review("bench", question=queries[qid])
        session = ScreeningSession(store, "bench")
        # The window runs the training job on its job runner's threads when asked; a thread does it here.
        session.subscribe(lambda change: change.kind == TRAINING_WANTED
                          and threading.Thread(target=session.train, daemon=True).start())
        session.add_records(
            [
                ScreeningRecord(
                    source="cf",
                    external_id=d["id"],
                    title=d.get("title") or "",
                    abstract=d.get("abstract") or "",
                    rank=n,
                )
                for n, d in enumerate(docs, start=1)
            ],
            origin="#1",
        )
        session.add_vectors({("cf", d["id"]): v for d, v in zip(docs, vectors, strict=True)})
        samples = []
        for _ in range(300):
            rec = session.current
            if rec is None:
                break
            t0 = time.perf_counter()
            if rec.external_id in relevant[qid]:
                session.include()
            else:
                session.exclude("wrong population")
            samples.append(time.perf_counter() - t0)
        session.wait_for_training(30)
        trainings = session.training_seconds
        session.close()
        store.close()
    print(
        f"session, {len(docs):,} records, 300 decisions: decision -> next record p95 "
        f"{latency_p95(samples) * 1000:.1f} ms (max {max(samples) * 1000:.1f} ms); background trainings "
        f"{len(trainings)}, median {statistics.median(trainings) * 1000:.0f} ms"
    )
    rng = np.random.default_rng(0)
    for n in (1_000, 10_000):
        pool = [texts[i % len(texts)] + f" r{i}" for i in range(n)]
        t0 = time.perf_counter()
        feats = TextFeatures.build(pool, queries[qid], vectors=vectors[np.arange(n) % len(texts)])
        built = time.perf_counter() - t0
        labelled = rng.choice(n, size=min(500, n // 2), replace=False)
        labels = {int(i): bool(i % 7 == 0) for i in labelled}
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            train(feats, labels, DEFAULT_MODEL)
            times.append(time.perf_counter() - t0)
        print(
            f"training at {n:,} records ({len(labels)} decided): {min(times) * 1000:.0f} ms per retrain "
            f"(fit + score all); features built once in {built:.1f} s"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--questions", type=int, default=None, help="only the first N questions (a smoke run)"
    )
    parser.add_argument(
        "--split", choices=("odd", "even", "both"), default="both",
        help="odd: the development questions only; even: the held-out ones only; both (the report)",
    )
    parser.add_argument("--skip-latency", action="store_true", help="no session latency / training timings")
    return run(parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
