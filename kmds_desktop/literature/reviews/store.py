"""The review's own tables beside the screening decisions, in the same SQLite file.

Why the same file as :class:`~kmds_desktop.literature.screening.decisions.DecisionStore`: a review's
records, decisions, strategy and update log must change together (a rename, a delete, an update that adds
records and logs itself) in one ``BEGIN IMMEDIATE`` transaction, and the screening view must see a
review the CLI just updated. The tables are additive (``CREATE TABLE IF NOT EXISTS``): a screening file
written before they existed opens as it is and gains them (its reviews read as one question, no saved
strategy, one round); an older app still reads a file that has them, so the schema version stays.

Tables (every one keyed by ``review_id`` first, so rename, delete and the review file handle all of them):

- ``review_question``: the review's questions in order (the first is also ``review.question``, the one
  the screening order reads).
- ``review_strategy``: each version of the saved strategy (the searches: question, rows exactly as they
  ran, the most documents per row) with its text and when and why it was saved; an edit is a new version.
- ``review_run``: the log of rounds: when, what kind (``search`` for the first round, ``update``), the
  strategy version and text it ran, the history set and the counts (found, already in the review, new,
  duplicates, withdrawn).
- ``record_round``: the round in which a record joined (no row: the first review, round 0).
- ``record_flag``: flags on records, e.g. ``withdrawn`` with the date the database gives.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kmds_desktop.literature.screening.decisions import DecisionStore, Key, Review, ScreeningError
from kmds_desktop.literature.strategy.history import utc_now

REVIEW_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS review_question (
        review_id TEXT NOT NULL, position INTEGER NOT NULL, text TEXT NOT NULL,
        PRIMARY KEY (review_id, position)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS review_strategy (
        review_id TEXT NOT NULL, version INTEGER NOT NULL, searches TEXT NOT NULL, text TEXT NOT NULL,
        saved_at TEXT NOT NULL, note TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (review_id, version)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS review_run (
        review_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, at TEXT NOT NULL,
        strategy_version INTEGER, strategy_text TEXT NOT NULL DEFAULT '', origin TEXT NOT NULL DEFAULT '',
        counts TEXT NOT NULL DEFAULT '{}', PRIMARY KEY (review_id, seq)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS record_round (
        review_id TEXT NOT NULL, source TEXT NOT NULL, external_id TEXT NOT NULL, round INTEGER NOT NULL,
        PRIMARY KEY (review_id, source, external_id)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS record_flag (
        review_id TEXT NOT NULL, source TEXT NOT NULL, external_id TEXT NOT NULL, flag TEXT NOT NULL,
        value TEXT NOT NULL DEFAULT '', at TEXT NOT NULL,
        PRIMARY KEY (review_id, source, external_id, flag)) WITHOUT ROWID""",
)

#: The longest review name kept (it is also the id the CLI's REVIEW argument names).
MAX_NAME_CHARS = 200
WITHDRAWN = "withdrawn"


class ReviewError(ScreeningError):
    """A review cannot do what was asked (no such review, a name taken, a file that is not a review)."""


@dataclass(frozen=True)
class SavedStrategy:
    """One version of a review's strategy."""

    version: int
    searches: list[dict[str, Any]]
    text: str
    saved_at: str
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "searches": self.searches, "text": self.text,
                "saved_at": self.saved_at, "note": self.note}


@dataclass(frozen=True)
class RunLog:
    """One round of the review: the first search, or an update."""

    seq: int
    kind: str
    at: str
    strategy_version: int | None
    strategy_text: str
    origin: str
    counts: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "kind": self.kind, "at": self.at, "strategy_version": self.strategy_version,
                "strategy_text": self.strategy_text, "origin": self.origin, "counts": dict(self.counts)}


def clean_name(name: str) -> str:
    """A review's name: spaces collapsed, at most :data:`MAX_NAME_CHARS`; empty is an error."""
    text = " ".join(str(name).split())[:MAX_NAME_CHARS]
    if not text:
        raise ReviewError("a review needs a name: give one, e.g. 'cf-sweat-test'")
    return text


