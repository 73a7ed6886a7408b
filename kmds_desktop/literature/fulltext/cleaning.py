"""Repairing the text a PDF reader gives: ligatures, hyphenation, running headers and footers, line
numbers, and the reference list.

Why here and not in the search: a passage is only as good as its text. A running header repeated on
every page ranks every page for the journal's name, a "speci fi c" split by a ligature misses the word
"specific", and a reference list answers every question with a title. Each repair is cheap and keyed
to what pdfium produces: it marks a soft (typographic) hyphen at a line end as U+FFFE, keeps a real
hyphen as ``-`` before the line break, and writes unmapped glyphs as control characters.

Everything here is a pure function of the page texts, so it runs in the reader's child process and in
tests alike. :func:`normalise_for_match` is the one normal form quotes and pages are compared in.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

LIGATURES = {
    "\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
    "\ufb05": "st", "\ufb06": "st",
}
#: pdfium's marker of a soft hyphen at a line end; U+00AD is the same in other producers.
SOFT_HYPHENS = ("\ufffe", "\xad")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufeff\uffff]")
_SPACES = re.compile(r"[ \t\xa0\u2000-\u200a\u202f\u205f\u3000]+")

#: A running header or footer is a line among a page's first or last few that recurs on at least this
#: share of the pages (digits ignored, so "Page 3 of 12" and "946 Diabetologia (2024) 67:940–951" count).
RUNNING_SHARE = 0.5
RUNNING_EDGE_LINES = 3
RUNNING_MIN_PAGES = 4

_REFERENCE_HEADING = re.compile(
    r"(?i)^(\d{1,2}\.?\s+)?(references?( and notes)?|bibliography|literature cited|references cited|"
    r"works cited|cited literature)\s*:?$"
)
#: A heading after which the text is the paper's own again (a Nature paper's Methods follow its
#: main references; a preprint's figure legends follow its reference list).
_AFTER_REFERENCES = re.compile(
    r"(?i)^(\d{1,2}\.?\s+)?(methods|materials and methods|online methods|star\W*methods|"
    r"acknowledge?ments?|supplementary (information|materials?|figures?|data)|supporting information|"
    r"appendix|data availability|code availability|author contributions|figure legends|"
    r"figures?( and tables)?|tables?|extended data)\b.{0,60}$"
)
_LINE_NUMBER = re.compile(r"^(\d{1,5})(\s+|$)")


def normalise_page(text: str) -> str:
    """One page as pdfium gives it, with line ends ``\\n``, soft hyphens joined, ligatures spelled
    out, unmapped glyphs as spaces, and runs of spaces made one (newlines kept: they are the lines
    the header and hyphenation repairs work on)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    for mark in SOFT_HYPHENS:
        text = re.sub(re.escape(mark) + r"[ \t]*\n[ \t]*", "", text)
        text = text.replace(mark, "")
    for ligature, letters in LIGATURES.items():
        text = text.replace(ligature, letters)
    text = _CONTROL.sub(" ", text)
    text = _SPACES.sub(" ", text)
    return "\n".join(line.strip() for line in text.split("\n"))


def strip_line_numbers(lines: list[str]) -> list[str]:
    """Drop a preprint's printed line numbers ("676 REFERENCES"), when most of the page's lines begin
    with a number and the numbers rise: a list of values does not, so it is left alone."""
    content = [line for line in lines if line]
    if len(content) < 8:
        return lines
    numbers = [int(m.group(1)) for line in content if (m := _LINE_NUMBER.match(line))]
    if len(numbers) < 0.6 * len(content):
        return lines
    rising = sum(1 for a, b in zip(numbers, numbers[1:], strict=False) if b > a)
    if rising < 0.8 * (len(numbers) - 1):
        return lines
    return [_LINE_NUMBER.sub("", line, count=1) for line in lines]


def _line_key(line: str) -> str:
    """A line with its digits made ``#`` and a page number at either end dropped: odd and even pages
    print "942 Diabetologia (2024) 67:940–951" and "Diabetologia (2024) 67:940–951 941"."""
    return re.sub(r"\d+", "#", " ".join(line.split())).lower().strip("# ")


def _edge_positions(lines: Sequence[str]) -> list[int]:
    content = [i for i, line in enumerate(lines) if line]
    edge = content[:RUNNING_EDGE_LINES] + content[-RUNNING_EDGE_LINES:]
    return sorted(set(edge))


def remove_running_lines(pages: list[list[str]]) -> list[list[str]]:
    """Remove running headers and footers: edge lines whose digit-blind form recurs on at least
    :data:`RUNNING_SHARE` of the pages, and bare page numbers at a page's edge."""
    if len(pages) < RUNNING_MIN_PAGES:
        return pages
    seen: Counter[str] = Counter()
    for lines in pages:
        seen.update({_line_key(lines[i]) for i in _edge_positions(lines)})
    threshold = max(3, RUNNING_SHARE * len(pages))
    running = {key for key, count in seen.items() if count >= threshold and key}
    cleaned: list[list[str]] = []
    for lines in pages:
        drop = {
            i for i in _edge_positions(lines)
            if _line_key(lines[i]) in running or re.fullmatch(r"\d{1,4}", lines[i])
        }
        cleaned.append([line for i, line in enumerate(lines) if i not in drop])
    return cleaned


