"""The LLM router: a prompt that lists every route, and a tolerant parser for the reply.

Local models rarely return bare JSON: they wrap it in code fences, put a sentence before it, add
an explanation after it, use single quotes or leave a trailing comma. The parser finds the first
JSON object that looks like a route wherever it sits, repairs the common slips, and then lets
pydantic decide: anything that does not validate is a :class:`RouteError` with a code the result
reports (``invalid_route`` or ``unknown_intent``), never a guess.

Where the backend can constrain decoding, the router is asked with :func:`route_json_schema` (the
pydantic model's own schema, made strict), so the reply is a route by construction; it is still
parsed and validated here, because a server may accept a schema and not enforce it.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from kmds_desktop.ask.catalog import ROUTES
from kmds_desktop.ask.kb_vocabulary import KBVocabulary
from kmds_desktop.ask.models import INTENT_CLASSES, OrchestratorRoute
from kmds_desktop.limits import too_long_reason
from kmds_desktop.reply_text import fenced_blocks

_FILTER_KEYS = ("obs_type_filter", "finding_seq_min", "finding_seq_max", "keyword", "workflow")
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
#: Reasoning models (deepseek-r1, qwen3) think aloud first; drafts in there are not the answer.
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
#: A route is three levels deep; a reply nested deeper than this is refused, never recursed into.
MAX_ROUTE_DEPTH = 32
#: Braces and quotes looked at before giving up (a route has a few dozen).
MAX_SCAN_TOKENS = 400
_MIN_OBJECT_CHARS = len('{"intent":1}')  # a shorter {...} cannot hold a route: not decoded
_MAX_OBJECT_CHARS = 64 * 1024  # a longer {...} is not a route: not decoded
_MAX_FENCES = 8
#: Objects handed to the JSON decoder before giving up (a route reply has a handful).
MAX_DECODED_OBJECTS = 32
_STRUCTURE = re.compile(r"[{}\"']")
#: The rest of a string after its opening quote, in one possessive match (no backtracking): up to
#: the closing quote, or a line end (a route's strings are on one line), or the end of the text.
_STRING_REST = {
    q: re.compile(rf"(?:[^{q}\\\n]++|\\.)*+(?:(?P<end>{q})|\n|\Z)", re.DOTALL) for q in "\"'"
}


#: Tokens the router may write. A route names its template and whether it is a listing (about 15 of
#: Qwen2.5's tokens) and the filters the question states, if any (all five filled: about 65); a model
#: that rambles, or writes prose around the JSON without a schema, is cut off here. Writing is the slow
#: half of a route on a CPU (measured with Qwen2.5-Coder-1.5B: the prompt is cached up to the question,
#: and the reply, 65 tokens when every filter was written out as null, took most of the 19 s a route took).
ROUTE_MAX_TOKENS = 100
#: The longest string filter the schema allows (characters): a workflow name or an observation type. A
#: weak model under a grammar otherwise may not close a string (measured with SmolLM2-135M: without a
#: bound it repeated one phrase until the token limit).
ROUTE_STRING_MAX_CHARS = 80


def route_json_schema() -> dict[str, Any]:
    """The route's JSON schema as servers enforce it: the template and the listing, required; the
    filters an optional object whose keys are all optional and never null, so a model writes only the
    filters the question states (an empty filter costs tokens, and a route's time is its reply being
    written). No explanation: the guard and the window say why a route runs. References inlined (not
    every grammar converter follows ``$ref``), no other properties, titles, descriptions and defaults
    dropped (they only lengthen the grammar), strings bounded (:data:`ROUTE_STRING_MAX_CHARS`).

    Derived from :class:`OrchestratorRoute`, so a new filter or intent reaches the schema without a
    second list. OpenAI's hosted strict mode wants every property required: it refuses this schema,
    and that server is then asked in plain text (remembered, :mod:`kmds_desktop.llm.structured`);
    local servers (llama.cpp, Ollama, LM Studio, vLLM) take optional properties.
    """
    schema = OrchestratorRoute.model_json_schema()
    defs = schema.pop("$defs", {})

    def strict(node: Any) -> Any:
        if isinstance(node, list):
            return [strict(n) for n in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return strict(defs[node["$ref"].rsplit("/", 1)[-1]])
        out = {k: strict(v) for k, v in node.items() if k not in ("title", "description", "default")}
        if "anyOf" in out:  # "x or null": a filter left out is omitted, never written as null
            kinds = [n for n in out["anyOf"] if n.get("type") != "null"]
            if len(kinds) == 1:
                out = {**{k: v for k, v in out.items() if k != "anyOf"}, **kinds[0]}
        if out.get("type") == "string" and "enum" not in out:
            out["maxLength"] = ROUTE_STRING_MAX_CHARS
        if out.get("type") == "object" and "properties" in out:
            out["required"] = []
            out["additionalProperties"] = False
        return out

    props = strict(schema)["properties"]
    return {"title": "route", "type": "object",
            "properties": {"intent_class": props["intent_class"], "listing": props["listing"],
                           "filters": props["filters"]},
            "required": ["intent_class", "listing"], "additionalProperties": False}


class RouteError(ValueError):
    """The router's reply cannot be used; ``code`` is "invalid_route" or "unknown_intent"."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def routing_prompt(question: str, vocabulary: KBVocabulary | Sequence[str] | None = None) -> str:
    """The prompt that asks the LLM for a route: every template (with two of the catalog's example
    questions), the KB's own vocabulary (its observation types, workflow names, sequence numbers and
    intents; a plain list is read as the observation types), the filters, and whether the question
    asks for a listing.

    Tuned with Qwen2.5-Coder-1.5B on ``tests/data/ask_questions_dev.jsonl`` only
    (``bench/llm_quality.py --split dev``, 12 questions): the template was already right, but the
    reply's ``listing`` was wrong for 5 of 12, most likely because the format line showed
    ``"listing": false`` and a small model copies it. The format line now leaves it open and the
    rule says what a listing question looks like: listing/open accuracy 0.583 -> 0.833 on dev,
    0.583 -> 1.000 on 12 held-out questions, at the cost of one template each (1.000 -> 0.917)."""
    if vocabulary is not None and not isinstance(vocabulary, KBVocabulary):
        vocabulary = KBVocabulary({"(any)": sorted(str(t) for t in vocabulary)}, [], [])
    lines = [
        "You route questions about a KMDS knowledge base of data-science observations to a search template.",
        "Templates (intent_class: what it searches; e.g. questions it answers):",
    ]
    for spec in ROUTES:
        examples = "; ".join(f'"{e}"' for e in spec.examples[:2])
        lines.append(f"- {spec.intent_class}: {spec.description}" + (f" E.g. {examples}" if examples else ""))
    lines.append("")
    if vocabulary is not None:
        lines += vocabulary.describe()
        lines.append("")
    example_type = vocabulary.obs_types[0] if vocabulary is not None and vocabulary.obs_types \
        else "Data Quality Observation"
    lines += [
        "Filters: most questions state none. Add a filter only when the question itself states it; spell "
        "types and workflows exactly as listed:",
        f'- obs_type_filter: one observation type, e.g. "{example_type}" ("data quality problems" -> '
        '"Data Quality Observation" when listed)',
        "- workflow: one workflow name, when the question names a workflow",
        "- finding_seq_min, finding_seq_max: inclusive range of finding sequence numbers, when the question "
        'states one ("the first 3 findings" -> 1 and 3; "findings 2 to 4" -> 2 and 4; "the last 2" -> the '
        "two highest numbers listed for that workflow and template)",
        "- keyword: a word that must appear in the finding text (only when the question quotes or "
        "insists on an exact term)",
        "listing: true when the question asks for a set of records rather than one fact: it says show, "
        "list or give, asks for the first/last N or a range, or names a kind of record (an observation "
        "type or template above, e.g. \"the feature engineering\", \"the data quality problems\") or a "
        "workflow; every match is then returned in order. false when it asks one specific question (why, "
        "whether, which value, how much) that a few records answer: only the relevant records are returned.",
        "",
        "Reply with one JSON object and nothing else, in this form:",
        '{"intent_class": "<one of the templates>", "listing": <true or false>}',
        'Only when the question itself states one of the filters above, add "filters" with that filter '
        "alone; most questions state none.",
        "",
        f"Question: {question}",
    ]
    return "\n".join(lines)


