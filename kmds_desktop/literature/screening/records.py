"""The records a review screens: what one record shows, where it came from, and one record per paper.

Why a record of its own (not the database row): a review outlives the database it was found in (a
re-import renumbers documents, a RIS file has no database at all), so a record is known by its
*identity* — (source, external id), e.g. ``("pubmed", "31234567")`` or ``("cf", "cf:17")`` — and its
DOI/PMID. Records from several searches or sources that share a DOI or PMID are one paper and are
screened once (:func:`merge_duplicates`); the others are counted as duplicates removed in the PRISMA flow.

Loaders: database documents (a search's merged ids or a history set, fetched by the caller), and files
— CSV (this app's export, or any file with title/abstract columns; ``label_included`` is read for
simulations) and RIS (via rispy). A file is read bounded and only if it is a regular file
(:mod:`kmds_desktop.user_files`), so a link to ``/dev/zero`` is refused, not read until memory ends.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kmds_desktop.literature.document import Document, ReadsDocument
from kmds_desktop.text import shorten
from kmds_desktop.user_files import UserFileError, file_limit, read_user_text

_DOI_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:)", re.IGNORECASE)
_YEAR = re.compile(r"^\s*(\d{4})(?!\d)")

#: The largest records file (CSV or RIS) read, in bytes: 100,000 records with abstracts are about
#: 250 MB. Larger files are refused before they are read (raise it with ``KMDS_DESKTOP_MAX_FILE_MB``).
MAX_RECORDS_FILE_BYTES = 256 << 20


def normalize_doi(value: Any) -> str:
    """``https://doi.org/10.1/X`` and ``doi:10.1/x`` are the same DOI: lower case, no prefix."""
    text = str(value or "").strip()
    return _DOI_PREFIX.sub("", text).strip().lower()


def normalize_pmid(value: Any) -> str:
    text = str(value or "").strip()
    return text if text.isdigit() else ""


