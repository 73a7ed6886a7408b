"""The app's own store of full texts: one SQLite file in the data folder with papers, their cleaned
pages, their passages, an FTS5 index over the passages (bm25) and a vector per passage.

Why SQLite beside the literature database and not in it: passages are the app's own derived data,
and the literature database may be a user's BMLibrarian one that the app must not write into. SQLite
needs no server, is in Python's standard library with FTS5, and one file per data folder is easy to
back up or delete. Vectors are float32 blobs (384 floats for the shipped model); a search loads them
once into one matrix (a few MB for thousands of passages) and keeps it until the store changes.

Pages are kept whole because the quote verifier checks every quote against the cited page's text.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kmds_desktop import paths

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from kmds_desktop.literature.fulltext.passages import Passage

SCHEMA_VERSION = 2
FILE_NAME = "fulltext.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS paper (
    id INTEGER PRIMARY KEY,
    sha256 TEXT NOT NULL UNIQUE,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    doi TEXT,
    title TEXT,
    page_count INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL,            -- 'ok' or the failure's reason code
    reason TEXT,
    record_id INTEGER,               -- a literature record, where one was matched
    imported_at REAL NOT NULL
);
-- Added later, by ALTER TABLE where missing (see FulltextStore.__init__): record_match,
-- record_source, record_external_id, pdf_info (the PDF's document info as JSON, which a record
-- made from an unmatched PDF takes its authors and year from).
CREATE INDEX IF NOT EXISTS paper_path ON paper(path);
-- The user's word on which literature record a PDF is (record_id NULL: none of them), kept by the
-- file's content, not its paper row: a paper removed with its file and imported again, or a whole
-- store rebuilt from the same files, gets the same correction back.
CREATE TABLE IF NOT EXISTS record_pin (
    sha256 TEXT PRIMARY KEY,
    record_id INTEGER,
    record_source TEXT,
    record_external_id TEXT,
    set_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS paper_doi ON paper(doi);
CREATE TABLE IF NOT EXISTS page (
    paper_id INTEGER NOT NULL REFERENCES paper(id) ON DELETE CASCADE,
    page_no INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (paper_id, page_no)
);
CREATE TABLE IF NOT EXISTS passage (
    id INTEGER PRIMARY KEY,
    paper_id INTEGER NOT NULL REFERENCES paper(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    start_page INTEGER NOT NULL,
    end_page INTEGER NOT NULL,
    start_offset INTEGER NOT NULL,
    end_offset INTEGER NOT NULL,
    text TEXT NOT NULL,
    vector BLOB
);
CREATE INDEX IF NOT EXISTS passage_paper ON passage(paper_id);
CREATE VIRTUAL TABLE IF NOT EXISTS passage_fts USING fts5(
    text, content='passage', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS passage_ai AFTER INSERT ON passage BEGIN
    INSERT INTO passage_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER IF NOT EXISTS passage_ad AFTER DELETE ON passage BEGIN
    INSERT INTO passage_fts(passage_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
"""


@dataclass(frozen=True)
class PaperRow:
    """A PDF the store knows: imported (``status == "ok"``) or failed with its reason."""

    id: int
    sha256: str
    path: str
    size: int
    doi: str | None
    title: str | None
    page_count: int
    status: str
    reason: str | None
    record_id: int | None
    #: How ``record_id`` was found: ``doi``, ``title``, ``manual`` (the user's correction), or None.
    record_match: str | None = None
    #: The record's identity as screening keys it (source name, external id): a review's included
    #: records are found among the papers by it, without the literature database.
    record_source: str | None = None
    record_external_id: str | None = None

    @property
    def record_key(self) -> tuple[str, str] | None:
        if self.record_source is None or self.record_external_id is None:
            return None
        return (self.record_source, self.record_external_id)

    @property
    def label(self) -> str:
        """How a citation names the paper: its DOI, else its file name."""
        return self.doi or Path(self.path).name


@dataclass(frozen=True)
class PassageRow:
    id: int
    paper_id: int
    start_page: int
    end_page: int
    start_offset: int
    end_offset: int
    text: str


