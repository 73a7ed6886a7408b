"""One small SQLite file of the app's own (search history, screening decisions), opened the same way.

Why one class: both files must be created 0600 in a 0700 folder before SQLite touches them (its
default honours the umask), use WAL with ``synchronous = NORMAL`` (a committed transaction survives
the app being killed), take the write lock first (``BEGIN IMMEDIATE``: two writers queue, never
deadlock), refuse a file written by a newer schema, and turn every SQLite error into the store's own
error with the file's name. A subclass names its file, error, schema and version.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from kmds_desktop.crashpoints import crash_point

#: How long a writer waits for another process's write lock before the store's error is raised.
BUSY_TIMEOUT_MS = 30_000


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``: take the write lock first so two writers queue, never deadlock."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class SqliteStore:
    """A thread-safe connection to one store file (see the module docstring)."""

    #: How messages name the file ("the search history").
    WHAT: ClassVar[str] = "the store"
    ERROR: ClassVar[type[Exception]] = RuntimeError
    SCHEMA: ClassVar[Sequence[str]] = ()
    SCHEMA_VERSION: ClassVar[int] = 1

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not self.path.exists():
            with contextlib.suppress(FileExistsError):
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            with transaction(conn):
                for statement in self.SCHEMA:
                    conn.execute(statement)
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version > self.SCHEMA_VERSION:
                    raise self.ERROR(f"{self.WHAT} {self.path} was written by a newer version of the app; "
                                     "update the app to read it")
                if version < self.SCHEMA_VERSION:
                    conn.execute(f"PRAGMA user_version = {self.SCHEMA_VERSION}")
        except sqlite3.DatabaseError as err:
            raise self.ERROR(f"cannot open {self.WHAT} {self.path}: {err}") from None
        return conn

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._conn.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                with transaction(self._conn):
                    yield self._conn
            except sqlite3.Error as err:
                raise self.ERROR(f"cannot write {self.WHAT} {self.path}: {err}") from None
            crash_point("sqlite.committed")

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as err:
                raise self.ERROR(f"cannot read {self.WHAT} {self.path}: {err}") from None
