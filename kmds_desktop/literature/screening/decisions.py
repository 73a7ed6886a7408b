"""Screening decisions, committed as they are made: one SQLite file in the app's data folder.

Why SQLite (WAL) and not the literature database: the literature database may be one the app does not
own (BMLibrarian), and a review must survive a re-import, a ``kill -9`` and the window and the CLI using
it at once. Each decision is one ``BEGIN IMMEDIATE`` transaction, so a decision the user saw accepted is
on disk; nothing is ever written into the literature database.

Tables (one review spans any number of searches and files):

- ``review``: id, name, question, the editable list of exclusion reasons.
- ``review_record``: every record that joined the review (identity, join order, a snapshot of what the
  view shows), so a review can be screened, exported and drawn as a PRISMA flow without the database.
- ``decision``: one row per decision keyed by (review id, source, external id): include, exclude
  (with a reason) or maybe, a note, the model score when it was made, the time.
- ``decision_log``: each change with the value before it, which is what *undo* restores.
- ``other_decision``: another reviewer's imported decisions (agreement, Cohen's kappa).
- ``flow_number``: PRISMA numbers entered by hand (marked as entered in the flow).
- ``record_vector``: a record's document vector (and the question's, under the key ``("", "question")``)
  per embedding model, copied from the literature database when the review is opened, so the order can
  use them without the database.
- ``model_score``: an LLM's (or the embedding model's) 1–5 score with its reason, cached per (model,
  question, document) across reviews; a score never decides anything.

The folder is 0700 and the file 0600, as every file the app writes.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from kmds_desktop import paths
from kmds_desktop.literature.errors import LiteratureError
from kmds_desktop.literature.screening.records import (
    CsvProblem,
    ScreeningRecord,
    csv_rows,
    normalize_doi,
    normalize_pmid,
)
from kmds_desktop.literature.store.sqlite_store import SqliteStore
from kmds_desktop.literature.strategy.history import utc_now
from kmds_desktop.text import shorten
from kmds_desktop.user_files import file_limit, read_user_text

SCREENING_FILE = "screening.sqlite3"
SCHEMA_VERSION = 1

INCLUDE = "include"
EXCLUDE = "exclude"
MAYBE = "maybe"
DECISIONS = (INCLUDE, EXCLUDE, MAYBE)

#: The exclusion reasons a new review starts with (editable per review).
DEFAULT_REASONS = (
    "wrong population",
    "wrong intervention",
    "wrong outcome",
    "wrong study design",
    "wrong publication type",
    "foreign language",
    "duplicate",
)

#: Columns of a reviewer's decisions file (``export_decisions`` / ``import_decisions``).
DECISION_COLUMNS = (
    "review",
    "reviewer",
    "source",
    "external_id",
    "doi",
    "pmid",
    "title",
    "decision",
    "reason",
    "note",
    "decided_at",
)

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS review (
        id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', question TEXT NOT NULL DEFAULT '',
        reasons TEXT NOT NULL, created_at TEXT NOT NULL, settings TEXT NOT NULL DEFAULT '{}')""",
    """CREATE TABLE IF NOT EXISTS review_record (
        review_id TEXT NOT NULL, source TEXT NOT NULL, external_id TEXT NOT NULL,
        position INTEGER NOT NULL, origin TEXT NOT NULL DEFAULT '', data TEXT NOT NULL,
        PRIMARY KEY (review_id, source, external_id)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS review_source (
        review_id TEXT NOT NULL, origin TEXT NOT NULL, identified INTEGER NOT NULL,
        per_row TEXT NOT NULL DEFAULT '{}', added_at TEXT NOT NULL,
        PRIMARY KEY (review_id, origin)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS decision (
        review_id TEXT NOT NULL, source TEXT NOT NULL, external_id TEXT NOT NULL,
        decision TEXT NOT NULL CHECK (decision IN ('include', 'exclude', 'maybe')),
        reason TEXT NOT NULL DEFAULT '', note TEXT NOT NULL DEFAULT '', score REAL,
        decided_at TEXT NOT NULL, PRIMARY KEY (review_id, source, external_id)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS decision_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, review_id TEXT NOT NULL, source TEXT NOT NULL,
        external_id TEXT NOT NULL, before TEXT, after TEXT, at TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS other_decision (
        review_id TEXT NOT NULL, reviewer TEXT NOT NULL, source TEXT NOT NULL, external_id TEXT NOT NULL,
        decision TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', note TEXT NOT NULL DEFAULT '',
        decided_at TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (review_id, reviewer, source, external_id)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS record_vector (
        review_id TEXT NOT NULL, source TEXT NOT NULL, external_id TEXT NOT NULL, model TEXT NOT NULL,
        vector BLOB NOT NULL, PRIMARY KEY (review_id, source, external_id, model)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS model_score (
        model TEXT NOT NULL, question TEXT NOT NULL, source TEXT NOT NULL, external_id TEXT NOT NULL,
        score INTEGER, reason TEXT NOT NULL DEFAULT '', note TEXT NOT NULL DEFAULT '',
        scored_at TEXT NOT NULL, PRIMARY KEY (model, question, source, external_id)) WITHOUT ROWID""",
    # The identities each search or file brought (before merging), so the PRISMA flow counts a record
    # that several runs of a search found once: a re-run is not new identification.
    """CREATE TABLE IF NOT EXISTS source_record (
        review_id TEXT NOT NULL, origin TEXT NOT NULL, source TEXT NOT NULL, external_id TEXT NOT NULL,
        PRIMARY KEY (review_id, origin, source, external_id)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS flow_number (
        review_id TEXT NOT NULL, name TEXT NOT NULL, value INTEGER NOT NULL, note TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (review_id, name)) WITHOUT ROWID""",
)

