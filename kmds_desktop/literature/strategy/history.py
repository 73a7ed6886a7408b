"""The search history: every search run and every combination is a numbered set (#1, #2, ...) that lasts.

Why SQLite in the data folder: the history must survive restarts, a ``kill -9`` in the middle of a
run, and two app instances (the window and a CLI) writing at once. SQLite in WAL mode gives that with
no server: each write is one ``BEGIN IMMEDIATE`` transaction (writers queue on the lock for up to
``busy_timeout``), and a process killed inside a transaction leaves nothing of it behind.

How a run is recorded: :meth:`SearchHistory.begin_search` commits a numbered set in state
``running`` before the search starts; :meth:`SearchHistory.complete_search` writes every row, the row
and set ID sets and the counts, and flips the state to ``complete``, all in one transaction. A run
that dies in between stays ``running`` with no rows and no documents; it is listed as *incomplete* once
the process that began it is gone, and can be deleted. So a set is either whole or empty, never half.

Documents are kept by internal id (what the set algebra combines) *and* by source and external id
(PMID, DOI-less SciFact or CF id), so a set can be compared with a re-run on a re-imported database and
reported in terms a reviewer can look up. Set numbers are never reused (``AUTOINCREMENT``).

The folder is created 0700 and the database file 0600 (SQLite gives its ``-wal``/``-shm`` files the
database file's mode).
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kmds_desktop import paths
from kmds_desktop.literature.errors import LiteratureError
from kmds_desktop.literature.retrieval.semantic import (
    KIND_FULL_TEXT,
    ROW_KIND_LABELS,
    VectorCoverage,
    row_kind_label,
)
from kmds_desktop.literature.store.sqlite_store import SqliteStore

HISTORY_FILE = "search_history.sqlite3"
SCHEMA_VERSION = 1

_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS search_set (
        number INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL DEFAULT '',
        kind TEXT NOT NULL CHECK (kind IN ('search', 'combination', 'rerun')),
        status TEXT NOT NULL CHECK (status IN ('running', 'complete')),
        question TEXT NOT NULL DEFAULT '',
        expression TEXT,
        database TEXT NOT NULL DEFAULT '',
        started_at TEXT NOT NULL,
        finished_at TEXT,
        pid INTEGER,
        host TEXT,
        document_count INTEGER,
        details TEXT NOT NULL DEFAULT '{}'
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS search_row (
        set_number INTEGER NOT NULL,
        position INTEGER NOT NULL,
        text TEXT NOT NULL,
        provenance TEXT NOT NULL DEFAULT '{}',
        normalized TEXT,
        matches INTEGER,
        matches_estimated INTEGER NOT NULL DEFAULT 0,
        ids_returned INTEGER NOT NULL DEFAULT 0,
        unique_ids INTEGER NOT NULL DEFAULT 0,
        time_s REAL,
        error TEXT,
        PRIMARY KEY (set_number, position)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE IF NOT EXISTS set_member (
        set_number INTEGER NOT NULL,
        doc_id INTEGER NOT NULL,
        rank INTEGER NOT NULL,
        source TEXT,
        external_id TEXT,
        PRIMARY KEY (set_number, doc_id)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE IF NOT EXISTS row_member (
        set_number INTEGER NOT NULL,
        position INTEGER NOT NULL,
        doc_id INTEGER NOT NULL,
        rank INTEGER NOT NULL,
        PRIMARY KEY (set_number, position, doc_id)
    ) WITHOUT ROWID
    """,
)