@dataclass(init=False)
class ScreeningRecord(ReadsDocument):
    """One paper in one screening: its :class:`~kmds_desktop.literature.document.Document` and what
    belongs to this screening (the rows that found it, its rank, where it joined the review, the
    identities merged into it, a known label).

    Why a wrapper: the same Document is imported, stored, ranked and exported; only these fields are
    the screening's. The paper's fields read through (``record.title``, ``record.volume``; see
    :class:`~kmds_desktop.literature.document.ReadsDocument`), except that ``doi`` and ``pmid`` read in
    one spelling (:func:`normalize_doi`, :func:`normalize_pmid`) so duplicates are found however a
    source wrote them, while the Document keeps the source's spelling.

    Built either from a Document (``ScreeningRecord(document=doc, rank=3)``) or, as records from files,
    tests and scripts are, from the paper's fields (``ScreeningRecord("pubmed", "123", title=...)``),
    which become its Document; the two cannot be mixed."""

    document: Document
    #: The search rows that found it ("#3 row 2: cystic AND fibrosis"), in the order first seen.
    found_by: list[str]
    #: Its best fused rank in the search that brought it (1 = best; None for a file import).
    rank: int | None
    #: Internal id in the literature database it was fetched from (for display only, never a key).
    doc_id: int | None
    #: Where the record joined the review ("#4", "file refs.ris") and, after merging, every such origin.
    origins: list[str]
    #: Other identities merged into this one (the same DOI/PMID from another source or search).
    aliases: list[tuple[str, str]]
    #: A known label (``label_included`` column of a CSV) for simulations; never shown as a decision.
    label: bool | None

    def __init__(
        self,
        source: str = "",
        external_id: str = "",
        title: str = "",
        abstract: str = "",
        authors: Sequence[str] = (),
        year: int | None = None,
        journal: str = "",
        doi: str = "",
        pmid: str = "",
        url: str = "",
        keywords: Sequence[str] = (),
        found_by: Sequence[str] = (),
        rank: int | None = None,
        doc_id: int | None = None,
        origins: Sequence[str] = (),
        aliases: Sequence[tuple[str, str]] = (),
        label: bool | None = None,
        volume: str = "",
        issue: str = "",
        pages: str = "",
        *,
        document: Document | None = None,
    ) -> None:
        if document is None:
            document = Document(
                source=source, external_id=external_id, title=title, abstract=abstract, authors=list(authors),
                year=year, journal=journal, doi=doi, pmid=pmid, url=url, keywords=list(keywords),
                volume=volume, issue=issue, pages=pages)
        elif any((source, external_id, title, abstract, authors, year is not None, journal, doi, pmid, url,
                  keywords, volume, issue, pages)):
            raise TypeError("ScreeningRecord takes a document or the paper's fields, not both")
        self.document = document
        self.found_by = list(found_by)
        self.rank = rank
        self.doc_id = doc_id
        self.origins = list(origins)
        self.aliases = [(str(a[0]), str(a[1])) for a in aliases]
        self.label = label

    @property
    def doi(self) -> str:
        """The DOI in one spelling (lower case, no ``https://doi.org/``): what duplicates are found by."""
        return normalize_doi(self.document.doi)

    @property
    def pmid(self) -> str:
        """The PMID when it is one (digits only), else ``""``."""
        return normalize_pmid(self.document.pmid)

    def to_dict(self) -> dict[str, Any]:
        """The record as the screening store and the review file keep it (``review_record.data``);
        the keys and their order are the file format, unchanged since before records held a Document."""
        return {
            "source": self.source,
            "external_id": self.external_id,
            "title": self.title,
            "abstract": self.abstract,
            "authors": list(self.authors),
            "year": self.year,
            "journal": self.journal,
            "doi": self.doi,
            "pmid": self.pmid,
            "url": self.url,
            "keywords": list(self.keywords),
            "found_by": list(self.found_by),
            "rank": self.rank,
            "doc_id": self.doc_id,
            "origins": list(self.origins),
            "aliases": [list(a) for a in self.aliases],
            **{k: v for k, v in (("volume", self.volume), ("issue", self.issue), ("pages", self.pages)) if v},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScreeningRecord:
        """A record from :meth:`to_dict`'s mapping (also as stores and files written before records held
        a Document have it: the same keys, ``volume``/``issue``/``pages`` only when known)."""
        year = data.get("year")
        document = Document(
            source=str(data.get("source") or ""),
            external_id=str(data.get("external_id") or ""),
            title=str(data.get("title") or ""),
            abstract=str(data.get("abstract") or ""),
            authors=[str(a) for a in data.get("authors") or []],
            year=int(year) if isinstance(year, int) or (isinstance(year, str) and year.isdigit()) else None,
            journal=str(data.get("journal") or ""),
            doi=str(data.get("doi") or ""),
            pmid=str(data.get("pmid") or ""),
            url=str(data.get("url") or ""),
            keywords=[str(k) for k in data.get("keywords") or []],
            volume=str(data.get("volume") or ""),
            issue=str(data.get("issue") or ""),
            pages=str(data.get("pages") or ""),
        )
        return cls(
            document=document,
            found_by=[str(f) for f in data.get("found_by") or []],
            rank=data.get("rank") if isinstance(data.get("rank"), int) else None,
            doc_id=data.get("doc_id") if isinstance(data.get("doc_id"), int) else None,
            origins=[str(o) for o in data.get("origins") or []],
            aliases=[(str(a[0]), str(a[1])) for a in data.get("aliases") or [] if len(a) == 2],
        )


def record_from_document(
    doc: Mapping[str, Any] | Document, *, rank: int | None = None, found_by: Sequence[str] = (),
    origin: str = "",
) -> ScreeningRecord:
    """A literature-database document as a record: a :class:`Document`, or a row of
    ``fetch_documents_by_ids`` (read with :meth:`Document.from_row`; its ``id`` becomes ``doc_id``)."""
    doc_id = None
    if not isinstance(doc, Document):
        doc_id = int(doc["id"]) if isinstance(doc.get("id"), int) else None
        row = doc
        doc = Document.from_row(row)
        if not doc.external_id and row.get("id") is not None:
            doc = replace(doc, external_id=str(row["id"]))
    return ScreeningRecord(document=doc, found_by=found_by, rank=rank, doc_id=doc_id,
                           origins=[origin] if origin else [])


def merge_duplicates(records: Iterable[ScreeningRecord]) -> tuple[list[ScreeningRecord], int]:
    """One record per paper: a record whose identity, DOI or PMID was seen before is folded into the
    first (its rows, origins and identity kept as aliases; the better rank kept). Returns the unique
    records in first-seen order and the number of duplicates removed."""
    out: list[ScreeningRecord] = []
    by_key: dict[tuple[str, str], ScreeningRecord] = {}
    removed = 0
    for rec in records:
        probes = [("id",) + rec.key]
        for alias in rec.aliases:
            probes.append(("id",) + alias)
        if rec.doi:
            probes.append(("doi", rec.doi, ""))
        if rec.pmid:
            probes.append(("pmid", rec.pmid, ""))
        first = next(
            (by_key[(p[0], p[1] + "\0" + p[2])] for p in probes if (p[0], p[1] + "\0" + p[2]) in by_key), None
        )
        if first is None:
            first = rec
            out.append(rec)
        else:
            removed += 1
            _fold(first, rec)
        for p in probes:
            by_key.setdefault((p[0], p[1] + "\0" + p[2]), first)
    return out, removed


#: Text fields of a paper a merged duplicate fills in where the first record has none.
_FILLED = ("title", "abstract", "journal", "doi", "pmid", "url", "volume", "issue", "pages")


def _fold(into: ScreeningRecord, other: ScreeningRecord) -> None:
    if other.key != into.key and other.key not in into.aliases:
        into.aliases.append(other.key)
    for alias in other.aliases:
        if alias != into.key and alias not in into.aliases:
            into.aliases.append(alias)
    for row in other.found_by:
        if row not in into.found_by:
            into.found_by.append(row)
    for origin in other.origins:
        if origin not in into.origins:
            into.origins.append(origin)
    if other.rank is not None and (into.rank is None or other.rank < into.rank):
        into.rank = other.rank
    # The paper's fields the first record lacks come from the other (a new Document: never changed in place).
    mine, theirs = into.document, other.document
    gaps: dict[str, Any] = {name: getattr(theirs, name) for name in _FILLED
                            if not getattr(mine, name) and getattr(theirs, name)}
    if not mine.authors and theirs.authors:
        gaps["authors"] = list(theirs.authors)
    if mine.year is None and theirs.year is not None:
        gaps["year"] = theirs.year
    if gaps:
        into.document = replace(mine, **gaps)


# -- files -----------------------------------------------------------------------------------------------

_TRUE = {"1", "true", "yes", "y", "included", "include", "relevant"}
_FALSE = {"0", "false", "no", "n", "excluded", "exclude", "irrelevant"}


def _first(row: Mapping[str, str], *names: str) -> str:
    for name in names:
        value = row.get(name)
        if value not in (None, ""):
            return str(value).strip()
    return ""


def _file_identity(path: Path, row: Mapping[str, str], n: int, title: str) -> tuple[str, str]:
    """(source, external id) of a file's record: its own columns when it has them (this app's export),
    else PMID, DOI, and last a hash of the title (stable across re-imports of the same file)."""
    source = _first(row, "source", "db")
    ext = _first(row, "external_id", "id_in_source")
    if source and ext:
        return source.lower(), ext
    pmid = normalize_pmid(_first(row, "pmid", "PMID"))
    if pmid:
        return "pubmed", pmid
    doi = normalize_doi(_first(row, "doi", "DOI"))
    if doi:
        return "doi", doi
    ident = _first(row, "id", "record_id", "ID")
    if ident:
        return f"file:{path.name}", ident
    if not title:
        return f"file:{path.name}", str(n)
    digest = hashlib.sha1(" ".join(title.lower().split()).encode(), usedforsecurity=False).hexdigest()[:16]
    return f"file:{path.name}", digest


@dataclass
class CsvProblem:
    """Lines of a CSV file that could not be read as a row (broken quoting), and why."""

    first_line: int
    last_line: int
    reason: str

    @property
    def where(self) -> str:
        if self.last_line > self.first_line:
            return f"lines {self.first_line}–{self.last_line}"
        return f"line {self.first_line}"

    def text(self) -> str:
        return f"{self.where}: {self.reason}"


def _quoting_reason(error: str, first: int, last: int) -> str:
    """What a strict CSV parser's complaint means for the user, and what to do."""
    fix = 'close the quote (a quote inside a field is written twice: "")'
    if "unexpected end of data" in error:
        if last > first:
            return (f"a quote opened on line {first} is never closed, so lines {first}–{last} (to the end "
                    f"of the file) were read as one field and not imported; {fix}")
        return f"a quote opened on line {first} is never closed; {fix}"
    if last > first:
        return (f"broken quoting ({error}): a quote opened on line {first} runs on to line {last}, so "
                f"these lines were read as one field and not imported; {fix}")
    return f"broken quoting ({error}); {fix}"


def csv_rows(text: str) -> Iterator[tuple[int, list[str] | CsvProblem]]:
    """The rows of CSV ``text``, each with the line it starts on; broken quoting is a :class:`CsvProblem`.

    Why strict parsing: Python's lenient mode reads a quote left open as one field running to the
    next quote or the end of the file, silently swallowing every line in between; the strict parser
    stops there, and the lines it read past are reported by number (the rows after them are read as
    usual). Why the field size limit is raised: the ``csv`` module refuses a field over 131,072
    characters (an abstract can be longer), which aborted the whole file with a ``_csv.Error``; no
    field can be longer than the text, whose size the caller has bounded (``user_files``). The limit
    is process-wide, so it is only ever raised, never lowered under another reader."""
    if csv.field_size_limit() < len(text) + 1:
        csv.field_size_limit(len(text) + 1)
    reader = csv.reader(io.StringIO(text), strict=True)
    start = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            last = max(reader.line_num, start)
            yield start, CsvProblem(start, last, _quoting_reason(str(err), start, last))
            start = last + 1
            continue
        yield start, row
        start = reader.line_num + 1


def _refuse_problems(path: Path, problems: list[CsvProblem], what: str) -> None:
    """A records file with broken quoting is refused whole (nothing added), naming the lines: adding
    the rest would leave the swallowed records out without the user knowing which."""
    if not problems:
        return
    shown = "; ".join(shorten(p.text(), 240) for p in problems[:3])
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    raise UserFileError(f"{path}: {len(problems)} place(s) in the {what} could not be read, so nothing was "
                        f"added: {shown}{more}")


def _year(text: str) -> int | None:
    """A year from the start of ``text`` when it is exactly four digits (``2019``, ``2019-05-01``);
    ``10000000`` is no year (its first four digits are not one)."""
    match = _YEAR.match(text)
    return int(match.group(1)) if match else None


def read_csv_records(path: str | Path) -> list[ScreeningRecord]:
    """Records of a CSV with a header row (title, abstract, authors ``; ``-separated, year, journal,
    doi, pmid, source, external_id, ``label_included``). Lines with no title and no abstract are skipped.

    The file is read bounded (:func:`~kmds_desktop.user_files.read_user_text`: a regular file, at most
    :data:`MAX_RECORDS_FILE_BYTES` unless the environment raises it); broken quoting refuses the file
    with the lines named (see :func:`csv_rows`)."""
    path = Path(path)
    text = read_user_text(path, file_limit(MAX_RECORDS_FILE_BYTES), "records file")
    out = []
    problems: list[CsvProblem] = []
    header: list[str] | None = None
    n = 0
    for _line, fields in csv_rows(text):
        if isinstance(fields, CsvProblem):
            problems.append(fields)
            continue
        if header is None:
            header = [name.lower().strip() for name in fields]
            continue
        if not fields:
            continue
        n += 1
        row = {name: value for name, value in zip(header, fields, strict=False) if name}
        title = _first(row, "title", "primary_title")
        abstract = _first(row, "abstract", "notes_abstract")
        if not title and not abstract:
            continue
        source, ext = _file_identity(path, row, n, title)
        label_text = _first(row, "label_included", "included", "label").lower()
        authors = _first(row, "authors", "author")
        out.append(
            ScreeningRecord(
                source=source,
                external_id=ext,
                title=title,
                abstract=abstract,
                authors=[a.strip() for a in re.split(r";|\band\b", authors) if a.strip()],
                year=_year(_first(row, "year", "publication_year")),
                journal=_first(row, "journal", "publication", "secondary_title"),
                doi=normalize_doi(_first(row, "doi")),
                pmid=normalize_pmid(_first(row, "pmid")),
                url=_first(row, "url"),
                origins=[f"file {path.name}"],
                found_by=[f for f in _first(row, "found_by").split("; ") if f],
                label=True if label_text in _TRUE else False if label_text in _FALSE else None,
            )
        )
    _refuse_problems(path, problems, "CSV file")
    return out


def read_ris_records(path: str | Path) -> list[ScreeningRecord]:
    """Records of a RIS file (rispy), known by their ID/AN and DB, else PMID/DOI, else a title hash;
    read bounded as :func:`read_csv_records` reads."""
    import rispy  # why: rispy loads on first use, not at start-up

    path = Path(path)
    text = read_user_text(path, file_limit(MAX_RECORDS_FILE_BYTES), "records file")
    entries = rispy.loads(text)
    out = []
    for n, entry in enumerate(entries, start=1):
        title = str(entry.get("title") or entry.get("primary_title") or "")
        abstract = str(entry.get("abstract") or "")
        if not title and not abstract:
            continue
        ident = str(entry.get("id") or "")
        row = {"doi": str(entry.get("doi") or ""), "db": str(entry.get("name_of_database") or "")}
        if ":" in ident and row["db"] and ident.lower().startswith(row["db"].lower() + ":"):
            row.update(source=row["db"], external_id=ident.split(":", 1)[1])
        elif entry.get("accession_number") and row["db"]:
            row.update(source=row["db"], external_id=str(entry["accession_number"]))
        if row["db"].lower() == "pubmed" and str(entry.get("accession_number") or "").isdigit():
            row["pmid"] = str(entry["accession_number"])
        source, ext = _file_identity(path, row, n, title)
        out.append(
            ScreeningRecord(
                source=source,
                external_id=ext,
                title=title,
                abstract=abstract,
                authors=[str(a) for a in entry.get("authors") or entry.get("first_authors") or []],
                year=_year(str(entry.get("year") or entry.get("publication_year") or "")),
                journal=str(entry.get("secondary_title") or entry.get("journal_name") or ""),
                doi=normalize_doi(entry.get("doi")),
                pmid=normalize_pmid(row.get("pmid")),
                url=str((entry.get("urls") or [""])[0]),
                keywords=[str(k) for k in entry.get("keywords") or []],
                origins=[f"file {path.name}"],
                volume=str(entry.get("volume") or ""),
                issue=str(entry.get("number") or ""),
                pages="-".join(str(entry.get(k)) for k in ("start_page", "end_page") if entry.get(k)),
            )
        )
    return out


def read_records_file(path: str | Path) -> list[ScreeningRecord]:
    """A RIS (``.ris``/``.txt``) or CSV file's records. A MEDLINE ``.nbib`` or a tab-separated ``.tsv``
    is refused with what to do: read as RIS or CSV they came back as no records and no error."""
    suffix = Path(path).suffix.lower()
    if suffix in (".ris", ".txt"):
        return read_ris_records(path)
    if suffix == ".csv":
        return read_csv_records(path)
    if suffix == ".nbib":
        raise ValueError(f"{path}: a MEDLINE (.nbib) file; export the records as RIS from PubMed "
                         "(Send to → Citation manager) or import it into the literature database")
    raise ValueError(f"{path}: import a .csv (comma-separated) or .ris file")
