"""The window's one way to ask for a file or a folder: each dialog starts where the last one of its kind
ended (:mod:`kmds_desktop.app.last_folders`), not in the home folder.

Every view calls these four functions instead of ``QFileDialog``'s static ones, with the kind of file it
asks for (``last_folders.KB``, ``LITERATURE``, ``EXPORT``, ``KNOWN_PAPERS``, ``SCREENING``). The main
window hands its settings over once (:func:`remember_folders_in`); without a window (a panel on its own
in a script or a test) the folders are remembered for the process only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QFileDialog, QWidget

from kmds_desktop.app.last_folders import LastFolders

_folders = LastFolders()


def remember_folders_in(ui_settings: Any, persist: Callable[[], Any] | None = None) -> LastFolders:
    """Keep the last folders in ``ui_settings.last_folders`` (written by ``persist`` after a change)."""
    global _folders  # one window per process: its settings are where the folders live
    _folders = LastFolders(ui_settings, persist)
    return _folders


def last_folders() -> LastFolders:
    return _folders


def open_file(parent: QWidget | None, kind: str, title: str, filters: str,
              fallback: str | Path | None = None) -> str:
    """One existing file of ``kind`` ("" when the user cancelled)."""
    path, _ = QFileDialog.getOpenFileName(parent, title, _folders.start(kind, fallback=fallback), filters)
    _folders.remember(kind, path)
    return path


def open_files(parent: QWidget | None, kind: str, title: str, filters: str) -> list[str]:
    """Existing files of ``kind`` (empty when the user cancelled)."""
    paths, _ = QFileDialog.getOpenFileNames(parent, title, _folders.start(kind), filters)
    if paths:
        _folders.remember(kind, paths[0])
    return list(paths)


def save_file(parent: QWidget | None, kind: str, title: str, suggested_name: str, filters: str,
              fallback: str | Path | None = None) -> str:
    """Where to write a file of ``kind``, ``suggested_name`` offered in its folder ("" when cancelled)."""
    path, _ = QFileDialog.getSaveFileName(
        parent, title, _folders.start(kind, suggested_name, fallback=fallback), filters)
    _folders.remember(kind, path)
    return path


def folder(parent: QWidget | None, kind: str, title: str) -> str:
    """An existing folder of ``kind`` ("" when the user cancelled)."""
    path = QFileDialog.getExistingDirectory(parent, title, _folders.start(kind))
    _folders.remember(kind, path)  # its parent: the next dialog shows this folder among its siblings
    return path