def utc_now() -> str:
    """ISO-8601 UTC to the second: the search history's and the search log's timestamps."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def default_history_path() -> Path:
    """``<data folder>/history/search_history.sqlite3`` (the folder made 0700)."""
    folder = paths.data_dir() / "history"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder / HISTORY_FILE


#: How a row's recorded error starts when the row never ran because it was invalid (the longest
#: first; the last, "invalid", is what every one starts with).
INVALID_ERROR_PREFIXES = ("invalid query:", "invalid search query", "invalid:", "invalid")


@dataclass
class RowRecord:
    """One row of a search exactly as it ran.

    ``provenance``: ``{"kind": "generated", "model": M, "attempt": A}``, ``{"kind": "hand-written"}``,
    ``{"kind": "question"}`` (the question's semantic row the retrieval settings added) or
    ``{"kind": "edited", "edited_from": original text, ...}`` (with the generated row's model and
    attempt), as :meth:`kmds_desktop.app.literature.QueryRow.provenance` gives them; besides,
    ``row_type`` (``semantic``/``hypothetical``) and ``row_kind`` (see :func:`row_kind`).
    ``ids`` are the documents the row returned, best first.
    """

    text: str
    provenance: dict[str, Any] = field(default_factory=dict)
    normalized: str | None = None
    matches: int | None = None
    matches_estimated: bool = False
    ids_returned: int = 0
    unique_ids: int = 0
    time_s: float | None = None
    error: str | None = None
    ids: list[int] = field(default_factory=list, repr=False)
    position: int = 0  # 1-based once stored

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def invalid(self) -> bool:
        """The row never ran: the server rejected its text (or, for a semantic row, it had nothing to
        search). Its error starts with "invalid" (:meth:`SearchWorkbench.complete` sees to it), which
        keeps the history file's layout and reads rows recorded before the distinction was made."""
        return bool(self.error) and str(self.error).lower().startswith(INVALID_ERROR_PREFIXES[-1])

    @property
    def outcome(self) -> str:
        """The row's result in words when it did not return documents: "not run (invalid: reason)"
        for a rejected row, which is not counted among the rows that ran; "error: …" for a valid row
        that failed (timeout, lost connection); "" for a row that ran."""
        if not self.error:
            return ""
        if not self.invalid:
            return f"error: {self.error}"
        reason = str(self.error)
        for prefix in INVALID_ERROR_PREFIXES:
            if reason.lower().startswith(prefix):
                reason = reason[len(prefix):].lstrip(" :")
                break
        return f"not run (invalid: {reason})"

    def provenance_text(self) -> str:
        """How the row came to be, in words (for tables and reports)."""
        return describe_provenance(self.provenance)

    @property
    def row_kind(self) -> str:
        """Full-text, semantic (the question or hand-written) or hypothetical abstract."""
        return row_kind(self.provenance)

    def summary(self) -> str:
        """Kind, origin and count in one line (the history's row list): "full-text, generated by m
        (attempt 1), 40 matches"; a row searched by meaning counts the documents with a vector."""
        if self.error:
            count = self.outcome
        elif self.row_kind == KIND_FULL_TEXT:
            count = f"{self.matches} matches"
        else:
            count = f"{self.matches} documents with a vector searched"
        return f"{describe_row(self.provenance)}, {count}"

    def to_dict(self, with_ids: bool = False) -> dict[str, Any]:
        data = {
            "position": self.position, "text": self.text, "row_kind": self.row_kind,
            "provenance": dict(self.provenance),
            "normalized": self.normalized, "matches": self.matches,
            "matches_estimated": self.matches_estimated, "ids_returned": self.ids_returned,
            "unique_ids": self.unique_ids, "time_s": self.time_s, "error": self.error,
        }
        if with_ids:
            data["ids"] = list(self.ids)
        return data


def row_kind(provenance: dict[str, Any]) -> str:
    """What the row is (``full-text``, ``semantic: the question``, ``semantic: hand-written``,
    ``hypothetical abstract``): as the session recorded it (``row_kind``), or for a row recorded
    before that, from its type and origin (the question's row was the only one the settings added)."""
    recorded = provenance.get("row_kind")
    if recorded in ROW_KIND_LABELS:
        return str(recorded)
    return row_kind_label(provenance.get("row_type"), provenance.get("kind") == "question")


def describe_row(provenance: dict[str, Any]) -> str:
    """Kind and origin in one line ("semantic: the question, added by the retrieval settings"), for
    the history's lists where there is no column for each."""
    return f"{row_kind(provenance)}, {describe_provenance(provenance)}"


def describe_provenance(provenance: dict[str, Any]) -> str:
    """Where the row came from: the model and attempt, hand-written, edited from what, or the question
    (the row's kind is :func:`row_kind`, shown beside it)."""
    kind = provenance.get("kind", "")
    if kind == "question":
        return "added by the retrieval settings"
    if kind == "generated":
        return f"generated by {provenance.get('model', '?')} (attempt {provenance.get('attempt', '?')})"
    if kind == "edited":
        origin = provenance.get("model")
        by = f" (generated by {origin})" if origin else ""
        if provenance.get("from_question"):
            by = " (the question)"
        original = provenance.get("edited_from", provenance.get("from", ""))
        return f"edited from \"{original}\"{by}"
    if kind == "hand-written":
        return "hand-written"
    return kind or "unknown"


@dataclass
class Member:
    """One document of a set: internal id, its rank in the set (1 = best) and where it comes from."""

    doc_id: int
    rank: int
    source: str | None = None
    external_id: str | None = None

    @property
    def key(self) -> tuple[str, str] | None:
        """(source, external id): the document's identity across databases and re-imports."""
        if self.source is None or self.external_id is None:
            return None
        return (self.source, self.external_id)


@dataclass
class SavedSet:
    """A set of the history as stored (without its documents; see :meth:`SearchHistory.members`)."""

    number: int
    name: str
    kind: str
    status: str
    question: str
    expression: str | None
    database: str
    started_at: str
    finished_at: str | None
    pid: int | None
    host: str | None
    document_count: int | None
    details: dict[str, Any]
    rows: list[RowRecord] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"#{self.number}"

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @property
    def state(self) -> str:
        """``complete``, ``running`` (its process is alive) or ``incomplete`` (it died mid-run)."""
        if self.status == "complete":
            return "complete"
        if self.host == socket.gethostname() and self.pid and _pid_alive(self.pid):
            return "running"
        return "incomplete"

    @property
    def title(self) -> str:
        """What the set is, in one line: its name, else its question or expression."""
        if self.name:
            return self.name
        if self.kind == "combination":
            return self.expression or ""
        return self.question or " | ".join(r.text for r in self.rows)

    def coverage_text(self) -> str:
        """"the semantic row searched 576 of 1,239 documents (those with a vector)" when the run
        recorded it (empty otherwise)."""
        facts = self.details.get("retrieval") or {}
        coverage = VectorCoverage.from_dict(facts.get("vector_coverage"))
        return coverage.sentence(int(facts.get("semantic_rows") or 1)) if coverage else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number, "name": self.name, "kind": self.kind, "state": self.state,
            "question": self.question, "expression": self.expression, "database": self.database,
            "started_at": self.started_at, "finished_at": self.finished_at,
            "document_count": self.document_count, "details": self.details,
            "rows": [r.to_dict() for r in self.rows],
        }


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


