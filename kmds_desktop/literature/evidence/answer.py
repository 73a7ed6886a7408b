"""Answers offline: the best sentences of the best passages, each cited ``[n]`` with its paper and
page, each quote checked on its page, and "These sources do not answer it." when the evidence is weak.

Why extractive: with no model, the honest answer is what the papers say, in their words. The
sentences are chosen by meaning (cosine to the question with the shipped model) with a nudge for the
question's own rare words, at most :data:`PER_PASSAGE` from one passage so one paragraph does not
fill the answer. Every quote goes through :func:`~kmds_desktop.literature.evidence.quotes.locate_quote`
(the one verifier); one that is not on its page is dropped and the drop is counted in the notes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kmds_desktop.literature.evidence.quotes import locate_quote
from kmds_desktop.literature.evidence.search import EvidenceHit

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from kmds_desktop.literature.fulltext.store import FulltextStore

NO_ANSWER = "These sources do not answer it."
#: Below this cosine between the question and its best passage, the papers are not about it.
#: Measured by ``bench/evidence.py`` over the 40 LitQA papers: the dev questions' best passages score
#: 0.46-0.76, off-topic questions' 0.14-0.32; the threshold sits midway between the two.
MIN_SIMILARITY = 0.40
#: Passages the answer reads, sentences it quotes, sentences from any one passage.
PASSAGES = 5
SENTENCES = 3
PER_PASSAGE = 2
_SENTENCE = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9])")

EmbedFn = Callable[[Sequence[str]], "np.ndarray"]


@dataclass(frozen=True)
class Source:
    """A cited paper and page(s): ``[n]`` in the answer."""

    number: int
    label: str
    doi: str | None
    file: str
    title: str | None
    pages: tuple[int, ...]

    @property
    def page_text(self) -> str:
        return f"p. {self.pages[0]}" if len(self.pages) == 1 else f"pp. {self.pages[0]}-{self.pages[-1]}"


@dataclass(frozen=True)
class Quote:
    text: str
    source: int  # the Source's number


@dataclass
class Answer:
    question: str
    answered: bool
    quotes: list[Quote] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    passages: list[EvidenceHit] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The answer as prose: each quoted sentence followed by its citation mark."""
        if not self.answered:
            return NO_ANSWER
        return " ".join(f"\u201c{q.text}\u201d [{q.source}]" for q in self.quotes)

    def as_dict(self) -> dict[str, object]:
        return {
            "question": self.question,
            "answered": self.answered,
            "answer": self.text,
            "quotes": [{"text": q.text, "source": q.source} for q in self.quotes],
            "sources": [
                {"n": s.number, "doi": s.doi, "file": s.file, "title": s.title, "pages": list(s.pages)}
                for s in self.sources
            ],
            "notes": self.notes,
        }

    def markdown(self) -> str:
        """The answer for a report: the question, the answer with ``[n]`` marks, each quote as a block
        quote with its source, the sources with DOI links and pages, and the notes."""
        lines = [f"## {self.question}", "", self.text if self.answered else f"*{NO_ANSWER}*", ""]
        if self.quotes:
            lines.append("### Quotes")
            lines.append("")
            by_number = {s.number: s for s in self.sources}
            for quote in self.quotes:
                source = by_number[quote.source]
                lines.append(f"> {quote.text}")
                lines.append(">")
                lines.append(f"> \u2014 [{source.number}] {source.label}, {source.page_text}")
                lines.append("")
        if self.sources:
            lines.append("### Sources")
            lines.append("")
            for s in self.sources:
                link = f"[{s.doi}](https://doi.org/{s.doi})" if s.doi else f"`{s.file}`"
                title = f"{s.title}. " if s.title else ""
                lines.append(f"{s.number}. {title}{link}, {s.page_text}")
            lines.append("")
        if self.notes:
            lines.append("### Notes")
            lines.append("")
            lines.extend(f"- {note}" for note in self.notes)
            lines.append("")
        return "\n".join(lines)


