"""Which paper a PDF is: its DOI and title, found by the app itself.

Why not from the file name: downloads are named by whoever served them ("nar_gkae222.pdf"), and a
Zotero folder by an item key. The DOI is read from the document's metadata first (publishers put it in
the subject or a ``doi`` key), then from the first pages' text, where a DOI printed with "doi" or
"doi.org" before it wins over the first DOI-like string (page one can cite another paper). The title
is the metadata's when it reads as one, else the largest type on page one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

#: Crossref's advice: ``10.`` + a 4-9 digit registrant + ``/`` + any printable suffix.
DOI_PATTERN = re.compile(r"\b10\.\d{4,9}/[^\s\"'<>]*[^\s\"'<>.,;:]|\b10\.\d{4,9}/\([^\s]+", re.IGNORECASE)
_DOI_MARKER = re.compile(r"(?i)(doi\s*[:./]?\s*|doi\.org/|dx\.doi\.org/)$")
#: A line that is a DOI and nothing else: how Science and Science Advances print the paper's own DOI
#: below the last page's dates.
_DOI_LINE = re.compile(r"(?m)^[ \t]*(10\.\d{4,9}/\S+)[ \t]*$")  # not \s: it ran over blank lines
_SICI = re.compile(r"\b10\.\d{4,9}/\(sici\)[^\s]+", re.IGNORECASE)
#: Pages whose text is searched for the DOI.
DOI_PAGES = 2


def clean_doi(raw: str) -> str:
    """A DOI without trailing punctuation or an unbalanced closing bracket, lower-cased (DOIs are
    case-insensitive, and one form makes matching records exact)."""
    doi = raw.strip().rstrip(".,;:")
    for opening, closing in ("()", "[]"):
        while doi.endswith(closing) and doi.count(closing) > doi.count(opening):
            doi = doi[:-1].rstrip(".,;:")
    return doi.lower()


def _candidates(text: str) -> list[tuple[bool, int, str]]:
    """``(marked, position, doi)`` for each DOI-like string of ``text`` (lines joined where a DOI
    was wrapped after a hyphen or a slash)."""
    text = re.sub(r"([-/])\s*\n\s*", r"\1", text)
    # pdfium writes a slash it cannot map as U+0001 ("doi\x0110.1073\x01pnas..." in PNAS footers).
    text = re.sub(r"(?i)(doi|10\.\d{4,9})\x01", r"\1/", text)
    found: list[tuple[bool, int, str]] = []
    for pattern in (_SICI, DOI_PATTERN):
        for match in pattern.finditer(text):
            if any(start <= match.start() < start + len(doi) for _, start, doi in found):
                continue
            marked = bool(_DOI_MARKER.search(text[max(0, match.start() - 12) : match.start()]))
            found.append((marked, match.start(), match.group(0)))
    return found


def find_doi(metadata: Mapping[str, str], pages: Sequence[str]) -> str | None:
    """The PDF's own DOI: from metadata, else from the first :data:`DOI_PAGES` pages' text, else a
    line of the last pages that holds a DOI alone (a reference list's DOIs follow "doi:" or a URL)."""
    for key in ("doi", "DOI", "Subject", "Keywords", "Title"):
        value = metadata.get(key) or ""
        for _, _, doi in _candidates(value):
            return clean_doi(doi)
    for text in pages[:DOI_PAGES]:
        candidates = _candidates(text)
        marked = [c for c in candidates if c[0]]
        best = (marked or candidates)[:1]
        if best:
            return clean_doi(best[0][2])
    for text in reversed(pages[-DOI_PAGES:]):  # printed at the end, alone on its line
        lines = _DOI_LINE.findall(text.replace("\r\n", "\n"))
        if lines:
            return clean_doi(lines[-1])
    return None


_GENERIC_TITLES = re.compile(
    r"(?i)^(untitled|microsoft word|document\d*|layout \d+|\S+\.(docx?|pdf|tex|indd))")


def usable_metadata_title(title: str) -> str | None:
    """The metadata title when it reads as a paper's title (a few words, not a file or tool name)."""
    title = " ".join((title or "").split())
    if len(title.split()) < 4 or _GENERIC_TITLES.match(title) or DOI_PATTERN.search(title):
        return None
    return title


#: A line a download service stamps on page one ("Downloaded via ... on June 25, 2025"), not the title.
_STAMP = re.compile(r"(?i)^(downloaded|this article is|see https?:|https?://|www\.)|https?://|sharingguidelines")


def title_from_lines(lines: Sequence[tuple[str, float]]) -> str | None:
    """The title from page one's ``(line, font size)`` pairs: the first run of lines set in the
    largest size that holds at least three words (a journal's name in big type is shorter); a
    download stamp is no title."""
    sized = [(" ".join(text.split()), size) for text, size in lines
             if text.strip() and not _STAMP.search(" ".join(text.split()))]
    for size in sorted({round(s, 1) for _, s in sized}, reverse=True)[:3]:
        run: list[str] = []
        for text, line_size in sized:
            if round(line_size, 1) == size:
                run.append(text)
            elif run:
                break
        title = " ".join(run)
        if len(title.split()) >= 3 and len(title) <= 400:
            return title
    return None


def _short_title_on_page(title: str, first_page_lines: Sequence[tuple[str, float]]) -> str | None:
    """A three-word metadata title ("Symmetric Molecular Dynamics") that page one prints as a line of
    its own: short titles exist, and the page confirms this one is not a file or tool name."""
    title = " ".join((title or "").split())
    if len(title.split()) != 3 or _GENERIC_TITLES.match(title):
        return None
    lines = {" ".join(text.split()).lower() for text, _ in first_page_lines}
    return title if title.lower() in lines else None


def find_title(metadata: Mapping[str, str], first_page_lines: Sequence[tuple[str, float]]) -> str | None:
    """The title: the largest type on page one, or the metadata's (publishers cut it short at times:
    "A loss-of-function mutation in"), whichever is the longer reading of the same start."""
    from_meta = usable_metadata_title(metadata.get("Title", "")) or _short_title_on_page(
        metadata.get("Title", ""), first_page_lines)
    from_page = title_from_lines(first_page_lines)
    if from_meta and from_page:
        return from_page if len(from_page) > len(from_meta) and from_page.lower().startswith(
            from_meta.lower()[:20]) else from_meta
    return from_meta or from_page


#: Document-info authors that name a machine account or a role, not a person.
_NOT_A_PERSON = re.compile(r"(?i)^(administrator|admin|user|owner|author|unknown|editor|publisher|"
                           r"journal|staff|office|\S+@\S+)$")
_YEAR = re.compile(r"\b(19[5-9]\d|20\d\d)\b")
#: Where a first page prints its own year: a copyright line, "Published", "Accepted".
_FIRST_PAGE_YEAR = re.compile(r"(?i)(?:\u00a9|copyright|published(?: online)?|accepted)\D{0,40}?"
                              r"\b(19[5-9]\d|20\d\d)\b")


def _person(name: str) -> bool:
    words = name.split()
    return (2 <= len(words) <= 6 and not any(ch.isdigit() for ch in name)
            and not _NOT_A_PERSON.match(name.strip()))


def find_authors(metadata: Mapping[str, str]) -> list[str]:
    """The authors the document info names, in order; ``[]`` when it names none that reads as a person.

    Why so strict: the Author field often holds whoever made the file ("Administrator", one
    typesetter's name); a record with a wrong author list misleads more than one without, so a value
    counts only as people of two to six words each. "Last, First" (one comma, one word each side)
    is one person; a list is split at semicolons, else at commas and "and"."""
    raw = " ".join((metadata.get("Author") or "").split())
    if not raw:
        return []
    if ";" in raw:
        parts = raw.split(";")
    elif re.fullmatch(r"[^,\s]+, [^,\s]+", raw):  # "McVey, Mitch"
        parts = [" ".join(reversed(raw.split(", ")))]
    else:
        parts = re.split(r",\s*|\s+and\s+", raw)
    names = [" ".join(p.split()) for p in parts if p.strip()]
    return names if names and all(_person(n) for n in names) else []


def find_year(metadata: Mapping[str, str], first_page: str) -> int | None:
    """The year the paper came out: printed on page one beside a copyright sign, "Published" or
    "Accepted"; else the year in the document info's subject (a citation line, "Science 2019.363");
    else the file's creation date, which a publisher's PDF gets when the paper is issued (a preprint
    server may have rebuilt it later, hence last)."""
    found = _FIRST_PAGE_YEAR.search(first_page or "")
    if found:
        return int(found.group(1))
    found = _YEAR.search((metadata.get("Subject") or "")[:200])
    if found:
        return int(found.group(1))
    created = re.match(r"(?:D:)?(\d{4})", (metadata.get("CreationDate") or "").strip())  # D:YYYYMMDD...
    year = int(created.group(1)) if created else 0
    return year if 1950 <= year <= 2099 else None
