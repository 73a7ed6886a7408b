"""Impact tiers of the top-k index: a broad AND row's cost bounded by k, not by its matches.

Why: block-max WAND skips for an OR of terms, but an AND of broad terms (``cancer & therapy``, a
million matches at PubMed size) is an intersection the engine walks whole, and no *exact* top-k
algorithm can avoid that growth (``bench/conjunction_depth.py``: at least N^(1 - 1/m) postings for m
independent terms). So the index keeps, beside each document's body, the terms for which the
document is among that term's highest-impact postings: tier j holds a term where its BM25 term
weight (tf saturated by length, the part of the score a document owns) is in the term's top
:data:`FRACTIONS` ``[j]`` share. A broad AND row too large to walk within its budget
(:data:`ROW_BUDGET` postings) runs restricted to the documents where at least
one of its terms is in the least restrictive tier that fits the budget; the restriction scores
nothing, so every document returned is a true match with its exact BM25 score, and the ranking
differs from the exact one only by a document whose every term weighs less there than in the
tier's (``bench/literature_scale.py`` reports the overlap with the exact top 100). Such a row is
reported as ranked approximately.

The thresholds are per term (a term's impact distribution is its own), taken once from a sample of
the database when a build starts from nothing, and fixed for the index's life (its documents were
tiered by them): ``tiers.json`` beside the index. A term too rare in the sample to have thresholds
is never broad enough to need them (its whole posting list fits the budget).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kmds_desktop.word_rarity import idf

#: tantivy's BM25 parameters (the impact is the same saturation its score uses).
K1, B = 1.2, 0.75
#: The share of a term's postings each tier keeps, least restrictive first.
FRACTIONS = (1 / 4, 1 / 16, 1 / 64, 1 / 256)
#: A row's budget: the postings a broad AND may walk before it runs within a tier (about 2,000 per
#: result of a row of 100; a millisecond or two). Not per page: one row's pages share one ranking.
ROW_BUDGET = 200_000
#: How many walked postings one document of a tier's restriction costs: each is a seek into the
#: row's body and title lists, not the next posting in order (measured: 2-5 times a walked posting,
#: 26 ns against 55-139 ns on 2M synthetic documents). The tier of a row over the budget is the least
#: restrictive whose postings are within ``ROW_BUDGET / SEEK_COST``: the same time as a walk of the
#: budget, so a row costs no more once it is too broad to walk.
SEEK_COST = 4
#: Documents the thresholds are taken from, and the share of them a term must occur in to get any.
SAMPLE_DOCUMENTS = 50_000
MIN_SAMPLE_SHARE = 0.005
MIN_SAMPLE_DOCUMENTS = 20
GAP = "\x1f"


def impact(tf: int, length: int, average: float) -> float:
    """BM25's term weight without the idf: what a document's own text gives a term (0..1)."""
    return tf / (tf + K1 * (1 - B + B * length / average))


@dataclass
class Tiers:
    """Per-term thresholds of each tier (``thresholds[lexeme][j]``), each term's title weight (its
    title idf over its body idf times the index's title boost: a title match is most of a broad
    term's score, so it counts in the impact), and the average body and title lengths the impacts
    are computed with (the sample's: fixed, so a document's tiers never change)."""

    average_length: float = 200.0
    average_title: float = 10.0
    thresholds: dict[str, list[float]] = field(default_factory=dict)
    title_weights: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_sample(cls, documents: Iterable[tuple[str, str]], title_boost: float = 0.0) -> Tiers:
        """Thresholds from documents' ``(body, title)`` texts (body: one token per position,
        :data:`GAP` between; title: its lexemes, once each)."""
        per_term: dict[str, list[tuple[int, int, int]]] = {}
        in_titles: Counter[str] = Counter()
        lengths: list[int] = []
        titles: list[int] = []
        for body, title in documents:
            tokens = body.split(" ") if body else []
            heading = set(title.split()) if title else set()
            lengths.append(len(tokens))
            titles.append(len(heading))
            in_titles.update(heading)
            for lexeme, tf in Counter(tokens).items():
                if lexeme != GAP:
                    per_term.setdefault(lexeme, []).append((tf, len(tokens), len(heading) if lexeme in heading
                                                            else 0))
        if not lengths:
            return cls()
        tiers = cls(average_length=max(1.0, sum(lengths) / len(lengths)),
                    average_title=max(1.0, sum(titles) / len(titles)))
        total = len(lengths)
        least = max(MIN_SAMPLE_DOCUMENTS, int(MIN_SAMPLE_SHARE * total))
        for lexeme, postings in per_term.items():
            if len(postings) < least:
                continue
            if title_boost > 0 and in_titles[lexeme]:
                tiers.title_weights[lexeme] = (title_boost * idf(in_titles[lexeme], total)
                                               / idf(len(postings), total))
            impacts = sorted((tiers.impact(lexeme, tf, n, heading) for tf, n, heading in postings),
                             reverse=True)
            # the impact of the posting at the tier's share (ties at it are in the tier too)
            tiers.thresholds[lexeme] = [impacts[max(0, int(len(impacts) * f) - 1)] for f in FRACTIONS]
        return tiers

    def impact(self, lexeme: str, tf: int, length: int, title_length: int) -> float:
        """The term's score in a document over its body idf: the body's saturated tf, and the
        title's (``title_length`` 0: not in the title) times the term's title weight."""
        value = impact(tf, length, self.average_length)
        if title_length:
            value += self.title_weights.get(lexeme, 0.0) * impact(1, title_length, self.average_title)
        return value

    def fields(self, body: str, title: str = "") -> list[str]:
        """The text of each tier field for a document: its terms that reach the tier's threshold."""
        if not self.thresholds or not body:
            return [""] * len(FRACTIONS)
        tokens = body.split(" ")
        heading = set(title.split()) if title else ()
        # self.impact inlined (a build calls this for every document: 36 million at PubMed size)
        saturation = K1 * (1 - B + B * len(tokens) / self.average_length)
        title_part = impact(1, len(heading), self.average_title) if heading else 0.0
        weights = self.title_weights
        out: list[list[str]] = [[] for _ in FRACTIONS]
        get = self.thresholds.get
        for lexeme, tf in Counter(tokens).items():
            limits = get(lexeme)
            if limits is None:
                continue
            value = tf / (tf + saturation)
            if lexeme in heading:
                value += weights.get(lexeme, 0.0) * title_part
            if value < limits[0]:  # most postings: in no tier
                continue
            for j, limit in enumerate(limits):
                if value < limit:
                    break
                out[j].append(lexeme)
        return [" ".join(words) for words in out]

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"average_length": self.average_length,
                                   "average_title": self.average_title,
                                   "thresholds": self.thresholds,
                                   "title_weights": self.title_weights}), encoding="utf-8")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> Tiers | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(average_length=float(data["average_length"]),
                       average_title=float(data["average_title"]),
                       thresholds={str(k): [float(x) for x in v] for k, v in data["thresholds"].items()},
                       title_weights={str(k): float(v) for k, v in data["title_weights"].items()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None


def tier_sentence(rows: Sequence[int]) -> str:
    """What a reader must know of full-text rows (1-based) ranked within an impact tier ("" when none
    was): the order is not the one ranking every match would give. One wording for the window, the
    CLI and the search report."""
    if not rows:
        return ""
    one = len(rows) == 1
    names = ", ".join(f"#{n}" for n in rows)
    return (f"{'Row' if one else 'Rows'} {names} {'was' if one else 'were'} ranked within the fast index's "
            f"impact tier ({'a broad AND' if one else 'broad ANDs'} at this database's size): every document "
            "returned matches and keeps its exact BM25 score; the order is the best among the documents "
            "where one of the row's terms weighs most, not among every match")


def describe_tiers(state: object, tiers: Tiers | None) -> str:
    """``topk status``'s line on the tiers: how many terms have them and the row budget, or why a
    broad AND row of this index is always walked whole."""
    if getattr(state, "schema", 3) < 3:
        return "none (an index built before them: 'literature topk build --rebuild' adds them)"
    if tiers is None or not tiers.thresholds:
        return ("none (the database was too small when the index was built; "
                "'literature topk build --rebuild' adds them)")
    return (f"{len(tiers.thresholds):,} terms; a broad AND row walking more than {ROW_BUDGET:,} postings "
            "is ranked within one")


def tier_field(j: int) -> str:
    """The index field of tier ``j`` (0 = the least restrictive)."""
    return f"tier{j + 1}"
