"""Benchmark: parsing a 1 MB hostile LLM reply against parsing a 1 MB valid one.

The parsers that read model replies are measured: the router's ``parse_route`` (ask), the
literature query cleaner ``clean_query_with_reason``, the answer's ``strip_reasoning`` and its
citation repair (``repair_citations``). The
valid replies are 1 MB of model text (a route after a long explanation; a query followed by one;
an answer after a long ``<think>`` part), which a parser must read through at least once to find
the answer or to see the reply's layout. The hostile ones are the shapes that used to crash or
take minutes to hours: deep JSON nesting, a megabyte of ``{``, of ``{}`` pairs, of quotes, of
nested parentheses, of half-written ``to_tsquery(`` calls, of unclosed ``<think>``, a fence or a
citation before a megabyte of spaces, a marker of a million digits. Each hostile
reply and the valid one are parsed alternately 15 times and the best time of each counts. A
bounded parser spends about the same on either: target ratio (slowest hostile / valid, per
parser) <= 2. (The citation repair's work is per marker: a reply of nothing but markers, 1 MB of
"[1] and ", holds eight times the valid answer's and takes about 2.4 times as long, in step with
it.) Run: ``.venv/bin/python bench/hostile_reply.py``; the last line is the worst ratio.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MB = 1024 * 1024
REPEATS = 15
TARGET = 2.0
ROUTE = '{"intent_class": "exploratory_search", "filters": {"obs_type_filter": null}, "explanation": "EDA"}'
QUERY = "aspirin & (heart <-> attack | myocardial <-> infarction) & diabet:*"


def _fit(text: str, tail: str = "") -> str:
    """``text`` repeated or cut to exactly 1 MB together with ``tail``."""
    body = (text * (MB // max(len(text), 1) + 1))[: MB - len(tail)]
    return body + tail


def _concepts(tail: str) -> str:
    """A 1 MB concept reply: one concept with a megabyte of terms, then ``tail`` (the end, or a cut)."""
    head = '{"concepts": [{"name": "calcium", "terms": ['
    return head + _fit('"calcium ions", ', tail)[len(head):]


def _once(fn: Callable[[str], object], reply: str) -> float:
    start = time.perf_counter()
    with contextlib.suppress(ValueError):  # RouteError: the expected outcome for a hostile route reply
        fn(reply)
    return time.perf_counter() - start


def paired_times(fn: Callable[[str], object], valid: str, hostile: str) -> tuple[float, float]:
    """Best of :data:`REPEATS` for each, measured alternately so that load from other processes on
    a shared machine falls on both alike (the parsers are deterministic: the best run is the cost)."""
    valid_times, hostile_times = [], []
    for _ in range(REPEATS):
        valid_times.append(_once(fn, valid))
        hostile_times.append(_once(fn, hostile))
    return min(valid_times), min(hostile_times)


def _repair(reply: str) -> object:
    """The answer's citation repair, as the orchestrator runs it on a model's answer over 3 records."""
    from kmds_desktop.ask.answers import repair_citations

    return repair_citations(reply, 3, ["Model A was selected.", "Its error was lowest.", "B was slower."],
                            [1, 2, 3])


def main() -> int:
    from kmds_desktop.ask.answers import strip_reasoning
    from kmds_desktop.ask.routing import parse_route
    from kmds_desktop.literature.queries.concept_json import parse_concepts
    from kmds_desktop.literature.queries.query_cleaning import clean_query_with_reason

    explanation = "The question is about data quality, so the exploratory template fits it best. "
    parsers: dict[str, tuple[Callable[[str], object], str, dict[str, str]]] = {
        "parse_route": (parse_route, _fit(explanation, "\n" + ROUTE), {
            "deep JSON nesting": _fit('{"a":'),
            "1 MB of {": _fit("{"),
            "1 MB of {} pairs": _fit("{}"),
            "1 MB of short objects": _fit('{"a": 1, "b": 2}'),
            "{ then 1 MB of quotes": "{" + _fit('"')[1:],
            "{ then 1 MB of apostrophes": "{" + _fit("'")[1:],
            "1 MB of }": _fit("}"),
            "an unclosed ``` then 1 MB of spaces": "```json" + _fit(" ")[7:],
        }),
        "clean_query": (clean_query_with_reason, QUERY + "\n" + _fit(explanation.replace(", ", ",\n"))[
                            len(QUERY) + 1:], {
            "1 MB of (": _fit("("),
            "nested ( ) lines": _fit("(" * 995 + "a & b" + ")" * 995 + "\n"),
            "lines of (": _fit("(\n"),
            "half-written to_tsquery calls": _fit("to_tsquery(''"),
            "1 MB of curly quotes": _fit("\u201c"),
            "lines of operators": _fit("a & " * 499 + "\n"),
        }),
        "repair_citations": (_repair, _fit("Model A was selected over model B: its error was lowest [1]. "), {
            "1 MB of spaces": _fit(" "),
            "[1] then 1 MB of spaces": "[1]" + _fit(" ")[3:],
            "a claim with a 1 MB marker": "Model A won [" + _fit("1", "].")[13:],
        }),
        "parse_concepts": (parse_concepts, _concepts('"calcium ions"]}]}'), {
            "a concept list cut off after 1 MB of terms": _concepts('"calc'),
        }),
        "strip_reasoning": (strip_reasoning, "<think>" + _fit(explanation, "</think>Two issues [1].")[7:], {
            "1 MB of unclosed <think>": _fit("<think>"),
            "1 MB of <think></think> pairs": _fit("<think></think>"),
            "1 MB of </think>": _fit("</think>"),
        }),
    }
    worst = 0.0
    for name, (fn, valid, hostile) in parsers.items():
        print(f"{name}: hostile 1 MB reply vs a valid 1 MB reply (best of {REPEATS}, measured alternately)")
        for label, reply in hostile.items():
            base, took = paired_times(fn, valid, reply)
            ratio = took / base
            worst = max(worst, ratio)
            print(f"  {label:32s} {len(reply):>9,} chars {took * 1000:7.2f} ms vs {base * 1000:6.2f} ms"
                  f"  ratio {ratio:.2f}")
    print(f"target: slowest hostile / valid <= {TARGET}")
    print(f"ratio {worst:.2f}")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
