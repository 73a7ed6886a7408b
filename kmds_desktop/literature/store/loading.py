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

A folder (the PubMed baseline: ~1,200 ``pubmedNNnNNNN.xml.gz``) is imported file by file in name
order, and resumably: every file committed is written to a ledger (name, size, mtime, records) in
the app's data folder, one JSON file per database (:func:`ledger_path`), never in the database, which
may be a BMLibrarian one the app does not own. The next import of a folder into the same database
skips the files the ledger has with the same size and mtime, so a killed import loses at most the
file in progress; a file changed since is imported again. Files named one by one are always read
(and recorded). Progress is one line for the whole run: files, records, MB read of the total (the
compressed bytes, so the ``done``/``total`` of the progress callback are bytes), records/s and ETA.
With several files, the next file is parsed in a thread while PostgreSQL merges the current one
(:class:`_ReadAhead`, at most 10,000 records ahead).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import psycopg.errors

from kmds_desktop import paths
from kmds_desktop.crashpoints import crash_point
from kmds_desktop.literature.document import Document
from kmds_desktop.literature.errors import ImportFileError, LiteratureError
from kmds_desktop.literature.store import citations
from kmds_desktop.literature.store.importers import (
    BadRecord,
    Item,
    Note,
    ReadMeter,
    Withdrawal,
    default_url,
    detect_format,
    read_records,
)
from kmds_desktop.literature.store.schema import KNOWN_SOURCES, current_version
from kmds_desktop.literature.store.topk_build import identities
from kmds_desktop.tasks import Cancelled, CancelToken, ProgressFn, check, report
from kmds_desktop.text import plural, shorten
from kmds_desktop.user_files import UserFileError, open_user_file

_COLUMNS = ("doi", "title", "abstract", "authors", "publication", "publication_date", "mesh_terms",
            "keywords", "url")
_STAGING = "kmds_import_staging"
_PROGRESS_EVERY = 1000

log = logging.getLogger(__name__)

#: The files a folder import reads (what :func:`~.importers.detect_format` accepts), in name order.
FOLDER_SUFFIXES = (".xml.gz", ".xml", ".jsonl", ".jsonl.gz", ".ndjson", ".json", ".json.gz")


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
    #: Files of a folder skipped because the ledger has them imported into this database already.
    already_imported: list[str] = field(default_factory=list)

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
        already = (f"; {plural(len(self.already_imported), 'file')} skipped as already imported"
                   if self.already_imported else "")
        return (f"{plural(len(self.files), 'file')}: {plural(self.records, 'record')}, "
                f"{self.inserted:,} new, {self.updated:,} updated, {self.unchanged:,} unchanged{withdrawn}, "
                f"{len(self.skipped):,} skipped{already}")


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
        assert row is not None  # noqa: S101 - narrows: inserted or found
        out[key] = int(row[0])
    return out


def _staging_row(seq: int, doc: Document) -> tuple[Any, ...]:
    """One staged row of ``doc``: a Document's unknown text (``""``) goes in as NULL, as it always has
    (the merge and the citation table tell "unknown" by NULL), and a record without a URL gets the
    landing page BMLibrarian stores."""
    return (seq, doc.source, doc.external_id, doc.doi or None, doc.title or None, doc.abstract or None,
            doc.authors, doc.journal or None, doc.publication_date, doc.mesh_terms, doc.keywords,
            doc.url or default_url(doc.source, doc.external_id, doc.doi or None), doc.volume or None,
            doc.issue or None, doc.pages or None)


