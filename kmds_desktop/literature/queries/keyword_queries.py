"""The built-in query generator ``builtin:keywords``: tsqueries from a question's content words, no LLM.

Why it exists: the whole literature flow (generate, review, run, merge, fetch) must work on a machine
without Ollama, and it gives every LLM a fixed, explainable baseline to be compared with. It can be
listed in ``query_generation.models`` beside real models.

What it does: it keeps the content terms of the question (stop words and words that only carry a
claim's polarity such as "increases" or "worsen" are dropped), lets PostgreSQL stem each with the
same ``english`` configuration as the search vectors, and writes a building-block strategy of three
queries, precise, medium and broad, from the question's concepts and their variants in the corpus
(:mod:`.concept_blocks`). Without a database, or with an empty one (every count is 0), the precise
query joins the longest terms with ``&`` and ``to_tsquery`` stems at run time.

Short terms that carry meaning are kept: a single capital letter or a short number right after a word
joins it as a phrase (``vitamin D`` -> ``vitamin <-> d``, ``hepatitis B``, ``type 2``), so "vitamin D"
does not find vitamin C, E or K papers; gene symbols and codes (``CD4``, ``p53``, ``BRCA1``) and
hyphenated terms (``IL-6``, ``non-small-cell``) stay whole.

The broad query is checked against its match count: while it would match more than
:data:`FLOOD_SHARE` of the database (at least :data:`FLOOD_MIN` documents), its most common term is
left out. Ranked by term rarity (``retrieval.fulltext_ranking = idf``, see
:mod:`kmds_desktop.literature.store.term_weights`), a broad query does not flood the top of its row
with documents that share one common word. Words are
not made prefixes (``word:*``): the search vector already stems them, and a prefix mostly adds
unrelated words that share the first letters.

The stop-word list and the thresholds were chosen on the SciFact *train* claims and ``pubmed_sample``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kmds_desktop.literature.queries.concept_blocks import (
    EXACT_COUNTS_UP_TO,
    Concept,
    ConceptFinder,
    CorpusLookups,
    Strategy,
    write_strategy,
)
from kmds_desktop.literature.store.collection_size import collection_size

BUILTIN_KEYWORDS = "builtin:keywords"
BUILTIN_PREFIX = "builtin:"

STRICT_TERMS = 3
BROAD_TERMS = 40
#: A broad query may match at most this share of the database (and always FLOOD_MIN documents).
#: 0.8, not 0.5: with the building-block strategy the merged full-text rows on all 809 SciFact *train*
#: claims reach recall@100 0.9065 with 0.8 (0.905 with 0.5; the same with 1.0), nDCG@10 0.562 either way.
FLOOD_SHARE = 0.8
FLOOD_MIN = 200

# English function words (PostgreSQL drops most of these itself; we drop them early so that the
# "key term" choice is not wasted on them) plus words that state a claim's direction or hedge it
# rather than its subject.
_STOP_WORDS = frozenset(
    """
    a about above after again against all also although am among an and any are as at be because been
    before being below between both but by can could did do does doing down during each either few for
    from further had has have having he her here hers him his how however i if in into is it its itself
    just least less like made make makes many may might more most much must my no nor not of off on once
    one only or other our out over own per rather same several she should since so some such than that
    the their them then there these they this those through thus to too two under until up upon very via
    was we were what when where whether which while who whom whose why will with within without would yet
    you your three four five six
    increase increases increased increasing decrease decreases decreased decreasing reduce reduces
    reduced reducing reduction improve improves improved promote promotes promoted inhibit inhibits
    inhibited enhance enhances enhanced lead leads led result results resulted cause causes caused
    associated association correlated correlates correlation linked related relationship effect effects
    affect affects affected impact role important importance significant significantly higher lower high
    low greater lack lacks lacking show shows shown showed occur occurs occurred involved involve involves
    required requires require necessary essential sufficient able ability likely unlikely use used uses
    using common commonly rate rates level levels risk risks factor factors cells cell patients people
    individuals human humans new different similar due compared found observed known
    worsen worsens worsened worsening prevent prevents prevented preventing contribute contributes
    influence influences influenced predict predicts predicted distinguish distinguishing differ differs
    effective effectiveness efficacy difference differences know whats good best better worse worst bad
    way ways often really actually exactly anything something
    """.split()
)
_WORD = re.compile(r"[A-Za-z0-9α-ωΑ-Ω][\w\-α-ωΑ-Ω]*")
#: A short token that qualifies the word before it: one capital letter (vitamin D, hepatitis B) or a
#: number of up to three digits (type 2, phase 3).
_QUALIFIER = re.compile(r"[A-Z]|\d{1,3}")


class TermStatistics(Protocol):
    """What the generator may ask of the literature database (all optional)."""

    def validate_tsquery(self, text: str) -> tuple[bool, str]: ...

    def count_matches(self, ts_query_str: str, *args: object, **kwargs: object) -> int: ...


def content_words(question: str) -> list[str]:
    """Terms of ``question`` that can carry its subject, in order, case-insensitively unique.

    A qualifier (see :data:`_QUALIFIER`) right after a kept word is joined to it with a space
    ("vitamin D", "type 2"): :func:`_safe_term` makes that a phrase.
    """
    words: list[str] = []
    seen: set[str] = set()
    previous_kept = False
    text = question or ""
    for match in _WORD.finditer(text):
        word = match.group().strip("-_")
        lower = word.lower()
        adjacent = previous_kept and text[match.start() - 1: match.start()] == " "
        if word and adjacent and _QUALIFIER.fullmatch(word) and words:
            joined = f"{words[-1]} {word}"
            seen.add(joined.lower())
            words[-1] = joined
            previous_kept = False
            continue
        previous_kept = False
        if not word or lower in _STOP_WORDS or lower in seen:
            continue
        if lower.isdigit() and len(lower) < 4:
            continue  # "5 million", "2 weeks": numbers alone rarely identify a topic
        if len(lower) < 2:
            continue
        seen.add(lower)
        words.append(word)
        previous_kept = True
    return words


#: How far after the last content word :func:`content_runs` looks for the next (characters).
_RUN_WINDOW_CHARS = 400


def content_runs(question: str) -> list[list[str]]:
    """The words of :func:`content_words`, grouped into runs of words that stand next to each other
    in the question (a stop word or punctuation ends a run): only words of one run can form a phrase."""
    kept = content_words(question)
    runs: list[list[str]] = []
    position = 0
    text = question or ""
    previous_end = -1
    for word in kept:
        first = word.split()[0]
        # the next content word stands within a few words of the last one: the search looks that far, so
        # a word the question writes otherwise ("-w1" kept as "w1") costs a window, not the rest of the
        # text (a 40,000-character question took 2.7 s)
        window = text[position:position + _RUN_WINDOW_CHARS]
        found = re.search(r"(?<![\w\-])" + re.escape(first) + r"(?![\w\-])", window)
        if found is None:
            runs.append([word])
            continue
        start = position + found.start()
        gap = text[previous_end:start] if previous_end >= 0 else None
        if runs and gap is not None and re.fullmatch(r"\s+", gap or ""):
            runs[-1].append(word)
        else:
            runs.append([word])
        end = start + len(first)
        for extra in word.split()[1:]:  # a qualifier joined to it ("vitamin D")
            more = re.search(re.escape(extra), text[end:end + _RUN_WINDOW_CHARS])
            end = end + more.end() if more else end
        position = previous_end = end
    return runs


def _safe_term(word: str) -> str:
    """A term as a tsquery operand: only characters ``to_tsquery`` accepts inside a term; a term of
    several words ("vitamin D") becomes a phrase (``vitamin <-> D``)."""
    parts = [re.sub(r"[^\w\-]", "", p).strip("-_") for p in word.split()]
    return " <-> ".join(p for p in parts if p)


#: On a collection above ``EXACT_COUNTS_UP_TO`` documents (where counts are already bounded in time),
#: the embedding neighbours are looked for only when the strategy took less than this so far: they
#: cost an embedding call and a second writing of the queries, and generation stays within 1 s.
NEIGHBOUR_BUDGET_S = 0.35


@dataclass
class KeywordQueryBuilder:
    """Build the attempt-``n`` query for a question; see the module docstring for the strategies."""

    database: TermStatistics | None = None
    #: ``encoder(texts) -> unit-length rows`` of the embedding model: concepts get their neighbours in
    #: its space as variants (None: no neighbours; see ``ConceptFinder.add_neighbours``).
    encoder: Callable[[list[str]], Any] | None = None
    _stems: dict[str, str | None] = field(default_factory=dict, repr=False)
    _plans: dict[str, Strategy] = field(default_factory=dict, repr=False)

    def _stem(self, word: str) -> str | None:
        """The database's lexeme for ``word`` (None for a stop word); the word itself without a database."""
        if self.database is None:
            return word.lower()
        if word not in self._stems:
            ok, normalized = self._call_validate(_safe_term(word))
            if not ok:
                self._stems[word] = None
            else:
                lexemes = re.findall(r"'((?:[^']|'')*)'", normalized)
                self._stems[word] = " ".join(lexemes) if lexemes else None
        return self._stems[word]

    def _call_validate(self, text: str) -> tuple[bool, str]:
        if not text:
            return False, ""
        try:
            return self.database.validate_tsquery(text)  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - a failing look-up only costs the stemming of this word
            return True, f"'{text.lower()}'"

    def _total(self) -> int | None:
        """Documents in the database (None: unknown or no database)."""
        return collection_size(self.database)

    def _counts_usable(self) -> bool:
        """Counts rank terms only when the database has documents (an empty one counts 0 for all)."""
        return self.database is not None and self._total() != 0

    def terms(self, question: str) -> list[str]:
        """Content words as tsquery operands, unique by stem, in question order."""
        out: list[str] = []
        seen: set[str] = set()
        for word in content_words(question):
            term = _safe_term(word)
            if not term:
                continue
            stem = self._stem(word)
            if stem is None or stem in seen:
                continue
            seen.add(stem)
            out.append(term)
        return out

    def plan(self, question: str) -> Strategy:
        """The question's concepts and its three queries (computed once per question)."""
        key = " ".join((question or "").split())
        if key not in self._plans:
            started = time.perf_counter()
            lookups = CorpusLookups(self.database if self._counts_usable() else None)
            finder = ConceptFinder(lookups, self.encoder if self._counts_usable() else None)
            runs = [[w for w in run if self._stem(w) is not None] for run in content_runs(question)]
            concepts = self._unique_concepts(finder.concepts([r for r in runs if r]))
            feedback_for = None
            if self._counts_usable():
                finder.add_variants(concepts)
                exclude = {self._stem(w) or "" for w in content_words(question)}

                def feedback_for(first_pass: str) -> list[str]:
                    return finder.feedback_terms(first_pass, exclude)
            elif len(concepts) > STRICT_TERMS:  # no counts: the longest words stand for the rarest
                longest = sorted(range(len(concepts)), key=lambda i: (-len(concepts[i].label), i))
                concepts = [concepts[i] for i in sorted(longest[:STRICT_TERMS])] + [
                    concepts[i] for i in sorted(longest[STRICT_TERMS:])]
            broad_words = self.terms(question)[:BROAD_TERMS]
            strategy = write_strategy(concepts, lookups, feedback_for, broad_words, self._flood_limit())
            within_budget = (time.perf_counter() - started <= NEIGHBOUR_BUDGET_S
                             or (self._total() or 0) <= EXACT_COUNTS_UP_TO)
            if feedback_for is not None and within_budget and finder.add_neighbours(concepts, exclude):
                # The blocks grew: the queries are written again from the same feedback (its ranked
                # pass is not repeated; every other count is cached).
                first = strategy.feedback
                strategy = write_strategy(concepts, lookups, lambda _query: list(first), broad_words,
                                          self._flood_limit())
            if not self._counts_usable() and len(concepts) > STRICT_TERMS:
                strategy.queries[0] = " & ".join(c.block for c in concepts[:STRICT_TERMS])
            if finder.neighbour_note:  # the embedding model failed: each query's note says so
                strategy.notes = [f"{note} · {finder.neighbour_note}" for note in strategy.notes]
            self._plans[key] = strategy
        return self._plans[key]

    def _unique_concepts(self, concepts: list[Concept]) -> list[Concept]:
        """Concepts unique by their stems ("fracture" and "fractures" are one)."""
        out: list[Concept] = []
        seen: set[str] = set()
        for concept in concepts:
            stems = " ".join(self._stem(w) or w.lower() for w in concept.label.split())
            if stems in seen:
                continue
            seen.add(stems)
            out.append(concept)
        return out

    def concepts(self, question: str) -> list[Concept]:
        """The concepts the strategy for ``question`` is built from."""
        return self.plan(question).concepts

    def explain(self, question: str, attempt: int = 1) -> str:
        """Why attempt ``attempt``'s query looks as it does: its concepts, variants and their reasons."""
        notes = self.plan(question).notes
        return notes[(max(attempt, 1) - 1) % len(notes)] if notes else ""

    def __call__(self, question: str, attempt: int = 1) -> str:
        """The builder is the ``(question, attempt) -> query`` function of its model name."""
        return self.query(question, attempt)

    def query(self, question: str, attempt: int = 1) -> str:
        """The query for attempt ``attempt`` (1-based; attempts above 3 cycle through the strategies):
        precise, medium, broad."""
        queries = self.plan(question).queries
        if not queries:
            return ""
        return queries[(max(attempt, 1) - 1) % len(queries)]

    def _flood_limit(self) -> int | None:
        """How many matches make a query flood the results (None: unknown, no database)."""
        total = self._total() if self._counts_usable() else None
        return None if total is None else max(FLOOD_MIN, int(total * FLOOD_SHARE))


def is_builtin(model: str) -> bool:
    """True for model names the app answers itself (``builtin:...``)."""
    return model.strip().lower().startswith(BUILTIN_PREFIX)


def builtin_generator(model: str, database: TermStatistics | None,
                      encoder: Callable[[list[str]], Any] | None = None) -> Callable[[str, int], str]:
    """The function ``(question, attempt) -> query`` behind a ``builtin:`` model name; ``encoder``
    (the embedding model) lets it add each concept's neighbours in the model's space as variants."""
    if model.strip().lower() != BUILTIN_KEYWORDS:
        raise ValueError(f"unknown built-in generator '{model}': the only one is '{BUILTIN_KEYWORDS}'")
    return KeywordQueryBuilder(database, encoder)
