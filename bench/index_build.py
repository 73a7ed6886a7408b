"""Semantic index build cost on a 10,000-observation KB, measured against the embedding itself.

One run measures, on the same synthetic KB (written by the KB core's generator):
  (c) warm ``search()`` latency, median of 100 queries, in milliseconds;
  (b) update after changing 1% of the observations vs the full build (target <= 0.05);
  (d) with ``--app``: the same full build the way the desktop app runs it (``own_process=True``:
      the index process embeds and stores, the caller sends texts and entries), wall-clock, the
      index process started and its model loaded before the clock starts;
  (a) full build vs a bare ``SentenceTransformer.encode`` of the same texts with the same batch
      size (target <= 1.15: storage and bookkeeping cost at most 15% over the embedding).
The last line is ratio (a). Usage: ``.venv/bin/python bench/index_build.py [N_OBSERVATIONS] [--app]``.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kmds_desktop.index import DEFAULT_MODEL, SemanticIndex, embeddings, entries  # noqa: E402
from kmds_desktop.kb import load_kb  # noqa: E402
from kmds_desktop.kb.synthetic import write_synthetic_kb  # noqa: E402

QUERIES = [
    "missing values in the data",
    "which features matter most",
    "class imbalance",
    "why was this model selected",
    "data transformation steps",
    "outliers in the measurements",
    "assumptions of the model",
    "cross validation results",
    "feature engineering for dates",
    "relevance of the customer segment",
]


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 10_000
    data = ROOT / "bench" / ".data"
    data.mkdir(parents=True, exist_ok=True)
    kb_file = data / f"synthetic_{n}.xml"
    if not kb_file.exists():
        write_synthetic_kb(kb_file, n)
    t0 = time.perf_counter()
    kb = load_kb(kb_file)
    load_s = time.perf_counter() - t0
    texts = [e.text for e in entries.make_entries(entries.from_knowledge_base(kb), DEFAULT_MODEL)]
    print(f"KB: {len(kb.observations)} observations, {len(texts)} texts to embed (load {load_s:.1f} s)")

    model = embeddings.get_model(DEFAULT_MODEL)
    model.encode(texts[:64], batch_size=embeddings.ENCODE_BATCH_SIZE)  # warm-up

    t0, c0 = time.perf_counter(), time.process_time()
    model.encode(texts, batch_size=embeddings.ENCODE_BATCH_SIZE, normalize_embeddings=True)
    bare_s, bare_cpu = time.perf_counter() - t0, time.process_time() - c0
    batch = embeddings.ENCODE_BATCH_SIZE
    print(f"bare SentenceTransformer.encode, batch {batch}: {bare_s:.2f} s ({bare_cpu:.1f} s CPU)")

    with tempfile.TemporaryDirectory(prefix="kmds-index-bench-", dir=data) as tmp:
        index = SemanticIndex(Path(tmp) / "index")
        t0, c0 = time.perf_counter(), time.process_time()
        full = index.build_from_onto(kb)
        full_s, full_cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"full build: {full_s:.2f} s ({full_cpu:.1f} s CPU; {full.summary()})")

        rng = random.Random(1)
        changed = rng.sample(kb.observations, max(1, len(kb.observations) // 100))
        for i, obs in enumerate(changed):
            kb.update_observation(obs.iri, finding=f"{obs.finding} (revised {i})")
        t0, c0 = time.perf_counter(), time.process_time()
        update = index.build_from_onto(kb)
        update_s, update_cpu = time.perf_counter() - t0, time.process_time() - c0
        assert update.embedded == len(changed), update
        print(
            f"update after changing {len(changed)} observations: {update_s:.2f} s "
            f"({update_cpu:.1f} s CPU; {update.summary()})"
        )

        for q in QUERIES[:3]:
            index.search(q)
        latencies = []
        for i in range(100):
            t0 = time.perf_counter()
            index.search(f"{QUERIES[i % len(QUERIES)]} {i}", n_results=5)
            latencies.append((time.perf_counter() - t0) * 1000)

    if "--app" in sys.argv:
        with tempfile.TemporaryDirectory(prefix="kmds-index-bench-app-", dir=data) as tmp:
            app_index = SemanticIndex(Path(tmp) / "index", own_process=True)
            app_index.encode(texts[:64])  # index process started, model loaded there
            t0 = time.perf_counter()
            app_build = app_index.build_from_onto(kb)
            app_s = time.perf_counter() - t0
            from kmds_desktop.index import index_process

            index_process.stop_all()
        print(f"(d) app's index process, full build / bare encode: {app_s / bare_s:.3f} "
              f"({app_s:.2f} s; {app_build.summary()})")
    print(f"(c) warm search latency, median of 100 queries: {statistics.median(latencies):.1f} ms")
    # Wall-clock on a shared machine swings with other load; CPU time of this process does not.
    print(
        f"(b) update after 1% changed / full build: {update_s / full_s:.3f} "
        f"(CPU time {update_cpu / full_cpu:.3f}) (target <= 0.05)"
    )
    print(
        f"(a) full build / bare encode: {full_s / bare_s:.3f} "
        f"(CPU time {full_cpu / bare_cpu:.3f}) (target <= 1.15)"
    )


if __name__ == "__main__":
    main()