def import_file(conn: psycopg.Connection, path: Path, *, progress: ProgressFn | None = None,
                cancel: CancelToken | None = None, target: _Target | None = None,
                tick: Callable[[int, int, str], None] | None = None,
                items: tuple[Iterator[Item], ReadMeter] | None = None) -> FileReport:
    """Import one file in one transaction (see the module docstring). ``tick(records, bytes_read,
    phase)`` is called every ``_PROGRESS_EVERY`` records (else ``progress`` gets this file's count);
    ``items`` are the file's records already being read (:class:`_ReadAhead`), else it reads them."""
    started = time.perf_counter()
    target = target or _target(conn)
    fmt = detect_format(path)
    if not path.is_file():  # missing, a folder, a device or a FIFO: the reader's refusal says which
        try:
            open_user_file(path, "corpus file").close()
        except UserFileError as err:
            raise ImportFileError(str(err)) from None
    rep = FileReport(path=str(path), format=fmt)
    if items is None:
        meter = ReadMeter()
        records = read_records(path, meter)
    else:
        records, meter = items
    if tick is None:
        def tick(records: int, _read: int, phase: str) -> None:
            report(progress, records, None, f"{path.name}: {plural(records, 'record')} {phase}")
    remove = cancel.add_hook(lambda: conn.cancel_safe(timeout=5)) if cancel is not None else None
    try:
        with conn.transaction():
            conn.execute(
                f"CREATE TEMP TABLE IF NOT EXISTS {_STAGING} (seq bigint, source text, external_id text, "
                "doi text, title text, abstract text, authors text[], publication text, "
                "publication_date date, mesh_terms text[], keywords text[], url text, "
                "volume text, issue text, pages text) ON COMMIT DELETE ROWS"
            )
            conn.execute(f"TRUNCATE {_STAGING}")
            sources: set[str] = set()
            keys: set[tuple[str, str]] = set()
            withdrawals: dict[str, list[str]] = {}
            with conn.cursor().copy(
                f"COPY {_STAGING} (seq, source, external_id, {', '.join(_COLUMNS)}, "
                f"{', '.join(citations.STAGING_COLUMNS)}) FROM STDIN"
            ) as copy:
                for item in records:
                    if isinstance(item, BadRecord):
                        # Cut to one readable line: a reason may quote a 200,000-character field.
                        rep.skipped.append(SkippedRecord(str(path), item.position, shorten(item.message)))
                        continue
                    if isinstance(item, Note):
                        rep.notes.append(item.message)
                        continue
                    if isinstance(item, Withdrawal):
                        withdrawals.setdefault(item.source, []).extend(item.external_ids)
                        continue
                    assert isinstance(item, Document)  # noqa: S101 - narrows: the other kind was handled
                    rep.records += 1
                    key = (item.source, item.external_id)
                    if key in keys:
                        rep.duplicates += 1
                    keys.add(key)
                    sources.add(item.source)
                    copy.write_row(_staging_row(rep.records, item))
                    if rep.records % _PROGRESS_EVERY == 0:
                        check(cancel)
                        tick(rep.records, meter.bytes_read, "read")
            check(cancel)
            tick(rep.records, meter.bytes_read, "merging")
            ids = _source_ids(conn, sorted(sources), target)
            upsert = _upsert_sql(target.has_updated_date)
            rows = conn.execute(upsert, (list(ids), list(ids.values()))).fetchall()
            rep.inserted = sum(1 for r in rows if r[0])
            rep.updated = len(rows) - rep.inserted
            rep.unchanged = len(keys) - len(rows)
            citations.write_from_staging(conn, _STAGING, ids)  # volume, issue, pages beside document
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


def folder_files(folder: Path) -> list[Path]:
    """The files of ``folder`` an import reads (:data:`FOLDER_SUFFIXES`, not hidden), in name order;
    subfolders are not entered."""
    try:
        entries = list(folder.iterdir())
    except OSError as err:
        raise ImportFileError(f"cannot read the folder {folder}: {err.strerror or err}") from None
    files = sorted((p for p in entries if not p.name.startswith(".")
                    and p.name.lower().endswith(FOLDER_SUFFIXES) and p.is_file()), key=lambda p: p.name)
    if not files:
        raise ImportFileError(f"{folder}: no files to import in this folder (expected "
                              f"{', '.join(FOLDER_SUFFIXES)} files)")
    return files


