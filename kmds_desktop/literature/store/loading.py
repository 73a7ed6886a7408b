"""Writing parsed records into ``document``: one transaction per file, COPY into staging, one upsert.

Why this shape: 200,000 records must import in seconds, so rows are streamed with ``COPY`` (no
per-row round trips) into a temporary table and merged with a single ``INSERT ... ON CONFLICT``.
Doing a whole file in one transaction makes an unreadable or cancelled file leave nothing behind;
files already finished stay committed, so running the same import again resumes (re-importing a file
is a no-op: the upsert only writes rows whose values change).

Merging rule: a new non-empty value replaces the stored one; an empty one never erases it. A
year-only or month-only date (stored as the first day of the span) does not replace a more precise
date inside that span. So JSONL, MEDLINE XML and PubMedQA copies of one PubMed record combine.

A database the app does not own (a BMLibrarian database: no ``kmds_schema_version``) is written the
way its owner writes it: a source is matched by a name containing ``pubmed``/``medrxiv`` (any case),
a new source gets the lower-case key as its name (``scifact``), ``url`` gets the landing page
BMLibrarian's importers store (PubMed, medRxiv) and ``updated_date``, where the table has it, is set
on every row written. So both programs see each document once and keep each other's fields.

Deletions (MEDLINE ``DeleteCitation``) are applied after the file's records are merged, by setting
``withdrawn_date``: searches leave withdrawn documents out, while a saved search log's ID sets
still fetch them (with the date), so an earlier search stays reproducible.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import psycopg.errors

from kmds_desktop.literature.errors import ImportFileError, LiteratureError
from kmds_desktop.literature.store.importers import (
    BadRecord,
    Note,
    Record,
    Withdrawal,
    default_url,
    detect_format,
    read_records,
)
from kmds_desktop.literature.store.schema import KNOWN_SOURCES, current_version
from kmds_desktop.tasks import Cancelled, CancelToken, ProgressFn, check, report
from kmds_desktop.text import plural

_COLUMNS = ("doi", "title", "abstract", "authors", "publication", "publication_date", "mesh_terms",
            "keywords", "url")
_STAGING = "kmds_import_staging"
_PROGRESS_EVERY = 1000


@dataclass
class SkippedRecord:
    path: str
    position: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}, {self.position}: {self.message}"


@dataclass
class FileReport:
    """What importing one file did."""

    path: str
    format: str
    records: int = 0  # well-formed records read
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    duplicates: int = 0  # same key twice in the file (the last one wins)
    withdrawn: int = 0  # documents the file deleted (DeleteCitation), marked withdrawn
    skipped: list[SkippedRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class ImportReport:
    files: list[FileReport] = field(default_factory=list)

    @property
    def records(self) -> int:
        return sum(f.records for f in self.files)

    @property
    def inserted(self) -> int:
        return sum(f.inserted for f in self.files)

    @property
    def updated(self) -> int:
        return sum(f.updated for f in self.files)

    @property
    def unchanged(self) -> int:
        return sum(f.unchanged for f in self.files)

    @property
    def withdrawn(self) -> int:
        return sum(f.withdrawn for f in self.files)

    @property
    def skipped(self) -> list[SkippedRecord]:
        return [s for f in self.files for s in f.skipped]

    def summary(self) -> str:
        withdrawn = f", {self.withdrawn:,} withdrawn" if self.withdrawn else ""
        return (f"{plural(len(self.files), 'file')}: {plural(self.records, 'record')}, "
                f"{self.inserted:,} new, {self.updated:,} updated, {self.unchanged:,} unchanged{withdrawn}, "
                f"{len(self.skipped):,} skipped")


def _merge_expr(col: str) -> str:
    new, old = f"EXCLUDED.{col}", f"d.{col}"
    if col in ("authors", "mesh_terms", "keywords"):
        return f"CASE WHEN cardinality({new}) > 0 THEN {new} ELSE {old} END"
    if col == "publication_date":
        return (f"CASE WHEN {new} IS NULL THEN {old} WHEN {old} IS NOT NULL AND {new} IN "
                f"(date_trunc('year', {old})::date, date_trunc('month', {old})::date) "
                f"THEN {old} ELSE {new} END")
    return f"COALESCE(NULLIF({new}, ''), {old})"


def _upsert_sql(stamp_updated: bool) -> str:
    """The merge statement (constant text); ``stamp_updated`` also sets ``updated_date`` on every row
    inserted or changed (BMLibrarian's column; the app's own schema has none)."""
    stamp_insert, stamp_select, stamp_set = ("", "", "")
    if stamp_updated:
        stamp_insert, stamp_select, stamp_set = (", updated_date", ", CURRENT_TIMESTAMP",
                                                 ", updated_date = CURRENT_TIMESTAMP")
    return (
        "WITH map AS (SELECT * FROM unnest(%s::text[], %s::int[]) AS m(key, sid)), "
        "src AS (SELECT DISTINCT ON (m.sid, st.external_id) m.sid AS source_id, st.* "
        f"FROM {_STAGING} st JOIN map m ON m.key = st.source ORDER BY m.sid, st.external_id, st.seq DESC) "
        f"INSERT INTO document AS d (source_id, external_id, {', '.join(_COLUMNS)}{stamp_insert}) "
        f"SELECT source_id, external_id, {', '.join(_COLUMNS)}{stamp_select} FROM src "
        "ON CONFLICT (source_id, external_id) DO UPDATE SET "
        + ", ".join(f"{c} = {_merge_expr(c)}" for c in _COLUMNS)
        + stamp_set
        + " WHERE ("
        + ", ".join(f"d.{c}" for c in _COLUMNS)
        + ") IS DISTINCT FROM ("
        + ", ".join(_merge_expr(c) for c in _COLUMNS)
        + ") RETURNING (xmax = 0) AS inserted"
    )


@dataclass(frozen=True)
class _Target:
    """How to write into this database: the app's conventions, or its owner's (BMLibrarian's)."""

    foreign: bool = False
    has_updated_date: bool = False
    sources_have_url: bool = True


def _target(conn: psycopg.Connection) -> _Target:
    if current_version(conn) is not None:
        return _Target()
    rows = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_name IN ('document', 'sources') AND table_schema = ANY(current_schemas(false))"
    ).fetchall()
    columns = {(str(t), str(c)) for t, c in rows}
    return _Target(foreign=True, has_updated_date=("document", "updated_date") in columns,
                   sources_have_url=("sources", "url") in columns)


