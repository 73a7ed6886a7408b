"""Export literature search results: documents as CSV, RIS and BibTeX.

Plain Python (no Qt) so the GUI, the CLI and tests share one writer. Every writer reads
:class:`FoundDocument` s: a :class:`~kmds_desktop.literature.document.Document` with what the search
adds (its row id, the queries that found it). Callers may pass database rows (dicts), Documents or
objects with attributes; :func:`normalize_document` reads the common field names once so every format
sees the same values. The search log (everything needed
to repeat a search) is the application layer's: :mod:`kmds_desktop.app.search_log`.

Volume, issue and pages go out wherever the source had them (RIS ``VL``/``IS``/``SP``/``EP``, BibTeX
``volume``/``number``/``pages``, CSV columns): without them a reference manager cannot cite the
article. Pages are read as MEDLINE writes them ("123-9" is pages 123 to 129; see
:func:`~kmds_desktop.literature.store.citations.page_range`).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from kmds_desktop.literature.document import Document, ReadsDocument
from kmds_desktop.literature.store.citations import page_range
from kmds_desktop.literature.strategy.citation_names import key_stem, parse_author, to_ascii

#: The file formats the documents table can be exported to, with their usual extensions.
DOCUMENT_FORMATS: dict[str, str] = {"csv": ".csv", "ris": ".ris", "bibtex": ".bib"}

CSV_COLUMNS = (
    "id",
    "title",
    "year",
    "journal",
    "volume",
    "issue",
    "pages",
    "authors",
    "doi",
    "pmid",
    "source",
    "external_id",
    "url",
    "found_by",
    "abstract",
)


@dataclass(frozen=True)
class FoundDocument(ReadsDocument):
    """A :class:`~kmds_desktop.literature.document.Document` as one search (or one screening) hands it
    to a reader or a file: the paper, plus what is true only of that search.

    Why a wrapper: the row id belongs to the database that was searched and the queries that found
    the paper to that search, so they travel beside the Document rather than in it; the paper's own
    fields read through (``found.title``, ``found.volume``), so every writer reads one type."""

    document: Document
    #: The row id in the database searched, as text ("" for a paper from a file).
    id: str = ""
    #: The queries (search rows) that found the paper.
    found_by: list[str] = field(default_factory=list)
    #: Keywords this export adds to the paper's own (a screening's decision and exclusion reason).
    extra_keywords: list[str] = field(default_factory=list)

    @property
    def keywords(self) -> list[str]:
        """The paper's keywords, then the ones this export adds."""
        return [*self.document.keywords, *self.extra_keywords]


#: The name the views and earlier callers know the export row by: one :class:`FoundDocument`.
ExportDocument = FoundDocument


def _get(doc: Any, *names: str) -> Any:
    """First non-empty value among ``names`` from a mapping or an object's attributes."""
    for name in names:
        value = doc.get(name) if isinstance(doc, Mapping) else getattr(doc, name, None)
        if value not in (None, "", [], ()):
            return value
    return None


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    return [str(v) for v in value if v not in (None, "")]


def _year_of(doc: Any) -> int | None:
    year = _get(doc, "year")
    if year is None:
        pub_date = _get(doc, "publication_date", "date")
        if isinstance(pub_date, (date, datetime)):
            return pub_date.year
        if isinstance(pub_date, str) and re.match(r"^\d{4}", pub_date):
            return int(pub_date[:4])
        return None
    try:
        return int(str(year)[:4])
    except ValueError:
        return None


def normalize_document(doc: Any, found_by: Sequence[str] | None = None) -> FoundDocument:
    """Read a database document (a row dict, a :class:`Document`, or any object with attributes) into a
    :class:`FoundDocument`.

    ``found_by`` names the queries that found the document; when not given, a ``found_by``
    field of the document itself is used.
    """
    source = _get(doc, "source", "source_name") or ""
    external_id = str(_get(doc, "external_id") or "")
    pmid = _get(doc, "pmid")
    if pmid is None and str(source).lower() == "pubmed" and external_id:
        pmid = external_id
    published = _get(doc, "publication_date", "date")
    document = Document(
        source=str(source),
        external_id=external_id,
        title=str(_get(doc, "title") or ""),
        abstract=str(_get(doc, "abstract") or ""),
        authors=_as_list(_get(doc, "authors")),
        year=_year_of(doc),
        publication_date=_as_date(published),
        journal=str(_get(doc, "journal", "publication") or ""),
        doi=str(_get(doc, "doi") or ""),
        pmid=str(pmid or ""),
        url=str(_get(doc, "url") or ""),
        keywords=_as_list(_get(doc, "keywords")),
        mesh_terms=_as_list(_get(doc, "mesh_terms")),
        volume=str(_get(doc, "volume") or ""),
        issue=str(_get(doc, "issue") or ""),
        pages=str(_get(doc, "pages") or ""),
    )
    return FoundDocument(
        document,
        id=str(_get(doc, "id", "doc_id") or ""),
        found_by=list(found_by) if found_by is not None else _as_list(_get(doc, "found_by")),
    )


