"""The Evidence view in the main window: a dock beside the panels (View \u2192 Evidence), and File's
Import PDFs\u2026 and Import Zotero library\u2026 placed after the literature imports.

Why a dock and not a fourth panel: evidence is read beside the records or the KB for a while, then put
away; a dock can be shown, hidden, floated or widened without the three panels' sizes changing, and
the window's saved state (``saveState``) keeps where the user put it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMainWindow

from kmds_desktop.ui.evidence.view import EvidenceView
from kmds_desktop.ui.jobs.runner import JobRunner
from kmds_desktop.ui.shell.message_bar import MessageBar

#: The window's width a shown Evidence dock takes (the page needs about 600 pixels to be read).
EVIDENCE_SHARE = 0.66


def install_evidence(window: QMainWindow, jobs: JobRunner, messages: MessageBar,
                     encode: Callable[[Any], Any], import_after: QAction) -> tuple[EvidenceView, QDockWidget]:
    """Add the Evidence dock (hidden until asked for) to ``window``, File's PDF and Zotero imports after
    ``import_after``, and View's Evidence entry. ``encode`` embeds in the index process, as the
    literature panel does (torch never loads in the window's process)."""
    view = EvidenceView(jobs, encoder=encode)

    def with_open_database(then: Callable[[Any], Any], failed: Callable[[BaseException], Any]) -> None:
        """An import matches its PDFs to the records of the window's literature database when it is open
        or opening; it does not start a database nobody asked for (the import says so)."""
        link = window.literature.link
        if link.database is None and not link.db.opening:
            failed(RuntimeError("the literature database is not open; import again once the Literature "
                                "panel has opened it"))
            return
        link.with_database(then, failed)

    view.with_database = with_open_database
    view.message.connect(lambda level, text: messages.show_message(text, level, topic="evidence"))
    window.browser.observation_selected.connect(lambda _iri: view.refresh_targets())
    dock = QDockWidget("Evidence", window)
    dock.setToolTip("Questions answered from your PDFs, each quote shown on its page")
    dock.setObjectName("evidenceDock")
    dock.setWidget(view)
    window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
    dock.hide()

    def widen(visible: bool) -> None:
        """A dock shown gets room for the passages and a readable page (most of the window's width)."""
        if visible and not dock.isFloating():
            window.resizeDocks([dock], [int(window.width() * EVIDENCE_SHARE)], Qt.Orientation.Horizontal)

    dock.visibilityChanged.connect(widen)

    def shown_then(run: object) -> None:
        dock.show()
        dock.raise_()
        run()  # type: ignore[operator]

    file_menu = import_after.associatedObjects()[0]
    after = file_menu.actions()
    position = after.index(import_after) + 1
    before = after[position] if position < len(after) else None
    for text, name, run, tip in (
        ("Import &PDFs\u2026", "importPdfs", view.import_pdfs_dialog,
         "Full texts: the PDFs under a folder, read page by page (a PDF that cannot be read is named with "
         "its reason; importing again skips unchanged files)"),
        ("Import &Zotero library\u2026", "importZotero", view.import_zotero_dialog,
         "The PDFs of a Zotero library, read-only (a copy of zotero.sqlite is read; Zotero's DOI and "
         "title are kept)"),
    ):
        action = QAction(text, window)
        action.setObjectName(name)
        action.setToolTip(tip)
        action.triggered.connect(lambda _checked=False, go=run: shown_then(go))
        file_menu.insertAction(before, action)
    toggle = dock.toggleViewAction()
    toggle.setText("&Evidence")
    toggle.setObjectName("showEvidence")
    toggle.setShortcut(QKeySequence("Ctrl+E"))
    view_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    view_menu.insertAction(view_menu.actions()[-3] if len(view_menu.actions()) >= 3 else None, toggle)
    return view, dock
