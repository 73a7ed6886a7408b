"""Known papers: the papers a search strategy must find, pasted as identifiers or loaded from a file.

Review teams validate a strategy against a set of papers they already know are relevant. They come
as pasted PMIDs / DOIs / source ids (``cf:139``, ``scifact:4983``), or as a reference manager's export
in RIS (read with ``rispy``) or BibTeX (read with ``bibtexparser``). Input from outside is bounded: at
most :data:`MAX_BYTES` of text (a file: :func:`~kmds_desktop.user_files.file_limit`, which the
environment can raise) and :data:`MAX_PAPERS` papers; only a regular file is read (never a device or a
pipe); a file that cannot be parsed gives one clear error line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kmds_desktop.literature.errors import LiteratureError
from kmds_desktop.user_files import UserFileError, file_limit, read_user_text

MAX_BYTES = 20 * 1024 * 1024
MAX_PAPERS = 20_000

_DOI = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)?(10\.\d{4,9}/\S+)$", re.IGNORECASE)
_DOI_ANYWHERE = re.compile(r"(10\.\d{4,9}/[^\s\"'<>{}]+)", re.IGNORECASE)
_PUBMED_URL = re.compile(r"pubmed\.ncbi\.nlm\.nih\.gov/(\d{1,9})|ncbi\.nlm\.nih\.gov/pubmed/(\d{1,9})",
                         re.IGNORECASE)
_PMID_NOTE = re.compile(r"\bPMID:?\s*(\d{1,9})\b", re.IGNORECASE)
_SOURCE_ID = re.compile(r"^[A-Za-z][\w-]*:[\w.-]+$")


class KnownPapersError(LiteratureError):
    """The known papers could not be read (too large, not RIS/BibTeX, nothing recognisable)."""


@dataclass
class KnownPaper:
    """One paper the strategy must find, with every identifier it came with."""

    label: str  # as the user gave it, for the report
    origin: str  # "pasted item 3", "refs.ris record 2"
    pmid: str | None = None
    doi: str | None = None
    external_id: str | None = None
    title: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "origin": self.origin, "pmid": self.pmid, "doi": self.doi,
                "external_id": self.external_id, "title": self.title}


def _clean_doi(text: str) -> str | None:
    match = _DOI.match(text.strip())
    return match.group(1).rstrip(".,;").lower() if match else None


@dataclass
class UnreadableItem:
    """A pasted item that is no identifier: reported with where it was, never silently dropped."""

    item: str  # as pasted (at most 60 characters)
    origin: str  # "pasted item 3"

    def text(self) -> str:
        return f"{self.origin}: {self.item!r} is not a PMID, DOI or source id (like cf:139)"


@dataclass
class PastedIdentifiers:
    """What :func:`read_pasted_identifiers` made of a paste: the papers, and the items it could not read."""

    papers: list[KnownPaper]
    unreadable: list[UnreadableItem]

    def report(self) -> str:
        """One line per unreadable item, for the check's report (empty when every item was read)."""
        if not self.unreadable:
            return ""
        head = (f"Not checked: {len(self.unreadable)} of {len(self.papers) + len(self.unreadable)} "
                "pasted items could not be read")
        return "\n".join([head + ":"] + [f"  {u.text()}" for u in self.unreadable])


def read_pasted_identifiers(text: str, origin: str = "pasted") -> PastedIdentifiers:
    """Like :func:`parse_identifiers`, but an item that is no identifier is set aside, not an error.

    One typo in a list of fifty pasted IDs used to stop the whole check; the window now checks the
    papers it could read and reports the others by position and text. Nothing readable at all is
    still an error (there is nothing to check), as is a paste too large or with too many papers.
    """
    papers, unreadable = _parse(text, origin, strict=False)
    if not papers:
        if unreadable:
            raise KnownPapersError(unreadable[0].text() + (
                f" (and {len(unreadable) - 1} more items)" if len(unreadable) > 1 else ""))
        raise KnownPapersError("no known papers given")
    return PastedIdentifiers(papers, unreadable)