def cut_reference_lists(pages: list[list[str]]) -> list[list[str]]:
    """Drop the reference list: the lines from a "References" heading (in the paper's later part) to
    the next heading of the paper's own (Methods, figure legends...) or the end."""
    total = sum(len(line) for lines in pages for line in lines) or 1
    before = 0
    inside = False
    cleaned: list[list[str]] = []
    for lines in pages:
        kept: list[str] = []
        for line in lines:
            if inside and _AFTER_REFERENCES.match(line):
                inside = False
            elif not inside and _REFERENCE_HEADING.match(line) and before > 0.3 * total:
                inside = True
            if not inside:
                kept.append(line)
            before += len(line)
        cleaned.append(kept)
    return cleaned


_WORD = re.compile(r"[^\W\d_][\w'-]*[^\W\d_]|[^\W\d_]", re.UNICODE)


def vocabulary(texts: Iterable[str]) -> Counter[str]:
    """Lower-cased words of ``texts`` with their counts: the paper's own dictionary for the repairs."""
    words: Counter[str] = Counter()
    for text in texts:
        words.update(w.lower() for w in _WORD.findall(text))
    return words


# Both start only where a word starts, and a word part is at most 40 letters: a page of one letter
# repeated 40,000 times took 6-9 s in each (every position, and every split of the run, was tried).
_HYPHEN_BREAK = re.compile(r"(?<![^\W\d_])([^\W\d_]{1,40})-\n([a-z]{1,40})")
_LIGATURE_GAP = re.compile(r"\b([^\W\d_]{1,40})([ \n]?)(ffi|ffl|fi|fl|ff)([ \n]?)([a-z]{1,40})\b")


def repair_hyphenation(text: str, words: Counter[str]) -> str:
    """Join a word hyphenated at a line end: "trans-\\nport" becomes "transport" when the paper
    spells it so elsewhere (or never writes "trans-port"); "CD122-\\npreferential" keeps its hyphen."""

    def join(match: re.Match[str]) -> str:
        head, tail = match.group(1), match.group(2)
        closed = (head + tail).lower()
        hyphenated = f"{head}-{tail}".lower()
        if words.get(hyphenated, 0) > 0 and words.get(closed, 0) == 0:
            return f"{head}-{tail}"
        if words.get(closed, 0) > 0 or head[-1:].islower():
            return head + tail
        return f"{head}-{tail}"

    # Any other hyphen at a line end is a real one ("CD122-\npreferential"): the word stays whole.
    return re.sub(r"(\S)-\n(?=\S)", r"\1-", _HYPHEN_BREAK.sub(join, text))


def repair_ligature_gaps(text: str, words: Counter[str]) -> str:
    """Close the gap some readers leave around a ligature ("speci fi c" -> "specific"), only where
    the closed word is one the paper itself uses: a stray "fi" between words is left alone."""

    def close(match: re.Match[str]) -> str:
        head, gap_before, ligature, gap_after, tail = match.groups()
        closed = head + ligature + tail
        if (gap_before or gap_after) and len(closed) > 3 and words.get(closed.lower(), 0) > 0:
            return closed
        return match.group(0)

    return _LIGATURE_GAP.sub(close, text)


def clean_pages(raw_pages: Sequence[str]) -> list[str]:
    """The page texts an import keeps: normalised, line numbers and running lines removed, the
    reference list cut, hyphenation and ligature gaps repaired. Page ``i`` stays page ``i`` (a page
    that was all references is an empty string)."""
    pages = [strip_line_numbers(normalise_page(text).split("\n")) for text in raw_pages]
    pages = remove_running_lines(pages)
    pages = cut_reference_lists(pages)
    texts = ["\n".join(line for line in lines if line) for lines in pages]
    words = vocabulary(texts)
    return [repair_ligature_gaps(repair_hyphenation(text, words), words) for text in texts]


def normalise_for_match(text: str) -> str:
    """The form quotes and pages are compared in: Unicode compatibility form (ligatures spelled out;
    superscript and subscript digits written ``^5`` and ``_2``, so an exponent stays one), soft
    hyphens and hyphenation at line breaks joined, quotes and dashes made plain, one space between
    words. Both sides go through it, so a quote matches however the page was wrapped."""
    # superscripts and subscripts keep their place: compatibility form alone makes "10⁵" "105", and a
    # quote of "105 cells" would pass against a page that says 10⁵
    text = unicodedata.normalize("NFKC", text.translate(_SCRIPTS))
    for mark in SOFT_HYPHENS:
        text = text.replace(mark, "")
    text = re.sub(r"(\w)-\s*\n\s*(\w)", r"\1\2", text)
    text = text.translate(_PLAIN)
    return " ".join(text.split())


#: Superscript digits (⁰ ¹ ² ³ ⁴ … ⁹) and signs as ``^n``, subscript digits as ``_n``.
_SUPERSCRIPT_DIGITS = (0x2070, 0xB9, 0xB2, 0xB3, *range(0x2074, 0x207A))
_SCRIPTS = str.maketrans({
    **{chr(code): f"^{digit}" for digit, code in enumerate(_SUPERSCRIPT_DIGITS)},
    "\u207a": "^+", "\u207b": "^-",
    **{chr(0x2080 + digit): f"_{digit}" for digit in range(10)},
})
_PLAIN = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2010": "-", "\u2011": "-",
    "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2212": "-",
})