Key = tuple[str, str]


class ScreeningError(LiteratureError):
    """The screening store cannot do what was asked (no such review, an unreadable file)."""


@dataclass(frozen=True)
class Decision:
    """One record's decision."""

    decision: str
    reason: str = ""
    note: str = ""
    score: float | None = None
    decided_at: str = ""

    @property
    def included(self) -> bool:
        return self.decision == INCLUDE

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "reason": self.reason,
            "note": self.note,
            "score": self.score,
            "decided_at": self.decided_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Decision:
        score = data.get("score")
        return cls(
            decision=str(data["decision"]),
            reason=str(data.get("reason") or ""),
            note=str(data.get("note") or ""),
            score=float(score) if score is not None else None,
            decided_at=str(data.get("decided_at") or ""),
        )


@dataclass
class Review:
    id: str
    name: str
    question: str
    reasons: list[str]
    created_at: str
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class SourceCount:
    """What one search or file brought into the review, before duplicates were removed."""

    origin: str
    identified: int
    per_row: dict[str, int]
    added_at: str


@dataclass
class ImportReport:
    """What importing another reviewer's decisions did."""

    reviewer: str
    imported: int = 0
    unknown: list[str] = field(default_factory=list)  #: identities not in the review
    broken: list[tuple[int, str]] = field(default_factory=list)  #: (line number, why)

    def summary(self) -> str:
        parts = [f"{self.imported} decision{'s' if self.imported != 1 else ''} of {self.reviewer} imported"]
        if self.unknown:
            parts.append(
                f"{len(self.unknown)} unknown record{'s' if len(self.unknown) != 1 else ''} "
                f"skipped ({', '.join(self.unknown[:5])}{', …' if len(self.unknown) > 5 else ''})"
            )
        if self.broken:
            parts.append(
                f"{len(self.broken)} broken line{'s' if len(self.broken) != 1 else ''} skipped "
                f"(line {', '.join(str(n) for n, _ in self.broken[:5])})"
            )
        return "; ".join(parts)


#: The largest decisions file read, in bytes (a million decisions are about 150 MB); larger files are
#: refused before they are read (raise it with ``KMDS_DESKTOP_MAX_FILE_MB``).
MAX_DECISIONS_FILE_BYTES = 256 << 20


def read_decisions_file(path: str | Path) -> str:
    """The text of another reviewer's decisions file, read bounded and only if it is a regular file
    (see :mod:`kmds_desktop.user_files`: a link to ``/dev/zero`` is refused, not read until memory
    ends), for :meth:`DecisionStore.import_decisions`."""
    return read_user_text(path, file_limit(MAX_DECISIONS_FILE_BYTES), "decisions file")


def default_store_path() -> Path:
    """``<data folder>/screening/screening.sqlite3`` (the folder 0700)."""
    return paths.sub_dir("screening") / SCREENING_FILE


def _problem_text(problem: CsvProblem) -> str:
    """A broken row's reason as the report lists it after its line number: the lines it spans where
    there are several ("line 5: line 5: …" said the one line twice)."""
    return problem.text() if problem.last_line > problem.first_line else problem.reason


