"""The route guard's rule, measured: how the offline router, a model and the guarded combination route.

Why simulated models: the guard (:mod:`kmds_desktop.ask.guard`) decides between two routes, and what
it must guarantee holds for any model — it must never keep a filter the question does not support,
and never fall below the offline router where the offline router's choice rests on the question's
words. So each question of a set is routed by the offline router, and the guard is given, in turn,
the route of

- an **oracle** model (the expected route): the guard should keep it, so the guarded route is right
  wherever a model is (the hard set, which the offline router gets wrong, shows what a good model adds);
- an **inventing** model (the expected template, plus the filters a 1.5B model was seen to invent:
  findings 1 to 6, the KB's first workflow, the template's first type, wherever the question has none):
  every invented filter must be dropped;
- a **wrong** model (each other template in turn, no filters): the guarded template should stay right
  where the offline router's was.

Also printed: the offline router's template accuracy by what its choice rested on ("words",
"similarity", "none"), which is what the rule reads. Sets: ``dev`` (the one tuned on) and ``hard``
(``tests/data/ask_questions_hard.jsonl``: questions the offline router got wrong when they were
written); ``--heldout`` adds the held-out set (never tuned on). Usage:
``.venv/bin/python bench/ask_guard.py [--heldout] [--verbose]``. The last line: guarded routing /
offline (the worst of the wrong-model and oracle runs over every set) and the filters kept that the
sets do not expect (an invented one that survived, or one the offline router reads that a set does not want).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ask_routing import KBS, SETS, load_questions  # noqa: E402

from kmds_desktop.ask.catalog import ROUTE_BY_INTENT  # noqa: E402
from kmds_desktop.ask.guard import guard_route  # noqa: E402
from kmds_desktop.ask.models import INTENT_CLASSES, OrchestratorRoute  # noqa: E402
from kmds_desktop.ask.offline_router import route_offline  # noqa: E402
from kmds_desktop.ask.relevance import is_listing  # noqa: E402
from kmds_desktop.config import Settings  # noqa: E402
from kmds_desktop.index import SemanticIndex  # noqa: E402
from kmds_desktop.kb import SearchFilters, load_kb  # noqa: E402
from kmds_desktop.search import SearchOrchestrator  # noqa: E402

HARD = ROOT / "tests" / "data" / "ask_questions_hard.jsonl"


def right(route: OrchestratorRoute, question: str, q: dict[str, Any]) -> bool:
    """Template, listing and filters as the question set expects."""
    f = route.filters
    seq = [f.finding_seq_min, f.finding_seq_max] if f.finding_seq_min is not None or \
        f.finding_seq_max is not None else None
    want = q["filters"]
    return (route.intent_class in q["intent"] and is_listing(question, f, route.listing) == q["listing"]
            and f.obs_type_filter == want["obs_type"] and f.workflow == want["workflow"]
            and seq == want["seq"])


def expected_route(q: dict[str, Any]) -> OrchestratorRoute:
    want = q["filters"]
    seq = want["seq"] or [None, None]
    return OrchestratorRoute(intent_class=q["intent"][0], listing=q["listing"], explanation="oracle",
                             filters=SearchFilters(obs_type_filter=want["obs_type"],
                                                   workflow=want["workflow"],
                                                   finding_seq_min=seq[0], finding_seq_max=seq[1]))


def inventing_route(q: dict[str, Any], vocab: Any) -> tuple[OrchestratorRoute, int]:
    """The expected route with invented filters where the question has none; and how many."""
    route = expected_route(q)
    changes: dict[str, Any] = {}
    if route.filters.finding_seq_min is None and route.filters.finding_seq_max is None:
        changes.update(finding_seq_min=1, finding_seq_max=6)
    if route.filters.workflow is None and vocab.workflows:
        changes["workflow"] = vocab.workflows[0]
    category = ROUTE_BY_INTENT[route.intent_class].category
    types = vocab.types_by_category.get(category or "", [])
    if route.filters.obs_type_filter is None and types:
        changes["obs_type_filter"] = types[0]
    return route.with_filters(**changes), len(changes)


def measure(name: str, questions: list[dict[str, Any]], orchs: dict[str, SearchOrchestrator],
            verbose: bool) -> dict[str, float]:
    counts: Counter[str] = Counter()
    by_basis: Counter[str] = Counter()
    right_by_basis: Counter[str] = Counter()
    for q in questions:
        orch, question = orchs[q["kb"]], q["question"]
        vocab = orch.vocabulary()
        decision = route_offline(question, orch._embed(question), orch.embedding_model, vocab,
                                 encode=orch._encode)
        offline_ok = right(decision.route, question, q)
        counts["offline"] += offline_ok
        by_basis[decision.basis] += 1
        right_by_basis[decision.basis] += offline_ok
        oracle = guard_route(question, expected_route(q), decision, vocab)
        counts["oracle"] += right(oracle.route, question, q)
        invented, n_invented = inventing_route(q, vocab)
        guarded = guard_route(question, invented, decision, vocab)
        counts["invented"] += n_invented
        counts["invented_dropped"] += len(guarded.dropped)
        # an invented filter survives when the route that runs has a filter the question set lacks
        ran, want = guarded.route.filters, q["filters"]
        counts["ungrounded_kept"] += sum((
            ran.workflow is not None and ran.workflow != want["workflow"],
            ran.obs_type_filter is not None and ran.obs_type_filter != want["obs_type"],
            (ran.finding_seq_min is not None or ran.finding_seq_max is not None) and want["seq"] is None,
        ))
        counts["inventing_right"] += right(guarded.route, question, q)
        if verbose and guarded.route.filters.model_dump() != expected_route(q).filters.model_dump():
            print(f"  [{q['kb']}] {question}: inventing model's guarded filters "
                  f"{guarded.route.describe_filters()!r}, expected {expected_route(q).describe_filters()!r}")
        for other in INTENT_CLASSES:
            if other in q["intent"]:
                continue
            wrong_route = OrchestratorRoute(intent_class=other, explanation="wrong")
            wrong = guard_route(question, wrong_route, decision, vocab)
            counts["wrong_runs"] += 1
            counts["wrong_right"] += wrong.route.intent_class in q["intent"]
            overruled = (decision.route.intent_class in q["intent"]
                         and wrong.route.intent_class not in q["intent"])
            if verbose and overruled:
                print(f"  [{q['kb']}] {question}: a wrong model's {other} overruled the offline router's "
                      f"{decision.route.intent_class} ({decision.basis})")
            counts["wrong_offline_right"] += decision.route.intent_class in q["intent"]
        if verbose and not right(oracle.route, question, q):
            print(f"  [{q['kb']}] {question}: guarded oracle ran {oracle.route.intent_class} "
                  f"{oracle.route.describe_filters()!r}; notes {oracle.notes}")
    n = len(questions)
    out = {
        "questions": n,
        "offline right": counts["offline"] / n,
        "guarded (oracle model) right": counts["oracle"] / n,
        "guarded (inventing model) right": counts["inventing_right"] / n,
        "invented filters": counts["invented"],
        "invented filters dropped": counts["invented_dropped"],
        "filters kept the set does not expect": counts["ungrounded_kept"],
        "wrong model: guarded template right": counts["wrong_right"] / max(1, counts["wrong_runs"]),
        "wrong model: offline template right": counts["wrong_offline_right"] / max(1, counts["wrong_runs"]),
    }
    for basis in ("words", "similarity", "filters", "none"):
        if by_basis[basis]:
            out[f"offline right when its basis is {basis} ({by_basis[basis]})"] = \
                right_by_basis[basis] / by_basis[basis]
    print(f"{name}: {n} questions")
    for key, value in out.items():
        print(f"  {key:<55} {value:8.3f}" if isinstance(value, float) else f"  {key:<55} {value:8d}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heldout", action="store_true", help="also the held-out set (never tuned on)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    sets = {"dev": SETS["dev"], "hard": HARD}
    if args.heldout:
        sets["held-out"] = SETS["held-out"]
    index = SemanticIndex(None)
    orchs: dict[str, SearchOrchestrator] = {}
    results = {}
    for name, path in sets.items():
        questions = load_questions(path)
        for kb in {q["kb"] for q in questions} - set(orchs):
            orchs[kb] = SearchOrchestrator(load_kb(KBS[kb]), backend="offline", settings=Settings(),
                                           index=index)
        results[name] = measure(name, questions, orchs, args.verbose)
    ratios = []
    for out in results.values():
        base = max(out["offline right"], 1e-9)
        ratios.append(out["guarded (oracle model) right"] / base)
        wrong_base = max(out["wrong model: offline template right"], 1e-9)
        ratios.append(out["wrong model: guarded template right"] / wrong_base)
    kept = sum(int(out["filters kept the set does not expect"]) for out in results.values())
    print(f"guarded routing / offline (worst over sets and models): {min(ratios):.3f}; "
          f"filters kept that the sets do not expect: {kept}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
