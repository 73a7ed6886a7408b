"""Semantic index build cost on a 10,000-observation KB, measured against the embedding itself.

One run measures, on the same synthetic KB (written by the KB core's generator):
  (c) warm ``search()`` latency, median of 100 queries, in milliseconds;
  (b) update after changing 1% of the observations vs the full build (target <= 0.05);
  (d) with ``--app``: the same full build the way the desktop app runs it (``own_process=True``:
      the index process embeds and stores, the caller sends texts and entries), wall-clock, the
      index process started and its model loaded before the clock starts;
  (a) full build vs a bare ``SentenceTransformer.encode`` of the same texts with the same batch
      size and normalisation (target <= 1.15: storage and bookkeeping cost at most 15% over the
      embedding).
A bare encode runs right before and right after each full build ((a), then (d)), and each build is
compared with the mean of the two next to it, so load that comes and goes on a shared machine
weighs on both sides alike (the bare encode alone swung from 40 s to 290 s within one run).
(e) The build embeds each distinct text once, in batches of equal token count
(``embeddings.encode``); that call alone, before and after the build, shows what storage and
bookkeeping cost on top of the embedding the build really does.
Ratios are given in wall-clock and in CPU time (every thread of this process, plus the index
process for (d)), which other load disturbs less. The last line is ratio (a).
``--distinct`` makes every finding a text of its own (the synthetic KB repeats findings word for
word, as real ones do, and the build embeds each distinct text once).
Usage: ``.venv/bin/python bench/index_build.py [N_OBSERVATIONS] [--app] [--distinct]``.
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
    if "--distinct" in sys.argv:  # every finding its own text: no repeats for the build to share
        for i, obs in enumerate(kb.observations):
            kb.update_observation(obs.iri, finding=f"{obs.finding} (case {i})")
    texts = [e.text for e in entries.make_entries(entries.from_knowledge_base(kb), DEFAULT_MODEL)]
    print(f"KB: {len(kb.observations)} observations, {len(texts)} texts to embed (load {load_s:.1f} s)")

    model = embeddings.get_model(DEFAULT_MODEL)
    model.encode(texts[:64], batch_size=embeddings.ENCODE_BATCH_SIZE)  # warm-up

    def bare_encode() -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        model.encode(texts, batch_size=embeddings.ENCODE_BATCH_SIZE, normalize_embeddings=True)
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"bare SentenceTransformer.encode, batch {embeddings.ENCODE_BATCH_SIZE}: {took:.2f} s "
              f"({cpu:.1f} s CPU)", flush=True)
        return took, cpu

    bare_runs = [bare_encode()]

    def own_encode() -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        embeddings.encode(texts, DEFAULT_MODEL)
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"the build's embedding call alone (embeddings.encode: {len(set(texts))} distinct texts, "
              f"token-count batches): {took:.2f} s ({cpu:.1f} s CPU)", flush=True)
        return took, cpu

    own_runs = [own_encode()]

    with tempfile.TemporaryDirectory(prefix="kmds-index-bench-", dir=data) as tmp:
        index = SemanticIndex(Path(tmp) / "index")
        t0, c0 = time.perf_counter(), time.process_time()
        full = index.build_from_onto(kb)
        full_s, full_cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"full build: {full_s:.2f} s ({full_cpu:.1f} s CPU; {full.summary()})", flush=True)
        bare_runs.append(bare_encode())
        own_runs.append(own_encode())

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
            from kmds_desktop.index import index_process

            child = index_process.running(app_index.persist_dir)
            assert child is not None
            t0, c0, k0 = time.perf_counter(), time.process_time(), _process_cpu(child.pid)
            app_build = app_index.build_from_onto(kb)
            app_s = time.perf_counter() - t0
            app_cpu = time.process_time() - c0 + _process_cpu(child.pid) - k0
            index_process.stop_all()
        print(f"app's index process, full build: {app_s:.2f} s ({app_cpu:.1f} s CPU, both processes; "
              f"{app_build.summary()})", flush=True)
        bare_runs.append(bare_encode())
        app_bare_s = statistics.fmean(t for t, _ in bare_runs[1:])
        app_bare_cpu = statistics.fmean(c for _, c in bare_runs[1:])
        print(f"(d) app's index process, full build / bare encode: {app_s / app_bare_s:.3f} "
              f"(CPU time {app_cpu / app_bare_cpu:.3f})")
    bare_s = statistics.fmean(t for t, _ in bare_runs[:2])
    bare_cpu = statistics.fmean(c for _, c in bare_runs[:2])
    own_s = statistics.fmean(t for t, _ in own_runs)
    own_cpu = statistics.fmean(c for _, c in own_runs)
    print(f"(e) full build / the build's embedding call alone (its storage and bookkeeping): "
          f"{full_s / own_s:.3f} (CPU time {full_cpu / own_cpu:.3f}); that call / bare encode: "
          f"{own_s / bare_s:.3f} (CPU time {own_cpu / bare_cpu:.3f})")
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


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system) another process of ours has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