#: A full stop after these is an abbreviation's, not a sentence's end ("(Fig. 3a)", "Smith et al. 2020").
_ABBREVIATION = re.compile(r"(?i)(\bfigs?|\bet al|\be\.g|\bi\.e|\bvs|\brefs?|\beqs?|\bapprox|\bno|\bca|\bcf|"
                           r"\bsuppl?|\bext|\bresp|\bdr|\bst|\bsp|\bspp)\.$")


def _sentences(text: str) -> list[str]:
    """The sentences of a passage worth quoting (five words or more), abbreviations kept inside."""
    merged: list[str] = []
    for piece in _SENTENCE.split(text):
        piece = piece.strip()
        if merged and _ABBREVIATION.search(merged[-1]):
            merged[-1] = f"{merged[-1]} {piece}"
        elif piece:
            merged.append(piece)
    return [s for s in merged if len(s.split()) >= 5]


def _rare_words(question: str) -> set[str]:
    return {w for w in re.findall(r"\w+", question.lower()) if len(w) > 3}


def default_embed(texts: Sequence[str]) -> np.ndarray:
    from kmds_desktop.index.embeddings import encode  # torch loads on first use, not at start-up

    return encode(list(texts))


def extractive_answer(
    store: FulltextStore,
    question: str,
    hits: Sequence[EvidenceHit],
    *,
    embed: EmbedFn = default_embed,
    min_similarity: float = MIN_SIMILARITY,
) -> Answer:
    """The offline answer to ``question`` from its ranked ``hits`` (see the module's notes)."""
    import numpy as np  # on first use: the CLI's --help and the app's start stay fast

    hits = list(hits)[:PASSAGES]
    answer = Answer(question, answered=False, passages=hits)
    if not hits or max(h.similarity for h in hits) < min_similarity:
        best = max((h.similarity for h in hits), default=0.0)
        answer.notes.append(f"the best passage's similarity to the question is {best:.2f}, below "
                            f"{min_similarity:.2f}: the papers are not about it")
        return answer
    candidates = [(hit, sentence) for hit in hits for sentence in _sentences(hit.text)]
    if not candidates:
        answer.notes.append("the best passages hold no whole sentence to quote")
        return answer
    vectors = embed([question] + [s for _, s in candidates])
    similarity = vectors[1:] @ vectors[0]
    words = _rare_words(question)
    scores = [
        float(similarity[i]) + 0.05 * len(words & _rare_words(sentence)) / max(1, len(words))
        for i, (_, sentence) in enumerate(candidates)
    ]
    order = np.argsort(-np.asarray(scores))
    taken: dict[int, int] = {}
    dropped = 0
    source_of: dict[tuple[int, tuple[int, ...]], int] = {}
    quoted: set[tuple[int, str]] = set()  # passages overlap: one sentence of a paper is quoted once
    for index in order:
        if len(answer.quotes) >= SENTENCES:
            break
        hit, sentence = candidates[int(index)]
        if taken.get(hit.passage_id, 0) >= PER_PASSAGE or (hit.paper_id, sentence) in quoted:
            continue
        check = locate_quote(sentence, functools.partial(store.page_text, hit.paper_id),
                             hit.start_page, hit.end_page)
        if not check.verified:
            dropped += 1
            continue
        taken[hit.passage_id] = taken.get(hit.passage_id, 0) + 1
        quoted.add((hit.paper_id, sentence))
        key = (hit.paper_id, check.pages)
        if key not in source_of:
            source_of[key] = len(answer.sources) + 1
            answer.sources.append(
                Source(source_of[key], hit.label, hit.doi, hit.file, hit.title, check.pages))
        answer.quotes.append(Quote(sentence, source_of[key]))
    answer.answered = bool(answer.quotes)
    if dropped:
        answer.notes.append(f"{dropped} quote{'s' if dropped != 1 else ''} dropped: not found verbatim on "
                            "the cited page")
    if not answer.answered:
        answer.notes.append("no quote could be verified on its page")
    return answer
