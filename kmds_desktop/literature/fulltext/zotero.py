"""A Zotero library's PDFs into the full-text store, read-only, with Zotero's own metadata.

Why a copy of ``zotero.sqlite``: Zotero keeps its database open (and locked) while it runs, and a
reader must never be the reason a user's library is damaged. The database file and its ``-wal``
journal (the latest writes live there until Zotero checkpoints) are copied to a private temporary
folder and only the copy is opened; the PDFs under ``storage/`` are read, never written.

What is read (Zotero's schema, unchanged since Zotero 5): ``itemAttachments`` rows with
``contentType = 'application/pdf'``; a stored file's ``path`` is ``storage:<file name>`` and lies in
``storage/<the attachment item's key>/``; a linked file's path is absolute (one relative to Zotero's
"base directory" preference, ``attachments:...``, cannot be resolved from the data folder alone and is
listed with that reason). The paper's title, DOI and date come from the attachment's parent item
(``itemData`` -> ``fields`` / ``itemDataValues``), its authors from ``itemCreators`` -> ``creators``.
Items in Zotero's trash (``deletedItems``: the attachment or its parent) are left out.

Why Zotero's DOI and title win over what the PDF says: they are the user's own statement of which
paper the file is (usually filled from the publisher's page by Zotero's connector), while the app's
reading of a PDF is a heuristic (page one can print another paper's DOI). Where Zotero has none, the
PDF's own DOI and title are kept.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kmds_desktop.literature.fulltext.identify import clean_doi
from kmds_desktop.literature.fulltext.importer import (
    EmbedFn,
    FileOutcome,
    ImportReport,
    default_embed,
    import_file,
)
from kmds_desktop.literature.fulltext.reader import PdfReader
from kmds_desktop.literature.fulltext.store import FulltextStore
from kmds_desktop.tasks import CancelToken, ProgressFn, check, report

DATABASE = "zotero.sqlite"
STORAGE = "storage"
PDF_TYPE = "application/pdf"
#: ``itemAttachments.linkMode``: files Zotero stores (imported file / URL) and files it links to.
STORED_MODES = (0, 1)
LINKED_FILE = 2
MISSING = "missing"
UNRESOLVABLE = "linked-relative"


@dataclass(frozen=True)
class ZoteroAttachment:
    """One PDF attachment of the library with the metadata of the item it belongs to."""

    item_id: int
    key: str
    path: Path | None  # None: a linked file relative to Zotero's base directory
    title: str | None
    doi: str | None
    year: str | None
    authors: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "file": str(self.path) if self.path else None, "title": self.title,
                "doi": self.doi, "year": self.year, "authors": list(self.authors)}


@dataclass
class ZoteroLibrary:
    folder: Path
    attachments: list[ZoteroAttachment] = field(default_factory=list)


def check_data_folder(folder: Path) -> Path:
    """The Zotero data folder's database, or a clear error naming what to give instead."""
    database = folder / DATABASE
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder; give Zotero's data folder (the one holding "
                         f"{DATABASE}, see Zotero's Settings > Advanced > Files and Folders)")
    if not database.is_file():
        raise ValueError(f"{folder} holds no {DATABASE}; give Zotero's data folder (Settings > Advanced > "
                         "Files and Folders > Data Directory Location)")
    return database