def parse_route(reply: str) -> OrchestratorRoute:
    """Find, repair and validate the route in an LLM reply; raises :class:`RouteError`.

    Bounded whatever the reply holds: longer than
    :data:`~kmds_desktop.limits.MAX_REPLY_CHARS` is refused before any parsing, the scan is one
    pass that never recurses on nesting (deeper than :data:`MAX_ROUTE_DEPTH` is refused) and stops
    after :data:`MAX_SCAN_TOKENS` braces and quotes or :data:`MAX_DECODED_OBJECTS` decoded objects,
    and at most about twice the reply's length is handed to the JSON decoder.
    """
    if not isinstance(reply, str) or not reply.strip():
        raise RouteError("invalid_route", "the router's reply was empty")
    too_long = too_long_reason(reply, "router's reply")
    if too_long:
        raise RouteError("invalid_route", too_long)
    reply = _THINK.sub("", reply) if "</think>" in reply.lower() else reply
    fenced = fenced_blocks(reply, _MAX_FENCES)
    obj: dict[str, Any] | None = None
    for text in [*fenced, reply]:
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

    One left-to-right pass keeps a stack of open braces (quotes count only inside braces, so an
    apostrophe in prose changes nothing); each ``{...}`` is decoded when its ``}`` arrives, inner
    objects first, so an unclosed ``{`` before the answer does not hide it. Raises
    :class:`RouteError` when the nesting is deeper than any route (a hostile or broken reply).
    """
    stack: list[int] = []
    known: tuple[int, dict[str, Any]] | None = None  # earliest route with a known template
    other: tuple[int, dict[str, Any]] | None = None  # earliest route-like object otherwise
    budget = 2 * len(text) + _MAX_OBJECT_CHARS
    decodes_left = MAX_DECODED_OBJECTS
    pos = 0
    for _ in range(MAX_SCAN_TOKENS):
        if not stack:
            if known is not None:
                return known[1]  # anything after starts later
            pos = text.find("{", pos)
            if pos < 0:
                break
            stack.append(pos)
            pos += 1
            continue
        match = _STRUCTURE.search(text, pos)
        if match is None:
            break
        ch, pos = match.group(), match.end()
        if ch in "\"'":
            rest = _STRING_REST[ch].match(text, pos)
            assert rest is not None  # noqa: S101 - the pattern matches the empty end of text
            if rest.group("end") is None and rest.end() == len(text):
                break  # an unterminated string runs to the end: nothing after it can close
            pos = rest.end()
        elif ch == "{":
            if len(stack) >= MAX_ROUTE_DEPTH:
                break
            stack.append(match.start())
        else:  # "}"
            start = stack.pop()
            length = pos - start
            if not _MIN_OBJECT_CHARS <= length <= min(_MAX_OBJECT_CHARS, budget):
                continue
            if decodes_left == 0:
                break
            decodes_left -= 1
            budget -= length
            obj = _decode(text[start:pos])
            if isinstance(obj, dict) and isinstance(obj.get("route"), dict):
                obj = obj["route"]
            if not isinstance(obj, dict) or not any(k in obj for k in ("intent_class", "intent", "template")):
                continue
            if _normalise(obj)["intent_class"] in INTENT_CLASSES:
                if known is None or start < known[0]:
                    known = (start, obj)
            elif other is None or start < other[0]:
                other = (start, obj)
    else:
        if known is None and other is None:
            raise RouteError("invalid_route", f"no JSON route within the first {MAX_SCAN_TOKENS} braces and "
                                              "quotes of the router's reply")
    if decodes_left == 0 and known is None and other is None:
        raise RouteError("invalid_route", f"no JSON route among the first {MAX_DECODED_OBJECTS} objects of "
                                          "the router's reply")
    if known is not None or other is not None:
        return (known or other)[1]  # type: ignore[index]
    if len(stack) >= MAX_ROUTE_DEPTH:
        raise RouteError("invalid_route", f"the router's reply nests braces deeper than {MAX_ROUTE_DEPTH} "
                                          "levels; it is not a route")
    return None


def _decode(chunk: str) -> Any:
    """``chunk`` as JSON, else with trailing commas removed, else as a Python-style dict."""
    try:
        return json.loads(chunk)
    except ValueError:  # JSONDecodeError, or a number over Python's digit limit
        pass
    chunk = _TRAILING_COMMA.sub(r"\1", chunk)
    try:
        return json.loads(chunk)
    except ValueError:
        pass
    try:  # Python-style dicts: single quotes, None/True
        python_style = chunk.replace("null", "None").replace("true", "True").replace("false", "False")
        return ast.literal_eval(python_style)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
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
    out = {"intent_class": intent, "filters": clean, "explanation": str(explanation)}
    if isinstance(obj.get("listing"), bool):
        out["listing"] = obj["listing"]
    return out


def _snippet(text: str, limit: int = 120) -> str:
    one_line = " ".join(text[: limit * 4].split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"
