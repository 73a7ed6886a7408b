"""One paper on the literature side: :class:`Document`, the same type imported, stored, ranked, screened
and exported.

Why one type: the same paper used to be four (an importer's record, a database row, an export row and a
screening record), each with its own names for the same fields (``publication`` or ``journal``,
``source_name`` or ``source``) and its own idea of what "unknown" is (None, ``""``), so a field added to
one (volume, issue, pages) had to be threaded through all of them by hand. A :class:`Document` holds
only what is true of the paper wherever it is: its identity in its source, its bibliographic fields
(with the volume, issue and pages a reference manager needs to cite it) and room for its full text's
passages. What belongs to one search or one screening — the row id in the database that was searched,
the queries that found it, its rank, a decision — wraps a Document rather than widening it
(:class:`~kmds_desktop.literature.strategy.reference_files.FoundDocument`,
:class:`~kmds_desktop.literature.screening.records.ScreeningRecord`).

Conventions, so every reader sees the same values: text that is unknown is ``""`` (never None; the
loader writes ``""`` as SQL NULL), lists are lists (empty when unknown), ``year`` is filled from
``publication_date`` when only the date is known, and a field is spelled as a reference manager spells
it (``journal``, not the ``document`` table's ``publication``). A Document is frozen — a change is a
:func:`dataclasses.replace` — so a paper handed to the export cannot be altered by the screening that
holds it too; its lists are lists rather than tuples so the values compare equal to the lists every
caller and file already holds (it is therefore not hashable: key it by :attr:`Document.key`). It has
slots: a review or an import holds tens of thousands of Documents at once.

This module imports nothing from the rest of ``literature/`` (it is the bottom layer of the
``literature/ by job`` contract), so the store's importer can produce Documents as well as the
screening can hold them.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

_YEAR = re.compile(r"^\s*(\d{4})(?!\d)")


class DocumentPassage(Protocol):
    """What a Document needs of one passage of its full text (the full-text store's
    :class:`~kmds_desktop.literature.fulltext.passages.Passage` is one): its order, its pages, its text.

    Why a protocol and not that class: the full-text package sits above the store in the layers, and
    the store's importer produces Documents; a protocol gives the room without the import."""

    @property
    def ordinal(self) -> int: ...

    @property
    def start_page(self) -> int: ...

    @property
    def end_page(self) -> int: ...

    @property
    def text(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Document:
    """One paper: identity in its source, bibliographic fields, and its full text's passages if read."""

    #: The source's key ("pubmed", "cf", "medrxiv", a file's "file:refs.ris"): with ``external_id`` the
    #: identity that names the same paper in any database built from the same source.
    source: str
    external_id: str
    title: str = ""
    abstract: str = ""
    authors: list[str] = field(default_factory=list)
    #: The year alone (a RIS or CSV file often gives no more); filled from ``publication_date``.
    year: int | None = None
    #: The publication date as precise as the source says (a month or year alone is its first day).
    publication_date: dt.date | None = None
    journal: str = ""
    doi: str = ""
    pmid: str = ""
    url: str = ""
    keywords: list[str] = field(default_factory=list)
    mesh_terms: list[str] = field(default_factory=list)
    #: Where the article is in its journal, as the source writes it (pages "123-9" are 123 to 129).
    volume: str = ""
    issue: str = ""
    pages: str = ""
    #: The full text's passages, in order, when a full text has been read for this paper. Empty for a
    #: paper known by its abstract only — every Document the database, a search or a screening gives:
    #: full texts live in their own store (``literature/fulltext``), are read on demand, and are
    #: attached with ``dataclasses.replace(doc, passages=...)`` where they are needed (evidence).
    #: Never written to a screening store, a review file or an export (their formats stay as they are).
    passages: tuple[DocumentPassage, ...] = ()

    def __post_init__(self) -> None:
        if self.year is None and self.publication_date is not None:
            object.__setattr__(self, "year", self.publication_date.year)

    @property
    def key(self) -> tuple[str, str]:
        """(source, external id): the identity a review, a history and an index know the paper by."""
        return (self.source, self.external_id)

    @property
    def text(self) -> str:
        """Title and abstract, what a screening model and an embedding read."""
        return f"{self.title}\n{self.abstract}".strip()

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Document:
        """A Document from a mapping: a database row (``fetch_documents_by_ids``' dicts, with
        ``source_name``, ``publication``, an ISO ``publication_date`` and the citation columns beside),
        or any mapping with this class's own field names (``source``, ``journal``). Missing, None and
        empty values become the class's "unknown"; nothing else is changed (a DOI keeps its spelling)."""
        year = _year(row.get("year"))
        published = _date(row.get("publication_date"))
        return cls(
            source=_text(row.get("source_name") or row.get("source")),
            external_id=_text(row.get("external_id")),
            title=_text(row.get("title")),
            abstract=_text(row.get("abstract")),
            authors=_texts(row.get("authors")),
            year=year,
            publication_date=published,
            journal=_text(row.get("journal") or row.get("publication")),
            doi=_text(row.get("doi")),
            pmid=_text(row.get("pmid")),
            url=_text(row.get("url")),
            keywords=_texts(row.get("keywords")),
            mesh_terms=_texts(row.get("mesh_terms")),
            volume=_text(row.get("volume")),
            issue=_text(row.get("issue")),
            pages=_text(row.get("pages")),
        )


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _texts(value: Any) -> list[str]:
    """A list of text from a list (or one text); None and empty items are left out."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, Sequence):
        return [str(v) for v in value if v not in (None, "")]
    return []


def _year(value: Any) -> int | None:
    """A year from a number or from text that starts with exactly four digits ("2019", "2019-05")."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    match = _YEAR.match(str(value))
    return int(match.group(1)) if match else None


def _date(value: Any) -> dt.date | None:
    """A date from a date, a datetime or ISO text (``2023-02-01``); anything else is unknown."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value[:10])
        except ValueError:
            return None
    return None


class ReadsDocument:
    """The wrapped :class:`Document`'s fields, read-only, on a wrapper that holds it as ``document``.

    Why: what a search or a screening adds (found by, rank, a decision) wraps a Document, yet the code
    that shows, matches or writes a wrapped paper reads ``record.title`` as it always has; these
    properties keep those reads one attribute deep while a change of the paper itself can only be a new
    Document (``replace``), never an assignment through the wrapper."""

    document: Document

    @property
    def source(self) -> str:
        return self.document.source

    @property
    def external_id(self) -> str:
        return self.document.external_id

    @property
    def key(self) -> tuple[str, str]:
        """(source, external id) of the wrapped paper."""
        return self.document.key

    @property
    def title(self) -> str:
        return self.document.title

    @property
    def abstract(self) -> str:
        return self.document.abstract

    @property
    def text(self) -> str:
        """Title and abstract (what a model reads)."""
        return self.document.text

    @property
    def authors(self) -> list[str]:
        return self.document.authors

    @property
    def year(self) -> int | None:
        return self.document.year

    @property
    def journal(self) -> str:
        return self.document.journal

    @property
    def doi(self) -> str:
        return self.document.doi

    @property
    def pmid(self) -> str:
        return self.document.pmid

    @property
    def url(self) -> str:
        return self.document.url

    @property
    def keywords(self) -> list[str]:
        return self.document.keywords

    @property
    def volume(self) -> str:
        return self.document.volume

    @property
    def issue(self) -> str:
        return self.document.issue

    @property
    def pages(self) -> str:
        return self.document.pages