@contextmanager
def _database_copy(database: Path) -> Iterator[sqlite3.Connection]:
    """A connection to a private copy of ``database`` (with its ``-wal``), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="kmds-zotero-") as scratch:
        copy = Path(scratch) / DATABASE
        shutil.copyfile(database, copy)
        wal = database.with_name(database.name + "-wal")
        if wal.is_file():
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
        connection = sqlite3.connect(copy)
        try:
            yield connection
        finally:
            connection.close()


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() \
        is not None


def _fields(db: sqlite3.Connection, item_id: int) -> dict[str, str]:
    rows = db.execute(
        "SELECT f.fieldName, v.value FROM itemData d JOIN fields f ON f.fieldID = d.fieldID "
        "JOIN itemDataValues v ON v.valueID = d.valueID WHERE d.itemID = ?", (item_id,)).fetchall()
    return {str(name): str(value) for name, value in rows if value is not None}


def _authors(db: sqlite3.Connection, item_id: int) -> tuple[str, ...]:
    rows = db.execute(
        "SELECT c.firstName, c.lastName FROM itemCreators ic JOIN creators c ON c.creatorID = ic.creatorID "
        "WHERE ic.itemID = ? ORDER BY ic.orderIndex", (item_id,)).fetchall()
    return tuple(" ".join(part for part in (first, last) if part) for first, last in rows)


def _resolve(folder: Path, key: str, link_mode: int, path: str | None) -> Path | None:
    raw = path or ""
    if link_mode in STORED_MODES:
        name = raw.split(":", 1)[1] if raw.startswith("storage:") else raw
        return folder / STORAGE / key / name
    if link_mode == LINKED_FILE and raw and not raw.startswith("attachments:"):
        return Path(raw)
    return None


def read_library(folder: Path) -> ZoteroLibrary:
    """Every PDF attachment of the Zotero library in ``folder`` (from a copy of its database)."""
    folder = folder.expanduser().resolve()
    database = check_data_folder(folder)
    library = ZoteroLibrary(folder)
    try:
        with _database_copy(database) as db:
            trash = ""
            if _has_table(db, "deletedItems"):
                trash = ("AND a.itemID NOT IN (SELECT itemID FROM deletedItems) "
                         "AND coalesce(a.parentItemID, -1) NOT IN (SELECT itemID FROM deletedItems) ")
            rows = db.execute(
                "SELECT a.itemID, i.key, a.parentItemID, a.linkMode, a.path FROM itemAttachments a "
                f"JOIN items i ON i.itemID = a.itemID WHERE a.contentType = ? {trash}ORDER BY a.itemID",
                (PDF_TYPE,)).fetchall()
            for item_id, key, parent_id, link_mode, path in rows:
                described = parent_id if parent_id is not None else item_id
                fields = _fields(db, described)
                doi = fields.get("DOI") or None
                date = fields.get("date") or ""
                library.attachments.append(ZoteroAttachment(
                    int(item_id), str(key), _resolve(folder, str(key), int(link_mode or 0), path),
                    fields.get("title") or None, clean_doi(doi) if doi else None,
                    date[:4] if date[:4].isdigit() else None, _authors(db, described)))
    except sqlite3.DatabaseError as err:
        raise ValueError(f"{database} cannot be read as Zotero's database ({err}); close Zotero and try "
                         "again, or give the data folder of a Zotero 5 or later") from None
    return library


class _ZoteroMetadataReader(PdfReader):
    """The bounded reader, with Zotero's DOI and title put over what the PDF says (see the module)."""

    def __init__(self, by_path: dict[str, ZoteroAttachment], **options: Any) -> None:
        super().__init__(**options)
        self.by_path = by_path

    def read(self, path: Path) -> dict[str, Any]:
        answer = super().read(path)
        known = self.by_path.get(str(path))
        if answer.get("ok") and known is not None:
            answer["doi"] = known.doi or answer.get("doi")
            answer["title"] = known.title or answer.get("title")
        return answer


def import_zotero(
    store: FulltextStore,
    folder: Path,
    *,
    embed: EmbedFn = default_embed,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> ImportReport:
    """Import the library's PDF attachments (incrementally by content, as a folder import is); the
    papers of attachments gone from ``storage/`` leave the store."""
    started = time.perf_counter()
    library = read_library(folder)
    result = ImportReport(str(library.folder))
    present = [a for a in library.attachments if a.path is not None and a.path.is_file()]
    for attachment in library.attachments:
        if attachment.path is None:
            result.files.append(FileOutcome(
                f"{attachment.key} ({attachment.title or 'untitled'})", "failed", doi=attachment.doi,
                code=UNRESOLVABLE, reason="a linked file relative to Zotero's base directory; set the "
                "base directory aside and import that folder with 'Import PDFs'"))
        elif not attachment.path.is_file():
            result.files.append(FileOutcome(
                str(attachment.path), "failed", doi=attachment.doi, code=MISSING,
                reason="Zotero lists it but the file is not there; sync the library or download the "
                       "attachment again in Zotero"))
    seen: set[int] = set()
    with _ZoteroMetadataReader({str(a.path): a for a in present}) as reader:
        for done, attachment in enumerate(present):
            check(cancel)
            assert attachment.path is not None  # noqa: S101 - narrows: present means a path
            report(progress, done, len(present),
                   f"reading {attachment.path.name} ({done + 1}/{len(present)})")
            outcome = import_file(store, attachment.path, reader, embed)
            if outcome.paper_id is not None:
                seen.add(outcome.paper_id)
            result.pages_read += outcome.pages if outcome.action == "imported" else 0
            result.files.append(outcome)
    storage = library.folder / STORAGE
    gone = [p for p in store.papers() if Path(p.path).is_relative_to(storage) and p.id not in seen
            and not Path(p.path).exists()]
    store.remove_papers(p.id for p in gone)
    result.removed = [p.path for p in gone]
    result.seconds = time.perf_counter() - started
    report(progress, len(present), len(present), result.summary())
    return result
