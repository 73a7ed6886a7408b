"""A Zotero library imported read-only: a data folder built with Zotero's own tables, its PDFs in
``storage/<KEY>/``, the newest item only in the ``-wal`` of a database another connection holds open
(as a running Zotero does); every file's bytes unchanged after the import, Zotero's DOI and title kept."""

from __future__ import annotations

import ctypes
import hashlib
import json
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.fulltext import litqa_dir, manifest

from kmds_desktop.literature.fulltext.store import FulltextStore
from kmds_desktop.literature.fulltext.zotero import MISSING, import_zotero, read_library

# Zotero 5+'s tables, the columns it uses (schema.sql of zotero/zotero, trimmed of tables not read).
ZOTERO_SCHEMA = """
CREATE TABLE itemTypes (itemTypeID INTEGER PRIMARY KEY, typeName TEXT, templateItemTypeID INT,
    display INT DEFAULT 1);
CREATE TABLE fields (fieldID INTEGER PRIMARY KEY, fieldName TEXT, fieldFormatID INT);
CREATE TABLE items (itemID INTEGER PRIMARY KEY, itemTypeID INT NOT NULL,
    dateAdded TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    dateModified TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    clientDateModified TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    libraryID INT NOT NULL, key TEXT NOT NULL, version INT NOT NULL DEFAULT 0,
    synced INT NOT NULL DEFAULT 0, UNIQUE (libraryID, key));
CREATE TABLE itemDataValues (valueID INTEGER PRIMARY KEY, value UNIQUE);
CREATE TABLE itemData (itemID INT, fieldID INT, valueID, PRIMARY KEY (itemID, fieldID));
CREATE TABLE itemAttachments (itemID INTEGER PRIMARY KEY, parentItemID INT, linkMode INT,
    contentType TEXT, charsetID INT, path TEXT, syncState INT DEFAULT 0, storageModTime INT,
    storageHash TEXT, lastProcessedModificationTime INT);
CREATE TABLE creators (creatorID INTEGER PRIMARY KEY, firstName TEXT, lastName TEXT, fieldMode INT,
    UNIQUE (lastName, firstName, fieldMode));
CREATE TABLE itemCreators (itemID INT NOT NULL, creatorID INT NOT NULL, creatorTypeID INT NOT NULL DEFAULT 1,
    orderIndex INT NOT NULL DEFAULT 0, PRIMARY KEY (itemID, creatorID, creatorTypeID, orderIndex));
CREATE TABLE deletedItems (itemID INTEGER PRIMARY KEY, dateDeleted DEFAULT CURRENT_TIMESTAMP NOT NULL);
INSERT INTO itemTypes VALUES (2, 'attachment', NULL, 1), (22, 'journalArticle', NULL, 1);
INSERT INTO fields VALUES (1, 'title', NULL), (6, 'date', NULL), (59, 'DOI', NULL);
"""

LICHEN_DOI = "10.5555/lichen.2024.17"
LICHEN_TITLE = "Clonal growth of crustose lichens on dated gravestones"


