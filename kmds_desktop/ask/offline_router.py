"""Routing without an LLM: embedding similarity to each template plus a few plain-language cues.

The question's embedding (computed once per question, shared with ranking) is compared with the
embeddings of each template's description and example questions; the best match wins when it is
clear enough, otherwise the question goes to semantic search. Cues a similarity score cannot see
are read directly: a sequence range ("first 3 findings", "findings 2 to 5", "finding 4"), quoted
words (a keyword filter), a category named outright ("model selection", "feature engineering"),
and an observation type named outright ("data quality observations").
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kmds_desktop.ask.catalog import ROUTES
from kmds_desktop.ask.models import OrchestratorRoute
from kmds_desktop.kb import SearchFilters

#: ``encode(texts, model_name)`` -> unit-length vectors, one row per text.
Encoder = Callable[[list[str], str], Any]

#: Below this cosine similarity to every template, a question is a free-text (semantic) search.
MIN_TEMPLATE_SIMILARITY = 0.42
#: Added to a template's score when the question names its category outright.
CUE_BONUS = 0.35

_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12,
}
_NUM = r"(\d+|" + "|".join(_NUMBER_WORDS) + r")"
_ITEM = r"(?:findings?|observations?|steps?|entries|records?)"
_RANGE = re.compile(
    rf"{_ITEM}\s*(?:#|no\.?|number)?\s*{_NUM}\s*(?:to|through|thru|until|-|–|and)\s*{_NUM}", re.I
)
_BETWEEN = re.compile(rf"{_ITEM}.{{0,20}}?between\s+{_NUM}\s+and\s+{_NUM}", re.I)
_FIRST = re.compile(rf"\b(?:first|top|earliest)\s+{_NUM}\s+(?:\w+\s+){{0,3}}?{_ITEM}", re.I)
_LAST = re.compile(rf"\b(?:last|latest|final)\s+{_NUM}\s+(?:\w+\s+){{0,3}}?{_ITEM}", re.I)
_SINGLE = re.compile(rf"\b{_ITEM}\s*(?:#|no\.?|number)\s*{_NUM}\b|\b(?:finding|observation)\s+(\d+)\b", re.I)
_AFTER = re.compile(rf"{_ITEM}\s+(?:after|from|since)\s+(?:#|number\s+)?{_NUM}(?!\s*(?:to|-|–|and))", re.I)
_QUOTED = re.compile(r"[\"“”']([^\"“”']{2,60})[\"“”']")

#: Phrases that name a template outright (lower case, matched as substrings).
_CATEGORY_CUES: dict[str, tuple[str, ...]] = {
    "exploratory_search": ("exploratory", "exploration", "explore", "eda", "data quality", "missing value",
                           "outlier", "relevance observation"),
    "data_representation_search": ("data representation", "feature engineering", "engineered feature",
                                   "transformation", "transformed", "encoding", "representation"),
    "modelling_choice_search": ("modelling choice", "modeling choice", "modelling assumption",
                                "modeling assumption", "assumption", "choice of model",
                                "choice of algorithm", "algorithm", "why was a", "why did we use"),
    "model_selection_search": ("model selection", "select the model", "selected model", "compare models",
                               "model comparison", "best model", "best performing", "evaluation metric"),
    "all_observations_search": ("all observations", "all findings", "every observation", "every finding",
                                "all the observations", "all the findings", "list observations",
                                "list findings", "list all", "overview of all"),
}
#: Observation types too generic to be a filter when named (they are the category itself).
_GENERIC_TYPES = {"model selection observation", "modelling choice observation", "experimental observation"}


@dataclass(frozen=True)
class OfflineDecision:
    route: OrchestratorRoute
    scores: dict[str, float]


class _TemplateVectors:
    """Embeddings of each template's description and examples, computed once per model."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_model: dict[str, list[tuple[str, Any]]] = {}

    def get(self, model_name: str, encode: Encoder | None = None) -> list[tuple[str, Any]]:
        """The vectors for ``model_name``, computed by ``encode`` (default: in this process)."""
        with self._lock:
            cached = self._by_model.get(model_name)
            if cached is None:
                if encode is None:
                    from kmds_desktop.index.embeddings import encode

                specs = [s for s in ROUTES if s.examples]
                texts = [[s.description, *s.examples] for s in specs]
                flat = [t for group in texts for t in group]
                vectors = encode(flat, model_name)
                cached, pos = [], 0
                for spec, group in zip(specs, texts, strict=True):
                    cached.append((spec.intent_class, vectors[pos : pos + len(group)]))
                    pos += len(group)
                self._by_model[model_name] = cached
            return cached


