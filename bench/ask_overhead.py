"""Cost of the orchestrator around a search: ``ask()`` vs a bare ``SemanticIndex.search``.

On the shared 1,000-observation KB (``generated_by_kmds/synth_250.xml``), with an LLM stub that
answers at once (a route for the routing prompt, a fixed answer for synthesis), both are timed
warm, median of 50 runs of the same questions:
  (a) ``SearchOrchestrator.ask(question)`` — route, template, ranking of the template's records by
      stored vectors, synthesis;
  (b) ``SemanticIndex.search(question, 5, kb_id=...)`` — embed the question and query ChromaDB.
Offline mode (embedding router, extractive answer) is reported too. The last line is the ratio
(a)/(b); the target is <= 3. Usage: ``.venv/bin/python bench/ask_overhead.py [RUNS]``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kmds_desktop.config import Settings  # noqa: E402
from kmds_desktop.kb import load_kb  # noqa: E402
from kmds_desktop.search import SearchOrchestrator  # noqa: E402

KB_FILE = ROOT.parent / "shared" / "data" / "kmds" / "generated_by_kmds" / "synth_250.xml"
QUESTIONS = [
    ("Which data quality problems were found?", "exploratory_search"),
    ("How were the features transformed?", "data_representation_search"),
    ("Why was this kind of model chosen?", "modelling_choice_search"),
    ("Which model performed best?", "model_selection_search"),
    ("What do we know about customer churn?", "semantic_search"),
]
ROUTES = dict(QUESTIONS)


def stub_llm(prompt: str) -> str:
    """Answers instantly: the route for the question in a routing prompt, else a cited answer."""
    if "Reply with one JSON object" in prompt:
        question = prompt.rsplit("Question: ", 1)[1].strip()
        return json.dumps({"intent_class": ROUTES[question], "filters": {}, "explanation": "stub"})
    return "The records answer this [1], [2]."


def median_ms(fn, runs: int) -> float:
    times = []
    for i in range(runs):
        question = QUESTIONS[i % len(QUESTIONS)][0]
        start = time.perf_counter()
        fn(question)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    if not KB_FILE.is_file():
        sys.exit(f"shared KB missing: {KB_FILE}")
    persist = ROOT / "bench" / ".data" / "ask_index"
    persist.mkdir(parents=True, exist_ok=True)
    kb = load_kb(KB_FILE)
    settings = Settings()
    orch = SearchOrchestrator(kb, persist_dir=persist, llm_fn=stub_llm, settings=settings)
    offline = SearchOrchestrator(kb, persist_dir=persist, backend="offline", settings=settings,
                                 index=orch.index)
    built = orch.refresh_index()
    print(f"KB: {KB_FILE.name}, {len(kb.observations)} observations; index: {built.summary()}")
    index = orch.index

    def bare(question: str) -> None:
        index.search(question, n_results=5, kb_id=kb.kb_id)

    def ask(question: str) -> None:
        result = orch.ask(question)
        assert result.fallback_reason is None and result.synthesis == "llm", result.fallback_reason

    for question, _ in QUESTIONS:  # warm: model, collection, template vectors
        bare(question)
        ask(question)
        offline.ask(question)

    search_ms = median_ms(bare, runs)
    ask_ms = median_ms(ask, runs)
    offline_ms = median_ms(offline.ask, runs)
    print(f"bare SemanticIndex.search: median {search_ms:.1f} ms ({runs} runs)")
    print(f"ask() with instant LLM stub: median {ask_ms:.1f} ms")
    print(f"ask() offline (embedding router): median {offline_ms:.1f} ms, ratio {offline_ms / search_ms:.2f}")
    print(f"ratio ask/search: {ask_ms / search_ms:.2f} (target <= 3)")


if __name__ == "__main__":
    main()