def text_pdf(target: Path, lines: list[str]) -> Path:
    """A one-page PDF with a text layer and no DOI (a preprint's first draft, say)."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    pdf = pdfium.PdfDocument.new()
    page = pdf.new_page(612, 792)
    font = raw.FPDFText_LoadStandardFont(pdf.raw, b"Helvetica")
    for row, line in enumerate(lines):
        text = raw.FPDFPageObj_CreateTextObj(pdf.raw, font, 11)
        buffer = ctypes.create_string_buffer((line + "\0").encode("utf-16-le"))
        raw.FPDFText_SetText(text, ctypes.cast(buffer, ctypes.POINTER(raw.FPDF_WCHAR)))
        raw.FPDFPageObj_Transform(text, 1, 0, 0, 1, 60, 740 - 16 * row)
        raw.FPDFPage_InsertObject(page.raw, text)
    page.gen_content()
    target.parent.mkdir(parents=True, exist_ok=True)
    pdf.save(target)
    return target


@dataclass
class ZoteroFolder:
    folder: Path
    writer: sqlite3.Connection  # held open, as Zotero holds its database

    def add_item(self, item_id: int, key: str, fields: dict[str, str],
                 authors: list[tuple[str, str]]) -> None:
        db = self.writer
        db.execute("INSERT INTO items (itemID, itemTypeID, libraryID, key) VALUES (?, 22, 1, ?)",
                   (item_id, key))
        for field_id, name in ((1, "title"), (6, "date"), (59, "DOI")):
            if name in fields:
                db.execute("INSERT OR IGNORE INTO itemDataValues (value) VALUES (?)", (fields[name],))
                value_id = db.execute("SELECT valueID FROM itemDataValues WHERE value = ?",
                                      (fields[name],)).fetchone()[0]
                db.execute("INSERT INTO itemData VALUES (?, ?, ?)", (item_id, field_id, value_id))
        for order, (first, last) in enumerate(authors):
            db.execute("INSERT OR IGNORE INTO creators (firstName, lastName, fieldMode) VALUES (?, ?, 0)",
                       (first, last))
            creator = db.execute("SELECT creatorID FROM creators WHERE firstName = ? AND lastName = ?",
                                 (first, last)).fetchone()[0]
            db.execute("INSERT INTO itemCreators VALUES (?, ?, 1, ?)", (item_id, creator, order))

    def add_pdf(self, item_id: int, key: str, parent: int, source: Path | None, name: str) -> Path:
        """A stored attachment (linkMode 0) whose file is ``storage/<key>/<name>`` (None: left missing)."""
        self.writer.execute("INSERT INTO items (itemID, itemTypeID, libraryID, key) VALUES (?, 2, 1, ?)",
                            (item_id, key))
        self.writer.execute("INSERT INTO itemAttachments (itemID, parentItemID, linkMode, contentType, path) "
                            "VALUES (?, ?, 0, 'application/pdf', ?)", (item_id, parent, f"storage:{name}"))
        target = self.folder / "storage" / key / name
        if source is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        return target


def fingerprint(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (the database, its journal, the PDFs)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture()
def zotero(tmp_path: Path) -> Iterator[ZoteroFolder]:
    folder = tmp_path / "Zotero"
    folder.mkdir()
    writer = sqlite3.connect(folder / "zotero.sqlite", isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.executescript(ZOTERO_SCHEMA)
    writer.execute("PRAGMA wal_autocheckpoint = 0")  # later writes stay in zotero.sqlite-wal
    library = ZoteroFolder(folder, writer)
    pdfs = litqa_dir() / "pdfs"
    entries = manifest()
    library.add_item(1, "PARENT01", {"title": "Membrane potential and lipid order", "date": "2022-02-01",
                                     "DOI": entries["j.bpj.2021.11.1119.pdf"]["doi"].upper()},
                     [("Ana", "Silva"), ("Ben", "Okafor")])
    library.add_pdf(2, "ABCD1234", 1, pdfs / "j.bpj.2021.11.1119.pdf",
                    "Silva - 2022 - Membrane potential.pdf")
    library.add_item(3, "PARENT02", {"title": "A PNAS paper", "date": "2004",
                                     "DOI": entries["pnas.0403760101.pdf"]["doi"]}, [("Cy", "Tran")])
    library.add_pdf(4, "EFGH5678", 3, pdfs / "pnas.0403760101.pdf", "Tran - 2004.pdf")
    library.add_item(7, "PARENT04", {"title": "Trashed paper", "DOI": "10.5555/trashed"}, [])
    library.add_pdf(8, "TRSH0001", 7, pdfs / "science.aaw1219.pdf", "trashed.pdf")
    writer.execute("INSERT INTO deletedItems (itemID) VALUES (7)")
    library.add_item(9, "PARENT05", {"title": "Never synced", "DOI": "10.5555/missing"}, [])
    library.add_pdf(10, "MISS0001", 9, None, "not here.pdf")
    writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # what came before is in zotero.sqlite ...
    # ... and the newest item only in the journal, as when Zotero is running.
    library.add_item(5, "PARENT03", {"title": LICHEN_TITLE, "date": "March 2024", "DOI": LICHEN_DOI},
                     [("Dana", "Moss")])
    library.add_pdf(6, "IJKL9012", 5, None, "draft.pdf")
    text_pdf(folder / "storage" / "IJKL9012" / "draft.pdf", [
        "Notes on lichens", "We measured the radial growth of crustose lichens on gravestones of known date",
        "over ten years; growth was slow, steady and independent of the stone's aspect."])
    assert (folder / "zotero.sqlite-wal").stat().st_size > 0
    yield library
    writer.close()


def test_a_zotero_library_imports_read_only_with_zoteros_doi_and_title(zotero: ZoteroFolder,
                                                                        tmp_path: Path) -> None:
    before = fingerprint(zotero.folder)
    library = read_library(zotero.folder)
    by_key = {a.key: a for a in library.attachments}
    assert set(by_key) == {"ABCD1234", "EFGH5678", "IJKL9012", "MISS0001"}  # the trashed item left out
    assert by_key["IJKL9012"].authors == ("Dana Moss",) and by_key["IJKL9012"].year is None
    assert by_key["ABCD1234"].authors == ("Ana Silva", "Ben Okafor") and by_key["ABCD1234"].year == "2022"
    with FulltextStore(tmp_path / "store.sqlite") as store:
        report = import_zotero(store, zotero.folder)
        outcomes = {Path(f.path).parent.name: f for f in report.files}
        assert report.count("imported") == 3, report.summary()
        assert outcomes["MISS0001"].code == MISSING and "sync" in outcomes["MISS0001"].reason
        assert outcomes["ABCD1234"].doi == manifest()["j.bpj.2021.11.1119.pdf"]["doi"].lower()
        assert outcomes["EFGH5678"].doi == manifest()["pnas.0403760101.pdf"]["doi"].lower()
        assert outcomes["IJKL9012"].doi == LICHEN_DOI  # the PDF prints none: Zotero's is kept
        papers = {Path(p.path).parent.name: p for p in store.papers()}
        assert papers["IJKL9012"].title == LICHEN_TITLE
        assert papers["ABCD1234"].title == "Membrane potential and lipid order"
        assert store.lexical("crustose lichens gravestones", 3)
        again = import_zotero(store, zotero.folder)
        assert again.count("unchanged") == 3 and again.count("imported") == 0
        (zotero.folder / "storage" / "EFGH5678" / "Tran - 2004.pdf").unlink()
        del before["storage/EFGH5678/Tran - 2004.pdf"]
        third = import_zotero(store, zotero.folder)
        assert [Path(p).parent.name for p in third.removed] == ["EFGH5678"]
    assert fingerprint(zotero.folder) == before  # zotero.sqlite, its -wal and every PDF unchanged


def test_cli_imports_a_zotero_folder_and_names_a_wrong_one(zotero: ZoteroFolder, tmp_path: Path,
                                                           data_home: Path, capsys) -> None:
    from kmds_desktop.cli import main

    assert main(["literature", "fulltext", "import", "--zotero", str(zotero.folder), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sorted(f["doi"] for f in out["files"] if f["action"] == "imported") == sorted(
        [LICHEN_DOI, "10.1016/j.bpj.2021.11.1119", manifest()["pnas.0403760101.pdf"]["doi"].lower()])
    assert main(["literature", "fulltext", "import", "--zotero", str(tmp_path)]) == 1
    assert "holds no zotero.sqlite" in capsys.readouterr().err
    assert main(["literature", "fulltext", "import"]) == 1
    assert "either FOLDER" in capsys.readouterr().err
