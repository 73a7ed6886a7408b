"""The offline router as the model's floor: a model's route is kept only where the question supports it.

Measured with a 1.5B model, the LLM router filled finding ranges the question never asked for
("findings 1 to 6"), named workflows and types nobody said, and chose a worse template than the
offline router on some questions the offline router gets right. So both routers run, and:

- **every filter the model sets must be grounded** in the question's words or in the KB's own
  vocabulary, or it is dropped and a note says which and why: a finding range needs its numbers
  in the question (or the offline router's reading of "the first 3"); a workflow needs words of its
  name that set it apart from the KB's other workflows (loosely said is fine: "the retail
  customer one"), or its place ("workflow 2"); a type needs its own words ("data quality") or the
  everyday words the offline router reads as that type ("problems in the data"); a keyword must be
  in the question;
- **where the two routers choose different templates**, the offline router's choice stands unless
  the question's words name the model's template, the offline router found no close template (a
  free-text search), or it chose all observations only for a named range or workflow that the
  model's route keeps (:data:`OFFLINE_STANDS`; measured by ``bench/ask_guard.py`` on the dev and
  hard question sets); in the free-text case the orchestrator still runs the free-text search when
  the model's records prove far from the question, and shows its closest record first, beside the
  template's, when that is clearly closer (``SearchOrchestrator._weigh_free_text``);
- where the model's template runs, the filters the offline router read from the question's words
  fill those the model left out (the route reply is kept short: a model writes only the filters the
  question states, and may leave out some; :func:`fill_stated_filters`);
- the model's say on whether the answer lists every match stands, unless it may have rested on a dropped
  filter, or the question asks for one thing (what was chosen, how the models did) in no listing words: that
  question is answered as an open one (:func:`_open_when_one_thing_asked`; the model's dev answers citing an
  expected record 23 -> 25 of 30, the offline answers' 25). Reading it from the question's words instead, as
  the offline router does, agreed with the question sets more often (dev 1.000 against 0.750, hard 0.875
  against 0.708), but the model's answers then cited an expected record less often (dev 15 of 22 against 18;
  held-out 7 of 10 either way): a listing hands the model the template's 3 records closest to the question,
  where an open question's relevance cut may keep one ("were there missing values?" kept the two rows
  missing every measurement and cut the 11 penguins missing their sex, the record the set expects);
- the route that did not run is kept as ``alternative``, one click away in the window.

Plain Python: the orchestrator calls :func:`guard_route` after parsing the model's reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kmds_desktop.ask.catalog import ROUTE_BY_INTENT
from kmds_desktop.ask.kb_vocabulary import KBVocabulary, normalise_name, type_stem
from kmds_desktop.ask.models import OrchestratorRoute, describe_filters
from kmds_desktop.ask.offline_router import CATEGORY_TYPE_STEMS, OfflineDecision, category_named
from kmds_desktop.ask.question_words import asks_for_results, asks_what_was_chosen, everyday_type
from kmds_desktop.ask.relevance import is_listing
from kmds_desktop.kb import SearchFilters

_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5,
    "sixth": 6,
}
_NUMERAL = re.compile(r"\d+|\b(?:" + "|".join(_NUMBER_WORDS) + r")\b", re.I)
#: Words of workflow names that say nothing about which workflow is meant.
_GENERIC_NAME_WORDS = frozenset({"model", "models", "modelling", "modeling", "data", "workflow", "workflows",
                                 "analysis", "pipeline", "study", "the", "and", "of", "for", "with"})


#: The offline router's template stands against a model's that the question does not name when it
#: rests on these (``OfflineDecision.basis``): on ``tests/data/ask_questions_dev.jsonl`` its
#: templates are right on every basis (words 56, similarity 6, filters 9, none 11 questions), and a
#: model that overrules one resting on words, similarity or filters is wrong there whenever it
#: differs (letting it overrule "filters" too cost 14% of the templates). Where the offline router
#: found no close template ("none": a free-text search), the model's template runs; there the
#: offline router was wrong on every hard question (``bench/ask_guard.py``).
OFFLINE_STANDS = ("words", "similarity", "filters")


@dataclass
class GuardedRoute:
    """What :func:`guard_route` decided."""

    #: The route that runs: the model's with its grounded filters, or the offline router's.
    route: OrchestratorRoute
    #: "model" or "offline": whose template runs.
    chosen_by: str
    #: One sentence per filter dropped or template overruled, saying which and why.
    notes: list[str] = field(default_factory=list)
    #: The other router's route (None when both agree on template and filters).
    alternative: OrchestratorRoute | None = None
    #: Filters of the model's route dropped as not grounded in the question ("type", "workflow", ...).
    dropped: list[str] = field(default_factory=list)

    @property
    def offline_route_runs(self) -> bool:
        """Whether the route that runs is the offline router's own: kept over the model's, or the
        model's agreeing with it on template and filters. The orchestrator then runs it as it runs
        offline (a category guessed from the question's meaning is preferred, not a fence)."""
        return self.chosen_by == "offline" or self.alternative is None


def numbers_in(question: str) -> set[int]:
    """The numbers a question says, in digits or words ("3", "three", "third")."""
    out = set()
    for m in _NUMERAL.finditer(question):
        text = m.group(0).lower()
        out.add(int(text) if text.isdigit() else _NUMBER_WORDS[text])
    return out


def _same_word(word: str, other: str) -> bool:
    """The same word, or the same first six letters ("classifier" for "classification",
    "regressor" for "regression"; "class" is not "classification")."""
    return word == other or (len(word) >= 6 and len(other) >= 6 and word[:6] == other[:6])


def workflow_grounded(question: str, workflow: str, vocab: KBVocabulary) -> bool:
    """Whether the question refers to ``workflow``: by the offline router's reading (whole name,
    place, words before "workflow"/"work"/"project"), or loosely, by the words of its name that no
    other workflow's name has (four letters or more; "classifier" for "classification"): all of
    them, or two. One topic word alone ("the species", "body mass") names a subject, not a workflow:
    on the dev questions a model that filtered on it was wrong every time."""
    if vocab.workflow_in_question(question) == workflow:
        return True
    others = {p for name in vocab.workflows if name != workflow for p in normalise_name(name).split()}
    own = [p for p in normalise_name(workflow).split()
           if len(p) >= 4 and p not in _GENERIC_NAME_WORDS and not any(_same_word(p, o) for o in others)]
    words = normalise_name(question).split()
    said = [p for p in own if any(_same_word(w, p) for w in words)]
    return bool(own) and (len(said) == len(own) or len(said) >= 2)


def type_grounded(question: str, obs_type: str, vocab: KBVocabulary, offline_type: str | None) -> bool:
    """Whether the question names ``obs_type``: the offline router read it, the everyday words
    name it ("problems in the data"), or every word of its stem (loosely) is in the question."""
    if obs_type == offline_type or everyday_type(question, vocab)[0] == obs_type:
        return True
    if type_stem(obs_type) in CATEGORY_TYPE_STEMS:  # the type narrows the template: named whole
        # "Model Selection Statement" restates its template: only its whole name says it is meant,
        # and only where the template holds other types too (else it narrows nothing)
        name = normalise_name(obs_type)
        siblings = [t for types in vocab.types_by_category.values() if obs_type in types for t in types]
        said = re.search(rf"\b{re.escape(name)}s?\b", normalise_name(question))
        return len(siblings) > 1 and said is not None
    stem = [w for w in type_stem(obs_type).split() if len(w) >= 3]
    words = normalise_name(question).split()
    return bool(stem) and all(any(_same_word(w, s) or w.startswith(s) for w in words) for s in stem)


def ground_filters(question: str, route: OrchestratorRoute, offline: OrchestratorRoute,
                   vocab: KBVocabulary) -> tuple[OrchestratorRoute, list[str], list[str]]:
    """``route`` with each filter the question does not support dropped; the notes and the names
    of the filters dropped. A range the question does state, read differently by the offline
    router, is replaced by the offline router's reading."""
    f, o = route.filters, offline.filters
    changes: dict[str, object] = {}
    notes: list[str] = []
    dropped: list[str] = []
    if f.finding_seq_min is not None or f.finding_seq_max is not None:
        said = numbers_in(question)
        bounds = {b for b in (f.finding_seq_min, f.finding_seq_max) if b is not None}
        same_as_offline = (f.finding_seq_min, f.finding_seq_max) == (o.finding_seq_min, o.finding_seq_max)
        if not same_as_offline and not (said and bounds <= said):
            low = "…" if f.finding_seq_min is None else f.finding_seq_min
            high = "…" if f.finding_seq_max is None else f.finding_seq_max
            changes.update(finding_seq_min=o.finding_seq_min, finding_seq_max=o.finding_seq_max)
            dropped.append("findings")
            why = ("the question states no numbers" if not said
                   else f"the question's numbers are {', '.join(str(n) for n in sorted(said))}")
            own_range = describe_filters(SearchFilters(finding_seq_min=o.finding_seq_min,
                                                       finding_seq_max=o.finding_seq_max))
            instead = f"; the question's own range ({own_range}) is used" if own_range else ""
            notes.append(f"Dropped the model's filter findings {low} to {high}: {why}{instead}.")
    if f.workflow and not workflow_grounded(question, f.workflow, vocab):
        changes["workflow"] = o.workflow
        dropped.append("workflow")
        notes.append(f"Dropped the model's filter workflow {f.workflow!r}: the question does not name that "
                     "workflow.")
    if f.obs_type_filter and not type_grounded(question, f.obs_type_filter, vocab, o.obs_type_filter):
        changes["obs_type_filter"] = o.obs_type_filter if o.obs_type_filter and \
            offline.intent_class == route.intent_class else None
        dropped.append("type")
        notes.append(f"Dropped the model's filter type {f.obs_type_filter!r}: the question does not name "
                     "that type.")
    if f.keyword and normalise_name(f.keyword) not in normalise_name(question):
        changes["keyword"] = None
        dropped.append("keyword")
        notes.append(f"Dropped the model's filter keyword {f.keyword!r}: the question does not contain it.")
    if not changes:
        return route, notes, dropped
    return route.with_filters(**changes), notes, dropped


def guard_route(question: str, model_route: OrchestratorRoute, offline: OfflineDecision,
                vocab: KBVocabulary) -> GuardedRoute:
    """The route to run for ``question``, given the model's route and the offline router's decision
    (see the module docstring for the rules)."""
    off = offline.route
    grounded, notes, dropped = ground_filters(question, model_route, off, vocab)
    label = _intent_words
    if grounded.intent_class != off.intent_class:
        model_named = template_named(question, grounded.intent_class, vocab)
        # all observations only because a range or workflow was named: a model that keeps them
        # may say which kind of record the question is about
        keeps_named = offline.basis == "filters" and all(
            getattr(grounded.filters, k) == getattr(off.filters, k)
            for k in ("workflow", "finding_seq_min", "finding_seq_max"))
        if offline.basis in OFFLINE_STANDS and not model_named and not keeps_named:
            notes.append(f"Kept the offline router's template {label(off.intent_class)} over the model's "
                         f"{label(grounded.intent_class)}: the question's words name it, not the model's.")
            return GuardedRoute(off, "offline", notes, grounded, dropped)
        if dropped and grounded.listing:  # the listing may have rested on a dropped filter
            grounded = grounded.model_copy(update={"listing": None})
        grounded = _open_when_one_thing_asked(question, grounded, off, vocab, notes)
        return GuardedRoute(fill_stated_filters(question, grounded, off, vocab), "model", notes, off, dropped)
    # same template: the offline router's filters fill what the model left out (they are grounded
    # by construction); the model's listing stands unless it may have rested on a dropped filter
    f, o = grounded.filters, off.filters
    fill = {k: getattr(o, k) for k in ("obs_type_filter", "workflow", "keyword")
            if getattr(f, k) is None and getattr(o, k) is not None}
    if f.finding_seq_min is None and f.finding_seq_max is None and (
            o.finding_seq_min is not None or o.finding_seq_max is not None):
        fill.update(finding_seq_min=o.finding_seq_min, finding_seq_max=o.finding_seq_max)
    route = grounded.with_filters(**fill) if fill else grounded
    if dropped and route.listing != off.listing:
        route = route.model_copy(update={"listing": off.listing})
    route = _open_when_one_thing_asked(question, route, off, vocab, notes)
    same = route.filters.model_dump() == off.filters.model_dump()
    return GuardedRoute(route, "model", notes, None if same else off, dropped)


def _open_when_one_thing_asked(question: str, route: OrchestratorRoute, offline: OrchestratorRoute,
                               vocab: KBVocabulary, notes: list[str]) -> OrchestratorRoute:
    """``route`` as an open question where the model called for a listing of every record but the
    question asks what was chosen or how the models did, in no listing words: such a question has
    one answer, which the open question's ranking puts first (the statement of the selection, the
    findings that state figures), where a listing handed the model the 3 records of the whole
    template closest to the question ("which regression model was picked in the end?" listed all 11
    model selection records, and the model read and named the classifier of the other workflow).
    A note says so. Other listings stand (see the module docstring)."""
    if not route.listing or offline.listing or is_listing(question, None):
        return route
    if not (asks_what_was_chosen(question, vocab) or asks_for_results(question, vocab)):
        return route
    notes.append("Answered as an open question, not as the model's listing of every record: it asks for one "
                 "thing (what was chosen, how the models did), so the most relevant records come first.")
    return route.model_copy(update={"listing": False})


def fill_stated_filters(question: str, route: OrchestratorRoute, offline: OrchestratorRoute,
                        vocab: KBVocabulary) -> OrchestratorRoute:
    """``route`` (the model's template, another than the offline router's) with the filters the offline
    router read from the question's own words where the model left them out: the workflow, a range
    whose numbers the question says ("findings 2 to 4"; "the last 2" was counted in the offline
    router's template, so it is not carried over), and the type when it is one of the model's
    template's types. Why: a model asked for a short route leaves out filters (each costs tokens
    and seconds to write), and these are grounded by construction."""
    f, o = route.filters, offline.filters
    fill: dict[str, object] = {}
    if f.workflow is None and o.workflow is not None:
        fill["workflow"] = o.workflow
    said = numbers_in(question)
    bounds = {b for b in (o.finding_seq_min, o.finding_seq_max) if b is not None}
    if f.finding_seq_min is None and f.finding_seq_max is None and bounds and bounds <= said:
        fill.update(finding_seq_min=o.finding_seq_min, finding_seq_max=o.finding_seq_max)
    spec = ROUTE_BY_INTENT.get(route.intent_class)
    category = spec.category if spec is not None else None
    if f.obs_type_filter is None and o.obs_type_filter is not None and (
            category is None or o.obs_type_filter in vocab.types_by_category.get(category, [])):
        fill["obs_type_filter"] = o.obs_type_filter
    return route.with_filters(**fill) if fill else route


def template_named(question: str, intent_class: str, vocab: KBVocabulary) -> bool:
    """Whether the question's words name ``intent_class``'s records: the category outright or in
    everyday words, a question about results or about what was chosen and why (model selection).
    A two-part question can name two templates."""
    if category_named(question, intent_class, vocab):
        return True
    if intent_class == "model_selection_search" and asks_for_results(question, vocab):
        return True
    # (a question about what was chosen and why is answered from both templates whichever runs)
    return intent_class == "model_selection_search" and asks_what_was_chosen(question, vocab) \
        and not question.lower().lstrip().startswith("why")


def _intent_words(intent_class: str) -> str:
    return intent_class.replace("_search", "").replace("_", " ")