def _as_date(value: Any) -> date | None:
    """A date from a date, a datetime or ISO text ("2001-02-03"); None for anything else (a year
    alone is the document's year, not a date)."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str) and re.match(r"^\d{4}-\d{2}-\d{2}", value):
        try:
            return date.fromisoformat(value[:10])
        except ValueError:
            return None
    return None


def _normalized(
    documents: Iterable[Any], found_by: Mapping[Any, Sequence[str]] | None
) -> list[FoundDocument]:
    out = []
    for doc in documents:
        if isinstance(doc, FoundDocument):
            out.append(doc)
            continue
        key = _get(doc, "id", "doc_id")
        names = None
        if found_by is not None:
            names = found_by.get(key, found_by.get(str(key)))
        out.append(normalize_document(doc, names))
    return out


def _one_line(text: str) -> str:
    """Collapse whitespace so a value cannot break a line-based format."""
    return " ".join(text.split())


# --- CSV ------------------------------------------------------------------------------------------


def documents_to_csv(
    documents: Iterable[Any], found_by: Mapping[Any, Sequence[str]] | None = None
) -> str:
    """CSV with a header row; lists (authors, found_by) are joined with ``"; "``."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for d in _normalized(documents, found_by):
        writer.writerow(
            [
                d.id,
                d.title,
                "" if d.year is None else d.year,
                d.journal,
                d.volume,
                d.issue,
                d.pages,
                "; ".join(d.authors),
                d.doi,
                d.pmid,
                d.source,
                d.external_id,
                d.url,
                "; ".join(d.found_by),
                d.abstract,
            ]
        )
    return buf.getvalue()


# --- RIS ------------------------------------------------------------------------------------------


def source_identifier(d: FoundDocument) -> str:
    """The document's identifier in its own source (``"pubmed:123456"``, ``"scifact:4983"``).

    Unlike the database row id, this names the same document in any database built from the same
    source, so an exported file can be matched back to PubMed, the SciFact corpus and so on.
    """
    ident = d.pmid or d.external_id
    if not ident:
        return ""
    source = (d.source or ("pubmed" if d.pmid else "")).lower()
    if not source or ident.lower().startswith(source + ":"):
        return ident
    return f"{source}:{ident}"


def documents_to_ris(
    documents: Iterable[Any], found_by: Mapping[Any, Sequence[str]] | None = None
) -> str:
    """RIS (one ``TY  - JOUR`` ... ``ER  -`` record per document), readable by Zotero/EndNote.

    ``AU`` is ``Last, F. M.`` (readers split people at the comma); ``VL``, ``IS``, ``SP`` and ``EP``
    are volume, issue, first and last page where the source has them; ``ID`` is the source's own
    identifier (:func:`source_identifier`), ``AN`` the bare accession number (PMID, SciFact id),
    ``DB`` the source; ``T2`` is the journal, which Zotero reads as the publication title.
    """
    lines: list[str] = []

    def tag(name: str, value: Any) -> None:
        text = _one_line(str(value)) if value not in (None, "") else ""
        if text:
            lines.append(f"{name}  - {text}")

    for d in _normalized(documents, found_by):
        lines.append("TY  - JOUR")
        tag("ID", source_identifier(d))
        tag("TI", d.title)
        for author in d.authors:
            tag("AU", parse_author(author).display)
        tag("PY", d.year)
        tag("T2", d.journal)
        first, last = page_range(d.pages)
        tag("VL", d.volume)
        tag("IS", d.issue)
        tag("SP", first)
        tag("EP", last)
        tag("AB", d.abstract)
        tag("DO", d.doi)
        tag("AN", d.pmid or d.external_id)
        tag("UR", d.url or (f"https://doi.org/{d.doi}" if d.doi else ""))
        for keyword in d.keywords:
            tag("KW", keyword)
        tag("DB", d.source)
        if d.found_by:
            tag("N1", "found by: " + "; ".join(d.found_by))
        lines.append("ER  - ")
        lines.append("")
    return "\n".join(lines)


# --- BibTeX ---------------------------------------------------------------------------------------

_BIBTEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
#: Characters that would unbalance a verbatim field (DOI, URL), percent-encoded as in a URL.
_VERBATIM_UNSAFE = {"{": "%7B", "}": "%7D", "\\": "%5C"}


def bibtex_escape(text: str) -> str:
    """Escape LaTeX specials so any title or abstract keeps the braces of the entry balanced."""
    return "".join(_BIBTEX_SPECIAL.get(ch, ch) for ch in _one_line(text))


