"""A living review on CF split by year: the first review on 1974–77, an update when 1978–79 is imported.

One command, one run, through the app's own code (:class:`~kmds_desktop.app.reviews.ReviewBook`, the
screening session, the search history and the embedded PostgreSQL):

1. The CF records of 1974–77 (781) are imported. For each CF question with an **odd** id (even ids are held
   out), the app's default search runs (the default query generation, ``builtin:keywords``; no semantic row,
   as on a database not yet embedded; 100 documents per row) and a review is made from it: its search is
   the review's strategy, its documents the first round's records.
2. Round one is screened in the screening session with the true labels (relevant = any qrels row), in the
   session's active-learning order, until the review's stopping rule (50 consecutive excluded) says stop or
   every record is screened.
3. The records of 1978–79 (458) are imported, and each review is updated (its strategy re-run on the
   database as it is now). Reported per question: the update's recall on the new relevant records (the
   1978–79 records relevant to the question) beside bm25s's on the same records with as many taken as the
   update added; records shown twice (a record in the review twice, or an earlier record added again:
   must be 0).
4. The update's new records are screened by replay twice, from the same priors (one relevant and one
   irrelevant record of the update, as ASReview's simulations do): **warm**, the session's model trained
   on round one's decisions and the update's as they come, and **cold**, the same model and features with
   the update's decisions only. Both replays are repeated for ``--seeds`` draws of the priors (seed
   ``question id + 1000 × s``; s = 0 is the single draw of earlier runs): one draw of one relevant record
   among a handful decides much of a 50-record replay, so a single draw is no measurement. WSS@95 and
   records to 95% recall for both, per question the mean over the draws (questions with fewer than 2
   relevant new records are left out of this part).

Printed: the mean over every (question, draw) pair, and the ratio warm / cold per draw (mean over the
questions of that draw) with its standard deviation and range across draws. The last line:
``warm / cold WSS@95: X (S seeds: sd D, range A–B) (repeats: N)`` (target: X >= 1.2, N = 0); a line
above it gives the previous default's, replayed on the same draws.

Measured (2 shared cores, 5 draws), with round one's decisions fading as the update's grow (the default
since 2026-12-03, :attr:`~kmds_desktop.literature.screening.ordering.ModelConfig.earlier_round_fade`) and
the previous default (every decision alike) replayed beside it in the same run: odd questions 1.213 (sd
0.038, 1.154–1.246; warm 0.490, cold 0.404; records to 95% 22.6 vs 26.8 of 49.6), alike 1.196 in the same
run, and 1.191 vs 1.171 in a run before (the fade higher in each draw of both); held out (even questions,
``--held-out``) 1.253 (sd 0.040; warm 0.495, cold 0.395) and 1.249, alike 1.253 and 1.249: a tie.
Round one is not deterministic between runs (the default search returns a few other documents
from run to run: 2,508 vs 2,512 new records), which moves the last line by about ±0.02: the previous default
measured 1.176, 1.185, 1.189 and 1.203 in four runs; compare within one run (the "alike" line) or on kept
rounds (``--keep``). Paired replays on one run's kept rounds (deterministic): odd 1.189 → 1.210, even 1.250
→ 1.249; every record with its document vector (the window's default once the database is embedded) odd
1.049 → 1.065, even 1.044 → 1.041 — the vectors lift the cold start (0.398 → 0.469) far more than the warm
one. ``--embed`` (odd, previous default): 1.123. Repeats: 0. Update recall on the new relevant records
0.514 vs bm25s 0.463 at the same count (odd), 0.534 vs 0.441 (even).

With ``--embed`` the database is embedded after each import, as the window does by default
(``retrieval.embed_after_import``; the CLI's ``literature import --embed``): the reviews' records then carry
their document vectors (the order's features, as in the window) and the default search may add a
semantic row. Without it the database is as ``literature import`` leaves it: TF-IDF alone.

Usage: ``python bench/living_review.py [--questions N] [--seeds S] [--embed] [--keep DIR]`` (all 49
odd questions, 5 seeds: a few minutes on 2 idle cores, most of it round one's screening, which retrains
after every decision as the session does; ``--embed`` adds the embedding of 1,239 records).
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CF = ROOT.parent / "shared" / "data" / "literature" / "cf"
FIRST_YEARS, UPDATE_YEARS = range(1974, 1978), range(1978, 1980)


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
            qid, doc_id = line.split("\t")[:2]
            relevant[qid].add(doc_id)
    return docs, queries, relevant


def write_years(docs: list[dict], years: range, path: Path) -> list[dict]:
    chosen = [d for d in docs if int(d["year"]) in years]
    path.write_text("".join(json.dumps(d) + "\n" for d in chosen), encoding="utf-8")
    return chosen


def bm25_recall(late: list[dict], question: str, relevant: set[str], k: int) -> float:
    """bm25s (English stop words) over the 1978–79 records: recall of the top ``k``."""
    import bm25s

    if not relevant:
        return float("nan")
    retriever = bm25s.BM25()
    texts = [f"{d.get('title') or ''} {d.get('abstract') or ''}" for d in late]
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    k = max(0, min(k, len(late)))
    if k == 0:
        return 0.0
    results, _ = retriever.retrieve(bm25s.tokenize([question], stopwords="en", show_progress=False), k=k,
                                    show_progress=False)
    top = {late[j]["id"] for j in results[0]}
    return len(top & relevant) / len(relevant)


def embed(db, wanted: bool) -> None:
    """Embed the documents without a vector, as the window does after an import (``--embed``)."""
    if not wanted:
        return
    from kmds_desktop.app.literature_data import embed_literature
    from kmds_desktop.config import RetrievalSettings

    started = time.perf_counter()
    report = embed_literature(db, "all-MiniLM-L6-v2", None, RetrievalSettings())
    print(f"embedded: {report} in {time.perf_counter() - started:.0f} s", flush=True)


def screen_round_one(session, relevant: set[str]) -> int:
    """Screen with the true labels until the stopping rule is met or nothing is left; returns decisions."""
    made = 0
    while session.current is not None:
        rec = session.current
        session.decide("include" if rec.external_id in relevant else "exclude")
        made += 1
        if session.stopping_report().rules[0].met:
            break
    return made


def warm_and_cold(session, new_keys: list[tuple[str, str]], relevant: set[str], seeds: list[int]):
    """Replays of the update's new records (see the module docstring): (warm, cold, warm with every
    decision alike) SimulationResults, one triple per seed of the priors. The third is the previous
    default (round one's decisions never fading, ``earlier_round_fade`` 0; see
    :mod:`kmds_desktop.literature.screening.ordering`), measured on the same draws: a paired before/after."""
    from kmds_desktop.literature.screening.decisions import INCLUDE, MAYBE
    from kmds_desktop.literature.screening.ordering import train
    from kmds_desktop.literature.screening.simulation import pick_priors, simulate

    index = {r.key: i for i, r in enumerate(session.records)}
    pool = [index[k] for k in new_keys]
    truth = np.array([session.records[i].external_id in relevant for i in pool], dtype=bool)
    earlier = {index[k]: d.decision == INCLUDE for k, d in session.decisions.items()
               if d.decision != MAYBE and k in index}
    features, config = session.features, session.model
    ranks = [session.records[i].rank or 10**9 for i in pool]
    fallback = sorted(range(len(pool)), key=lambda j: (ranks[j], j))

    alike = replace(config, earlier_round_fade=0.0)

    def scorer(with_earlier: bool, model=config):
        def score(labels):
            known = dict(earlier) if with_earlier else {}
            known.update({pool[j]: v for j, v in labels.items()})
            # warm: as the session trains (round one's decisions weighed as an updated review's are)
            result = train(features, known, model, earlier=session.earlier_rounds if with_earlier else ())
            return None if result is None else result.values[pool]
        return score

    out = []
    for seed in seeds:
        priors = pick_priors(truth, seed)
        out.append((simulate(truth, scorer=scorer(True), priors=priors, fallback=fallback),
                    simulate(truth, scorer=scorer(False), priors=priors, fallback=fallback),
                    simulate(truth, scorer=scorer(True, alike), priors=priors, fallback=fallback)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=None, help="only the first N odd questions")
    parser.add_argument("--seeds", type=int, default=5, help="draws of the priors per question (default 5)")
    parser.add_argument("--held-out", action="store_true",
                        help="the even questions instead (held out: to check a choice made on the odd ones)")
    parser.add_argument("--embed", action="store_true",
                        help="embed the database after each import (the window's default)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the data folder here")
    args = parser.parse_args()

    from kmds_desktop.app.reviews import ReviewBook
    from kmds_desktop.app.screening import ScreeningSession
    from kmds_desktop.config import LiteratureSettings, QueryGenerationSettings, RetrievalSettings
    from kmds_desktop.literature.queries.agent import QueryAgent
    from kmds_desktop.literature.reviews.identity import repeats
    from kmds_desktop.literature.store.database import open_embedded
    from kmds_desktop.literature.strategy.history import SearchHistory
    from kmds_desktop.literature.strategy.workbench import SearchWorkbench, rows_from_generation

    docs, queries, relevant = load_cf()
    parity = 0 if args.held_out else 1
    odd = [q for q in sorted(queries, key=int) if int(q) % 2 == parity and relevant.get(q)][: args.questions]
    root = args.keep or Path(tempfile.mkdtemp(prefix="kmds-bench-living-"))
    root.mkdir(parents=True, exist_ok=True)
    early = write_years(docs, FIRST_YEARS, root / "cf-1974-77.jsonl")
    late = write_years(docs, UPDATE_YEARS, root / "cf-1978-79.jsonl")
    late_ids = {d["id"] for d in late}
    max_rows = LiteratureSettings().max_rows
    db = open_embedded(root / "postgres")
    rows_out = []
    started = time.perf_counter()
    try:
        db.import_files([root / "cf-1974-77.jsonl"])
        embed(db, args.embed)
        agent = QueryAgent(db, QueryGenerationSettings(), retrieval=RetrievalSettings())
        history = SearchHistory(root / "history.sqlite3")
        book = ReviewBook(root / "screening.sqlite3")
        workbench = SearchWorkbench(history, db)
        first: dict[str, dict] = {}
        for qid in odd:
            rows = rows_from_generation(agent.convert_question_multi_model(queries[qid]))
            saved = workbench.run(queries[qid], rows, max_rows=max_rows, agent=agent)
            name = book.new(f"cf-q{qid}", [queries[qid]], history=history, database=db,
                            from_sets=[saved.number])
            session = ScreeningSession(book.store, name, background=False, seed=int(qid))
            made = screen_round_one(session, relevant[qid])
            first[qid] = {"records": len(session.records), "screened": made,
                          "included": sum(d.decision == "include" for d in session.decisions.values())}
            session.close()
        round_one_s = time.perf_counter() - started
        db.import_files([root / "cf-1978-79.jsonl"])
        embed(db, args.embed)
        notice = book.new_records(db, history=history, agent=agent)
        print(f"{len(early)} records of 1974–77 first, {len(late)} of 1978–79 imported later; "
              f"{len(odd)} {'even (held-out)' if args.held_out else 'odd'} questions; round one screened in "
              f"{round_one_s:.0f} s; after the import: "
              f"{notice.line() or 'no review has new records'}", flush=True)
        for qid in odd:
            name = f"cf-q{qid}"
            before = {r.key for r in book.store.records(name)}
            outcome = book.update(name, history=history, database=db, agent=agent)
            records = book.store.records(name)
            twice = len(repeats(records)) + sum(1 for k in outcome.new_keys if k in before)
            new_relevant = relevant[qid] & late_ids
            found = {k[1] for k in outcome.new_keys} & new_relevant
            recall = len(found) / len(new_relevant) if new_relevant else float("nan")
            bm25 = bm25_recall(late, queries[qid], new_relevant, outcome.new)
            row = {"q": qid, **first[qid], "new": outcome.new, "known": outcome.known,
                   "new_relevant": len(new_relevant), "recall": recall, "bm25": bm25, "twice": twice}
            in_pool = sum(1 for k in outcome.new_keys if k[1] in relevant[qid])
            if in_pool >= 2:
                session = ScreeningSession(book.store, name, background=False, seed=int(qid))
                seeds = [int(qid) + 1000 * s for s in range(max(1, args.seeds))]
                pairs = warm_and_cold(session, outcome.new_keys, relevant[qid], seeds)
                session.close()
                row.update(warm_wss=[w.wss(0.95) for w, _, _ in pairs],
                           cold_wss=[c.wss(0.95) for _, c, _ in pairs],
                           alike_wss=[a.wss(0.95) for _, _, a in pairs],
                           warm_n95=[w.records_to_recall(0.95) for w, _, _ in pairs],
                           cold_n95=[c.records_to_recall(0.95) for _, c, _ in pairs])
            rows_out.append(row)
        book.close()
        history.close()
    finally:
        db.close(stop_server=True)
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)

    mean = statistics.fmean
    print(f"{'q':>3} {'R1 rec':>6} {'R1 scr':>6} {'R1 inc':>6} {'new':>5} {'known':>5} {'newrel':>6} "
          f"{'recall':>6} {'bm25s':>6} {'twice':>5} {'wWSS':>6} {'cWSS':>6} {'wN95':>5} {'cN95':>5}")
    for r in rows_out:
        extra = (f"{mean(r['warm_wss']):>6.3f} {mean(r['cold_wss']):>6.3f} {mean(r['warm_n95']):>5.1f} "
                 f"{mean(r['cold_n95']):>5.1f}"
                 if "warm_wss" in r else f"{'-':>6} {'-':>6} {'-':>5} {'-':>5}")
        print(f"{r['q']:>3} {r['records']:>6} {r['screened']:>6} {r['included']:>6} {r['new']:>5} "
              f"{r['known']:>5} {r['new_relevant']:>6} {r['recall']:>6.3f} {r['bm25']:>6.3f} "
              f"{r['twice']:>5} {extra}")
    judged = [r for r in rows_out if r["new_relevant"]]
    simulated = [r for r in rows_out if "warm_wss" in r]
    repeats_total = sum(r["twice"] for r in rows_out)
    print(f"mean over {len(judged)} questions with new relevant records: update recall "
          f"{mean(r['recall'] for r in judged):.3f}, bm25s on the same records "
          f"{mean(r['bm25'] for r in judged):.3f}")
    if not simulated:
        print("warm / cold WSS@95: n/a (no question has 2 relevant new records) (repeats: "
              f"{repeats_total})")
        return 1
    draws = len(simulated[0]["warm_wss"])
    warm = mean(w for r in simulated for w in r["warm_wss"])
    cold = mean(c for r in simulated for c in r["cold_wss"])
    per_draw = [mean(r["warm_wss"][s] for r in simulated) / mean(r["cold_wss"][s] for r in simulated)
                for s in range(draws)]
    spread = statistics.stdev(per_draw) if draws > 1 else 0.0
    pool = mean(r["new"] for r in simulated)
    print(f"over {len(simulated)} questions with >= 2 relevant new records, {draws} draws of the priors "
          f"each: WSS@95 warm {warm:.3f}, cold {cold:.3f}; records to 95% warm "
          f"{mean(n for r in simulated for n in r['warm_n95']):.1f}, cold "
          f"{mean(n for r in simulated for n in r['cold_n95']):.1f} (of {pool:.1f})")
    alike = mean(a for r in simulated for a in r["alike_wss"])
    alike_per_draw = [mean(r["alike_wss"][s] for r in simulated) / mean(r["cold_wss"][s] for r in simulated)
                      for s in range(draws)]
    print("warm with every decision alike (round one never fading; the previous default): WSS@95 "
          f"{alike:.3f}, / cold {alike / cold if cold else float('inf'):.3f} (per draw: "
          + ", ".join(f"{x:.3f}" for x in alike_per_draw) + ")")
    print("warm / cold per draw: " + ", ".join(f"{x:.3f}" for x in per_draw))
    print(f"warm / cold WSS@95: {warm / cold if cold else float('inf'):.3f} ({draws} seeds: sd {spread:.3f}, "
          f"range {min(per_draw):.3f}–{max(per_draw):.3f}) (repeats: {repeats_total})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
