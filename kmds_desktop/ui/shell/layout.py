"""The window's geometry, dock state and panel sizes, kept in the settings across sessions.

A :class:`SavedLayout` is given the window, its splitter and the settings (their ``ui`` section); the window
calls :meth:`~SavedLayout.restore` once built, :meth:`~SavedLayout.window_shown` from its
``showEvent`` and :meth:`~SavedLayout.remember` when it closes.
"""

from __future__ import annotations

import base64

from PySide6.QtCore import QByteArray
from PySide6.QtWidgets import QMainWindow, QSplitter

from kmds_desktop.app.presentation import Settings

#: A first start's window size (the screen's free area permitting).
DEFAULT_SIZE = (1440, 880)


class SavedLayout:
    """Where the window and its panels were (see the module docstring)."""

    def __init__(self, window: QMainWindow, splitter: QSplitter, settings: Settings) -> None:
        self.window = window
        self.splitter = splitter
        self.settings = settings
        self._pending_sizes: list[int] | None = None

    def restore(self) -> None:
        """The remembered geometry and dock state now; the panel sizes once the window is shown."""
        ui = self.settings.ui
        restored = False
        if ui.window_geometry:
            try:
                restored = self.window.restoreGeometry(QByteArray(base64.b64decode(ui.window_geometry)))
            except ValueError:  # not base64: ignore a hand-edited value
                restored = False
        if not restored:
            self.window.resize(*DEFAULT_SIZE)
        if ui.window_state:
            self.window.restoreState(QByteArray(base64.b64decode(ui.window_state)))
        self._pending_sizes = list(ui.splitter_sizes) if len(ui.splitter_sizes) == 3 else None

    def window_shown(self) -> None:
        """Apply the remembered panel sizes once the window has its real size (else Qt rescales them)."""
        if self._pending_sizes and all(s >= 0 for s in self._pending_sizes):
            self.splitter.setSizes(self._pending_sizes)
        self._pending_sizes = None

    def remember(self) -> None:
        self.settings.ui.window_geometry = base64.b64encode(bytes(self.window.saveGeometry())).decode("ascii")
        self.settings.ui.window_state = base64.b64encode(bytes(self.window.saveState())).decode("ascii")
        self.settings.ui.splitter_sizes = [int(s) for s in self.splitter.sizes()]

    def reset(self) -> None:
        """View > Reset layout: the panels' default shares of the window's width."""
        total = max(900, sum(self.splitter.sizes()))
        self.splitter.setSizes([int(total * 0.24), int(total * 0.40), int(total * 0.36)])