def bibtex_verbatim(text: str) -> str:
    """A DOI or URL as written (``10.1000/a_b`` stays so: biber and Zotero read these verbatim).

    Only what could unbalance the entry's braces is percent-encoded, and whitespace is removed.
    """
    return "".join(_VERBATIM_UNSAFE.get(ch, ch) for ch in "".join(text.split()))


def bibtex_pages(pages: str) -> str:
    """``123--129`` (BibTeX's page range, the last page written out), or the one page."""
    first, last = page_range(pages)
    return bibtex_escape(f"{first}--{last}" if last else first)


def bibtex_author(name: str) -> str:
    """One ``author`` list item: ``Last, F. M.`` for a person, ``{Group Name}`` for a group."""
    author = parse_author(name)
    if author.group:
        return "{" + bibtex_escape(author.group) + "}"
    return bibtex_escape(author.display)


def _bibtex_key(d: FoundDocument, used: set[str]) -> str:
    """``Surname`` + year + ``_`` + identifier, ASCII only ("Müller" -> "Muller"), unique in the file."""
    base = key_stem(d.authors) + str(d.year or "")
    ident = re.sub(r"[^A-Za-z0-9]", "", to_ascii(d.pmid or d.external_id or d.id))
    key = f"{base}_{ident}" if ident else base
    candidate, n = key, 1
    while candidate in used:
        n += 1
        candidate = f"{key}_{n}"
    used.add(candidate)
    return candidate


def documents_to_bibtex(
    documents: Iterable[Any], found_by: Mapping[Any, Sequence[str]] | None = None
) -> str:
    """BibTeX ``@article`` entries with unique, stable ASCII keys (first author, year, identifier).

    Titles are brace-protected (``{{...}}``) so styles keep their capitals ("DNA", "CF"); DOIs
    and URLs are written verbatim; every entry carries the source's identifier as biblatex's
    ``eprint``/``eprinttype`` (and ``pmid`` for PubMed, which Zotero and JabRef read).
    """
    used: set[str] = set()
    entries = []
    for d in _normalized(documents, found_by):
        fields: list[tuple[str, str]] = []
        if d.title:
            fields.append(("title", "{" + bibtex_escape(d.title) + "}"))
        if d.authors:
            fields.append(("author", " and ".join(bibtex_author(a) for a in d.authors)))
        if d.year is not None:
            fields.append(("year", str(d.year)))
        fields += [
            ("journal", bibtex_escape(d.journal)),
            ("volume", bibtex_escape(d.volume)),
            ("number", bibtex_escape(d.issue)),
            ("pages", bibtex_pages(d.pages)),
            ("doi", bibtex_verbatim(d.doi)),
            ("pmid", bibtex_escape(d.pmid)),
            ("eprint", bibtex_escape(d.pmid or d.external_id)),
            ("eprinttype", bibtex_escape(d.source.lower())),
            ("url", bibtex_verbatim(d.url)),
            ("abstract", bibtex_escape(d.abstract)),
            ("keywords", bibtex_escape(", ".join(d.keywords))),
            ("note", bibtex_escape("found by: " + "; ".join(d.found_by)) if d.found_by else ""),
        ]
        body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields if value)
        entries.append(f"@article{{{_bibtex_key(d, used)},\n{body}\n}}\n")
    return "\n".join(entries)


_WRITERS = {"csv": documents_to_csv, "ris": documents_to_ris, "bibtex": documents_to_bibtex}


def format_for_path(path: str | Path) -> str:
    """The document format a file name asks for by its suffix (``.ris``, ``.bib``, ``.csv``);
    ``ValueError`` for any other."""
    suffix = Path(path).suffix.lower()
    for fmt, ext in DOCUMENT_FORMATS.items():
        if suffix == ext:
            return fmt
    raise ValueError(f"{path}: the documents file must end in "
                     f"{', '.join(DOCUMENT_FORMATS.values())}")


def export_documents(
    documents: Iterable[Any],
    path: str | Path,
    fmt: str,
    found_by: Mapping[Any, Sequence[str]] | None = None,
) -> Path:
    """Write ``documents`` to ``path`` in ``fmt`` (``csv``, ``ris`` or ``bibtex``); returns the path."""
    key = fmt.lower().lstrip(".")
    key = {"bib": "bibtex"}.get(key, key)
    if key not in _WRITERS:
        raise ValueError(f"unknown export format {fmt!r}: use one of {', '.join(DOCUMENT_FORMATS)}")
    path = Path(path)
    text = _WRITERS[key](documents, found_by)
    # newline="" keeps the CSV module's line endings; UTF-8 without BOM is what Zotero and pandas expect.
    path.write_text(text, encoding="utf-8", newline="")
    return path
