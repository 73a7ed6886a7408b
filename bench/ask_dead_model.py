"""What a question gets when the model fails: the offline router's route (now) or a bare semantic search
(before), on the same questions.

Why: the model is an aide and the offline router its floor. A model that does not answer (a stopped
server), or answers with no usable route, or routes to a template that finds nothing, used to leave the
question to a semantic search over every record, with no template, no filters and no listing; a
researcher with a model configured got less than one with none. Now the offline router's route runs.

Each question of the sets (``dev``, ``hard``, ``held-out``; none of them was tuned on for this) is asked
of an orchestrator whose Ollama server is not there (a port nothing listens on), as the window asks it,
and, on the same orchestrator, run on the route the fallback used to take (semantic search, no filters,
not a listing). Scored as ``bench/ask_routing.py`` scores records: a listing's records exactly right, an
open question's expected records all found within its ``max_count``; and the share of all expected
records found. Usage: ``.venv/bin/python bench/ask_dead_model.py [--verbose]``. Last line: records
right with the fallback now / before, over every set.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ask_routing import KBS, SETS, covered, load_questions  # noqa: E402

from kmds_desktop.config import LLMSettings, Settings  # noqa: E402
from kmds_desktop.index import SemanticIndex  # noqa: E402
from kmds_desktop.kb import load_kb  # noqa: E402
from kmds_desktop.search import OrchestratorRoute, SearchOrchestrator  # noqa: E402

HARD = ROOT / "tests" / "data" / "ask_questions_hard.jsonl"
#: The route the fallback took before: every record ranked by meaning.
SEMANTIC = OrchestratorRoute(intent_class="semantic_search", listing=False, explanation="the old fallback")


def dead_url() -> str:
    """An address nothing listens on (a port bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def score(kb: Any, q: dict[str, Any], results: list[dict[str, Any]]) -> tuple[bool, int, int]:
    """(records right, expected records found, expected records)."""
    keys = covered(kb, results)
    if "records" in q:
        want = q["records"]
        return sorted(keys) == sorted(want), len(set(want) & set(keys)), len(set(want))
    want = q.get("include") or []
    found = [k for k in want if k in keys]
    return (len(found) == len(want) and len(results) <= q.get("max_count", 10**6)), len(found), len(want)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verbose", action="store_true", help="print each question whose records differ")
    args = parser.parse_args()
    sets = {"dev": SETS["dev"], "hard": HARD, "held-out": SETS["held-out"]}
    index = SemanticIndex(None)
    settings = Settings(llm=LLMSettings(ollama_host=dead_url(), ollama_model="gone", timeout_s=5))
    orchs: dict[str, SearchOrchestrator] = {}
    totals = {"now": [0, 0, 0, 0], "before": [0, 0, 0, 0]}  # templates right, records right, found, expected
    asked = judged = 0
    print(f"{'set':9} {'questions':>9} {'template right now':>18} {'before':>7} {'with records':>12} "
          f"{'records right now':>17} {'before':>7} {'found now':>9} {'before':>7}")
    for name, path in sets.items():
        counts = {"now": [0, 0, 0, 0], "before": [0, 0, 0, 0]}
        questions = load_questions(path)
        with_records = 0
        for q in questions:
            if q["kb"] not in orchs:
                orchs[q["kb"]] = SearchOrchestrator(load_kb(KBS[q["kb"]]), backend="ollama",
                                                    settings=settings, index=index)
            orch = orchs[q["kb"]]
            now = orch.retrieve(q["question"])
            assert now.fallback_code == "llm_error", now.fallback_reason  # the model is gone
            before = orch.retrieve(q["question"], route=SEMANTIC)
            judged_here = "records" in q or bool(q.get("include"))
            with_records += judged_here
            for label, result in (("now", now), ("before", before)):
                counts[label][0] += result.intent_class in q["intent"]
                if judged_here:
                    right, found, want = score(orch.kb, q, result.results)
                    counts[label][1] += right
                    counts[label][2] += found
                    counts[label][3] += want
            if args.verbose and judged_here and (score(orch.kb, q, now.results)[0]
                                                 != score(orch.kb, q, before.results)[0]):
                better = "now" if score(orch.kb, q, now.results)[0] else "before"
                print(f"  [{name}] {q['question']}: records right {better} (now {now.intent_class}, "
                      f"{len(now.results)} records; before {len(before.results)})")
        n = len(questions)
        asked += n
        judged += with_records
        for label in totals:
            totals[label] = [a + b for a, b in zip(totals[label], counts[label], strict=True)]
        now_c, before_c = counts["now"], counts["before"]
        records = (f"{now_c[1] / with_records:17.3f} {before_c[1] / with_records:7.3f} "
                   f"{now_c[2] / max(1, now_c[3]):9.3f} {before_c[2] / max(1, before_c[3]):7.3f}"
                   if with_records else f"{'-':>17} {'-':>7} {'-':>9} {'-':>7}")
        print(f"{name:9} {n:9d} {now_c[0] / n:18.3f} {before_c[0] / n:7.3f} {with_records:12d} {records}")
    right_now, right_before = totals["now"][1], totals["before"][1]
    print(f"templates right with a failed model, offline router / semantic search: {totals['now'][0]} / "
          f"{totals['before'][0]} of {asked}")
    print(f"records right with a failed model, offline router / semantic search ({judged} questions): "
          f"{right_now} / {right_before} = {right_now / max(1, right_before):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
