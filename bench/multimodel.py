"""Benchmark of multi-model query generation: serial overhead, and recall of the union of queries.

(a) Overhead. The fake Ollama server answers every call after a fixed delay; 3 models x 3 queries are
    generated strictly serially, so the ideal total is 9 x delay. The ratio measured / ideal shows the
    cost of everything around the calls (cleaning, timing, HTTP). Target: <= 1.05.
(b) Recall. On the SciFact *train* claims that have relevance judgements (never the test split), every
    generated query runs against the SciFact corpus with the same ``max_rows``; recall of each single
    query slot (model, attempt) is compared with the recall of the union of all of them. Models:
    ``builtin:keywords`` (3 variants) and any Ollama model reachable at the configured host.

The benchmark starts its own embedded PostgreSQL under ``bench/.data/`` and imports the corpus
(re-running it reuses the server and changes nothing in the data). The LAST line is the recall ratio
(union / best single query).

    .venv/bin/python bench/multimodel.py [--delay 1.0] [--max-rows 20] [--limit N] [--skip-overhead]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "literature" / "scifact"
DATA = ROOT / "bench" / ".data" / "multimodel"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def overhead(delay: float) -> float:
    """(a): serial generation time of 3 models x 3 queries over 9 x delay."""
    from support.fake_ollama import FakeOllama, ModelScript

    from kmds_desktop.literature.queries.query_generation import MultiModelQueryGenerator

    replies = ["Here is the query:\n```\nA & (b | c)\n```", "a | b:*", "a & c"]
    models = {f"model{i}": ModelScript(replies=list(replies), delay=delay) for i in range(3)}
    with FakeOllama(models) as server:
        generator = MultiModelQueryGenerator(ollama_host=server.url, timeout=60)
        generator.generate_queries("warm-up question", None, ["model0"], 1)  # client import, first connect
        server.requests.clear()
        start = time.perf_counter()
        result = generator.generate_queries("Does aspirin prevent stroke?", None, list(models), 3)
        elapsed = time.perf_counter() - start
        assert server.max_active == 1, "calls overlapped"
    ideal = 9 * delay
    failed = [r for r in result.all_queries if not r.ok]
    print(f"(a) 3 models x 3 queries at {delay:.2f} s per call: {elapsed:.3f} s measured, "
          f"{ideal:.3f} s ideal, {len(failed)} failed; unique queries {len(result.unique_queries)}")
    per_call = [r.generation_time - delay for r in result.all_queries]
    print(f"(a) time per call beyond the delay: mean {sum(per_call) / len(per_call) * 1000:.1f} ms, "
          f"max {max(per_call) * 1000:.1f} ms; outside the calls: "
          f"{(elapsed - sum(r.generation_time for r in result.all_queries)) * 1000:.1f} ms in all")
    ratio = elapsed / ideal
    print(f"(a) serial generation overhead ratio (target <= 1.05): {ratio:.4f}")
    return ratio


def _open_database():
    from kmds_desktop import paths
    from kmds_desktop.literature.store.database import open_embedded

    DATA.mkdir(parents=True, exist_ok=True)
    paths.set_data_dir(DATA / "home")
    db = open_embedded(DATA / "home" / "postgres")
    counts = {name.lower(): n for name, n in db.status()["sources"].items()}
    if counts.get("scifact", 0) < 5000:
        start = time.perf_counter()
        report = db.import_files([SHARED / "corpus.jsonl"])
        print(f"imported the SciFact corpus in {time.perf_counter() - start:.1f} s: {report.summary()}")
    return db


def _train_claims(limit: int | None) -> list[tuple[str, str, set[str]]]:
    texts = {}
    for line in (SHARED / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        claim = json.loads(line)
        if claim.get("split") == "train":
            texts[claim["id"]] = claim["text"]
    relevant: dict[str, set[str]] = collections.defaultdict(set)
    lines = (SHARED / "qrels.tsv").read_text(encoding="utf-8").splitlines()
    for line in lines[1:]:
        qid, doc, _score, split, *_ = line.split("\t")
        if split == "train" and qid in texts:
            relevant[qid].add(doc)
    claims = [(qid, texts[qid], relevant[qid]) for qid in texts if relevant[qid]]
    return claims[:limit] if limit else claims


def _ollama_models() -> tuple[list[str], str]:
    from kmds_desktop.config import load_settings
    from kmds_desktop.llm.errors import LLMError
    from kmds_desktop.llm.ollama_backend import OllamaBackend

    host = load_settings().query_generation.ollama_host
    try:
        models = OllamaBackend(host, timeout=3).list_models(timeout=3)
    except LLMError as err:
        return [], (f"no Ollama server reachable at {host} ({type(err).__name__}): "
                    "only builtin:keywords measured")
    return models[:3], f"Ollama at {host} has {len(models)} models; measuring {models[:3]}"


def recall(max_rows: int, limit: int | None) -> float:
    """(b): mean recall of each query slot and of the union, at the same max_rows."""
    from kmds_desktop.literature.queries.query_generation import MultiModelQueryGenerator

    db = _open_database()
    try:
        external: dict[int, str] = {}
        claims = _train_claims(limit)
        models, note = _ollama_models()
        print(f"(b) {note}")
        models = ["builtin:keywords", *models]
        generator = MultiModelQueryGenerator(database=db, timeout=120)
        sums: dict[str, float] = collections.defaultdict(float)
        union_sum = 0.0
        empty: collections.Counter[str] = collections.Counter()
        start = time.perf_counter()
        for _qid, text, relevant in claims:
            result = generator.generate_queries(text, None, models, 3)
            found_all: set[str] = set()
            for row in result.all_queries:
                slot = f"{row.model} #{row.attempt_number}"
                found: set[str] = set()
                if row.ok:
                    try:
                        ids = [i for i, _ in db.find_abstract_ids_ranked(row.query, max_rows=max_rows)]
                    except Exception:  # noqa: BLE001 - an invalid generated query finds nothing
                        ids = []
                    found = _corpus_ids(db, external, ids)
                if not found:
                    empty[slot] += 1
                sums[slot] += len(found & relevant) / len(relevant)
                found_all |= found
            union_sum += len(found_all & relevant) / len(relevant)
        n = len(claims)
        print(f"(b) {n} SciFact train claims with judgements, max_rows={max_rows}, "
              f"{time.perf_counter() - start:.1f} s")
        best_slot, best = max(((s, v / n) for s, v in sums.items()), key=lambda item: item[1])
        for slot, total in sums.items():
            print(f"(b) recall of single query {slot:<24} {total / n:.4f}  "
                  f"(no hits for {empty[slot]} claims)")
        union = union_sum / n
        print(f"(b) recall of the union of all queries      {union:.4f}")
        print(f"(b) best single query: {best_slot} with {best:.4f}")
        ratio = union / best if best else float("inf")
        print(f"(b) recall ratio union / best single query at max_rows={max_rows}: {ratio:.4f}")
        return ratio
    finally:
        db.close()


def _corpus_ids(db, cache: dict[int, str], doc_ids: list[int]) -> set[str]:
    """Database ids -> the corpus ids the judgements use (``scifact:<id>``), fetched once each."""
    missing = [i for i in doc_ids if i not in cache]
    for doc in db.fetch_documents_by_ids(missing, batch_size=200) if missing else []:
        ext = str(doc["external_id"])
        cache[doc["id"]] = ext if ext.startswith("scifact:") else f"scifact:{ext}"
    return {cache[i] for i in doc_ids if i in cache}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=1.0, help="seconds per fake model call (a)")
    parser.add_argument("--max-rows", type=int, default=20, help="documents per query (b)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N train claims (b)")
    parser.add_argument("--skip-overhead", action="store_true", help="run (b) only")
    args = parser.parse_args()
    if not args.skip_overhead:
        overhead(args.delay)
    recall(args.max_rows, args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