def parse_identifiers(text: str, origin: str = "pasted") -> list[KnownPaper]:
    """PMIDs, DOIs and source ids from pasted text (separated by spaces, commas, semicolons, lines).

    ``PMID 123``, ``pmid:123`` and a bare number are PMIDs; ``10.x/y``, ``doi:10.x/y`` and
    ``https://doi.org/10.x/y`` are DOIs; ``source:id`` (``cf:139``) is a source's own id. Anything else
    is an error naming the item, so a typo is not silently dropped (the window uses
    :func:`read_pasted_identifiers`, which checks the rest and reports it).
    """
    return _parse(text, origin, strict=True)[0]


def _parse(text: str, origin: str, *, strict: bool) -> tuple[list[KnownPaper], list[UnreadableItem]]:
    if len(text.encode("utf-8", "replace")) > MAX_BYTES:
        raise KnownPapersError(f"the pasted text is larger than {MAX_BYTES // (1024 * 1024)} MB, the limit "
                               "for pasted identifiers; paste them in parts, or load them from a file")
    items = [t for t in re.split(r"[\s,;]+", text) if t]
    papers: list[KnownPaper] = []
    unreadable: list[UnreadableItem] = []
    i = 0
    while i < len(items):
        item = items[i]
        where = f"{origin} item {len(papers) + len(unreadable) + 1}"
        if item.upper().rstrip(":") == "PMID" and i + 1 < len(items) and items[i + 1].isdigit():
            item = f"PMID {items[i + 1]}"
            pmid = items[i + 1]
            i += 2
            papers.append(KnownPaper(item, where, pmid=pmid))
        else:
            i += 1
            lowered = item.lower()
            doi = _clean_doi(item)
            if lowered.startswith("pmid:") and item[5:].isdigit():
                papers.append(KnownPaper(item, where, pmid=item[5:]))
            elif item.isdigit() and len(item) <= 9:
                papers.append(KnownPaper(item, where, pmid=item))
            elif doi:
                papers.append(KnownPaper(item, where, doi=doi))
            elif _SOURCE_ID.match(item):
                papers.append(KnownPaper(item, where, external_id=item))
            else:
                bad = UnreadableItem(item[:60], where)
                if strict:
                    raise KnownPapersError(bad.text())
                unreadable.append(bad)
        if len(papers) + len(unreadable) > MAX_PAPERS:
            raise KnownPapersError(f"more than {MAX_PAPERS:,} known papers, the limit for one check; check "
                                   "them in parts")
    return papers, unreadable


def read_known_file(path: str | Path) -> list[KnownPaper]:
    """Known papers from a RIS (``.ris``), BibTeX (``.bib``) or plain identifier list (anything else)."""
    path = Path(path)
    try:  # bounded, and only a regular file: a link to /dev/zero is refused, not read until memory ends
        text = read_user_text(path, file_limit(MAX_BYTES), "known-papers file", errors="replace")
    except UserFileError as err:
        raise KnownPapersError(str(err)) from None
    suffix = path.suffix.lower()
    stripped = text.lstrip()
    if suffix in (".ris", ".nbib") or stripped.startswith("TY  -"):
        papers = parse_ris(text, path.name)
    elif suffix in (".bib", ".bibtex") or stripped.startswith("@"):
        papers = parse_bibtex(text, path.name)
    else:
        papers = parse_identifiers(text, path.name)
    if not papers:
        raise KnownPapersError(f"{path}: no papers found")
    return papers


def _first(value: Any) -> str | None:
    if isinstance(value, list):
        value = value[0] if value else None
    if value is None:
        return None
    text = " ".join(str(value).split())
    return text or None


def _ids_from_text(texts: list[str]) -> tuple[str | None, str | None]:
    """(pmid, doi) found in free text fields (URLs, notes)."""
    pmid = doi = None
    for text in texts:
        if pmid is None:
            m = _PUBMED_URL.search(text) or _PMID_NOTE.search(text)
            if m:
                pmid = next(g for g in m.groups() if g)
        if doi is None:
            m = _DOI_ANYWHERE.search(text)
            if m and "doi" in text.lower():
                doi = m.group(1).rstrip(".,;").lower()
    return pmid, doi