class ReviewStore(DecisionStore):
    """The reviews of one data folder with their strategy, rounds and flags (see the module docstring)."""

    WHAT = "the screening file"
    ERROR = ReviewError
    SCHEMA = (*DecisionStore.SCHEMA, *REVIEW_SCHEMA)

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        super().__init__(path)

    # -- finding and naming ----------------------------------------------------------------------------
    def find(self, name: str) -> Review:
        """The review called ``name`` (its id, else its display name); a clear error when none is."""
        ids = {r.id: r for r in self.reviews()}
        if name in ids:
            return ids[name]
        named = [r for r in ids.values() if r.name == name]
        if len(named) == 1:
            return named[0]
        known = ", ".join(sorted(ids)[:8]) or "none yet"
        raise ReviewError(f"there is no review {name!r} (reviews: {known}); list them with "
                          "'kmds-desktop literature review list'")

    def free_name(self, name: str) -> str:
        """``name``, or ``name (2)``, ``name (3)``... the first no review has (id or name)."""
        taken = {r.id for r in self.reviews()} | {r.name for r in self.reviews()}
        base = clean_name(name)
        if base not in taken:
            return base
        n = 2
        while f"{base} ({n})" in taken:
            n += 1
        return f"{base} ({n})"

    def review_tables(self) -> list[str]:
        """Every table of the file with a ``review_id`` column (what rename, delete and export cover)."""
        out = []
        for (table,) in self._read("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            if "review_id" in self.columns(table) or table == "review":
                out.append(str(table))
        return out

    def columns(self, table: str) -> list[str]:
        """The columns of ``table`` (a name read from the file's own catalogue, never from input)."""
        return [str(r[1]) for r in self._read(f"PRAGMA table_info({_quoted(table)})")]

    def rename_review(self, review_id: str, new_name: str) -> Review:
        """Give a review a new name, which is also its new id (the CLI's REVIEW argument): every table's
        rows move with it in one transaction. A name another review has is refused."""
        new = clean_name(new_name)
        old = self.find(review_id)
        if new == old.id:
            with self._write() as conn:
                conn.execute("UPDATE review SET name = ? WHERE id = ?", (new, old.id))
            return self.review(new)
        if any(r.id == new or r.name == new for r in self.reviews()):
            raise ReviewError(f"a review called {new!r} exists already: choose another name")
        tables = self.review_tables()
        with self._write() as conn:
            for table in tables:
                column = "id" if table == "review" else "review_id"
                conn.execute(f"UPDATE {_quoted(table)} SET {column} = ? WHERE {column} = ?", (new, old.id))
            conn.execute("UPDATE review SET name = ? WHERE id = ?", (new, new))
        return self.review(new)

    def delete_review(self, review_id: str) -> int:
        """Delete a review with its records, decisions, strategy and log (cached model scores, kept per
        question, stay for other reviews). Returns how many decisions went with it."""
        review = self.find(review_id)
        decided = len(self.decisions(review.id))
        tables = self.review_tables()
        with self._write() as conn:
            for table in tables:
                column = "id" if table == "review" else "review_id"
                conn.execute(f"DELETE FROM {_quoted(table)} WHERE {column} = ?", (review.id,))
        return decided

    # -- questions -------------------------------------------------------------------------------------
    def questions(self, review_id: str) -> list[str]:
        """The review's questions; a review from before questions were kept has its one question."""
        rows = [str(r[0]) for r in self._read(
            "SELECT text FROM review_question WHERE review_id = ? ORDER BY position", (review_id,))]
        if rows:
            return rows
        question = self.review(review_id).question
        return [question] if question.strip() else []

    def set_questions(self, review_id: str, questions: Sequence[str]) -> list[str]:
        """Replace the questions (blank and repeated ones dropped); the first orders the screening."""
        clean: list[str] = []
        for q in questions:
            text = " ".join(str(q).split())
            if text and text not in clean:
                clean.append(text)
        with self._write() as conn:
            conn.execute("DELETE FROM review_question WHERE review_id = ?", (review_id,))
            conn.executemany("INSERT INTO review_question (review_id, position, text) VALUES (?, ?, ?)",
                             [(review_id, n, q) for n, q in enumerate(clean, start=1)])
            first = clean[0] if clean else ""
            conn.execute("UPDATE review SET question = ? WHERE id = ?", (first, review_id))
        return clean

    # -- strategy --------------------------------------------------------------------------------------
    def strategies(self, review_id: str) -> list[SavedStrategy]:
        """Every version of the strategy, oldest first."""
        rows = self._read("SELECT version, searches, text, saved_at, note FROM review_strategy "
                          "WHERE review_id = ? ORDER BY version", (review_id,))
        return [SavedStrategy(int(r[0]), json.loads(r[1]), str(r[2]), str(r[3]), str(r[4])) for r in rows]

    def strategy(self, review_id: str) -> SavedStrategy | None:
        """The strategy in force (the latest version), or None when none was saved."""
        versions = self.strategies(review_id)
        return versions[-1] if versions else None

    def save_strategy(self, review_id: str, searches: Sequence[Mapping[str, Any]], text: str,
                      note: str = "") -> SavedStrategy:
        """Save the strategy as a new version (the edit is logged with its time and note); the same
        searches as the version in force save nothing and return it."""
        current = self.strategy(review_id)
        plain = [dict(s) for s in searches]
        if current is not None and current.searches == json.loads(json.dumps(plain)):
            return current
        version = (current.version if current else 0) + 1
        with self._write() as conn:
            conn.execute(
                "INSERT INTO review_strategy (review_id, version, searches, text, saved_at, note) "
                "VALUES (?, ?, ?, ?, ?, ?)", (review_id, version, json.dumps(plain), text, utc_now(), note))
        return self.strategy(review_id)  # type: ignore[return-value]

    # -- rounds ----------------------------------------------------------------------------------------
    def runs(self, review_id: str) -> list[RunLog]:
        return [RunLog(int(r[0]), str(r[1]), str(r[2]), r[3], str(r[4]), str(r[5]), json.loads(r[6] or "{}"))
                for r in self._read(
                    "SELECT seq, kind, at, strategy_version, strategy_text, origin, counts FROM review_run "
                    "WHERE review_id = ? ORDER BY seq", (review_id,))]

    def log_run(self, review_id: str, kind: str, *, strategy: SavedStrategy | None, origin: str,
                counts: Mapping[str, Any], conn: sqlite3.Connection | None = None) -> int:
        """Log a round (inside ``conn``'s transaction when given); returns its number."""
        def insert(c: sqlite3.Connection) -> int:
            seq = int(c.execute("SELECT coalesce(max(seq), 0) + 1 FROM review_run WHERE review_id = ?",
                                (review_id,)).fetchone()[0])
            c.execute(
                "INSERT INTO review_run (review_id, seq, kind, at, strategy_version, strategy_text, origin, "
                "counts) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (review_id, seq, kind, utc_now(), strategy.version if strategy else None,
                 strategy.text if strategy else "", origin, json.dumps(dict(counts))))
            return seq
        if conn is not None:
            return insert(conn)
        with self._write() as c:
            return insert(c)

    def rounds(self, review_id: str) -> dict[Key, int]:
        """The round each record joined in (records of the first review are absent: round 0)."""
        return {(str(r[0]), str(r[1])): int(r[2]) for r in self._read(
            "SELECT source, external_id, round FROM record_round WHERE review_id = ?", (review_id,))}

    def set_rounds(self, review_id: str, keys: Iterable[Key], round_number: int) -> None:
        with self._write() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO record_round (review_id, source, external_id, round) "
                "VALUES (?, ?, ?, ?)",
                [(review_id, k[0], k[1], int(round_number)) for k in keys])

    # -- flags -----------------------------------------------------------------------------------------
    def flags(self, review_id: str, flag: str = WITHDRAWN) -> dict[Key, str]:
        """Flagged records (e.g. withdrawn) with the flag's value (the withdrawal date)."""
        return {(str(r[0]), str(r[1])): str(r[2]) for r in self._read(
            "SELECT source, external_id, value FROM record_flag WHERE review_id = ? AND flag = ?",
            (review_id, flag))}

    def set_flags(self, review_id: str, values: Mapping[Key, str], flag: str = WITHDRAWN) -> None:
        with self._write() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO record_flag (review_id, source, external_id, flag, value, at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(review_id, k[0], k[1], flag, v, utc_now()) for k, v in values.items()])

    def add_other_decisions(self, review_id: str, reviewer: str, decisions: Mapping[Key, Any]) -> None:
        """Keep another reviewer's decisions (``Decision`` objects) beside this review's, in one transaction
        (a later merge of the same reviewer replaces their earlier decision of a record)."""
        with self._write() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO other_decision (review_id, reviewer, source, external_id, decision, "
                "reason, note, decided_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(review_id, reviewer, k[0], k[1], d.decision, d.reason, d.note, d.decided_at)
                 for k, d in decisions.items()])

    # -- raw rows (the review file) --------------------------------------------------------------------
    def table_rows(self, table: str, review_id: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Columns and rows of ``table`` for one review (a name from :meth:`review_tables`), in the
        order they were written (``decision_log`` by its sequence, so undo survives the round trip)."""
        columns = self.columns(table)
        column = "id" if table == "review" else "review_id"
        order = " ORDER BY seq" if "seq" in columns else ""
        rows = self._read(f"SELECT * FROM {_quoted(table)} WHERE {column} = ?{order}", (review_id,))
        return columns, [tuple(r) for r in rows]

    def insert_rows(self, tables: Mapping[str, tuple[Sequence[str], Sequence[Sequence[Any]]]],
                    review_id: str) -> dict[str, int]:
        """Write a review's rows (from a review file) under ``review_id`` in one transaction. Only
        tables and columns this file has are written (their names come from its own catalogue);
        ``decision_log``'s sequence is given anew, in the file's order. Returns rows per table."""
        known = set(self.review_tables())
        written: dict[str, int] = {}
        with self._write() as conn:
            for table, (columns, rows) in tables.items():
                if table not in known:
                    continue
                have = self.columns(table)
                key_column = "id" if table == "review" else "review_id"
                keep = [i for i, c in enumerate(columns) if c in have and c != key_column
                        and not (table == "decision_log" and c == "seq")]
                names = [key_column] + [columns[i] for i in keep]
                marks = ", ".join("?" * len(names))
                sql = (f"INSERT INTO {_quoted(table)} ({', '.join(_quoted(n) for n in names)}) "
                       f"VALUES ({marks})")
                conn.executemany(sql, [(review_id, *[row[i] for i in keep]) for row in rows])
                written[table] = len(rows)
        return written


def _quoted(name: str) -> str:
    """An SQL identifier in double quotes (names come from the file's catalogue; quotes doubled)."""
    return '"' + str(name).replace('"', '""') + '"'
