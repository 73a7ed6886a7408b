"""Writing the answer: the synthesis prompt for an LLM, and extractive answers when there is none.

Records are numbered in the order of ``results`` so that ``[n]`` in any answer, LLM-written or
extractive, always means ``results[n-1]`` — the GUI turns each ``[n]`` into a link to that IRI.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

#: Characters of each finding shown to the LLM (long Markdown findings would crowd out the others).
PROMPT_FINDING_CHARS = 1200
#: Characters of each finding quoted in an extractive answer.
EXTRACT_CHARS = 240

_CITATION = re.compile(r"\[(\d+)\]")


def record_label(result: dict[str, Any]) -> str:
    parts = [str(result.get("obs_type") or result.get("category") or "observation")]
    if result.get("workflow_name"):
        parts.append(f"workflow {result['workflow_name']}")
    if result.get("finding_seq") is not None:
        parts.append(f"finding {result['finding_seq']}")
    if result.get("intent"):
        parts.append(f"intent {result['intent']}")
    return ", ".join(parts)


def synthesis_prompt(question: str, results: Sequence[dict[str, Any]]) -> str:
    """Ask for a concise answer that uses only the numbered records and cites them as [n]."""
    lines = [
        "Answer the question using ONLY the numbered records from a knowledge base of data-science "
        "observations below.",
        "Be concise (a few sentences or a short list). Cite the records you use as [1], [2], ... right "
        "after the statement they support. If the records do not answer the question, say so plainly. "
        "Do not invent facts or cite numbers that are not listed.",
        "",
        "Records:",
    ]
    for i, result in enumerate(results, start=1):
        finding = " ".join(str(result.get("finding", "")).split())
        if len(finding) > PROMPT_FINDING_CHARS:
            finding = finding[: PROMPT_FINDING_CHARS - 1] + "…"
        lines.append(f"[{i}] ({record_label(result)}) {finding}")
    lines += ["", f"Question: {question}", "Answer:"]
    return "\n".join(lines)


def clean_citations(answer: str, n_results: int) -> str:
    """Drop citation markers that point at no record (``[7]`` when there are 5 results)."""
    def keep(match: re.Match[str]) -> str:
        n = int(match.group(1))
        return match.group(0) if 1 <= n <= n_results else ""

    return _CITATION.sub(keep, answer).strip()


def strip_reasoning(answer: str) -> str:
    """Drop a reasoning model's ``<think>...</think>`` preamble: the user asked for the answer only."""
    return re.sub(r"<think>.*?</think>", "", answer, flags=re.DOTALL | re.IGNORECASE).strip()


def cited_numbers(answer: str) -> list[int]:
    """The distinct record numbers an answer cites, in order of first use."""
    return list(dict.fromkeys(int(n) for n in _CITATION.findall(answer)))


def _excerpt(text: str, limit: int = EXTRACT_CHARS) -> str:
    """The first sentence(s) of a finding, up to ``limit`` characters, Markdown flattened to one line."""
    flat = " ".join(re.sub(r"[#*_`>|]+", " ", text).split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    stop = max(cut.rfind(". "), cut.rfind("; "))
    return (cut[: stop + 1] if stop > limit // 2 else cut.rstrip() + "…").strip()


def extractive_answer(results: Sequence[dict[str, Any]], heading: str) -> str:
    """The records themselves, grouped by observation type, each with its ``[n]`` citation."""
    if not results:
        return f"{heading}\n\nNo matching observations were found in this knowledge base."
    groups: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for i, result in enumerate(results, start=1):
        key = str(result.get("obs_type") or result.get("category") or "Observation")
        groups.setdefault(key, []).append((i, result))
    lines = [heading]
    for obs_type, items in groups.items():
        lines += ["", f"{obs_type}:"]
        for i, result in items:
            lines.append(f"- {_excerpt(str(result.get('finding', '')))} [{i}]")
    return "\n".join(lines)


def _records(n: int) -> str:
    return "the most relevant observation" if n == 1 else f"the {n} most relevant observations"


def offline_heading(n: int) -> str:
    return (f"No LLM was used (offline mode): here {'is' if n == 1 else 'are'} {_records(n)}, "
            "grouped by type." if n else "No LLM was used (offline mode).")


def fallback_heading(reason: str, n: int) -> str:
    return (f"The LLM could not write an answer ({reason}), so this is an extractive summary of "
            f"{_records(n)}, grouped by type.")
