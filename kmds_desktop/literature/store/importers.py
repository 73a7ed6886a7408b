"""Readers for the corpus formats the app imports: shared JSONL, MEDLINE/PubMed XML, PubMedQA JSON.

Readers only parse; :mod:`kmds_desktop.literature.store.loading` writes. Each reader yields a
:class:`~kmds_desktop.literature.document.Document` for every usable record (the type the store
fetches, a screening holds and an export writes) and a :class:`BadRecord` (with its position: line,
record number, entry key) for a malformed one, so one bad record never stops a file. A file that cannot be
read at all raises :class:`~kmds_desktop.literature.errors.ImportFileError`; the loader then rolls the
whole file back.

PubMed records from every format use the PMID as external id (source ``pubmed``), so the same article
imported from JSONL, MEDLINE XML and PubMedQA is one document. medRxiv records use the bare DOI as
external id (``10.1101/...``, never ``medrxiv:10.1101/...``), as BMLibrarian's medRxiv importer stores
them, so a preprint in a shared BMLibrarian database is one document whichever program imported it.

Damaged or hostile input stays one record's problem where it can: a date part that cannot be read
makes the date coarser (the record is kept), a JSON line nested too deeply is a :class:`BadRecord`, and
text reaches PostgreSQL without the NUL characters and lone surrogates it refuses (which would roll
the whole file back). Memory is bounded per record: a JSONL line longer than
:data:`MAX_RECORD_BYTES` is skipped (as a :class:`BadRecord`, read past without being held), while
XML past that size, or past :data:`MAX_RECORD_ELEMENTS`, without a record ending stops the file with
an :class:`~kmds_desktop.literature.errors.ImportFileError` (the parser holds the record's tree, so it
cannot be skipped); a whole-file JSON (PubMedQA) past :data:`MAX_JSON_FILE_BYTES` is refused the same
way. A ``.gz`` that decompresses to one endless line or element costs no more than these bounds.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import re
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeGuard
from xml.etree.ElementTree import ParseError

from kmds_desktop.literature.document import Document
from kmds_desktop.literature.errors import ImportFileError
from kmds_desktop.user_files import ENV_MAX_GZIP_RATIO, UserFileError, env_limit, open_user_file, size_text

_MONTHS = {m: i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], start=1)}
_SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}

#: Most bytes of one record: one JSONL line, or the XML read (decompressed) between two record ends.
#: The largest real PubMed records are under 1 MB; the bound only stops a damaged or hostile file
#: (a ``.gz`` that decompresses to one line or element without end) from exhausting memory.
MAX_RECORD_BYTES = 64 << 20
#: Most XML elements started between two record ends (each costs about 100 bytes once parsed, so
#: 64 MiB of ``<a/>`` would cost gigabytes); the largest PubMed records have tens of thousands.
MAX_RECORD_ELEMENTS = 1_000_000
#: Most bytes (decompressed) of a file parsed whole, as PubMedQA's JSON is: PubMedQA's largest file
#: (211,269 artificial instances) is a few hundred MB.
MAX_JSON_FILE_BYTES = 1 << 30
_SKIP_CHUNK = 1 << 20  # bytes read at a time from a file parsed whole
#: A ``.gz`` may decompress to at most this many times its size on disk (see :class:`_CappedGzip`):
#: about ten times what the real corpus files measured here expand to (3.1x to 6.0x).
MAX_GZIP_RATIO = 50
#: The least cap on a ``.gz`` file's decompressed size, so a small file of repetitive records is read.
MIN_GZIP_CAP = 8 << 20


def _size(n: int) -> str:
    """A limit for a message: ``64 MiB``, or bytes where it is no whole number of MiB."""
    return f"{n >> 20:,} MiB" if n and n % (1 << 20) == 0 else f"{n:,} bytes"


@dataclass
class BadRecord:
    """A record that was skipped; ``position`` says where it is in its file."""

    position: str
    message: str


@dataclass
class Note:
    """Something about the file worth telling the user that is not a record."""

    message: str


@dataclass
class Withdrawal:
    """Records the file says are deleted (a MEDLINE update file's ``DeleteCitation``)."""

    source: str
    external_ids: list[str]


#: What a reader yields: a :class:`~kmds_desktop.literature.document.Document` for each usable record.
Item = Document | BadRecord | Note | Withdrawal


def detect_format(path: Path) -> str:
    """``jsonl``, ``medline`` or ``pubmedqa`` from the file name (a ``.gz`` suffix is allowed)."""
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith(".jsonl") or name.endswith(".ndjson"):
        return "jsonl"
    if name.endswith(".xml"):
        return "medline"
    if name.endswith(".json"):
        return "pubmedqa"
    raise ImportFileError(
        f"{path}: unknown file type; import .jsonl (shared corpus format), .xml / .xml.gz "
        "(MEDLINE or PubMed XML) or .json (PubMedQA)"
    )


class ReadMeter:
    """How far a reader has got into its file: bytes read from the disk (compressed bytes for a
    ``.gz``), so a loader can show progress against the files' sizes while the file is parsed."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._last = 0

    def attach(self, raw: IO[bytes]) -> None:
        self._file, self._last = raw, 0

    @property
    def bytes_read(self) -> int:
        """Bytes of the file read so far (the last position seen once the file is closed)."""
        if self._file is not None:
            try:
                self._last = max(self._last, self._file.tell())
            except (OSError, ValueError):  # closed: keep the last position seen
                self._file = None
        return self._last


class _CappedGzip:
    """A ``.gz`` file's decompressed bytes, stopping with an :class:`ImportFileError` past ``cap``.

    Why: every reader bounds one record, but not a file's length, and a ``.gz`` chooses its own: 305 KB
    of compressed blank lines took 104 s of CPU to read as 300 MB of nothing. Real corpus files
    expand 3 to 6 times (MEDLINE XML 6.0x, the shared JSONL corpora 3.1 to 5.2x), so the cap is
    :data:`MAX_GZIP_RATIO` times the size on disk (at least :data:`MIN_GZIP_CAP`), which the
    environment variable ``KMDS_DESKTOP_MAX_GZIP_RATIO`` raises; the message says both ways on."""

    def __init__(self, raw: IO[bytes], path: Path, size: int, ratio: int, meter: ReadMeter | None) -> None:
        self._raw, self._meter = raw, meter
        self._gz = gzip.GzipFile(fileobj=raw, mode="rb")
        self._path, self._size, self._ratio = path, size, ratio
        self._cap = max(size * ratio, MIN_GZIP_CAP)
        self._given = 0

    def _count(self, data: bytes) -> bytes:
        self._given += len(data)
        if self._given > self._cap:
            floor = size_text(MIN_GZIP_CAP)
            raise ImportFileError(
                f"{self._path}: decompresses to more than {size_text(self._cap)}, the cap for this .gz file "
                f"({self._ratio} times its {size_text(self._size)} on disk, at least {floor}), so nothing "
                "from it was imported; if the file is genuine, gunzip it and import the plain file, or raise "
                f"the cap with the environment variable {ENV_MAX_GZIP_RATIO} (now {self._ratio})")
        return data

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:  # never unbounded: at most one byte past the cap
            size = self._cap + 1 - self._given
        return self._count(self._gz.read(max(size, 0)))

    def readline(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = self._cap + 1 - self._given
        return self._count(self._gz.readline(max(size, 0)))

    def close(self) -> None:
        if self._meter is not None:
            _ = self._meter.bytes_read  # the position at the end, kept by the meter once closed
        try:
            self._gz.close()
        finally:
            self._raw.close()  # GzipFile leaves a file object it was given open

    def __enter__(self) -> _CappedGzip:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _open_binary(path: Path, meter: ReadMeter | None = None) -> IO[bytes]:
    """``path`` for reading (decompressed when it is a ``.gz``): only a regular file (a link to
    ``/dev/zero`` or a FIFO is refused, see :mod:`kmds_desktop.user_files`), and a ``.gz`` capped."""
    try:
        raw = open_user_file(path, "corpus file")
        size = os.fstat(raw.fileno()).st_size
        ratio = env_limit(ENV_MAX_GZIP_RATIO, MAX_GZIP_RATIO) if path.name.lower().endswith(".gz") else 0
    except UserFileError as err:
        raise ImportFileError(str(err)) from None
    if meter is not None:
        meter.attach(raw)
    if ratio:
        return _CappedGzip(raw, path, size, ratio, meter)  # type: ignore[return-value]
    return raw


_READ_ERRORS = (OSError, EOFError, zlib.error, gzip.BadGzipFile, UnicodeDecodeError)


def read_records(path: Path, meter: ReadMeter | None = None) -> Iterator[Item]:
    """Records of ``path`` in file order (format from :func:`detect_format`); ``meter`` follows how
    much of the file has been read."""
    fmt = detect_format(path)
    reader = {"jsonl": read_jsonl, "medline": read_medline_xml, "pubmedqa": read_pubmedqa}[fmt]
    yield from reader(path, meter)


# -- helpers ---------------------------------------------------------------------------------------
_SURROGATES = re.compile("[\ud800-\udfff]")


def _clean(value: Any) -> str | None:
    """``value`` as one line of text with its runs of white space made single spaces, or None.

    Every text a reader gives PostgreSQL comes through here, so here it loses what PostgreSQL
    refuses: NUL characters (JSON's ``\\u0000``) are dropped and lone surrogates (JSON's
    ``\\ud800`` without its pair, which cannot be encoded as UTF-8) become U+FFFD; either would
    otherwise fail the COPY and roll the whole file back."""
    if value is None:
        return None
    text = str(value)
    if not text.isascii():  # O(1) in CPython: the scan only runs for text with non-ASCII characters
        text = _SURROGATES.sub("\ufffd", text)
    if "\x00" in text:
        text = text.replace("\x00", "")
    text = " ".join(text.split())
    return text or None


def _is_pmid(text: str | None) -> TypeGuard[str]:
    """Whether ``text`` is a PMID: ASCII digits only (``str.isdigit`` alone also takes '²' or '١')."""
    return text is not None and text.isascii() and text.isdigit()


def _clean_doi(value: Any) -> str | None:
    text = _clean(value)
    if not text:
        return None
    text = re.sub(r"^(https?://(dx\.)?doi\.org/|doi:\s*)", "", text, flags=re.IGNORECASE)
    return text or None


_JSON_TYPES = {dict: "an object", list: "a list", bool: "true/false", int: "a number", float: "a number",
               str: "text"}


def _kind(value: Any) -> str:
    """How a JSON value's type reads in a message (``a list``, ``a number``)."""
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _text_field(data: dict[str, Any], name: str, *, numbers: bool = False) -> str | None:
    """The text of field ``name`` (None when absent or null), refusing another type.

    Why refuse: ``str()`` of a list stored ``['a', 'b']`` as an abstract, a wrong value that looks
    like data; the record is skipped with its line number instead, so the user can fix the source.
    ``numbers`` also takes a whole number (an id or PMID written as a JSON number)."""
    value = data.get(name)
    if value is None or isinstance(value, str):
        return _clean(value)
    if numbers and isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return str(value)
    raise ValueError(f"field {name!r} is {_kind(value)}, expected text")


def _str_list(value: Any, name: str = "field") -> list[str]:
    """A list of text (one text is a list of one); any other type, or an item that is not text, is
    refused rather than written as its Python spelling."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ValueError(f"{name} is {_kind(value)}, expected a list of text")
    for number, item in enumerate(value, start=1):
        if item is not None and not isinstance(item, str):
            raise ValueError(f"{name} item {number} is {_kind(item)}, expected text")
    return [t for t in (_clean(v) for v in value) if t]


_YEAR_TEXT = re.compile(r"\s*(\d{4})(?!\d)")


def _year_date(value: Any) -> dt.date | None:
    """January 1st of a year given as a whole number (``2019``, or ``2019.0`` as some writers put it)
    or as text that starts with four digits (``"2019"``, ``"2019-05"``); anything else is refused:
    10^30 is no year, and its first four digits (1000) are not one either."""
    if value is None or value == "":
        return None
    year: int | None = None
    if isinstance(value, (bool, list, dict)):
        raise ValueError(f"year is {_kind(value)}, expected a number")
    if isinstance(value, int):
        year = value
    elif isinstance(value, float):
        year = int(value) if value.is_integer() and abs(value) < 1e6 else None
    elif isinstance(value, str):
        match = _YEAR_TEXT.match(value)
        year = int(match.group(1)) if match else None
    if year is None or not 1000 <= year <= 9999:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
        raise ValueError(f"year {shown} is not a year from 1000 to 9999")
    return dt.date(year, 1, 1)


def _number(text: str, digits: int) -> int | None:
    """``text`` as a number if it is 1 to ``digits`` ASCII digits, else None.

    Why not ``int(text)`` after ``text.isdigit()``: ``isdigit`` takes '²', which ``int`` refuses,
    and a 20-digit month reads as a number ``datetime.date`` cannot take (OverflowError)."""
    if 0 < len(text) <= digits and text.isascii() and text.isdigit():
        return int(text)
    return None


def parse_partial_date(year: Any, month: Any = None, day: Any = None) -> dt.date | None:
    """A date from possibly partial parts (missing month/day -> 1); month may be a name, season or
    number.

    A part that cannot be read makes the date coarser instead of losing the record: a bad day gives
    the month's first day, a bad month the year's (which the loader treats as year-only precision),
    and a year that is not four ASCII digits (or year 0) gives no date. Numbers are read only from
    ASCII digits of bounded length (month and day up to 2, year 4), so no part can overflow."""
    if year in (None, ""):
        return None
    year_text = str(year).strip()
    y = _number(year_text, 4) if len(year_text) == 4 else None  # "10000" is no year, nor is its "1000"
    if y is None:
        return None
    m: int | None = 1
    if month not in (None, ""):
        text = str(month).strip().lower()
        m = _number(text, 2)
        if m is None and not text.isdigit():
            m = _MONTHS.get(text[:3]) or _SEASONS.get(text)
        if m is not None and not 1 <= m <= 12:
            m = None
    d = None
    if m is not None and day not in (None, ""):
        d = _number(str(day).strip(), 2)
    for mm, dd in ((m, d), (m, 1), (1, 1)):  # as given, then coarser
        if mm is None or dd is None:
            continue
        try:
            return dt.date(y, mm, dd)
        except (ValueError, OverflowError):
            continue
    return None


# -- JSONL ------------------------------------------------------------------------------------------
_LINE_BLOCK = 1 << 20  # bytes of a JSONL file read at a time
#: A line with something on it, from its start (``re.M``) to its end; blank lines never match.
_CONTENT_LINE = re.compile(rb"^[^\S\n]*\S[^\n]*", re.MULTILINE)


def _lines(raw: IO[bytes], limit: int) -> Iterator[tuple[int, bytes | None]]:
    """The lines of ``raw`` that are not blank, each with its number (from 1) and without its
    newline; None for one longer than ``limit`` bytes.

    Why not iterate a text wrapper: it holds a whole line however long, so a ``.gz`` that
    decompresses to one endless line would exhaust memory. Here at most ``limit`` bytes of a line are
    held; an over-long line is read past and dropped. Why blocks and a regular expression, not
    ``readline``: blank lines are found and counted in C, so a file of millions of them (a
    compressed one costs a few hundred KB) reads in a fraction of a second, not minutes."""
    lineno = 1  # the number of the line ``carry`` is the start of
    carry = bytearray()  # the start of a line whose end has not been read yet
    too_long = False  # that line is past ``limit``: its bytes are not kept
    while block := raw.read(_LINE_BLOCK):
        first = block.find(b"\n")
        if first < 0:  # the whole block continues the line in ``carry``
            if not too_long:
                carry += block
                if len(carry) > limit:
                    carry, too_long = bytearray(), True
            continue
        if too_long or len(carry) + first > limit:
            yield lineno, None
        else:
            carry += block[:first]
            if carry.strip():
                yield lineno, bytes(carry)
        carry, too_long = bytearray(), False
        lineno += 1
        last = block.rfind(b"\n")
        pos = first + 1  # ``lineno`` is the number of the line that starts at ``pos``
        for match in _CONTENT_LINE.finditer(block, pos, last):
            lineno += block.count(b"\n", pos, match.start())
            pos = match.start()
            line = match.group()
            yield lineno, (line if len(line) <= limit else None)
        lineno += block.count(b"\n", pos, last + 1)
        carry += block[last + 1:]
        if len(carry) > limit:
            carry, too_long = bytearray(), True
    if too_long:
        yield lineno, None
    elif carry.strip():
        yield lineno, bytes(carry)


def read_jsonl(path: Path, meter: ReadMeter | None = None) -> Iterator[Item]:
    """The shared format: ``{id, title, abstract, year, authors, journal, doi, pmid, source, origin}``.

    A line that is not JSON, nested too deeply for the parser, longer than :data:`MAX_RECORD_BYTES`
    or not a usable record (a field of the wrong type: a list for an abstract, a number for a title,
    a year that is not one) is a :class:`BadRecord` with its line number; bytes that are not UTF-8
    stop the file."""
    with _open_binary(path, meter) as raw:
        lineno = 0
        try:
            for lineno, line in _lines(raw, MAX_RECORD_BYTES):
                if line is None:
                    yield BadRecord(f"line {lineno}", f"longer than {_size(MAX_RECORD_BYTES)}, the limit "
                                    "for one record (real records are under 1 MB); skipped unread")
                    continue
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise ImportFileError(f"{path}: line {lineno} is not UTF-8 text ({err.reason} at byte "
                                          f"{err.start})") from None
                try:
                    data = json.loads(text)
                except json.JSONDecodeError as err:
                    yield BadRecord(f"line {lineno}", f"not valid JSON ({err.msg})")
                    continue
                except RecursionError:  # [[[[... deeper than the interpreter's stack allows
                    yield BadRecord(f"line {lineno}", "not valid JSON (nested too deeply)")
                    continue
                except ValueError as err:  # a number of more than 4,300 digits, which int() refuses
                    yield BadRecord(f"line {lineno}", f"not a usable record ({err})")
                    continue
                try:
                    yield _jsonl_record(data)
                except (ValueError, TypeError, KeyError) as err:
                    yield BadRecord(f"line {lineno}", str(err))
                except RecursionError:  # a field nested almost as deep as json allows, made text
                    yield BadRecord(f"line {lineno}", "a field is nested too deeply")
        except _READ_ERRORS as err:
            raise ImportFileError(f"{path}: cannot read past line {lineno}: {err}") from None


def _jsonl_record(data: Any) -> Document:
    if not isinstance(data, dict):
        raise ValueError("a record must be a JSON object")
    rec_id = _text_field(data, "id", numbers=True)
    prefix = rec_id.split(":", 1)[0] if rec_id and ":" in rec_id else ""
    source = (_text_field(data, "source") or prefix).lower()
    pmid = _text_field(data, "pmid", numbers=True)
    if source == "pubmed" or (not source and pmid):
        source = "pubmed"
        if not _is_pmid(pmid):
            raise ValueError(f"PubMed record {rec_id!r} has no valid pmid")
        external_id = pmid
    else:
        if not rec_id:
            raise ValueError("record has no id")
        if not source:
            raise ValueError(f"record {rec_id!r} has no source")
        external_id = rec_id
        if source == "medrxiv":  # BMLibrarian's key for a preprint: the bare DOI
            bare = rec_id.split(":", 1)[1] if rec_id.lower().startswith("medrxiv:") else rec_id
            external_id = _clean_doi(_text_field(data, "doi")) or _clean_doi(bare) or rec_id
    is_preprint_doi = source == "medrxiv" and external_id.startswith("10.")
    title, abstract = _text_field(data, "title"), _text_field(data, "abstract")
    if not title and not abstract:
        raise ValueError(f"record {rec_id or pmid!r} has neither title nor abstract")
    pub_date = None
    date_text = _text_field(data, "publication_date")
    if date_text:
        parts = date_text.split("-")
        year_match = _YEAR_TEXT.match(parts[0])
        if not year_match:
            raise ValueError(f"publication_date {date_text[:40]!r} does not start with a 4-digit year")
        pub_date = parse_partial_date(year_match.group(1), *parts[1:3])
    elif data.get("year") is not None:
        pub_date = _year_date(data.get("year"))
    doi = _clean_doi(_text_field(data, "doi")) or (external_id if is_preprint_doi else None)
    return _document(
        source,
        external_id,
        title=title,
        abstract=abstract,
        authors=_str_list(data.get("authors"), "authors"),
        journal=_text_field(data, "journal") or _text_field(data, "publication"),
        publication_date=pub_date,
        doi=doi,
        mesh_terms=_str_list(data.get("mesh_terms"), "mesh_terms"),
        keywords=_str_list(data.get("keywords"), "keywords"),
        url=_text_field(data, "url"),
        volume=_text_field(data, "volume", numbers=True),
        issue=_text_field(data, "issue", numbers=True),
        pages=_text_field(data, "pages", numbers=True),
    )


def _document(source: str, external_id: str, *, title: str | None = None, abstract: str | None = None,
              authors: list[str] | None = None, journal: str | None = None,
              publication_date: dt.date | None = None, doi: str | None = None,
              mesh_terms: list[str] | None = None, keywords: list[str] | None = None, url: str | None = None,
              volume: str | None = None, issue: str | None = None, pages: str | None = None) -> Document:
    """A read record as the :class:`Document` the store will give back for it: unknown text is ``""``,
    a PubMed record's PMID is its external id, and the landing page BMLibrarian stores is filled in
    where the record brings no URL (:func:`default_url`), so what was read equals what is fetched."""
    return Document(
        source=source, external_id=external_id, title=title or "", abstract=abstract or "",
        authors=authors or [], publication_date=publication_date, journal=journal or "", doi=doi or "",
        pmid=external_id if source == "pubmed" else "",
        url=url or default_url(source, external_id, doi) or "", keywords=keywords or [],
        mesh_terms=mesh_terms or [], volume=volume or "", issue=issue or "", pages=pages or "")


def default_url(source: str, external_id: str, doi: str | None) -> str | None:
    """The landing page BMLibrarian's importers store in ``url`` when a record brings none."""
    if source == "pubmed" and _is_pmid(external_id):
        return f"https://pubmed.ncbi.nlm.nih.gov/{external_id}/"
    if source == "medrxiv" and (doi or external_id).startswith("10."):
        return f"https://www.medrxiv.org/content/{doi or external_id}"
    return None


# -- MEDLINE / PubMed XML -------------------------------------------------------------------------------
def _text(el: Any) -> str | None:
    return _clean("".join(el.itertext())) if el is not None else None


def _medline_record(mc: Any, pubmed_data: Any | None) -> Document:
    pmid = _clean(mc.findtext("PMID"))
    if not _is_pmid(pmid):
        raise ValueError("citation has no PMID")
    art = mc.find("Article")
    if art is None:
        raise ValueError(f"PMID {pmid}: citation has no Article element")
    title = _text(art.find("ArticleTitle")) or _text(art.find("VernacularTitle"))
    parts = []
    for el in art.findall("Abstract/AbstractText"):
        body = _text(el)
        if not body:
            continue
        label = _clean(el.get("Label"))
        parts.append(f"{label}: {body}" if label else body)
    abstract = " ".join(parts) or None
    if not title and not abstract:
        raise ValueError(f"PMID {pmid}: neither title nor abstract")
    authors = []
    for au in art.findall("AuthorList/Author"):
        last = _clean(au.findtext("LastName"))
        if last:
            initials = _clean(au.findtext("Initials"))
            authors.append(f"{last} {initials}" if initials else last)
        else:
            collective = _text(au.find("CollectiveName"))
            if collective:
                authors.append(collective)
    journal = _clean(art.findtext("Journal/Title")) or _clean(mc.findtext("MedlineJournalInfo/MedlineTA"))
    pub_date = None
    pd = art.find("Journal/JournalIssue/PubDate")
    if pd is not None:
        if pd.findtext("Year"):
            pub_date = parse_partial_date(pd.findtext("Year"), pd.findtext("Month") or pd.findtext("Season"),
                                          pd.findtext("Day"))
        elif pd.findtext("MedlineDate"):
            m = re.match(r"\s*(\d{4})(?:\s+([A-Za-z]+))?", pd.findtext("MedlineDate") or "")
            if m:
                pub_date = parse_partial_date(m.group(1), m.group(2))
    if pub_date is None:
        ad = art.find("ArticleDate")
        if ad is not None:
            pub_date = parse_partial_date(ad.findtext("Year"), ad.findtext("Month"), ad.findtext("Day"))
    doi = None
    for el in art.findall("ELocationID"):
        if el.get("EIdType") == "doi":
            doi = _clean_doi(el.text)
            break
    if doi is None and pubmed_data is not None:
        for el in pubmed_data.findall("ArticleIdList/ArticleId"):
            if el.get("IdType") == "doi":
                doi = _clean_doi(el.text)
                break
    mesh = [t for t in (_text(el) for el in mc.findall("MeshHeadingList/MeshHeading/DescriptorName")) if t]
    keywords = [t for t in (_text(el) for el in mc.findall("KeywordList/Keyword")) if t]
    return _document("pubmed", pmid, title=title, abstract=abstract, authors=authors, journal=journal,
                     publication_date=pub_date, doi=doi, mesh_terms=mesh, keywords=keywords,
                     volume=_clean(art.findtext("Journal/JournalIssue/Volume")),
                     issue=_clean(art.findtext("Journal/JournalIssue/Issue")), pages=_medline_pages(art))


def _medline_pages(art: Any) -> str | None:
    """The article's pages as MEDLINE writes them: ``MedlinePgn`` ("123-9"), else its StartPage and
    EndPage ("61-76"), else None."""
    pages = _clean(art.findtext("Pagination/MedlinePgn"))
    if pages:
        return pages
    start, end = _clean(art.findtext("Pagination/StartPage")), _clean(art.findtext("Pagination/EndPage"))
    return f"{start}-{end}" if start and end else start


_XML_CHUNK = 1 << 16  # bytes parsed at a time: memory stays bounded whatever the file's size


class _RootSeen:
    """Target of the guard parser: notes that the root element has started (and builds nothing)."""

    started = False

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        self.started = True

    def end(self, tag: str) -> None:
        pass

    def data(self, data: str) -> None:
        pass

    def close(self) -> None:
        return None


def _xml_events(raw: IO[bytes]) -> Iterator[tuple[int, Iterator[tuple[Any, ...]]]]:
    """The ``start``/``end`` events of an XML stream, one iterator per ``_XML_CHUNK`` bytes read,
    each with the bytes fed to the parser so far (what the caller bounds one record by).

    defusedxml's safety at the speed of ElementTree's C parser (1.5x faster on MEDLINE): the bytes
    before the root element (the prolog, the only place where a DTD, and so an entity declaration,
    can be) go through defusedxml's parser first, which refuses entity declarations and external
    references (billion laughs, XXE); once the root element has started nothing can declare an entity
    any more, and the C parser loads no external DTD or entity, so an undeclared reference is refused
    as not well-formed, never fetched. The caller clears each record once read."""
    from defusedxml.ElementTree import DefusedXMLParser  # why: defusedxml loads on first use, not at start-up

    seen = _RootSeen()
    guard = DefusedXMLParser(target=seen)
    parser: ET.XMLPullParser = ET.XMLPullParser(events=("start", "end"))
    fed = 0
    while chunk := raw.read(_XML_CHUNK):
        if not seen.started:
            guard.feed(chunk)  # raises before the C parser sees a refused declaration
        parser.feed(chunk)
        fed += len(chunk)
        yield fed, parser.read_events()
    parser.close()
    yield fed, parser.read_events()


def read_medline_xml(path: Path, meter: ReadMeter | None = None) -> Iterator[Item]:
    """``MedlineCitationSet`` (MEDLINE 2016 DTD) and ``PubmedArticleSet`` (current DTD), streamed:
    gzip and XML are decoded a chunk at a time (see :func:`_xml_events` for the safety) and each
    record is dropped once read, so memory stays bounded whatever the file's size.

    The PMIDs of an update file's ``DeleteCitation`` come as one :class:`Withdrawal`; the loader
    marks those documents withdrawn rather than deleting them, so saved searches still resolve.

    Memory is bounded per record too: the XML between two record ends (a record, or anything else
    held until a child of the root ends) may be at most :data:`MAX_RECORD_BYTES` decompressed and
    :data:`MAX_RECORD_ELEMENTS` elements; past that the file stops with an ImportFileError, since
    the parser holds the unfinished record and it cannot be skipped.
    """
    count = 0
    depth = 0  # elements open (the root is depth 1)
    root: Any = None
    record_tag = "PubmedArticle"  # MedlineCitation, a child of the root, in a MedlineCitationSet
    mark = 0  # bytes fed when the last record (or child of the root) ended: what is held starts there
    elements = 0  # elements started since then
    with _open_binary(path, meter) as raw:
        try:
            for fed, events in _xml_events(raw):
                for event, el in events:
                    if event == "start":
                        depth += 1
                        elements += 1
                        if elements > MAX_RECORD_ELEMENTS:
                            raise ImportFileError(_too_big(path, count, f"{MAX_RECORD_ELEMENTS:,} elements"))
                        if root is None:
                            root = el
                            if el.tag not in ("MedlineCitationSet", "PubmedArticleSet"):
                                raise ImportFileError(
                                    f"{path}: root element <{el.tag}> is not MEDLINE/PubMed XML "
                                    "(expected <MedlineCitationSet> or <PubmedArticleSet>)"
                                )
                            if el.tag == "MedlineCitationSet":
                                record_tag = "MedlineCitation"
                        continue
                    depth -= 1
                    tag = el.tag
                    if tag == record_tag and (depth == 1 or record_tag == "PubmedArticle"):
                        count += 1
                        mc = el if tag == "MedlineCitation" else el.find("MedlineCitation")
                        pmid = _clean(mc.findtext("PMID")) if mc is not None else None
                        try:
                            if mc is None:
                                raise ValueError("article has no MedlineCitation")
                            yield _medline_record(mc, el.find("PubmedData"))
                        except (ValueError, TypeError) as err:
                            yield BadRecord(f"record {count}" + (f" (PMID {pmid})" if pmid else ""), str(err))
                    elif tag == "PubmedBookArticle":
                        count += 1
                        yield BadRecord(f"record {count}", "PubMed book records are not imported")
                    elif tag == "DeleteCitation":
                        pmids = [p for p in (_clean(e.text) for e in el.findall("PMID")) if p]
                        if pmids:
                            yield Withdrawal("pubmed", pmids)
                    elif depth != 1:
                        continue  # a part of a record, or of something else the root holds
                    # A record, a deletion list or another child of the root ended: drop it (and the
                    # root's reference to it), so what is held from here on is the next one only.
                    el.clear()
                    if depth == 1:
                        root.clear()
                    mark, elements = fed, 0
                if fed - mark > MAX_RECORD_BYTES:
                    raise ImportFileError(_too_big(path, count, _size(MAX_RECORD_BYTES)))
        except ParseError as err:
            raise ImportFileError(
                f"{path}: not well-formed XML ({err}); nothing from this file was imported"
            ) from None
        except ImportFileError:
            raise
        except _READ_ERRORS as err:
            raise ImportFileError(f"{path}: cannot read after record {count}: {err}") from None
        except Exception as err:  # defusedxml refusals (entities, external references)
            if type(err).__module__.startswith("defusedxml"):
                raise ImportFileError(f"{path}: refused unsafe XML: {err}") from None
            raise
    if root is None:
        raise ImportFileError(f"{path}: empty file")


def _too_big(path: Path, count: int, limit: str) -> str:
    """The error for XML that runs past a record's bound (see :func:`read_medline_xml`)."""
    where = f"after record {count}" if count else "before the first record"
    return (f"{path}: the XML {where} runs past {limit} without a record ending, the limit for one "
            "record (real PubMed records are under 1 MB); the file is damaged or not PubMed XML, "
            "and nothing from it was imported")


# -- PubMedQA ----------------------------------------------------------------------------------------------
def read_pubmedqa(path: Path, meter: ReadMeter | None = None) -> Iterator[Item]:
    """PubMedQA ``ori_pqal.json``: ``{pmid: {QUESTION, CONTEXTS, LABELS, MESHES, YEAR, ...}}``.

    The abstract is the ``CONTEXTS`` joined with their ``LABELS``; PubMedQA carries no title. The file
    is parsed whole, so one larger than :data:`MAX_JSON_FILE_BYTES` (decompressed) is refused before
    it is held, and nesting deeper than the parser's stack is an ImportFileError, not a crash.
    """
    try:
        body = bytearray()
        with _open_binary(path, meter) as raw:
            while chunk := raw.read(_SKIP_CHUNK):  # in pieces: read(limit) would reserve the limit
                body += chunk
                if len(body) > MAX_JSON_FILE_BYTES:
                    raise ImportFileError(f"{path}: larger than {_size(MAX_JSON_FILE_BYTES)}, the limit "
                                          "for a PubMedQA JSON file (which is read whole); nothing was "
                                          "imported")
        data = json.loads(body.decode("utf-8"))
    except json.JSONDecodeError as err:
        raise ImportFileError(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from None
    except RecursionError:
        raise ImportFileError(f"{path}: not valid JSON (nested too deeply)") from None
    except _READ_ERRORS as err:
        raise ImportFileError(f"{path}: cannot read: {err}") from None
    except ValueError as err:  # a number of more than 4,300 digits, which int() refuses
        raise ImportFileError(f"{path}: not a usable PubMedQA file ({err})") from None
    del body
    if not isinstance(data, dict):
        raise ImportFileError(f"{path}: expected a JSON object keyed by PMID (PubMedQA format)")
    for index, (key, entry) in enumerate(data.items(), start=1):
        position = f"entry {index} (key {key!r})"
        try:
            pmid = str(key).strip()
            if not _is_pmid(pmid):
                raise ValueError("key is not a PMID")
            if not isinstance(entry, dict):
                raise ValueError("entry is not an object")
            contexts = _str_list(entry.get("CONTEXTS"), "CONTEXTS")
            if not contexts:
                raise ValueError("entry has no CONTEXTS")
            labels = entry.get("LABELS") or []
            parts = []
            for i, ctx in enumerate(contexts):
                label = _clean(labels[i]) if isinstance(labels, list) and i < len(labels) else None
                parts.append(f"{label}: {ctx}" if label else ctx)
            yield _document("pubmed", pmid, abstract=" ".join(parts),
                            publication_date=_year_date(entry.get("YEAR")),
                            mesh_terms=_str_list(entry.get("MESHES"), "MESHES"))
        except (ValueError, TypeError) as err:
            yield BadRecord(position, str(err))
