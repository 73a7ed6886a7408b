"""Where each kind of file dialog starts: the folder the user last chose a file of that kind in.

Every dialog started in the home folder, so a user who keeps the knowledge bases in one folder, the
PubMed files in another and the exports in a third walked there again each time. The folder is kept per
*kind* (a knowledge base's folder is no place to start an export) in the settings
(``ui.last_folders``), so it holds across sessions. A folder that has gone since (an unplugged disk, a
renamed project) is not offered: the dialog starts in the home folder as before.

Qt-free: the window's one dialog helper (:mod:`kmds_desktop.ui.shell.file_dialogs`) asks it where to start and
tells it what was chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The kinds of file a dialog asks for (each remembers its own folder).
KB = "kb"  # knowledge bases: open, save as
LITERATURE = "literature"  # literature files and folders to import
EXPORT = "export"  # documents, search logs, reports, answers written out
KNOWN_PAPERS = "known_papers"  # RIS / BibTeX / identifier lists of known papers
SCREENING = "screening"  # screening decisions, included records, PRISMA diagrams
FOLDER_KINDS = (KB, LITERATURE, EXPORT, KNOWN_PAPERS, SCREENING)


class LastFolders:
    """The last folder of each kind, kept in ``ui_settings.last_folders`` (a settings model's ``ui``
    section, or None for a memory of this process only); ``persist`` writes the settings after a change."""

    def __init__(self, ui_settings: Any = None, persist: Callable[[], Any] | None = None) -> None:
        self._ui = ui_settings
        self._own: dict[str, str] = {}
        self._persist = persist

    @property
    def folders(self) -> dict[str, str]:
        return dict(self._ui.last_folders) if self._ui is not None else dict(self._own)

    def folder(self, kind: str, fallback: str | Path | None = None) -> Path:
        """Where a ``kind`` dialog starts: the remembered folder if it still exists, else ``fallback``
        (when it exists), else the home folder."""
        for candidate in (self.folders.get(kind), fallback):
            if candidate:
                path = Path(candidate).expanduser()
                try:
                    if path.is_dir():
                        return path
                except OSError:  # an unreachable network folder: not a place to start
                    continue
        return Path.home()

    def start(self, kind: str, suggested_name: str = "", fallback: str | Path | None = None) -> str:
        """The path a ``kind`` dialog opens at: its folder, with ``suggested_name`` for a save dialog."""
        folder = self.folder(kind, fallback)
        return str(folder / suggested_name) if suggested_name else str(folder)

    def remember(self, kind: str, chosen: str | Path | None, *, is_folder: bool = False) -> bool:
        """``chosen`` was picked in a ``kind`` dialog (a file, or a folder when ``is_folder``): its folder
        is where the next one starts. True when that changed (and the settings were written)."""
        if not chosen:
            return False
        path = Path(chosen).expanduser()
        folder = str(path if is_folder else path.parent)
        if self.folders.get(kind) == folder:
            return False
        if self._ui is not None:
            self._ui.last_folders = {**self._ui.last_folders, kind: folder}
        else:
            self._own[kind] = folder
        if self._persist is not None:
            self._persist()
        return True