def _source_ids(conn: psycopg.Connection, keys: list[str], target: _Target | None = None) -> dict[str, int]:
    """Map JSONL source keys to ``sources.id``, creating missing sources (matched case-insensitively;
    ``pubmed``/``medrxiv`` also by a name containing them, BMLibrarian's rule)."""
    target = target or _Target()
    out: dict[str, int] = {}
    for key in keys:
        name, url = KNOWN_SOURCES.get(key, (key, None))
        if target.foreign:
            name = key.lower()  # the owner's names are lower case ("pubmed", "medrxiv")
        row = conn.execute(
            "SELECT id FROM sources WHERE lower(name) = lower(%s) OR lower(name) = lower(%s) "
            "ORDER BY id LIMIT 1",
            (name, key),
        ).fetchone()
        if row is None and key in ("pubmed", "medrxiv"):
            row = conn.execute(
                "SELECT id FROM sources WHERE strpos(lower(name), %s) > 0 ORDER BY length(name), id LIMIT 1",
                (key,),
            ).fetchone()
        if row is None:
            if target.sources_have_url:
                row = conn.execute("INSERT INTO sources (name, url) VALUES (%s, %s) ON CONFLICT DO NOTHING "
                                   "RETURNING id", (name, url)).fetchone()
            else:
                row = conn.execute("INSERT INTO sources (name) VALUES (%s) ON CONFLICT DO NOTHING "
                                   "RETURNING id", (name,)).fetchone()
            if row is None:  # created meanwhile by another import
                row = conn.execute("SELECT id FROM sources WHERE lower(name) = lower(%s) ORDER BY id LIMIT 1",
                                   (name,)).fetchone()
        assert row is not None
        out[key] = int(row[0])
    return out