class HistoryError(LiteratureError):
    """The history cannot do what was asked (no such set, an incomplete set, an unreadable file)."""


class SearchHistory(SqliteStore):
    """The numbered sets of one data folder. Thread-safe; several processes may use one file at once."""

    WHAT = "the search history"
    ERROR = HistoryError
    SCHEMA = _SCHEMA
    SCHEMA_VERSION = SCHEMA_VERSION

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        super().__init__(Path(path) if path is not None else default_history_path())

    # -- recording ----------------------------------------------------------------------------------
    def begin_search(self, question: str, database: str, details: dict[str, Any] | None = None, *,
                     kind: str = "search") -> int:
        """Number a search before it runs (state ``running``); returns the set number."""
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO search_set (kind, status, question, database, started_at, pid, host, details) "
                "VALUES (?, 'running', ?, ?, ?, ?, ?, ?)",
                (kind, question, database, utc_now(), os.getpid(), socket.gethostname(),
                 json.dumps(details or {}, default=str)),
            )
            return int(cur.lastrowid or 0)

    def complete_search(self, number: int, rows: Sequence[RowRecord], members: Sequence[Member],
                        details: dict[str, Any] | None = None) -> SavedSet:
        """Store what search ``number`` found and mark it complete, all in one transaction."""
        with self._write() as conn:
            status = conn.execute("SELECT status FROM search_set WHERE number = ?", (number,)).fetchone()
            if status is None:
                raise HistoryError(f"set #{number} is not in the history (was it deleted?)")
            if status[0] != "running":
                raise HistoryError(f"set #{number} is already complete")
            for position, row in enumerate(rows, start=1):
                conn.execute(
                    "INSERT INTO search_row (set_number, position, text, provenance, normalized, matches, "
                    "matches_estimated, ids_returned, unique_ids, time_s, error) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (number, position, row.text, json.dumps(row.provenance, default=str), row.normalized,
                     row.matches, int(row.matches_estimated), row.ids_returned, row.unique_ids, row.time_s,
                     row.error),
                )
                conn.executemany(
                    "INSERT OR IGNORE INTO row_member (set_number, position, doc_id, rank) "
                    "VALUES (?, ?, ?, ?)",
                    ((number, position, int(doc_id), rank) for rank, doc_id in enumerate(row.ids, start=1)),
                )
            self._insert_members(conn, number, members)
            extra = ""
            params: list[Any] = [utc_now(), len(members)]
            if details is not None:
                extra = ", details = ?"
                params.append(json.dumps(details, default=str))
            conn.execute(f"UPDATE search_set SET status = 'complete', finished_at = ?, document_count = ?"
                         f"{extra} WHERE number = ?", (*params, number))
        return self.get(number)

    def save_set(self, *, kind: str, question: str, database: str, members: Sequence[Member],
                 expression: str | None = None, details: dict[str, Any] | None = None,
                 name: str = "") -> SavedSet:
        """Store a finished set in one transaction (a combination); returns it with its new number."""
        with self._write() as conn:
            now = utc_now()
            cur = conn.execute(
                "INSERT INTO search_set (name, kind, status, question, expression, database, started_at, "
                "finished_at, pid, host, document_count, details) "
                "VALUES (?, ?, 'complete', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (name, kind, question, expression, database, now, now, os.getpid(), socket.gethostname(),
                 len(members), json.dumps(details or {}, default=str)),
            )
            number = int(cur.lastrowid or 0)
            self._insert_members(conn, number, members)
        return self.get(number)

    @staticmethod
    def _insert_members(conn: sqlite3.Connection, number: int, members: Sequence[Member]) -> None:
        conn.executemany(
            "INSERT OR IGNORE INTO set_member (set_number, doc_id, rank, source, external_id) "
            "VALUES (?, ?, ?, ?, ?)",
            ((number, int(m.doc_id), int(m.rank), m.source, m.external_id) for m in members),
        )

    def discard(self, number: int) -> None:
        """Remove a set that never completed (its search failed cleanly)."""
        self.delete(number)

    # -- editing ------------------------------------------------------------------------------------
    def rename(self, number: int, name: str) -> SavedSet:
        name = " ".join(str(name).split())[:200]
        with self._write() as conn:
            cur = conn.execute("UPDATE search_set SET name = ? WHERE number = ?", (name, number))
            if cur.rowcount == 0:
                raise HistoryError(f"there is no set #{number} in the history")
        return self.get(number)

    def delete(self, number: int) -> None:
        """Delete a set with its rows and documents (combinations made from it keep their own)."""
        with self._write() as conn:
            cur = conn.execute("DELETE FROM search_set WHERE number = ?", (number,))
            if cur.rowcount == 0:
                raise HistoryError(f"there is no set #{number} in the history")
            for table in ("search_row", "set_member", "row_member"):
                conn.execute(f"DELETE FROM {table} WHERE set_number = ?", (number,))  # constant names

    # -- reading ------------------------------------------------------------------------------------
    _SET_COLUMNS = ("number, name, kind, status, question, expression, database, started_at, finished_at, "
                    "pid, host, document_count, details")

    def list_sets(self) -> list[SavedSet]:
        """Every set, oldest first, with its rows."""
        sets = [self._set_from(r) for r in self._read(
            f"SELECT {self._SET_COLUMNS} FROM search_set ORDER BY number")]
        rows = self._read("SELECT set_number, position, text, provenance, normalized, matches, "
                          "matches_estimated, ids_returned, unique_ids, time_s, error FROM search_row "
                          "ORDER BY set_number, position")
        by_number = {s.number: s for s in sets}
        for r in rows:
            if r[0] in by_number:
                by_number[r[0]].rows.append(_row_from(r[1:]))
        return sets

    def get(self, number: int) -> SavedSet:
        found = self._read(f"SELECT {self._SET_COLUMNS} FROM search_set WHERE number = ?", (int(number),))
        if not found:
            raise HistoryError(f"there is no set #{number} in the history")
        saved = self._set_from(found[0])
        saved.rows = [_row_from(r) for r in self._read(
            "SELECT position, text, provenance, normalized, matches, matches_estimated, ids_returned, "
            "unique_ids, time_s, error FROM search_row WHERE set_number = ? ORDER BY position",
            (saved.number,))]
        return saved

    def latest(self) -> SavedSet | None:
        found = self._read("SELECT number FROM search_set WHERE status = 'complete' "
                           "ORDER BY number DESC LIMIT 1")
        return self.get(found[0][0]) if found else None

    def complete_set(self, number: int) -> SavedSet:
        """Set ``number``, which must be complete (an incomplete run has no documents to use)."""
        saved = self.get(number)
        if not saved.complete:
            raise HistoryError(f"set #{number} is {saved.state}: it has no documents to use")
        return saved

    def members(self, number: int) -> list[Member]:
        """The documents of set ``number``, best rank first."""
        return [Member(int(r[0]), int(r[1]), r[2], r[3]) for r in self._read(
            "SELECT doc_id, rank, source, external_id FROM set_member WHERE set_number = ? "
            "ORDER BY rank, doc_id", (int(number),))]

    def member_ids(self, number: int) -> set[int]:
        """The set's document ids (read straight into a set: the set algebra's hot path)."""
        with self._lock:
            try:
                cur = self._conn.execute("SELECT doc_id FROM set_member WHERE set_number = ?", (int(number),))
                return {doc_id for (doc_id,) in cur}
            except sqlite3.Error as err:
                raise HistoryError(f"cannot read the search history {self.path}: {err}") from None

    def expression_ids(self, sql: str, params: Sequence[int], *, count_only: bool = False,
                       ) -> set[int] | int | None:
        """Evaluate a compound ``SELECT doc_id`` from :func:`set_algebra.to_sql` in the database: the ids
        (or only their number). None when SQLite cannot take an expression nested that deep."""
        statement = f"SELECT count(*) FROM ({sql})" if count_only else sql
        with self._lock:
            try:
                cur = self._conn.execute(statement, list(params))
                if count_only:
                    return int(cur.fetchone()[0])
                return {doc_id for (doc_id,) in cur}
            except sqlite3.OperationalError as err:
                text = str(err)
                if "parser stack overflow" in text or "too many terms" in text or "too deep" in text:
                    return None
                raise HistoryError(f"cannot read the search history {self.path}: {err}") from None
            except sqlite3.Error as err:
                raise HistoryError(f"cannot read the search history {self.path}: {err}") from None

    def row_ids(self, number: int, position: int) -> list[int]:
        """The documents row ``position`` of search ``number`` returned, best first."""
        return [int(r[0]) for r in self._read(
            "SELECT doc_id FROM row_member WHERE set_number = ? AND position = ? ORDER BY rank",
            (int(number), int(position)))]

    def all_row_ids(self, number: int) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for pos, doc_id in self._read("SELECT position, doc_id FROM row_member WHERE set_number = ? "
                                      "ORDER BY position, rank", (int(number),)):
            out.setdefault(int(pos), []).append(int(doc_id))
        return out

    def identities(self, doc_ids: Iterable[int]) -> dict[int, tuple[str | None, str | None]]:
        """(source, external id) of documents any set of the history holds."""
        wanted = {int(i) for i in doc_ids}
        out: dict[int, tuple[str | None, str | None]] = {}
        chunk = sorted(wanted)
        for start in range(0, len(chunk), 500):
            part = chunk[start:start + 500]
            marks = ",".join("?" * len(part))
            for doc_id, source, ext in self._read(
                    f"SELECT doc_id, source, external_id FROM set_member WHERE doc_id IN ({marks})", part):
                out.setdefault(int(doc_id), (source, ext))
        return out

    @staticmethod
    def _set_from(r: Sequence[Any]) -> SavedSet:
        try:
            details = json.loads(r[12] or "{}")
        except ValueError:
            details = {}
        return SavedSet(number=int(r[0]), name=r[1] or "", kind=r[2], status=r[3], question=r[4] or "",
                        expression=r[5], database=r[6] or "", started_at=r[7], finished_at=r[8],
                        pid=r[9], host=r[10], document_count=r[11], details=details)


def _row_from(r: Sequence[Any]) -> RowRecord:
    try:
        provenance = json.loads(r[2] or "{}")
    except ValueError:
        provenance = {}
    return RowRecord(text=r[1], provenance=provenance, normalized=r[3], matches=r[4],
                     matches_estimated=bool(r[5]), ids_returned=int(r[6] or 0), unique_ids=int(r[7] or 0),
                     time_s=r[8], error=r[9], position=int(r[0]))