class _Connection:
    """A connection with the ``run`` of a :class:`~.database.LiteratureDatabase` (what
    :func:`~.topk_build.database_identity` reads the identity through)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self._conn = conn

    def run(self, fn: Callable[[psycopg.Connection], Any], cancel: CancelToken | None = None) -> Any:
        return fn(self._conn)


def ledger_path(database: Any) -> Path:
    """The ledger of the files imported into ``database`` (a ``LiteratureDatabase`` or a
    connection): ``<data dir>/imports/<hash of the database's identity>.json``, the folder 0700.

    The identity is the top-k index's (:func:`~.topk_build.database_identity`: the server's system
    identifier, the database's name and oid), so a database dropped and created again, or another
    server's database of the same name, has a ledger of its own. A ledger kept under the identity that
    still named the server's address is moved to its new name once (else a folder import would read
    every file again)."""
    if isinstance(database, psycopg.Connection):
        database = _Connection(database)
    identity, legacy = identities(database)
    folder = paths.sub_dir("imports")
    path = folder / f"{hashlib.sha256(identity.encode()).hexdigest()[:16]}.json"
    old = folder / f"{hashlib.sha256(legacy.encode()).hexdigest()[:16]}.json"
    if legacy != identity and not path.exists() and old.exists():
        with contextlib.suppress(OSError):  # another import moved it first
            old.rename(path)
    return path


class ImportLedger:
    """The files committed into one database: ``{name: {size, mtime_ns, records, folder, finished}}``.

    Written after each file's commit (atomically: a new file 0600 renamed over the old one, re-read
    first so two imports into one database keep each other's entries). A kill between the commit
    and the write only makes the next run import that file again, which changes nothing."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def entries(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as err:
            log.warning("import ledger %s unreadable (%s): every file is imported again", self.path, err)
            return {}
        files = data.get("files") if isinstance(data, dict) else None
        return files if isinstance(files, dict) else {}

    @staticmethod
    def _same(entry: Any, st: os.stat_result) -> bool:
        return (isinstance(entry, dict) and entry.get("size") == st.st_size
                and entry.get("mtime_ns") == st.st_mtime_ns)

    def done(self, path: Path, st: os.stat_result, entries: dict[str, dict[str, Any]] | None = None) -> bool:
        """Whether ``path`` (as it is now: ``st``) was imported already."""
        entries = self.entries() if entries is None else entries
        return self._same(entries.get(path.name), st)

    def record(self, path: Path, st: os.stat_result, records: int) -> None:
        entries = self.entries()
        entries[path.name] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "records": records,
                              "folder": str(path.resolve().parent),
                              "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
        self._write(entries)

    def forget(self, names: list[str] | None = None) -> None:
        """Drop the entries of ``names`` (every entry when None): they are imported again."""
        entries = {} if names is None else {k: v for k, v in self.entries().items() if k not in set(names)}
        self._write(entries)

    def _write(self, entries: dict[str, dict[str, Any]]) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        text = json.dumps({"version": 1, "files": entries}, indent=1, sort_keys=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise


def _clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class _RunProgress:
    """The one progress line of an import run: ``done``/``total`` are bytes of the files read (on
    disk, so compressed for ``.gz``), never going back; the message says the rest."""

    def __init__(self, progress: ProgressFn | None, files: int, total_bytes: int) -> None:
        self.progress, self.files, self.total = progress, files, max(total_bytes, 1)
        self.started = time.perf_counter()
        self.files_done = self.records_done = self.bytes_done = self._shown = 0

    def tick(self, records: int, read: int, size: int) -> None:
        """The file in progress has ``records`` read, ``read`` of its ``size`` bytes."""
        done = max(self._shown, min(self.bytes_done + min(read, size), self.total))
        self._shown = done
        records += self.records_done
        elapsed = time.perf_counter() - self.started
        rate = f"{records / elapsed:,.0f} rec/s" if elapsed > 0 else "- rec/s"
        eta = _clock((self.total - done) * elapsed / done) if done and elapsed > 0.5 else "-"
        digits = 1 if self.total < 100e6 else 0
        report(self.progress, done, self.total,
               f"{self.files_done:,}/{self.files:,} files, {records:,} records, "
               f"{done / 1e6:,.{digits}f}/{self.total / 1e6:,.{digits}f} MB, {rate}, ETA {eta}")

    def finished(self, records: int, size: int) -> None:
        self.files_done += 1
        self.records_done += records
        self.bytes_done += size
        self.tick(0, 0, 0)


_AHEAD_CHUNK = 250  # records handed over at a time
_AHEAD_CHUNKS = 40  # at most this many chunks wait (10,000 records: bounded memory)
_AHEAD_POLL = 0.2  # seconds the loader waits for the next chunk between looks at its cancel token
_AHEAD_JOIN = 0.5  # seconds :meth:`_ReadAhead.close` waits for the thread (it stops at its next record)


class _ReadAhead:
    """Parses the run's files, in order, in a thread of its own, a bounded way ahead of the loader.

    Why: while PostgreSQL merges one file (the upsert, where the loader only waits, without holding
    the GIL) the next file is being parsed, so parsing and merging overlap instead of taking turns.
    A file's error reaches the loader when it comes to that file (the files before it are imported
    as they would be without read-ahead); :meth:`close` stops the thread. The loader waits for the
    next chunk a short while at a time, so a cancel is seen while the thread is on a slow or stalled
    read (a network disk, a file that takes long to parse without yielding a record)."""

    def __init__(self, files: list[Path]) -> None:
        self._queue: queue.Queue[tuple[str, Any, int]] = queue.Queue(maxsize=_AHEAD_CHUNKS)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(files,), name="kmds-import-read-ahead",
                                        daemon=True)
        self._thread.start()

    def _put(self, entry: tuple[str, Any, int]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _read(self, files: list[Path]) -> None:
        for path in files:
            meter = ReadMeter()
            chunk: list[Item] = []
            try:
                for item in read_records(path, meter):
                    chunk.append(item)
                    if len(chunk) >= _AHEAD_CHUNK:
                        if not self._put(("items", chunk, meter.bytes_read)):
                            return
                        chunk = []
            except BaseException as err:  # noqa: BLE001 - handed to the loader, raised there
                self._put(("error", err, 0))
                return
            if not (self._put(("items", chunk, meter.bytes_read)) and self._put(("end", None, 0))):
                return

    def file(self, cancel: CancelToken | None = None) -> tuple[Iterator[Item], ReadMeter]:
        """The next file's records, and a meter that follows how far into it they are; waiting for
        them raises :class:`~kmds_desktop.tasks.Cancelled` within ``_AHEAD_POLL`` of ``cancel``."""
        meter = _AheadMeter()

        def items() -> Iterator[Item]:
            while True:
                try:
                    kind, value, read = self._queue.get(timeout=_AHEAD_POLL)
                except queue.Empty:
                    check(cancel)
                    if not self._thread.is_alive() and self._queue.empty():  # nothing more can come
                        raise LiteratureError("the import's reading thread stopped before the file "
                                              "was read") from None
                    continue
                if kind == "error":
                    raise value
                if kind == "end":
                    return
                meter.position = read
                yield from value

        return items(), meter

    def close(self) -> None:
        """Stop the thread. It stops at its next record, which a stalled read may hold back; it is
        waited for only ``_AHEAD_JOIN`` (a daemon thread: it ends by itself, and with the program),
        so a cancel is never held up by the read it cancels."""
        self._stop.set()
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.get_nowait()
        self._thread.join(timeout=_AHEAD_JOIN)
        if self._thread.is_alive():
            log.info("the import's read-ahead thread is still in a read; it stops at its next record")


class _AheadMeter(ReadMeter):
    """The bytes of a file read up to the chunk the loader is at (set by :meth:`_ReadAhead.file`)."""

    position = 0

    @property
    def bytes_read(self) -> int:
        return self.position


def import_paths(conn: psycopg.Connection, paths: list[Path], *, progress: ProgressFn | None = None,
                 cancel: CancelToken | None = None, redact: Callable[[str], str] = str,
                 where: str = "", before_writing: Callable[[list[int]], None] | None = None) -> ImportReport:
    """Import files in order, each committed before the next starts; a folder stands for its files
    (:func:`folder_files`), less those the ledger has as imported already (see the module docstring).
    ``before_writing(sizes)`` gets the sizes of the files about to be read, before anything is
    written: the embedded server refuses there an import its disk cannot hold."""
    result = ImportReport()
    # Imports may take longer than an interactive search: no statement timeout on this connection.
    conn.execute("SELECT set_config('statement_timeout', '0', false)")
    planned: list[tuple[Path, bool]] = []  # (file, found in a folder)
    for path in paths:
        if path.is_dir():
            planned += [(p, True) for p in folder_files(path)]
        else:
            detect_format(path)  # fail before anything is written when a name is not importable
            planned.append((path, False))
    target = _target(conn)
    try:
        ledger: ImportLedger | None = ImportLedger(ledger_path(conn))
    except OSError as err:  # no data folder to write to: import everything, record nothing
        log.warning("no import ledger (%s): every file of a folder is imported", err)
        ledger = None
    entries = ledger.entries() if ledger is not None else {}
    todo: list[tuple[Path, os.stat_result | None]] = []
    for path, in_folder in planned:
        try:
            st: os.stat_result | None = path.stat()
        except OSError:
            st = None  # import_file says why
        if in_folder and st is not None and ledger is not None and ledger.done(path, st, entries):
            result.already_imported.append(str(path))
        else:
            todo.append((path, st))
    if before_writing is not None:
        before_writing([st.st_size for _, st in todo if st is not None])
    run = _RunProgress(progress, len(todo), sum(st.st_size for _, st in todo if st is not None))
    ahead = _ReadAhead([path for path, _ in todo]) if len(todo) > 1 else None
    try:
        for path, st in todo:
            check(cancel)
            size = st.st_size if st is not None else 0

            def tick(records: int, read: int, _phase: str, size: int = size) -> None:
                run.tick(records, read, size)

            rep = import_file(conn, path, cancel=cancel, target=target, tick=tick,
                              items=ahead.file(cancel) if ahead is not None else None)
            result.files.append(rep)
            crash_point("import.file-committed")  # committed, not yet in the ledger
            if st is not None and ledger is not None:
                try:
                    ledger.record(path, st, rep.records)
                except OSError as err:  # the import stands; only the next run's skipping is lost
                    log.warning("could not record %s in the import ledger %s: %s", path.name, ledger.path,
                                err)
            run.finished(rep.records, size)
    finally:
        if ahead is not None:
            ahead.close()
    return result