def import_file(conn: psycopg.Connection, path: Path, *, progress: ProgressFn | None = None,
                cancel: CancelToken | None = None, done_before: int = 0,
                target: _Target | None = None) -> FileReport:
    """Import one file in one transaction (see the module docstring)."""
    started = time.perf_counter()
    target = target or _target(conn)
    fmt = detect_format(path)
    if not path.is_file():
        raise ImportFileError(f"cannot import {path}: no such file")
    rep = FileReport(path=str(path), format=fmt)
    remove = cancel.add_hook(lambda: conn.cancel_safe(timeout=5)) if cancel is not None else None
    try:
        with conn.transaction():
            conn.execute(
                f"CREATE TEMP TABLE IF NOT EXISTS {_STAGING} (seq bigint, source text, external_id text, "
                "doi text, title text, abstract text, authors text[], publication text, "
                "publication_date date, mesh_terms text[], keywords text[], url text) ON COMMIT DELETE ROWS"
            )
            conn.execute(f"TRUNCATE {_STAGING}")
            sources: set[str] = set()
            keys: set[tuple[str, str]] = set()
            withdrawals: dict[str, list[str]] = {}
            with conn.cursor().copy(
                f"COPY {_STAGING} (seq, source, external_id, {', '.join(_COLUMNS)}) FROM STDIN"
            ) as copy:
                for item in read_records(path):
                    if isinstance(item, BadRecord):
                        rep.skipped.append(SkippedRecord(str(path), item.position, item.message))
                        continue
                    if isinstance(item, Note):
                        rep.notes.append(item.message)
                        continue
                    if isinstance(item, Withdrawal):
                        withdrawals.setdefault(item.source, []).extend(item.external_ids)
                        continue
                    assert isinstance(item, Record)
                    rep.records += 1
                    key = (item.source, item.external_id)
                    if key in keys:
                        rep.duplicates += 1
                    keys.add(key)
                    sources.add(item.source)
                    url = item.url or default_url(item.source, item.external_id, item.doi)
                    copy.write_row((rep.records, item.source, item.external_id, item.doi, item.title,
                                    item.abstract, item.authors, item.publication, item.publication_date,
                                    item.mesh_terms, item.keywords, url))
                    if rep.records % _PROGRESS_EVERY == 0:
                        check(cancel)
                        report(progress, done_before + rep.records, None,
                               f"{path.name}: {plural(rep.records, 'record')} read")
            check(cancel)
            report(progress, done_before + rep.records, None,
                   f"{path.name}: merging {plural(rep.records, 'record')}")
            ids = _source_ids(conn, sorted(sources), target)
            upsert = _upsert_sql(target.has_updated_date)
            rows = conn.execute(upsert, (list(ids), list(ids.values()))).fetchall()
            rep.inserted = sum(1 for r in rows if r[0])
            rep.updated = len(rows) - rep.inserted
            rep.unchanged = len(keys) - len(rows)
            conn.execute(f"TRUNCATE {_STAGING}")
            if withdrawals:
                _apply_withdrawals(conn, withdrawals, rep, target)
            check(cancel)
    except psycopg.errors.QueryCanceled:
        if cancel is not None and cancel.cancelled:
            raise Cancelled(f"import of {path} cancelled; nothing from it was written") from None
        raise LiteratureError(
            f"import of {path} ran longer than the statement timeout; nothing was written"
        ) from None
    finally:
        if remove is not None:
            remove()
    rep.seconds = time.perf_counter() - started
    return rep


def _apply_withdrawals(conn: psycopg.Connection, withdrawals: dict[str, list[str]], rep: FileReport,
                       target: _Target | None = None) -> None:
    """Mark the documents a file deleted as withdrawn (today), and say what happened in a note."""
    target = target or _Target()
    ids = _source_ids(conn, sorted(withdrawals), target)
    stamp = ", updated_date = CURRENT_TIMESTAMP" if target.has_updated_date else ""
    listed = 0
    for key, external_ids in withdrawals.items():
        unique = list(dict.fromkeys(external_ids))
        listed += len(unique)
        marked = conn.execute(
            f"UPDATE document SET withdrawn_date = current_date{stamp} "
            "WHERE source_id = %s AND external_id = ANY(%s) AND withdrawn_date IS NULL RETURNING id",
            (ids[key], unique),
        ).fetchall()
        rep.withdrawn += len(marked)
    rep.notes.append(
        f"{listed} deleted citation(s) listed: {rep.withdrawn} document(s) marked withdrawn (left out of "
        "searches, still fetched by saved searches); the others were not in the database or already withdrawn"
    )


def import_paths(conn: psycopg.Connection, paths: list[Path], *, progress: ProgressFn | None = None,
                 cancel: CancelToken | None = None, redact: Callable[[str], str] = str,
                 where: str = "") -> ImportReport:
    """Import files in order; each is committed before the next starts."""
    result = ImportReport()
    # Imports may take longer than an interactive search: no statement timeout on this connection.
    conn.execute("SELECT set_config('statement_timeout', '0', false)")
    for path in paths:
        detect_format(path)  # fail before anything is written when a name is not importable
    target = _target(conn)
    done = 0
    for path in paths:
        check(cancel)
        rep = import_file(conn, path, progress=progress, cancel=cancel, done_before=done, target=target)
        done += rep.records
        result.files.append(rep)
        report(progress, done, None, f"{path.name}: {rep.inserted:,} new, {rep.updated:,} updated, "
                                     f"{rep.unchanged:,} unchanged, {len(rep.skipped):,} skipped")
    return result
