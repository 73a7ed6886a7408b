"""Routing without an LLM: embedding similarity to each template plus a few plain-language cues.

The question's embedding (computed once per question, shared with ranking) is compared with the
embeddings of each template's description and example questions; the best match wins when it is
clear enough, otherwise the question goes to semantic search. Cues a similarity score cannot see
are read directly: a sequence range ("first 3 findings", "findings 2 to 5", "finding 4"), quoted
words (a keyword filter), a category named outright ("model selection"), and, from the KB's own
vocabulary (:mod:`~kmds_desktop.ask.kb_vocabulary`), an observation type ("data quality problems"),
a workflow ("the penguin body mass regression workflow", "workflow 2", "the second workflow", "the
body mass workflow") and the sequence numbers "first/last N" refer to. Everyday words for the KB's
types ("problems in the data", "issues", "what went wrong" for data quality; "assumptions";
"derived features"; :mod:`~kmds_desktop.ask.question_words`) choose the template and, where the KB
holds that type, the type filter; a question about results ("which model was best, and by how
much") goes to model selection, whose records stating figures are ranked first. Whether the
question asks for a listing or is an open question is read from its wording
and filters (:func:`~kmds_desktop.ask.relevance.is_listing`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kmds_desktop.ask.catalog import ROUTE_BY_INTENT, ROUTES
from kmds_desktop.ask.kb_vocabulary import GENERIC_TYPES, KBVocabulary, normalise_name, type_stem
from kmds_desktop.ask.models import OrchestratorRoute
from kmds_desktop.ask.question_words import (
    asks_for_reason,
    asks_for_results,
    asks_what_was_chosen,
    everyday_type,
    question_topic,
)
from kmds_desktop.ask.relevance import is_listing
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
_ITEM = (r"(?:findings?|observations?|steps?|entries|records?|choices|assumptions|descriptions|statements"
         r"|summaries)")
_TO = r"\s*(?:to|through|thru|until|-|–|and)\s*"
_RANGE = re.compile(rf"{_ITEM}\s*(?:from\s+)?(?:#|no\.?|numbers?|numbered)?\s*{_NUM}{_TO}{_NUM}\b", re.I)
_NUMBERED = re.compile(rf"\b(?:numbered|numbers?|nos?\.?|#)\s*{_NUM}{_TO}{_NUM}\b", re.I)
_BETWEEN = re.compile(rf"{_ITEM}.{{0,20}}?between\s+{_NUM}\s+and\s+{_NUM}", re.I)
_FIRST = re.compile(rf"\b(?:first|top|earliest)\s+{_NUM}\s+(?:[\w-]+\s+){{0,4}}?{_ITEM}", re.I)
_LAST = re.compile(rf"\b(?:last|latest|final)\s+{_NUM}\s+(?:[\w-]+\s+){{0,4}}?{_ITEM}", re.I)
_SINGLE = re.compile(rf"\b{_ITEM}\s*(?:#|no\.?|number(?:ed)?)\s*{_NUM}\b|\b(?:finding|observation)\s+(\d+)\b",
                     re.I)
#: "findings from 3" (open-ended); the ``\b`` keeps ``\d+`` whole: without it "from 12 to 15" backtracked
#: to "from 1", which the look-ahead let through.
_AFTER = re.compile(rf"{_ITEM}\s+(?:after|from|since)\s+(?:#|number\s+)?{_NUM}\b(?!\s*(?:to|-|–|and))", re.I)
_QUOTED = re.compile(r"[\"“”]([^\"“”]{2,60})[\"“”]|(?<![\w])'([^']{2,60})'(?![\w])")

#: Phrases that name a template outright (lower case, matched as substrings).
_CATEGORY_CUES: dict[str, tuple[str, ...]] = {
    "exploratory_search": ("exploratory", "exploration", "explore", "eda", "data quality", "outlier",
                           "relevance observation"),
    "data_representation_search": ("data representation", "feature engineering", "engineered feature",
                                   "transformation", "transformed", "encoding", "representation"),
    "modelling_choice_search": ("modelling choice", "modeling choice", "modelling decision",
                                "modeling decision", "modelling assumption",
                                "modeling assumption", "assumption", "choice of model",
                                "choice of algorithm", "algorithm", "why was a", "why did we use"),
    "model_selection_search": ("model selection", "select the model", "selected model", "compare models",
                               "model comparison", "best model", "best performing", "evaluation metric",
                               "cross-validation", "cross validation", "cross-validated"),
    "all_observations_search": ("all observations", "all findings", "every observation", "every finding",
                                "all the observations", "all the findings", "list observations",
                                "list findings", "list all", "overview of all", "everything"),
}
#: Type stems that are a category's own name (naming the category narrows nothing): a type filter
#: needs the type's whole name (the guard's rule too).
CATEGORY_TYPE_STEMS = frozenset({"exploratory", "data representation", "modelling choice", "modeling choice",
                                 "model selection", "experimental"})


@dataclass(frozen=True)
class OfflineDecision:
    route: OrchestratorRoute
    scores: dict[str, float]
    #: What the template rests on: "words" (the question names a type or a category, or asks about
    #: results or a choice), "filters" (all observations, because the question names a range or a
    #: workflow but no kind of record), "similarity" (the closest template's examples, nothing
    #: named) or "none" (no template close enough: free-text search). The guard
    #: (:mod:`~kmds_desktop.ask.guard`) reads it to decide when a model may choose another template.
    basis: str = "words"


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
                    # why here: the embedding stack loads only when the offline router first needs it
                    from kmds_desktop.index.embeddings import encode as encode_in_process

                    encode = encode_in_process

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
                  vocabulary: KBVocabulary | None = None, encode: Encoder | None = None) -> OfflineDecision:
    """Route ``question`` without an LLM.

    ``question_vector`` is the question's unit-length embedding; ``vocabulary`` is the KB's own
    (observation types, workflow names, sequence numbers per workflow and category), so a type or
    workflow named in the question becomes a filter and "first 3" means the three lowest numbers
    the KB actually has where the question looks. ``encode(texts, model_name)`` embeds the
    templates' examples (once per model); the orchestrator passes its index's, which in the app
    runs in the index process.
    """
    import numpy as np  # why: numpy loads on first use, not at start-up

    vocab = vocabulary or KBVocabulary({}, [], [])
    similarity: dict[str, float] = {}
    for intent, vectors in _TEMPLATE_VECTORS.get(model_name, encode):
        similarity[intent] = float(np.max(vectors @ np.asarray(question_vector, dtype=np.float32)))
    scores = dict(similarity)
    lowered = question.lower()
    cued = [intent for intent, cues in _CATEGORY_CUES.items() if any(c in lowered for c in cues)]
    for intent in cued:
        scores[intent] += CUE_BONUS

    notes: list[str] = []
    obs_type = _type_from_question(question, vocab)
    workflow = vocab.workflow_in_question(question)
    best = max(scores, key=lambda k: scores[k])
    category_cued = [c for c in cued if c != "all_observations_search"]
    listing_said: bool | None = None
    everyday_category = None
    if not obs_type:
        everyday_obs_type, everyday_category, everyday_listing = everyday_type(question, vocab)
        if everyday_category and category_cued and f"{everyday_category}_search" not in category_cued:
            everyday_category = None  # the question names another category outright: trust that
        if everyday_category:
            obs_type, listing_said = everyday_obs_type, everyday_listing or None
    choice_cued = {"modelling_choice_search", "model_selection_search"}
    chosen = (not obs_type and not everyday_category and set(category_cued) <= choice_cued
              and asks_what_was_chosen(question, vocab))
    results = not obs_type and not everyday_category and not chosen and asks_for_results(question, vocab)
    basis = "words"
    if obs_type:
        best = f"{_category_of(obs_type, vocab)}_search"
        why = (f"the question's words name the observation type {obs_type!r}" if everyday_category
               else f"the question names the observation type {obs_type!r}")
    elif everyday_category:
        best = f"{everyday_category}_search"
        why = f"the question's words name {everyday_category.replace('_', ' ')} observations"
    elif chosen:
        # "why was it chosen" asks mainly for the reason, "which was chosen and why" for the choice;
        # either template answers from both categories (the orchestrator's choice rule)
        best = "modelling_choice_search" if lowered.lstrip().startswith("why") else "model_selection_search"
        why = ("the question asks what was chosen and why: the model selection records (what was selected) "
               "and the modelling choice records (why)") if asks_for_reason(question) else (
               "the question asks which was chosen: the model selection records (what was selected) and "
               "the modelling choice records (the main model and why)")
        topic = question_topic(question, vocab) if not workflow else None
        if topic:  # the orchestrator keeps that workflow's records (its choice is the one asked about)
            why += f", of the workflow {topic} (the question uses its name's own words)"
    elif results and (not category_cued or "model_selection_search" in category_cued):
        best = "model_selection_search"
        why = "the question asks how models did: model selection records, those stating figures first"
    elif scores[best] >= MIN_TEMPLATE_SIMILARITY:
        named = " and named in the question" if best in cued else ""
        why = f"closest template (similarity {similarity[best]:.2f}){named}"
        basis = "words" if best in cued else "similarity"
    else:
        best = "semantic_search"
        basis = "none"
        top = max(similarity.values())
        why = f"no template is close enough (best similarity {top:.2f}): free-text search"
    category = ROUTE_BY_INTENT[best].category
    seq_min, seq_max, seq_note = _range_from_question(question, vocab, category, workflow)
    has_seq = seq_min is not None or seq_max is not None
    named_kind = bool(category_cued or obs_type or everyday_category or results or chosen)
    if (has_seq or workflow) and not named_kind:
        # the range or workflow is the question's; the template only follows from it
        best, basis = "all_observations_search", "filters"
        why = "the question asks for a range of findings" if has_seq else "the question names a workflow"
        if has_seq:  # the range was read for the old template's category: read it again for all
            seq_min, seq_max, seq_note = _range_from_question(question, vocab, None, workflow)
    if best == "semantic_search" and workflow:
        best, basis = "all_observations_search", "filters"
    keyword = None
    if m := _QUOTED.search(question):
        keyword = (m.group(1) or m.group(2)).strip()
    for label, value in (("type", obs_type), ("workflow", workflow), ("", seq_note),
                         ("keyword", f'"{keyword}"' if keyword else None)):
        if value:
            notes.append(f"{label} {value}".strip())
    filters = SearchFilters(obs_type_filter=obs_type, finding_seq_min=seq_min, finding_seq_max=seq_max,
                            keyword=keyword, workflow=workflow)
    said = True if listing_said and best != "all_observations_search" else None
    # which model was chosen asks for the one chosen and the reasons, in a named workflow too
    listing = is_listing(question, None if chosen else filters, said)
    mode = "a listing: every match in workflow and sequence order" if listing \
        else "an open question: the relevant records"
    explanation = f"Offline router: {why}" + (f"; {'; '.join(notes)}" if notes else "") + f"; {mode}."
    route = OrchestratorRoute(intent_class=best, filters=filters, explanation=explanation,
                              listing=listing).as_offline_router_route()
    return OfflineDecision(route, scores, basis)




def category_named(question: str, intent_class: str, vocabulary: KBVocabulary | None = None) -> bool:
    """Whether ``question`` names ``intent_class``'s category outright ("model selection", "feature
    engineering", ...) or in everyday words ("problems in the data", "which model was best"),
    rather than a router guessing it from the question's meaning: only then is an open question's
    answer kept to that category."""
    lowered = question.lower()
    if any(cue in lowered for cue in _CATEGORY_CUES.get(intent_class, ())):
        return True
    vocab = vocabulary or KBVocabulary({}, [], [])
    category = everyday_type(question, vocab)[1]
    if category is not None:
        return f"{category}_search" == intent_class
    return intent_class == "model_selection_search" and asks_for_results(question, vocab)


def _num(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBER_WORDS[text.lower()]


def _category_of(obs_type: str, vocab: KBVocabulary) -> str:
    for category, types in vocab.types_by_category.items():
        if obs_type in types:
            return category
    return "all_observations"


def _type_from_question(question: str, vocab: KBVocabulary) -> str | None:
    """The KB's observation type the question names: its full name, or the words that set it apart
    ("data quality", "feature engineering"); a one-word stem ("relevance") only before
    "observation(s)"/"finding(s)". Types that merely restate their category are never a filter."""
    lowered = normalise_name(question)
    for name in sorted(vocab.obs_types, key=len, reverse=True):
        norm = normalise_name(name)
        if not norm or norm in GENERIC_TYPES:
            continue
        stem = type_stem(name)
        if norm in lowered:
            return name
        if not stem or stem in CATEGORY_TYPE_STEMS:
            continue
        if " " in stem:
            if re.search(rf"\b{re.escape(stem)}", lowered):
                return name
        elif re.search(rf"\b{re.escape(stem)}\s+(?:observations?|findings?)\b", lowered):
            return name
    return None


def _range_from_question(question: str, vocab: KBVocabulary, category: str | None,
                         workflow: str | None) -> tuple[int | None, int | None, str | None]:
    """``(seq_min, seq_max, note)`` from "findings 2 to 4", "findings from 3 to 5", "numbered 1 to 3",
    "first/last N", "finding 4", "findings from 3"; first/last N read against the numbers of
    ``category`` in ``workflow`` (the whole KB when None)."""
    if m := (_RANGE.search(question) or _NUMBERED.search(question) or _BETWEEN.search(question)):
        low, high = sorted((_num(m.group(1)), _num(m.group(2))))
        return low, high, f"findings {low} to {high}"
    ordered = vocab.seqs_in(category, workflow)
    if (m := _FIRST.search(question)) and _num(m.group(1)) > 0:  # "first 0 findings" names none
        n = _num(m.group(1))
        if ordered:
            return ordered[0], ordered[min(n, len(ordered)) - 1], f"first {n} findings"
        return 1, n, f"first {n} findings"
    if (m := _LAST.search(question)) and _num(m.group(1)) > 0:
        n = _num(m.group(1))
        if ordered:
            return ordered[-min(n, len(ordered))], ordered[-1], f"last {n} findings"
        return None, None, None
    if m := _AFTER.search(question):
        low = _num(m.group(1))
        return low, None, f"findings from {low}"
    if m := _SINGLE.search(question):
        value = _num(m.group(1) or m.group(2))
        return value, value, f"finding {value}"
    return None, None, None