class DecisionStore(SqliteStore):
    """The reviews of one data folder. Thread-safe (the session's training thread reads it)."""

    WHAT = "the screening file"
    ERROR = ScreeningError
    SCHEMA: ClassVar[Sequence[str]] = _SCHEMA  # a subclass adds its own tables' statements
    SCHEMA_VERSION = SCHEMA_VERSION

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        super().__init__(Path(path) if path is not None else default_store_path())

    # -- reviews -------------------------------------------------------------------------------------
    def create_review(
        self, review_id: str, *, name: str = "", question: str = "", reasons: Sequence[str] = DEFAULT_REASONS
    ) -> Review:
        """Create a review, or return the existing one of that id unchanged (opening is idempotent)."""
        review_id = str(review_id).strip()
        if not review_id:
            raise ScreeningError("a review needs a name")
        with self._write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO review (id, name, question, reasons, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (review_id, name or review_id, question, json.dumps(list(reasons)), utc_now()),
            )
        return self.review(review_id)

    def review(self, review_id: str) -> Review:
        found = self._read(
            "SELECT id, name, question, reasons, created_at, settings FROM review WHERE id = ?", (review_id,)
        )
        if not found:
            raise ScreeningError(f"there is no review {review_id!r}")
        r = found[0]
        return Review(
            id=r[0],
            name=r[1],
            question=r[2],
            reasons=list(json.loads(r[3])),
            created_at=r[4],
            settings=json.loads(r[5] or "{}"),
        )

    def reviews(self) -> list[Review]:
        return [self.review(r[0]) for r in self._read("SELECT id FROM review ORDER BY created_at, id")]

    def set_reasons(self, review_id: str, reasons: Sequence[str]) -> list[str]:
        """Replace the review's exclusion reasons (blank and repeated ones dropped; order kept)."""
        clean: list[str] = []
        for reason in reasons:
            text = " ".join(str(reason).split())
            if text and text not in clean:
                clean.append(text)
        with self._write() as conn:
            conn.execute("UPDATE review SET reasons = ? WHERE id = ?", (json.dumps(clean), review_id))
        return clean

    def set_settings(self, review_id: str, settings: Mapping[str, Any]) -> None:
        """The review's own settings (the random sample of the target-recall rule)."""
        with self._write() as conn:
            conn.execute(
                "UPDATE review SET settings = ? WHERE id = ?", (json.dumps(dict(settings)), review_id)
            )

    def set_question(self, review_id: str, question: str) -> None:
        with self._write() as conn:
            conn.execute("UPDATE review SET question = ? WHERE id = ?", (question, review_id))

    # -- records -------------------------------------------------------------------------------------
    def add_records(
        self,
        review_id: str,
        records: Iterable[ScreeningRecord],
        *,
        origin: str,
        identified: int | None = None,
        per_row: Mapping[str, int] | None = None,
        identities: Iterable[Key] = (),
    ) -> int:
        """Add records (already merged by DOI/PMID) to the review; a record already in it keeps its
        place and decision, and gains the new rows that found it. ``identities``: the (source,
        external id) of every record ``origin`` brought, before merging (see :meth:`source_identities`).
        Returns how many are new."""
        records = list(records)
        added = 0
        with self._write() as conn:
            position = int(
                conn.execute(
                    "SELECT coalesce(max(position), 0) FROM review_record WHERE review_id = ?", (review_id,)
                ).fetchone()[0]
            )
            for rec in records:
                old = conn.execute(
                    "SELECT data FROM review_record WHERE review_id = ? AND source = ? AND external_id = ?",
                    (review_id, *rec.key),
                ).fetchone()
                if old is None:
                    position += 1
                    added += 1
                    conn.execute(
                        "INSERT INTO review_record (review_id, source, external_id, position, origin, "
                        "data) VALUES (?, ?, ?, ?, ?, ?)",
                        (review_id, rec.source, rec.external_id, position, origin, json.dumps(rec.to_dict())),
                    )
                else:
                    kept = ScreeningRecord.from_dict(json.loads(old[0]))
                    for row in rec.found_by:
                        if row not in kept.found_by:
                            kept.found_by.append(row)
                    for o in rec.origins:
                        if o not in kept.origins:
                            kept.origins.append(o)
                    for a in rec.aliases:
                        if a not in kept.aliases and a != kept.key:
                            kept.aliases.append(a)
                    conn.execute(
                        "UPDATE review_record SET data = ? WHERE review_id = ? AND source = ? AND "
                        "external_id = ?",
                        (json.dumps(kept.to_dict()), review_id, *rec.key),
                    )
            conn.execute(
                "INSERT OR REPLACE INTO review_source (review_id, origin, identified, per_row, added_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (
                    review_id,
                    origin,
                    len(records) if identified is None else int(identified),
                    json.dumps(dict(per_row or {})),
                    # To the microsecond: runs added within one second keep their order in the flow.
                    datetime.now(UTC).isoformat(timespec="microseconds"),
                ),
            )
            conn.executemany(
                "INSERT OR IGNORE INTO source_record (review_id, origin, source, external_id) "
                "VALUES (?, ?, ?, ?)",
                [(review_id, origin, str(k[0]), str(k[1])) for k in identities],
            )
        return added

    def records(self, review_id: str) -> list[ScreeningRecord]:
        """The review's records in the order they joined it."""
        return [
            ScreeningRecord.from_dict(json.loads(r[0]))
            for r in self._read(
                "SELECT data FROM review_record WHERE review_id = ? ORDER BY position", (review_id,)
            )
        ]

    def sources(self, review_id: str) -> list[SourceCount]:
        return [
            SourceCount(origin=r[0], identified=int(r[1]), per_row=json.loads(r[2] or "{}"), added_at=r[3])
            for r in self._read(
                "SELECT origin, identified, per_row, added_at FROM review_source "
                "WHERE review_id = ? ORDER BY added_at, origin",
                (review_id,),
            )
        ]

    def source_identities(self, review_id: str) -> dict[str, set[Key]]:
        """Per origin, the identities it brought (origins added before they were kept have none)."""
        out: dict[str, set[Key]] = {}
        for origin, source, external_id in self._read(
            "SELECT origin, source, external_id FROM source_record WHERE review_id = ?", (review_id,)
        ):
            out.setdefault(str(origin), set()).add((str(source), str(external_id)))
        return out

    # -- decisions -----------------------------------------------------------------------------------
    def decide(
        self,
        review_id: str,
        key: Key,
        decision: str,
        *,
        reason: str = "",
        note: str = "",
        score: float | None = None,
    ) -> Decision:
        """Record (or change) one record's decision, committed before this returns."""
        if decision not in DECISIONS:
            raise ScreeningError(f"unknown decision {decision!r}: use include, exclude or maybe")
        made = Decision(
            decision=decision,
            reason=reason if decision == EXCLUDE else "",
            note=note,
            score=score,
            decided_at=utc_now(),
        )
        with self._write() as conn:
            before = self._decision_in(conn, review_id, key)
            conn.execute(
                "INSERT OR REPLACE INTO decision (review_id, source, external_id, decision, reason, "
                "note, score, decided_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (review_id, *key, made.decision, made.reason, made.note, made.score, made.decided_at),
            )
            conn.execute(
                "INSERT INTO decision_log (review_id, source, external_id, before, after, at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    review_id,
                    *key,
                    json.dumps(before.to_dict()) if before else None,
                    json.dumps(made.to_dict()),
                    made.decided_at,
                ),
            )
        return made

    @staticmethod
    def _decision_in(conn: sqlite3.Connection, review_id: str, key: Key) -> Decision | None:
        r = conn.execute(
            "SELECT decision, reason, note, score, decided_at FROM decision WHERE review_id = ? "
            "AND source = ? AND external_id = ?",
            (review_id, *key),
        ).fetchone()
        return Decision(r[0], r[1], r[2], r[3], r[4]) if r else None

    def decisions(self, review_id: str) -> dict[Key, Decision]:
        return {
            (r[0], r[1]): Decision(r[2], r[3], r[4], r[5], r[6])
            for r in self._read(
                "SELECT source, external_id, decision, reason, note, score, decided_at FROM decision "
                "WHERE review_id = ? ORDER BY decided_at",
                (review_id,),
            )
        }

    def decision_order(self, review_id: str) -> list[Key]:
        """Decided records in the order of their *first* decision (what "since the last include" counts)."""
        seen: dict[Key, None] = {}
        for source, ext in self._read(
            "SELECT source, external_id FROM decision_log WHERE review_id = ? ORDER BY seq", (review_id,)
        ):
            seen.setdefault((source, ext), None)
        current = self.decisions(review_id)
        return [k for k in seen if k in current]

    def undo(self, review_id: str) -> Key | None:
        """Take back the last change: the record gets its decision before it (or none). Returns its key."""
        with self._write() as conn:
            last = conn.execute(
                "SELECT seq, source, external_id, before FROM decision_log WHERE review_id = ? "
                "ORDER BY seq DESC LIMIT 1",
                (review_id,),
            ).fetchone()
            if last is None:
                return None
            seq, source, ext, before = last
            if before is None:
                conn.execute(
                    "DELETE FROM decision WHERE review_id = ? AND source = ? AND external_id = ?",
                    (review_id, source, ext),
                )
            else:
                d = Decision.from_dict(json.loads(before))
                conn.execute(
                    "INSERT OR REPLACE INTO decision (review_id, source, external_id, decision, "
                    "reason, note, score, decided_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (review_id, source, ext, d.decision, d.reason, d.note, d.score, d.decided_at),
                )
            conn.execute("DELETE FROM decision_log WHERE seq = ?", (seq,))
        return (source, ext)

    # -- another reviewer ----------------------------------------------------------------------------
    def export_decisions(self, review_id: str, reviewer: str = "me") -> str:
        """This reviewer's decisions as CSV (:data:`DECISION_COLUMNS`), for a second reviewer's tool."""
        records = {r.key: r for r in self.records(review_id)}
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(DECISION_COLUMNS)
        for key, d in self.decisions(review_id).items():
            rec = records.get(key)
            writer.writerow(
                [
                    review_id,
                    reviewer,
                    key[0],
                    key[1],
                    rec.doi if rec else "",
                    rec.pmid if rec else "",
                    rec.title if rec else "",
                    d.decision,
                    d.reason,
                    d.note,
                    d.decided_at,
                ]
            )
        return buf.getvalue()

    def import_decisions(self, review_id: str, text: str, reviewer: str | None = None) -> ImportReport:
        """Another reviewer's decisions (a file :meth:`export_decisions` wrote). Records are matched by
        identity, else DOI or PMID; unknown records and broken lines are reported and skipped, the rest
        kept (a re-import of the same reviewer replaces their earlier decision of a record)."""
        records = self.records(review_id)
        index: dict[tuple[str, str], Key] = {}
        for rec in records:
            index[("id", f"{rec.source}\0{rec.external_id}")] = rec.key
            for alias in rec.aliases:
                index[("id", f"{alias[0]}\0{alias[1]}")] = rec.key
            if rec.doi:
                index[("doi", rec.doi)] = rec.key
            if rec.pmid:
                index[("pmid", rec.pmid)] = rec.key
        rows_read = csv_rows(text)
        header: list[str] | None = None
        report = ImportReport(reviewer=reviewer or "")
        for line_no, first in rows_read:
            if isinstance(first, CsvProblem):
                report.broken.append((line_no, shorten(_problem_text(first))))
                continue
            if first:
                header = first
                break
        if not header:
            if not report.broken:
                report.broken.append((1, "the file is empty"))
            return report
        cols = {name.strip().lower(): i for i, name in enumerate(header)}
        missing = [c for c in ("decision",) if c not in cols]
        if missing or not ({"source", "external_id"} <= cols.keys() or "doi" in cols or "pmid" in cols):
            report.broken.append(
                (1, "the header lacks decision and source/external_id (or doi/pmid) columns")
            )
            return report
        rows: list[tuple[Key, str, Decision]] = []
        for line_no, row in rows_read:
            if isinstance(row, CsvProblem):
                report.broken.append((line_no, shorten(_problem_text(row))))
                continue
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(header):
                report.broken.append((line_no, f"{len(row)} fields where the header has {len(header)}"))
                continue

            def get(name: str, row: list[str] = row) -> str:
                return row[cols[name]].strip() if name in cols else ""

            decision = get("decision").lower()
            decision = {"included": INCLUDE, "excluded": EXCLUDE, "yes": INCLUDE, "no": EXCLUDE}.get(
                decision, decision
            )
            if decision not in DECISIONS:
                report.broken.append((line_no, shorten(f"unknown decision {get('decision')!r}")))
                continue
            who = reviewer or get("reviewer") or "other"
            report.reviewer = report.reviewer or who
            key = index.get(("id", f"{get('source')}\0{get('external_id')}"))
            doi, pmid = normalize_doi(get("doi")), normalize_pmid(get("pmid"))
            if key is None and doi:
                key = index.get(("doi", doi))
            if key is None and pmid:
                key = index.get(("pmid", pmid))
            if key is None:
                named = (f"{get('source')}:{get('external_id')}".strip(":") or get("doi")
                         or (f"PMID {get('pmid')}" if get("pmid") else f"line {line_no}"))
                report.unknown.append(shorten(named, 80))
                continue
            rows.append((key, who, Decision(decision, get("reason"), get("note"), None, get("decided_at"))))
        # two lines naming one record (by id and by DOI): one decision is kept, the last, and counted once
        rows = list({(key, who): (key, who, d) for key, who, d in rows}.values())
        with self._write() as conn:
            for key, who, d in rows:
                conn.execute(
                    "INSERT OR REPLACE INTO other_decision (review_id, reviewer, source, external_id, "
                    "decision, reason, note, decided_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (review_id, who, *key, d.decision, d.reason, d.note, d.decided_at),
                )
        report.imported = len(rows)
        return report

    def other_reviewers(self, review_id: str) -> list[str]:
        return [
            r[0]
            for r in self._read(
                "SELECT DISTINCT reviewer FROM other_decision WHERE review_id = ? ORDER BY reviewer",
                (review_id,),
            )
        ]

    def other_decisions(self, review_id: str, reviewer: str) -> dict[Key, Decision]:
        return {
            (r[0], r[1]): Decision(r[2], r[3], r[4], None, r[5])
            for r in self._read(
                "SELECT source, external_id, decision, reason, note, decided_at FROM other_decision "
                "WHERE review_id = ? AND reviewer = ?",
                (review_id, reviewer),
            )
        }

    # -- hand-entered PRISMA numbers ------------------------------------------------------------------
    def set_flow_number(self, review_id: str, name: str, value: int | None, note: str = "") -> None:
        """Enter (or with None clear) a PRISMA number the records cannot give (e.g. records removed by
        automation tools, reports not retrieved)."""
        with self._write() as conn:
            if value is None:
                conn.execute("DELETE FROM flow_number WHERE review_id = ? AND name = ?", (review_id, name))
            else:
                conn.execute(
                    "INSERT OR REPLACE INTO flow_number (review_id, name, value, note) VALUES (?, ?, ?, ?)",
                    (review_id, name, int(value), note),
                )

    def flow_numbers(self, review_id: str) -> dict[str, tuple[int, str]]:
        return {
            r[0]: (int(r[1]), r[2])
            for r in self._read("SELECT name, value, note FROM flow_number WHERE review_id = ?", (review_id,))
        }

    # -- document vectors (the order's features) --------------------------------------------------------
    def set_vectors(self, review_id: str, model: str, vectors: Mapping[Key, Any]) -> int:
        """Keep the document vectors of ``model`` (float32, any length) for the review's records."""
        import numpy as np  # why: numpy loads on first use, not at start-up

        rows = [
            (review_id, key[0], key[1], model, np.asarray(v, dtype="<f4").ravel().tobytes())
            for key, v in vectors.items()
            if v is not None
        ]
        with self._write() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO record_vector (review_id, source, external_id, model, vector) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )
        return len(rows)

    def vectors(self, review_id: str, model: str) -> dict[Key, Any]:
        import numpy as np  # why: numpy loads on first use, not at start-up

        return {
            (str(r[0]), str(r[1])): np.frombuffer(r[2], dtype="<f4")
            for r in self._read(
                "SELECT source, external_id, vector FROM record_vector WHERE review_id = ? AND model = ?",
                (review_id, model),
            )
        }

    # -- model scores (cached per model, question, document) -------------------------------------------
    def set_model_score(
        self, model: str, question: str, key: Key, score: int | None, reason: str = "", note: str = ""
    ) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO model_score (model, question, source, external_id, score, reason, "
                "note, scored_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (model, question, key[0], key[1], score, reason, note, utc_now()),
            )

    def model_scores(
        self, question: str, model: str | None = None
    ) -> dict[tuple[str, Key], tuple[int | None, str, str]]:
        """(model, key) -> (score or None, reason, note) for ``question`` (one model, or all)."""
        sql = "SELECT model, source, external_id, score, reason, note FROM model_score WHERE question = ?"
        params: tuple[Any, ...] = (question,)
        if model is not None:
            sql += " AND model = ?"
            params += (model,)
        return {
            (str(r[0]), (str(r[1]), str(r[2]))): (None if r[3] is None else int(r[3]), str(r[4]), str(r[5]))
            for r in self._read(sql, params)
        }
