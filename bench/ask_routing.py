"""Routing accuracy, filter extraction and records of the offline router, on two question sets.

``tests/data/ask_questions_dev.jsonl`` is the set the router and the relevance cut were developed
on; ``tests/data/ask_questions_heldout.jsonl`` was written at the same time and never tuned on (its
questions on workflows by place, everyday type words and results were written before the router
learnt them). Together they cover every shared KB in ``../shared/data/kmds`` and the demo KB.
Each line names a KB, a question and what a correct answer is: the acceptable templates, whether it
is a listing, the type / workflow / sequence-range filters, and the records (exactly, for a
listing; ``include`` records and a ``max_count``, for an open question). Records are named
``"<workflow>|<category>|<finding_seq>"`` ("" for no workflow); a merged duplicate covers every
place it was recorded.

Prints per-question misses, then for each set: template accuracy, listing/open accuracy, filter
extraction (exact match per filter, and precision/recall of the filters set), listing record sets
exactly right, open-question recall of the expected records, and how many open answers stayed
within ``max_count``. The last line compares the two sets (held-out / dev template accuracy).
Usage: ``.venv/bin/python bench/ask_routing.py [--verbose] [--dev-only]`` (``--dev-only`` while
tuning, so the held-out questions stay unseen).
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kmds_desktop.config import Settings  # noqa: E402
from kmds_desktop.index import SemanticIndex  # noqa: E402
from kmds_desktop.kb import load_kb  # noqa: E402
from kmds_desktop.search import SearchOrchestrator  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "kmds"
#: Every shared KB (and the demo KB), by the short name the question sets use.
KBS = {
    "demo": ROOT / "resources" / "demo_kb.xml",
    "retail": SHARED / "example_ml_kb_exp_workflow.xml",
    "itsm": SHARED / "example_analytics_kb_app_workflow.xml",
    "test_exp": SHARED / "test_kb_exp_workflow.xml",
    "test_app": SHARED / "test_kb_app_workflow.xml",
    "retail_2024": SHARED / "history_2024_example_ml_kb_exp_workflow.xml",
    "itsm_0216": SHARED / "repo_0.2.16_example_analytics_kb_app_workflow.xml",
    "retail_0216": SHARED / "repo_0.2.16_example_ml_kb_exp_workflow.xml",
    "test_app_0216": SHARED / "repo_0.2.16_test_kb_app_workflow.xml",
    "test_exp_0216": SHARED / "repo_0.2.16_test_kb_exp_workflow.xml",
    "synth": SHARED / "generated_by_kmds" / "synth_250.xml",
    "noseq": SHARED / "generated_by_kmds" / "noseq.xml",
    "cli": SHARED / "generated_by_kmds" / "cli_kb.xml",
    "schema_only": SHARED / "schema_only_kmds_ontology_0.4.2.xml",
}
SETS = {
    "dev": ROOT / "tests" / "data" / "ask_questions_dev.jsonl",
    "held-out": ROOT / "tests" / "data" / "ask_questions_heldout.jsonl",
}


def load_questions(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def record_key(obs: Any) -> list[str]:
    return [f"{wf}|{obs.category}|{obs.finding_seq}" for wf in (obs.workflows or [""])]


def covered(kb: Any, results: list[dict[str, Any]]) -> list[str]:
    """Record keys an answer covers (merged duplicates included)."""
    keys: list[str] = []
    for r in results:
        for iri in [r["iri"], *[a["iri"] for a in r.get("also", [])]]:
            obs = kb.observation(iri)
            if obs is not None:
                keys.extend(record_key(obs))
    return keys


def evaluate(orchestrators: dict[str, SearchOrchestrator], questions: list[dict[str, Any]],
             verbose: bool) -> dict[str, float]:
    n = len(questions)
    counts: dict[str, float] = defaultdict(float)
    filter_tp: dict[str, int] = defaultdict(int)
    filter_pred: dict[str, int] = defaultdict(int)
    filter_gold: dict[str, int] = defaultdict(int)
    open_expected = open_found = 0
    for q in questions:
        orch = orchestrators[q["kb"]]
        result = orch.retrieve(q["question"])
        route = result.proposed_route
        misses = []
        if route is not None and route.intent_class in q["intent"]:
            counts["intent"] += 1
        else:
            misses.append(f"template {route.intent_class if route else None} not in {q['intent']}")
        if result.listing == q["listing"]:
            counts["listing"] += 1
        else:
            misses.append(f"listing {result.listing} != {q['listing']}")
        f = route.filters if route is not None else None
        got = {
            "obs_type": f.obs_type_filter if f else None,
            "workflow": f.workflow if f else None,
            "seq": [f.finding_seq_min, f.finding_seq_max] if f and (
                f.finding_seq_min is not None or f.finding_seq_max is not None) else None,
        }
        for name, want in q["filters"].items():
            have = got[name]
            if have == want:
                counts[f"filter_{name}"] += 1
            else:
                misses.append(f"{name} {have!r} != {want!r}")
            filter_pred[name] += have is not None
            filter_gold[name] += want is not None
            filter_tp[name] += have is not None and have == want
        keys = covered(orch.kb, result.results)
        if "records" in q:
            counts["listing_questions"] += 1
            if sorted(keys) == sorted(q["records"]):
                counts["records_exact"] += 1
            else:
                missing = sorted(set(q["records"]) - set(keys))
                extra = sorted(set(keys) - set(q["records"]))
                misses.append(f"records missing {missing} extra {extra}")
        if "include" in q:
            counts["open_questions"] += 1
            found = [k for k in q["include"] if k in keys]
            open_expected += len(q["include"])
            open_found += len(found)
            if len(result.results) <= q.get("max_count", 10**6):
                counts["within_max"] += 1
            else:
                misses.append(f"{len(result.results)} records > max {q['max_count']}")
            if len(found) < len(q["include"]):
                misses.append(f"missing {sorted(set(q['include']) - set(found))}")
            counts["open_records"] += len(result.results)
        if misses and verbose:
            print(f"  [{q['kb']}] {q['question']}\n      " + "\n      ".join(misses))
            print(f"      route: {route.explanation if route else result.route_explanation}")
    out = {
        "questions": n,
        "template accuracy": counts["intent"] / n,
        "listing/open accuracy": counts["listing"] / n,
    }
    for name in ("obs_type", "workflow", "seq"):
        out[f"{name} filter exact"] = counts[f"filter_{name}"] / n
        pred, gold = filter_pred[name], filter_gold[name]
        out[f"{name} filter precision"] = filter_tp[name] / pred if pred else 1.0
        out[f"{name} filter recall"] = filter_tp[name] / gold if gold else 1.0
    if counts["listing_questions"]:
        out["listing records exactly right"] = counts["records_exact"] / counts["listing_questions"]
    if counts["open_questions"]:
        out["open-question recall of expected records"] = open_found / open_expected
        out["open answers within max_count"] = counts["within_max"] / counts["open_questions"]
        out["open answers: mean records"] = counts["open_records"] / counts["open_questions"]
    return out


def main() -> None:
    verbose = "--verbose" in sys.argv
    settings = Settings()
    orchestrators = {}
    used = {q["kb"] for path in SETS.values() for q in load_questions(path)}
    for name, path in KBS.items():
        if name not in used:
            continue
        kb = load_kb(path)
        orchestrators[name] = SearchOrchestrator(kb, backend="offline", settings=settings,
                                                 index=SemanticIndex(None))
    results = {}
    sets = {"dev": SETS["dev"]} if "--dev-only" in sys.argv else SETS
    for set_name, path in sets.items():
        print(f"{set_name}: {path.relative_to(ROOT)}")
        results[set_name] = evaluate(orchestrators, load_questions(path), verbose)
    if len(results) == 1:
        for key, value in results["dev"].items():
            print(f"{key:44} {value:8.3f}")
        return
    names = list(results["dev"])
    print(f"{'':44} {'dev':>8} {'held-out':>9}")
    for key in names:
        dev, held = results["dev"].get(key), results["held-out"].get(key)
        fmt = (lambda v: f"{v:8.0f}") if key == "questions" else (lambda v: f"{v:8.3f}")
        print(f"{key:44} {fmt(dev)} {fmt(held) if held is not None else '':>9}")
    dev_acc, held_acc = results["dev"]["template accuracy"], results["held-out"]["template accuracy"]
    print(f"held-out / dev template accuracy: {held_acc / dev_acc:.3f} "
          f"(held-out {held_acc:.3f}, dev {dev_acc:.3f})")


if __name__ == "__main__":
    main()
