"""Splitting a paper's pages into passages of about :data:`MIN_WORDS`-:data:`MAX_WORDS` words at
sentence (preferably paragraph) boundaries, each with its page range and character offsets.

Why passages of this size: a whole page mixes a figure legend, the end of one argument and the start of
the next, and ranks for all of them; a sentence alone loses the context that makes it evidence
("this mutation" - which one?). A paragraph-sized passage is what a reader quotes, what the search
ranks and what the embedding model reads whole (its window is 256 word pieces, about 180 words).

Passages flow across page breaks, as paragraphs do: a passage that starts at the foot of page 7 and
ends on page 8 has the range 7-8, its start offset on page 7 and its end offset on page 8.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass

MIN_WORDS = 120
MAX_WORDS = 250
#: A last passage shorter than this joins the one before (when the two stay under 1.25 x MAX_WORDS).
TAIL_WORDS = 40
#: Words the next passage repeats from the end of the one before (its closing sentences, up to this
#: many) where a passage is cut for length: a finding that straddles the cut is then whole in one of
#: the two more often.
OVERLAP_WORDS = 60

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9])")


@dataclass(frozen=True)
class Passage:
    """One passage: pages are 1-based; offsets index the cleaned page texts the store keeps."""

    ordinal: int
    start_page: int
    end_page: int
    start_offset: int
    end_offset: int
    text: str


@dataclass(frozen=True)
class _Sentence:
    start: int
    end: int
    words: int
    paragraph_end: bool


def _sentences(doc: str) -> list[_Sentence]:
    """Sentence spans of ``doc``; a sentence ending its line on a short line closes a paragraph."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _SENTENCE_END.finditer(doc):
        spans.append((start, match.start() + len(match.group(0).rstrip())))
        start = match.end()
    spans.append((start, len(doc)))
    line_lengths = sorted(len(line) for line in doc.split("\n") if line.strip())
    typical = line_lengths[int(len(line_lengths) * 0.75)] if line_lengths else 0
    sentences: list[_Sentence] = []
    for begin, end in spans:
        while begin < end and doc[begin].isspace():
            begin += 1
        while end > begin and doc[end - 1].isspace():
            end -= 1
        if end <= begin:
            continue
        line_start = doc.rfind("\n", 0, end) + 1
        next_break = doc.find("\n", end)
        at_line_end = next_break == -1 or not doc[end:next_break].strip()
        short_line = (end - line_start) < 0.8 * typical
        sentences.append(_Sentence(begin, end, len(doc[begin:end].split()),
                                   at_line_end and short_line))
    return sentences


def _split_long(doc: str, sentence: _Sentence) -> list[_Sentence]:
    """A "sentence" over :data:`MAX_WORDS` words (a table, a list without stops) cut by words."""
    pieces: list[_Sentence] = []
    words = list(re.finditer(r"\S+", doc[sentence.start : sentence.end]))
    size = (MIN_WORDS + MAX_WORDS) // 2
    for first in range(0, len(words), size):
        chunk = words[first : first + size]
        pieces.append(_Sentence(sentence.start + chunk[0].start(), sentence.start + chunk[-1].end(),
                                len(chunk), False))
    return pieces


def split_passages(pages: Sequence[str]) -> list[Passage]:
    """The passages of a paper whose cleaned page texts are ``pages`` (page 1 first)."""
    page_starts: list[int] = []
    parts: list[str] = []
    position = 0
    for text in pages:
        page_starts.append(position)
        parts.append(text)
        position += len(text) + 1  # the "\n" that joins pages
    doc = "\n".join(parts)
    units: list[_Sentence] = []
    for sentence in _sentences(doc):
        units.extend(_split_long(doc, sentence) if sentence.words > MAX_WORDS else [sentence])
    groups: list[list[_Sentence]] = []
    current: list[_Sentence] = []
    words = 0
    for unit in units:
        if current and words + unit.words > MAX_WORDS:
            groups.append(current)
            carried: list[_Sentence] = []
            for sentence in reversed(current):  # the closing sentences, up to OVERLAP_WORDS words
                if sum(u.words for u in carried) + sentence.words > OVERLAP_WORDS:
                    break
                carried.insert(0, sentence)
            current, words = carried, sum(u.words for u in carried)
        current.append(unit)
        words += unit.words
        if words >= MIN_WORDS and unit.paragraph_end:
            groups.append(current)
            current, words = [], 0
    if current:
        tail_words = sum(u.words for u in current)
        room = 1.25 * MAX_WORDS - sum(u.words for u in groups[-1]) if groups else 0
        if groups and tail_words < TAIL_WORDS and tail_words <= room:
            groups[-1].extend(u for u in current if u not in groups[-1])
        else:
            groups.append(current)
    passages: list[Passage] = []
    for group in groups:
        start, end = group[0].start, group[-1].end
        text = " ".join(doc[start:end].split())
        if not text:
            continue
        first = bisect.bisect_right(page_starts, start) - 1
        last = bisect.bisect_right(page_starts, end - 1) - 1
        passages.append(Passage(len(passages), first + 1, last + 1, start - page_starts[first],
                                end - page_starts[last], text))
    return passages
