"""The LLM router: a prompt that lists every route, and a tolerant parser for the reply.

Local models rarely return bare JSON: they wrap it in code fences, put a sentence before it, add
an explanation after it, use single quotes or leave a trailing comma. The parser finds the first
JSON object that looks like a route wherever it sits, repairs the common slips, and then lets
pydantic decide: anything that does not validate is a :class:`RouteError` with a code the result
reports (``invalid_route`` or ``unknown_intent``), never a guess.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from pydantic import ValidationError

from kmds_desktop.ask.catalog import ROUTES
from kmds_desktop.ask.models import INTENT_CLASSES, OrchestratorRoute

_FILTER_KEYS = ("obs_type_filter", "finding_seq_min", "finding_seq_max", "keyword")
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
#: Reasoning models (deepseek-r1, qwen3) think aloud first; drafts in there are not the answer.
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)


class RouteError(ValueError):
    """The router's reply cannot be used; ``code`` is "invalid_route" or "unknown_intent"."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def routing_prompt(question: str, obs_types: list[str] | None = None) -> str:
    """The prompt that asks the LLM for a route: every template, what it searches, the filters."""
    lines = [
        "You route questions about a KMDS knowledge base of data-science observations to a search template.",
        "Templates (intent_class: what it searches):",
    ]
    for spec in ROUTES:
        lines.append(f"- {spec.intent_class}: {spec.description}")
    lines += [
        "",
        "Optional filters (use null when the question does not ask for one):",
        "- obs_type_filter: an observation type, e.g. "
        + (", ".join(f'"{t}"' for t in obs_types) if obs_types else '"Data Quality Observation"'),
        "- finding_seq_min, finding_seq_max: inclusive range of finding sequence numbers "
        '(e.g. "the first 3 findings" -> 1 and 3)',
        "- keyword: a word that must appear in the finding text (only when the question quotes or "
        "insists on an exact term)",
        "",
        "Reply with one JSON object and nothing else, in this form:",
        '{"intent_class": "<one of the templates>", "filters": {"obs_type_filter": null, '
        '"finding_seq_min": null, "finding_seq_max": null, "keyword": null}, '
        '"explanation": "<one sentence: why this template>"}',
        "",
        f"Question: {question}",
    ]
    return "\n".join(lines)


def parse_route(reply: str) -> OrchestratorRoute:
    """Find, repair and validate the route in an LLM reply; raises :class:`RouteError`."""
    if not isinstance(reply, str) or not reply.strip():
        raise RouteError("invalid_route", "the router's reply was empty")
    reply = _THINK.sub("", reply) if "</think>" in reply.lower() else reply
    candidates = [m.group(1) for m in _FENCE.finditer(reply)] + [reply]
    obj: dict[str, Any] | None = None
    for text in candidates:
        obj = _first_route_object(text)
        if obj is not None:
            break
    if obj is None:
        raise RouteError("invalid_route", f"no JSON route found in the router's reply: {_snippet(reply)}")
    data = _normalise(obj)
    intent = data.get("intent_class")
    if intent not in INTENT_CLASSES:
        raise RouteError("unknown_intent", f"the router chose an unknown template {intent!r}")
    try:
        return OrchestratorRoute.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()
        )
        raise RouteError("invalid_route", f"the router's route is not valid: {problems}") from None


def _first_route_object(text: str) -> dict[str, Any] | None:
    """The first ``{...}`` in ``text`` that decodes (after light repair) to a route with a known
    template; else the first route-like one (so its unknown template is reported).

    Preferring a known template skips a model's echo of the prompt's format line
    (``"intent_class": "<one of the templates>"``) that comes before its real answer.
    """
    decoder = json.JSONDecoder()
    first: dict[str, Any] | None = None
    for start in (m.start() for m in re.finditer(r"\{", text)):
        obj = _decode_at(decoder, text, start)
        if isinstance(obj, dict):
            if isinstance(obj.get("route"), dict):
                obj = obj["route"]
            if any(k in obj for k in ("intent_class", "intent", "template")):
                if _normalise(obj)["intent_class"] in INTENT_CLASSES:
                    return obj
                first = first or obj
    return first


def _decode_at(decoder: json.JSONDecoder, text: str, start: int) -> Any:
    try:
        return decoder.raw_decode(text, start)[0]
    except json.JSONDecodeError:
        pass
    end = _matching_brace(text, start)
    if end is None:
        return None
    chunk = _TRAILING_COMMA.sub(r"\1", text[start : end + 1])
    try:
        return json.loads(chunk)
    except json.JSONDecodeError:
        pass
    try:  # Python-style dicts: single quotes, None/True
        python_style = chunk.replace("null", "None").replace("true", "True").replace("false", "False")
        return ast.literal_eval(python_style)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _matching_brace(text: str, start: int) -> int | None:
    depth = 0
    quote: str | None = None
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


def _normalise(obj: dict[str, Any]) -> dict[str, Any]:
    """Accept common variants: ``intent``/``template`` keys, filters at the top level, "null" strings."""
    intent = obj.get("intent_class", obj.get("intent", obj.get("template")))
    if isinstance(intent, str):
        key = intent.strip().strip("`'\"").lower().replace("-", "_").replace(" ", "_")
        if key not in INTENT_CLASSES and f"{key}_search" in INTENT_CLASSES:
            key = f"{key}_search"
        intent = key
    filters = obj.get("filters")
    if not isinstance(filters, dict):
        filters = {}
    filters = {**{k: obj[k] for k in _FILTER_KEYS if k in obj}, **filters}
    clean: dict[str, Any] = {}
    for key, value in filters.items():
        if isinstance(value, str) and value.strip().lower() in {"", "null", "none", "n/a", "any", "all"}:
            value = None
        clean[key] = value
    explanation = obj.get("explanation") or obj.get("reason") or ""
    return {"intent_class": intent, "filters": clean, "explanation": str(explanation)}


def _snippet(text: str, limit: int = 120) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"
