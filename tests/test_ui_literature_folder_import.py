"""File > Import literature folder… and a folder dropped on the window: the PubMed baseline's way in
(real Qt offscreen, the real menu clicked, real PostgreSQL, the shared MEDLINE files). The folder is
imported file by file with one progress line; importing it again skips the files done."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from support.menus import click_menu

from kmds_desktop.config import Settings

WAIT = 60_000
FILES = ("medline16n0902.xml.gz", "test_current_medline.xml.gz")


def _baseline(literature_data: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "baseline"
    folder.mkdir()
    for name in FILES:
        shutil.copy2(literature_data / "raw" / name, folder / name)
        (folder / f"{name}.md5").write_text("not imported\n", encoding="utf-8")
    return folder


def _window(make_window, database):
    window = make_window(Settings(), auto_index=False,
                         literature_kwargs={"database": database, "open_on_start": False})
    window.resize(1600, 1000)
    return window, window.literature


def _wait_import(qtbot, panel) -> None:
    qtbot.waitUntil(lambda: panel.progress_label.text().startswith("Import finished"), timeout=WAIT)
    qtbot.waitUntil(lambda: not panel._working(), timeout=WAIT)


def test_a_folder_from_the_file_menu_is_imported_with_one_progress_line_and_resumes(
        qtbot, make_window, pg_empty_database, literature_data, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    folder = _baseline(literature_data, tmp_path)
    window, panel = _window(make_window, pg_empty_database)
    lines: list[str] = []
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(folder)))
    original = panel._set_progress

    def seen(text: str) -> None:
        lines.append(text)
        original(text)

    monkeypatch.setattr(panel, "_set_progress", seen)
    click_menu(qtbot, window, "&File", "Import literature f&older…")
    _wait_import(qtbot, panel)
    assert pg_empty_database.status()["documents"] == 608
    folder_lines = [t for t in lines if t.startswith("Importing: ")]
    assert any("2/2 files, 608 records" in t for t in folder_lines), folder_lines
    assert panel.last_message is not None and "2 files: 608 records, 608 new" in panel.last_message[1]

    lines.clear()
    click_menu(qtbot, window, "&File", "Import literature f&older…")  # again: nothing read twice
    _wait_import(qtbot, panel)
    assert "2 files skipped as already imported" in panel.last_message[1]
    assert pg_empty_database.status()["documents"] == 608


@pytest.mark.filterwarnings("ignore:Function.*QDragEnterEvent:DeprecationWarning")
def test_a_folder_dropped_on_the_window_goes_to_the_literature_import(
        qtbot, make_window, pg_empty_database, literature_data, tmp_path):
    from PySide6.QtGui import QDragEnterEvent

    folder = _baseline(literature_data, tmp_path)
    window, panel = _window(make_window, pg_empty_database)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(folder))])
    centre = window.rect().center()
    enter = QDragEnterEvent(centre, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    window.dragEnterEvent(enter)
    assert enter.isAccepted()
    drop = QDropEvent(QPointF(centre), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)
    window.dropEvent(drop)
    _wait_import(qtbot, panel)
    assert pg_empty_database.status()["documents"] == 608