_TEMPLATE_VECTORS = _TemplateVectors()


def route_offline(question: str, question_vector: Any, model_name: str,
                  obs_types: Sequence[str] = (), seqs: Sequence[int] = (),
                  encode: Encoder | None = None) -> OfflineDecision:
    """Route ``question`` without an LLM.

    ``question_vector`` is the question's unit-length embedding; ``obs_types`` are the KB's
    observation types (for type cues) and ``seqs`` its finding sequence numbers (so "first 3" means
    the three lowest numbers the KB actually has). ``encode(texts, model_name)`` embeds the
    templates' examples (once per model); the orchestrator passes its index's, which in the app
    runs in the index process.
    """
    import numpy as np

    similarity: dict[str, float] = {}
    for intent, vectors in _TEMPLATE_VECTORS.get(model_name, encode):
        similarity[intent] = float(np.max(vectors @ np.asarray(question_vector, dtype=np.float32)))
    scores = dict(similarity)
    lowered = question.lower()
    cued = [intent for intent, cues in _CATEGORY_CUES.items() if any(c in lowered for c in cues)]
    for intent in cued:
        scores[intent] += CUE_BONUS

    filters, notes = _filters_from_cues(question, obs_types, seqs)
    best = max(scores, key=lambda k: scores[k])
    has_seq = filters.finding_seq_min is not None or filters.finding_seq_max is not None
    category_cued = [c for c in cued if c != "all_observations_search"]
    if has_seq and not category_cued:
        best = "all_observations_search"
        why = "the question asks for a range of findings"
    elif scores[best] >= MIN_TEMPLATE_SIMILARITY:
        named = " and named in the question" if best in cued else ""
        why = f"closest template (similarity {similarity[best]:.2f}){named}"
    else:
        best = "semantic_search"
        top = max(similarity.values())
        why = f"no template is close enough (best similarity {top:.2f}): free-text search"
    if filters.obs_type_filter and best in ("semantic_search",):
        best = "all_observations_search"
        why = "the question names an observation type"
    explanation = f"Offline router: {why}" + (f"; {'; '.join(notes)}" if notes else "") + "."
    route = OrchestratorRoute(intent_class=best, filters=filters, explanation=explanation)
    return OfflineDecision(route, scores)


def _num(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBER_WORDS[text.lower()]


def _filters_from_cues(question: str, obs_types: Sequence[str], seqs: Sequence[int]) -> tuple[SearchFilters,
                                                                                               list[str]]:
    notes: list[str] = []
    seq_min: int | None = None
    seq_max: int | None = None
    ordered = sorted(set(seqs))
    if m := (_RANGE.search(question) or _BETWEEN.search(question)):
        seq_min, seq_max = sorted((_num(m.group(1)), _num(m.group(2))))
        notes.append(f"findings {seq_min} to {seq_max}")
    elif m := _FIRST.search(question):
        n = _num(m.group(1))
        if ordered:
            seq_min, seq_max = ordered[0], ordered[min(n, len(ordered)) - 1]
        else:
            seq_min, seq_max = 1, n
        notes.append(f"first {n} findings")
    elif m := _LAST.search(question):
        n = _num(m.group(1))
        if ordered:
            seq_min, seq_max = ordered[-min(n, len(ordered))], ordered[-1]
            notes.append(f"last {n} findings")
    elif m := _AFTER.search(question):
        seq_min = _num(m.group(1))
        notes.append(f"findings from {seq_min}")
    elif m := _SINGLE.search(question):
        value = m.group(1) or m.group(2)
        seq_min = seq_max = _num(value)
        notes.append(f"finding {seq_min}")

    keyword = None
    if m := _QUOTED.search(question):
        keyword = m.group(1).strip()
        notes.append(f'keyword "{keyword}"')

    obs_type = None
    lowered = question.lower()
    for name in sorted(set(obs_types), key=len, reverse=True):
        if not name or name.lower() in _GENERIC_TYPES:
            continue
        stem = re.sub(r"\s+(observation|statement|description|summary)$", "", name.strip(), flags=re.I)
        stem = stem.lower()
        if name.lower() in lowered or (len(stem) > 6 and f"{stem} observation" in lowered):
            obs_type = name
            notes.append(f"type {name}")
            break
    return SearchFilters(obs_type_filter=obs_type, finding_seq_min=seq_min, finding_seq_max=seq_max,
                         keyword=keyword), notes