def parse_ris(text: str, name: str = "RIS") -> list[KnownPaper]:
    """Papers of a RIS file: DOI (``DO``), PMID (numeric ``AN``, a PubMed URL or a ``PMID:`` note),
    the source's own id (a non-numeric ``AN`` or an ``ID`` like ``cf:139``) and the title."""
    import rispy  # why: rispy loads on first use, not at start-up

    try:
        entries = rispy.loads(text, skip_unknown_tags=True)
    except Exception as err:  # noqa: BLE001 - rispy raises plain exceptions for broken files
        first = (str(err).splitlines() or [type(err).__name__])[0][:120]
        raise KnownPapersError(f"{name}: not a readable RIS file ({first})") from None
    papers: list[KnownPaper] = []
    for number, entry in enumerate(entries, start=1):
        if number > MAX_PAPERS:
            raise KnownPapersError(f"{name}: more than {MAX_PAPERS:,} records, the limit for one check; "
                                   "check them in parts")
        title = _first(entry.get("title") or entry.get("primary_title"))
        doi = _clean_doi(_first(entry.get("doi")) or "")
        accession = _first(entry.get("accession_number"))
        ris_id = _first(entry.get("id"))
        pmid = accession if accession and accession.isdigit() else None
        external = accession if accession and not accession.isdigit() else None
        if external is None and ris_id and _SOURCE_ID.match(ris_id):
            external = ris_id
        free = [str(u) for u in entry.get("urls") or []] + [str(n) for n in entry.get("notes") or []]
        found_pmid, found_doi = _ids_from_text(free)
        pmid, doi = pmid or found_pmid, doi or found_doi
        label = (f"PMID {pmid}" if pmid else doi or external or title or f"record {number}")
        papers.append(KnownPaper(label, f"{name} record {number}", pmid=pmid, doi=doi, external_id=external,
                                 title=title))
    return papers


def parse_bibtex(text: str, name: str = "BibTeX") -> list[KnownPaper]:
    """Papers of a BibTeX file: ``doi``, ``pmid`` (or ``eprint`` with ``eprinttype = pubmed``, a PubMed
    URL, a ``PMID:`` note), an ``external_id``/``sourceid`` field and the title (braces removed)."""
    import bibtexparser  # why: bibtexparser loads on first use, not at start-up

    try:
        library = bibtexparser.parse_string(text)
    except Exception as err:  # noqa: BLE001 - the parser's exceptions vary by version
        first = (str(err).splitlines() or [type(err).__name__])[0][:120]
        raise KnownPapersError(f"{name}: not a readable BibTeX file ({first})") from None
    if not library.entries and library.failed_blocks:
        raise KnownPapersError(f"{name}: not a readable BibTeX file ({len(library.failed_blocks)} broken "
                               "entries, none readable)")
    papers: list[KnownPaper] = []
    for number, entry in enumerate(library.entries, start=1):
        if number > MAX_PAPERS:
            raise KnownPapersError(f"{name}: more than {MAX_PAPERS:,} entries, the limit for one check; "
                                   "check them in parts")
        fields = {k.lower(): str(f.value) for k, f in entry.fields_dict.items()}

        def field(key: str, fields: dict[str, str] = fields) -> str | None:
            value = fields.get(key)
            return " ".join(value.replace("{", "").replace("}", "").split()) or None if value else None

        pmid = field("pmid")
        if not pmid and (field("eprinttype") or "").lower() == "pubmed":
            pmid = field("eprint")
        doi = _clean_doi(field("doi") or "")
        found_pmid, found_doi = _ids_from_text([field("url") or "", field("note") or ""])
        pmid = pmid if pmid and pmid.isdigit() else found_pmid
        doi = doi or found_doi
        external = field("external_id") or field("sourceid")
        title = field("title")
        label = f"PMID {pmid}" if pmid else doi or external or title or entry.key
        papers.append(KnownPaper(label, f"{name} entry {entry.key}", pmid=pmid, doi=doi,
                                 external_id=external, title=title))
    return papers