def default_path() -> Path:
    """The store in the data folder (``<data>/fulltext/fulltext.sqlite``, the folder 0700)."""
    return paths.sub_dir("fulltext") / FILE_NAME


#: Words a question is made of that say nothing about its subject: in an OR-query they would rank
#: every passage that uses them.
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers him his how i if in into is it its itself just me more most my no nor not of
off on once only or other our out over own same she should so some such than that the their them then
there these they this those through to too under until up very was we were what when where which
while who whom why will with would you your following shown show shows known likely main
""".split())


def _fts_query(question: str) -> str:
    """An FTS5 OR-query of the question's words without :data:`STOPWORDS` (quoted, so no word is read
    as an operator)."""
    words = [w for w in re.findall(r"\w+", question.lower()) if len(w) > 1 and w not in STOPWORDS]
    return " OR ".join(f'"{w}"' for w in dict.fromkeys(words))


class FulltextStore:
    """The SQLite store; one connection, used from one thread at a time (a lock guards it, so a
    window's worker and its view may take turns)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        # A folder made here is private; one that exists is the user's (e.g. /tmp) and is left as it is.
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("PRAGMA foreign_keys = ON")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(paper)")}
        with self._db:
            for column in ("record_match", "record_source", "record_external_id", "pdf_info"):
                if column not in columns:  # a store written before record matching (or records made)
                    self._db.execute(f"ALTER TABLE paper ADD COLUMN {column} TEXT")
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                             (str(SCHEMA_VERSION),))
        self._matrix: tuple[int, np.ndarray, list[int], list[int]] | None = None
        self._generation = 0

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> FulltextStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- papers -------------------------------------------------------------------------------

    def _paper(self, row: Sequence[Any]) -> PaperRow:
        return PaperRow(*row)

    _PAPER_COLUMNS = ("id, sha256, path, size, doi, title, page_count, status, reason, record_id, "
                      "record_match, record_source, record_external_id")

    def papers(self) -> list[PaperRow]:
        with self._lock:
            rows = self._db.execute(f"SELECT {self._PAPER_COLUMNS} FROM paper ORDER BY path").fetchall()
        return [self._paper(r) for r in rows]

    def paper(self, paper_id: int) -> PaperRow | None:
        with self._lock:
            row = self._db.execute(f"SELECT {self._PAPER_COLUMNS} FROM paper WHERE id = ?",
                                   (paper_id,)).fetchone()
        return self._paper(row) if row else None

    def paper_by_hash(self, sha256: str) -> PaperRow | None:
        with self._lock:
            row = self._db.execute(f"SELECT {self._PAPER_COLUMNS} FROM paper WHERE sha256 = ?",
                                   (sha256,)).fetchone()
        return self._paper(row) if row else None

    def relink(self, paper_id: int, path: Path) -> None:
        """A moved file: the same content at a new path keeps its passages."""
        with self._lock, self._db:
            self._db.execute("UPDATE paper SET path = ? WHERE id = ?", (str(path), paper_id))

    def remove_papers(self, paper_ids: Iterable[int]) -> int:
        """Remove papers with their pages and passages (and their full-text entries)."""
        ids = list(paper_ids)
        with self._lock, self._db:
            for paper_id in ids:
                self._db.execute("DELETE FROM passage WHERE paper_id = ?", (paper_id,))
                self._db.execute("DELETE FROM paper WHERE id = ?", (paper_id,))
            self._changed()
        return len(ids)

    def add_failure(self, sha256: str, path: Path, size: int, code: str, reason: str) -> int:
        """Remember a file that could not be read, with its reason (an unchanged file is not retried)."""
        with self._lock, self._db:
            cur = self._db.execute(
                "INSERT INTO paper (sha256, path, size, status, reason, imported_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (sha256, str(path), size, code, reason, time.time()),
            )
        return int(cur.lastrowid or 0)

    def add_paper(
        self,
        sha256: str,
        path: Path,
        size: int,
        doi: str | None,
        title: str | None,
        pages: Sequence[str],
        passages: Sequence[Passage],
        vectors: np.ndarray,
        info: Mapping[str, str] | None = None,
    ) -> int:
        """Store a read paper in one transaction: the paper, its pages, its passages with vectors, and
        the PDF's document info (``info``: Author, CreationDate ...)."""
        import numpy as np  # on first use: the CLI's --help and the app's start stay fast

        with self._lock, self._db:
            cur = self._db.execute(
                "INSERT INTO paper (sha256, path, size, doi, title, page_count, status, imported_at, "
                "pdf_info) VALUES (?, ?, ?, ?, ?, ?, 'ok', ?, ?)",
                (sha256, str(path), size, doi, title, len(pages), time.time(),
                 json.dumps(dict(info or {}))),
            )
            paper_id = int(cur.lastrowid or 0)
            self._db.executemany(
                "INSERT INTO page (paper_id, page_no, text) VALUES (?, ?, ?)",
                [(paper_id, i + 1, text) for i, text in enumerate(pages)],
            )
            self._db.executemany(
                "INSERT INTO passage (paper_id, ordinal, start_page, end_page, start_offset, end_offset, "
                "text, vector) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (paper_id, p.ordinal, p.start_page, p.end_page, p.start_offset, p.end_offset, p.text,
                     np.asarray(vectors[i], dtype=np.float32).tobytes())
                    for i, p in enumerate(passages)
                ],
            )
            pin = self._db.execute("SELECT record_id, record_source, record_external_id FROM record_pin "
                                   "WHERE sha256 = ?", (sha256,)).fetchone()
            if pin is not None:  # the user said which record these bytes are, before
                self._db.execute("UPDATE paper SET record_id = ?, record_source = ?, record_external_id = ?, "
                                 "record_match = 'manual' WHERE id = ?", (*pin, paper_id))
            self._changed()
        return paper_id

    def pdf_info(self, paper_id: int) -> dict[str, str]:
        """The PDF's document info as read at import (``{}`` for a paper stored before it was kept)."""
        with self._lock:
            row = self._db.execute("SELECT pdf_info FROM paper WHERE id = ?", (paper_id,)).fetchone()
        try:
            value = json.loads(row[0]) if row and row[0] else {}
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}

    # -- records ------------------------------------------------------------------------------

    def set_record(self, paper_id: int, record_id: int | None, how: str | None = None,
                   key: tuple[str, str] | None = None) -> bool:
        """An automatic match (``how``: ``doi``, ``title``, ``created``; ``key``: the record's source
        and external id); False, and nothing changed, where the user pinned the paper's record: a
        correction by hand outranks every heuristic."""
        source, external = key if key and record_id is not None else (None, None)
        with self._lock, self._db:
            cur = self._db.execute(
                "UPDATE paper SET record_id = ?, record_match = ?, record_source = ?, record_external_id = ? "
                "WHERE id = ? AND coalesce(record_match, '') != 'manual'",
                (record_id, how if record_id is not None else None, source, external, paper_id))
        return cur.rowcount > 0

    def pin_record(self, paper_id: int, record_id: int | None,
                   key: tuple[str, str] | None = None) -> PaperRow:
        """The user's correction: this paper is record ``record_id`` (None: none of the records). Kept
        by the file's content, so it survives re-imports, moves and the paper's removal and return."""
        with self._lock, self._db:
            paper = self.paper(paper_id)
            if paper is None or paper.status != "ok":
                raise ValueError(f"no imported paper with id {paper_id}; see 'literature fulltext status'")
            source, external = key if key and record_id is not None else (None, None)
            self._db.execute("INSERT OR REPLACE INTO record_pin (sha256, record_id, record_source, "
                             "record_external_id, set_at) VALUES (?, ?, ?, ?, ?)",
                             (paper.sha256, record_id, source, external, time.time()))
            self._db.execute("UPDATE paper SET record_id = ?, record_source = ?, record_external_id = ?, "
                             "record_match = 'manual' WHERE id = ?", (record_id, source, external, paper_id))
        return self.paper(paper_id)  # type: ignore[return-value]  # it exists: checked above

    def unpin_record(self, paper_id: int) -> PaperRow:
        """Forget the user's correction: the paper is matched automatically again (next match run)."""
        with self._lock, self._db:
            paper = self.paper(paper_id)
            if paper is None:
                raise ValueError(f"no paper with id {paper_id}; see 'literature fulltext status'")
            self._db.execute("DELETE FROM record_pin WHERE sha256 = ?", (paper.sha256,))
            self._db.execute("UPDATE paper SET record_id = NULL, record_match = NULL, record_source = NULL, "
                             "record_external_id = NULL WHERE id = ? AND record_match = 'manual'",
                             (paper_id,))
        return self.paper(paper_id)  # type: ignore[return-value]  # it exists: checked above

    # -- pages and passages -------------------------------------------------------------------

    def page_text(self, paper_id: int, page_no: int) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT text FROM page WHERE paper_id = ? AND page_no = ?",
                                   (paper_id, page_no)).fetchone()
        return row[0] if row else None

    def passages(self, ids: Sequence[int]) -> dict[int, PassageRow]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        with self._lock:
            rows = self._db.execute(
                "SELECT id, paper_id, start_page, end_page, start_offset, end_offset, text FROM passage "
                f"WHERE id IN ({marks})", list(ids)).fetchall()
        return {r[0]: PassageRow(*r) for r in rows}

    def passages_of(self, paper_id: int) -> list[PassageRow]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, paper_id, start_page, end_page, start_offset, end_offset, text FROM passage "
                "WHERE paper_id = ? ORDER BY ordinal", (paper_id,)).fetchall()
        return [PassageRow(*r) for r in rows]

    def counts(self) -> dict[str, int]:
        with self._lock:
            papers = self._db.execute("SELECT count(*) FROM paper WHERE status = 'ok'").fetchone()[0]
            failed = self._db.execute("SELECT count(*) FROM paper WHERE status != 'ok'").fetchone()[0]
            pages = self._db.execute("SELECT coalesce(sum(page_count), 0) FROM paper").fetchone()[0]
            passages = self._db.execute("SELECT count(*) FROM passage").fetchone()[0]
        return {"papers": papers, "failed": failed, "pages": pages, "passages": passages}

    # -- search -------------------------------------------------------------------------------

    def lexical(
        self, question: str, limit: int, paper_ids: Sequence[int] | None = None
    ) -> list[tuple[int, float]]:
        """``(passage id, bm25 score)`` best first (FTS5's bm25 is lower-is-better; negated here)."""
        query = _fts_query(question)
        if not query:
            return []
        sql = ("SELECT passage_fts.rowid, bm25(passage_fts) AS score FROM passage_fts "
               "WHERE passage_fts MATCH ?")
        params: list[Any] = [query]
        if paper_ids is not None:
            marks = ",".join("?" * len(paper_ids))
            sql += f" AND rowid IN (SELECT id FROM passage WHERE paper_id IN ({marks}))"
            params.extend(paper_ids)
        sql += " ORDER BY score LIMIT ?"
        params.append(limit)
        with self._lock:
            rows = self._db.execute(sql, params).fetchall()
        return [(int(r[0]), -float(r[1])) for r in rows]

    def vector_matrix(self) -> tuple[np.ndarray, list[int], list[int]]:
        """All passage vectors as one matrix, with the passage id and paper id of each row (cached
        until the store changes)."""
        import numpy as np  # on first use: the CLI's --help and the app's start stay fast

        with self._lock:
            cached = self._matrix
            if cached is not None and cached[0] == self._generation:
                return cached[1], cached[2], cached[3]
            rows = self._db.execute("SELECT id, paper_id, vector FROM passage WHERE vector IS NOT NULL "
                                    "ORDER BY id").fetchall()
            ids = [int(r[0]) for r in rows]
            papers = [int(r[1]) for r in rows]
            matrix = (np.stack([np.frombuffer(r[2], dtype=np.float32) for r in rows])
                      if rows else np.zeros((0, 0), dtype=np.float32))
            self._matrix = (self._generation, matrix, ids, papers)
            return matrix, ids, papers

    def _changed(self) -> None:
        self._generation += 1
        self._matrix = None
