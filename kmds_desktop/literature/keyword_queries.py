"""The built-in query generator ``builtin:keywords``: tsqueries from a question's content words, no LLM.

Why it exists: the whole literature flow (generate, review, run, merge, fetch) must work on a machine
without Ollama, and it gives every LLM a fixed, explainable baseline to be compared with. It can be
listed in ``query_generation.models`` beside real models.

What it does: it keeps the content words of the question (stop words and words that only carry a
claim's polarity such as "increases" or "associated" are dropped), and when a database is at hand it
lets PostgreSQL stem each word with the same ``english`` configuration as the search vectors and asks
how many documents contain it, so the rarest (most specific) words count as key terms. Without a
database the longest words stand in for the most specific ones, and ``to_tsquery`` stems at run time.

Each attempt is a different strategy, so that several attempts widen the net instead of repeating:

1. strict: the key terms joined with ``&`` (precise, may find nothing for a long question);
2. broad: every content word as a prefix ``word:*`` joined with ``|`` (ranked, it behaves like a
   bag-of-words search and finds something for almost any question);
3. pairs: any two of the key terms, ``(a & b) | (a & c) | ...`` (between the two).

The stop-word list was chosen on the SciFact *train* claims only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations
from typing import Protocol

BUILTIN_KEYWORDS = "builtin:keywords"
BUILTIN_PREFIX = "builtin:"

STRICT_TERMS = 3
PAIR_TERMS = 5
BROAD_TERMS = 12

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
    """.split()
)
_WORD = re.compile(r"[A-Za-z0-9α-ωΑ-Ω][\w\-α-ωΑ-Ω]*")


class TermStatistics(Protocol):
    """What the generator may ask of the literature database (all optional)."""

    def validate_tsquery(self, text: str) -> tuple[bool, str]: ...

    def count_matches(self, ts_query_str: str, *args: object, **kwargs: object) -> int: ...


def content_words(question: str) -> list[str]:
    """Words of ``question`` that can carry its subject, in order, case-insensitively unique."""
    words: list[str] = []
    seen: set[str] = set()
    for match in _WORD.finditer(question or ""):
        word = match.group().strip("-_")
        lower = word.lower()
        if not word or lower in _STOP_WORDS or lower in seen:
            continue
        if lower.isdigit() and len(lower) < 4:
            continue  # "5 million", "2 weeks": numbers alone rarely identify a topic
        if len(lower) < 2:
            continue
        seen.add(lower)
        words.append(word)
    return words


def _safe_term(word: str) -> str:
    """A word as a tsquery operand: only characters ``to_tsquery`` accepts inside a term."""
    return re.sub(r"[^\w\-]", "", word).strip("-_")


@dataclass
class KeywordQueryBuilder:
    """Build the attempt-``n`` query for a question; see the module docstring for the strategies."""

    database: TermStatistics | None = None
    _stems: dict[str, str | None] = field(default_factory=dict, repr=False)
    _counts: dict[str, int] = field(default_factory=dict, repr=False)

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

    def _frequency(self, term: str) -> int | None:
        if self.database is None:
            return None
        if term not in self._counts:
            try:
                self._counts[term] = int(self.database.count_matches(term))
            except Exception:  # noqa: BLE001 - without a count the word keeps its length-based rank
                return None
        return self._counts[term]

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

    def key_terms(self, question: str, limit: int) -> list[str]:
        """The ``limit`` most specific terms (rarest in the database, else longest), in question order."""
        terms = self.terms(question)
        if len(terms) <= limit:
            return terms

        def specificity(item: tuple[int, str]) -> tuple[float, int]:
            index, term = item
            freq = self._frequency(term)
            if freq is None:
                return (-len(term), index)
            # A word found nowhere is probably a typo or a spelling the corpus does not use: last.
            return (float("inf") if freq == 0 else freq, index)

        chosen = sorted(enumerate(terms), key=specificity)[:limit]
        return [term for _, term in sorted(chosen)]

    def _strict(self, question: str) -> str:
        """The rarest key terms joined with ``&``; with a database, only as many as still match something.

        Adding terms rarest first and stopping before the conjunction matches nothing keeps the query
        precise without making it empty for a long question.
        """
        keys = self.key_terms(question, STRICT_TERMS)
        if self.database is None or len(keys) < 2:
            return " & ".join(keys)
        by_rarity = sorted(keys, key=lambda t: (self._frequency(t) or float("inf"), keys.index(t)))
        chosen = [by_rarity[0]]
        for term in by_rarity[1:]:
            trial = [t for t in keys if t in (*chosen, term)]
            if self._conjunction_count(trial) == 0:
                continue
            chosen.append(term)
        return " & ".join(t for t in keys if t in chosen)

    def _conjunction_count(self, terms: list[str]) -> int:
        query = " & ".join(terms)
        if query not in self._counts:
            try:
                self._counts[query] = int(self.database.count_matches(query))  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001 - unknown counts keep the term
                return 1
        return self._counts[query]

    def query(self, question: str, attempt: int = 1) -> str:
        """The query for attempt ``attempt`` (1-based; attempts above 3 cycle through the strategies)."""
        strategy = (max(attempt, 1) - 1) % 3
        if strategy == 0:
            return self._strict(question)
        if strategy == 1:
            return " | ".join(f"{t}:*" for t in self.terms(question)[:BROAD_TERMS])
        keys = self.key_terms(question, PAIR_TERMS)
        if len(keys) < 3:
            return " & ".join(keys) if len(keys) == 2 else " | ".join(keys)
        return " | ".join(f"({a} & {b})" for a, b in combinations(keys, 2))


def is_builtin(model: str) -> bool:
    """True for model names the app answers itself (``builtin:...``)."""
    return model.strip().lower().startswith(BUILTIN_PREFIX)


def builtin_generator(model: str, database: TermStatistics | None) -> Callable[[str, int], str]:
    """The function ``(question, attempt) -> query`` behind a ``builtin:`` model name."""
    if model.strip().lower() != BUILTIN_KEYWORDS:
        raise ValueError(f"unknown built-in generator '{model}': the only one is '{BUILTIN_KEYWORDS}'")
    return KeywordQueryBuilder(database).query
