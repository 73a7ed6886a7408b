"""A folder of PDFs into the full-text store, incrementally by file content.

Why by content (SHA-256) and not by name or time: a researcher renames and moves downloads; the same
bytes at a new path are the same paper (its passages are kept and re-linked), and a file changed in
place is a new paper. A file gone from the folder takes its passages with it. A file that could not
be read is remembered with its reason and not read again until its bytes change, so one hostile PDF
costs its timeout once, not at every import.

Each PDF is read in the bounded child process (:mod:`.reader`), split into passages
(:mod:`.passages`), embedded with the app's shipped model in the parent and stored in one
transaction: a cancelled or interrupted import leaves every finished file complete and none half.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kmds_desktop.literature.fulltext.passages import split_passages
from kmds_desktop.literature.fulltext.reader import PdfReader
from kmds_desktop.tasks import CancelToken, ProgressFn, check, report

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from kmds_desktop.literature.fulltext.records import MatchReport
    from kmds_desktop.literature.fulltext.store import FulltextStore

#: ``embed(texts) -> unit-length float32 matrix``: the shipped model by default.
EmbedFn = Callable[[Sequence[str]], "np.ndarray"]


@dataclass(frozen=True)
class FileOutcome:
    """What the import did with one file: ``imported``, ``unchanged``, ``moved``, ``failed``,
    ``failed-before`` (known unreadable, bytes unchanged) or ``duplicate`` (same bytes elsewhere)."""

    path: str
    action: str
    paper_id: int | None = None
    doi: str | None = None
    pages: int = 0
    passages: int = 0
    code: str | None = None
    reason: str | None = None


@dataclass
class ImportReport:
    folder: str
    files: list[FileOutcome] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    pages_read: int = 0
    seconds: float = 0.0
    #: The papers matched to literature records after the import (records made from the PDFs no
    #: record matched), when a literature database was given; else None.
    records: MatchReport | None = None
    #: Why the papers were not matched to records (the literature database could not be opened).
    records_note: str = ""

    def count(self, action: str) -> int:
        return sum(1 for f in self.files if f.action == action)

    @property
    def failures(self) -> list[FileOutcome]:
        return [f for f in self.files if f.action in ("failed", "failed-before")]

    def summary(self) -> str:
        """One line: what was imported, skipped, moved, removed and what failed."""
        parts = [f"{self.count('imported')} imported", f"{self.count('unchanged')} unchanged"]
        for action, word in (("moved", "moved"), ("duplicate", "duplicates"), ("failed", "failed"),
                             ("failed-before", "failed before")):
            if self.count(action):
                parts.append(f"{self.count(action)} {word}")
        if self.removed:
            parts.append(f"{len(self.removed)} removed (file gone)")
        line = ", ".join(parts)
        if self.records is not None:
            line += f"; records: {self.records.summary()}"
        elif self.records_note:
            line += f"; records not matched: {self.records_note}"
        return line

    def as_dict(self) -> dict[str, Any]:
        return {
            "folder": self.folder,
            "summary": self.summary(),
            "pages_read": self.pages_read,
            "seconds": round(self.seconds, 3),
            "files": [vars(f) for f in self.files],
            "removed": self.removed,
            "new_records": self.records.new_records if self.records is not None else 0,
            "records": self.records.as_dict() if self.records is not None else None,
            "records_note": self.records_note,
        }


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def find_pdfs(folder: Path) -> list[Path]:
    """The PDFs under ``folder`` (recursive, by extension, any case), in path order."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() == ".pdf")


def default_embed(texts: Sequence[str]) -> np.ndarray:
    """The shipped embedding model (all-MiniLM-L6-v2, no download)."""
    from kmds_desktop.index.embeddings import encode  # torch loads on first use, not at start-up

    return encode(list(texts))


def _inside(path: str, folder: Path) -> bool:
    try:
        Path(path).relative_to(folder)
    except ValueError:
        return False
    return True


def import_folder(
    store: FulltextStore,
    folder: Path,
    *,
    embed: EmbedFn = default_embed,
    reader: PdfReader | None = None,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> ImportReport:
    """Import the PDFs under ``folder``: new ones read and indexed, unchanged ones skipped, moved ones
    re-linked, and the papers of files gone from the folder removed."""
    folder = folder.expanduser().resolve()
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder; give the folder that holds the PDFs")
    started = time.perf_counter()
    result = ImportReport(str(folder))
    files = find_pdfs(folder)
    seen_ids: set[int] = set()
    own_reader = reader is None
    active = reader or PdfReader()
    try:
        for done, path in enumerate(files):
            check(cancel)
            report(progress, done, len(files), f"reading {path.name} ({done + 1}/{len(files)})")
            outcome = _import_one(store, path, active, embed)
            if outcome.paper_id is not None:
                seen_ids.add(outcome.paper_id)
            result.pages_read += outcome.pages if outcome.action == "imported" else 0
            result.files.append(outcome)
    finally:
        if own_reader:
            active.close()
    gone = [p for p in store.papers() if _inside(p.path, folder) and p.id not in seen_ids
            and not Path(p.path).exists()]
    store.remove_papers(p.id for p in gone)
    result.removed = [p.path for p in gone]
    result.seconds = time.perf_counter() - started
    report(progress, len(files), len(files), result.summary())
    return result


def _import_one(store: FulltextStore, path: Path, reader: PdfReader, embed: EmbedFn) -> FileOutcome:
    try:
        size = path.stat().st_size
        sha = file_sha256(path)
    except OSError as err:
        return FileOutcome(str(path), "failed", code="unreadable",
                           reason=f"cannot read the file ({err.strerror or err}); check its permissions")
    known = store.paper_by_hash(sha)
    if known is not None:
        if known.path != str(path):
            if Path(known.path).exists():
                return FileOutcome(str(path), "duplicate", reason=f"the same file as {known.path}")
            store.relink(known.id, path)
            return FileOutcome(str(path), "moved", known.id, known.doi, known.page_count)
        if known.status != "ok":
            return FileOutcome(str(path), "failed-before", known.id, code=known.status, reason=known.reason)
        return FileOutcome(str(path), "unchanged", known.id, known.doi, known.page_count)
    # New bytes at a path the store knows: the file changed in place, and its old paper goes.
    store.remove_papers(p.id for p in store.papers() if p.path == str(path))
    answer = reader.read(path)
    if not answer.get("ok"):
        paper_id = store.add_failure(sha, path, size, str(answer["code"]), str(answer["reason"]))
        return FileOutcome(str(path), "failed", paper_id, code=answer["code"], reason=answer["reason"])
    pages: list[str] = answer["pages"]
    passages = split_passages(pages)
    vectors = embed([p.text for p in passages])
    paper_id = store.add_paper(sha, path, size, answer.get("doi"), answer.get("title"), pages, passages,
                               vectors, info=answer.get("metadata"))
    return FileOutcome(str(path), "imported", paper_id, answer.get("doi"), len(pages), len(passages))


def import_file(
    store: FulltextStore, path: Path, reader: PdfReader, embed: EmbedFn = default_embed
) -> FileOutcome:
    """Import one PDF as :func:`import_folder` imports each of its files (for sources that list their
    files themselves, such as a Zotero library)."""
    return _import_one(store, path, reader, embed)
