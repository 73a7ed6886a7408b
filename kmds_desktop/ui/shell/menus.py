"""The window's menus.

:class:`WindowMenus` fills the menu bar it is given; what each entry does is a callable in the
:class:`MenuCommands` the window hands it (the window composes the panels and knows which one serves
an entry; the menus know none of them). The recent-files list is the settings' (kept by
:func:`kmds_desktop.app.workspace.remember_opened`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction, QIcon, QKeySequence
from PySide6.QtWidgets import (
    QMenu,
    QMenuBar,
    QWidget,
)

from kmds_desktop.app import workspace
from kmds_desktop.app.presentation import Settings, resources_dir

Command = Callable[[], Any]



def app_icon() -> QIcon:
    for name in ("kmds-desktop.svg", "kmds-desktop.png"):
        path = resources_dir() / "icons" / name
        if path.exists():
            return QIcon(str(path))
    return QIcon()


@dataclass(frozen=True)
class MenuCommands:
    """What each menu entry does (the window fills it from its parts)."""

    open_kb_dialog: Command
    open_kb: Callable[[str | Path], Any]
    save_kb: Command
    save_kb_as: Command
    import_literature: Command
    import_literature_folder: Command
    build_fast_index: Command
    fill_review_entries: Callable[[QMenu], Any]
    export_documents: Callable[[str], Any]
    export_search_log: Command
    export_answer: Command
    quit: Command
    add_observation: Command
    edit_selected: Command
    delete_observation: Command
    add_workflow: Command
    preferences: Command
    focus_kb_filter: Command
    focus_question: Command
    reset_layout: Command
    rebuild_index: Command
    shortcuts: Command
    diagnose: Command
    about: Command
    clear_recent: Command


class WindowMenus(QObject):
    """File, Edit, View and Help in ``bar`` (see the module docstring). ``panels`` are the widgets
    View's "Show …" entries show and hide, with their names."""

    def __init__(self, bar: QMenuBar, settings: Settings, commands: MenuCommands,
                 panels: tuple[tuple[str, QWidget], ...]) -> None:
        super().__init__(bar)
        self.bar = bar
        self.settings = settings
        self.commands = commands
        self._build(panels)

    def _action(self, menu: QMenu, text: str, slot: Command, shortcut: Any = None, name: str = "") -> QAction:
        action = QAction(text, self.bar)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        if name:
            action.setObjectName(name)
        action.triggered.connect(lambda _checked=False: slot())
        menu.addAction(action)
        return action

    def _build(self, panels: tuple[tuple[str, QWidget], ...]) -> None:
        do = self.commands
        file_menu = self.bar.addMenu("&File")
        self.file_menu = file_menu
        self.open_action = self._action(
            file_menu, "&Open knowledge base…", do.open_kb_dialog, QKeySequence.StandardKey.Open, "openKb"
        )
        self.recent_menu = file_menu.addMenu("Open &recent")
        self.save_action = self._action(
            file_menu, "&Save knowledge base", do.save_kb, QKeySequence.StandardKey.Save, "saveKb"
        )
        self.save_as_action = self._action(
            file_menu, "Save knowledge base &as…", do.save_kb_as, QKeySequence.StandardKey.SaveAs, "saveKbAs"
        )
        file_menu.addSeparator()
        self.import_action = self._action(
            file_menu, "&Import literature…", do.import_literature, None, "importLiterature"
        )
        self.import_folder_action = self._action(
            file_menu, "Import literature f&older…", do.import_literature_folder, None,
            "importLiteratureFolder",
        )
        self.import_folder_action.setToolTip(
            "A folder such as the PubMed baseline (~1,200 .xml.gz): file by file in name order, one "
            "progress line; Cancel or a crash keeps the files done, and importing the folder again goes on")
        self.topk_action = self._action(
            file_menu, "Build &fast search index", do.build_fast_index, None, "buildFastIndex"
        )
        self.topk_action.setToolTip("Index the literature database for fast full-text rows and counts at "
                                    "any size (read-only on the database; Cancel keeps what is done)")
        file_menu.addSeparator()
        do.fill_review_entries(file_menu)  # New / Open / Recent reviews, Update, Rename, ...
        file_menu.addSeparator()
        self.export_menu = file_menu.addMenu("&Export")
        self._fill_export_menu()
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", do.quit, QKeySequence.StandardKey.Quit, "quit")

        edit_menu = self.bar.addMenu("&Edit")
        self._action(edit_menu, "Add &observation…", do.add_observation, "Ctrl+N", "addObservation")
        self._action(edit_menu, "&Edit selected…", do.edit_selected, None, "editSelected")
        self._action(edit_menu, "&Delete observation", do.delete_observation, None, "deleteObservation")
        self._action(edit_menu, "Add &workflow…", do.add_workflow, None, "addWorkflow")
        edit_menu.addSeparator()
        self._action(
            edit_menu, "&Preferences…", do.preferences, QKeySequence.StandardKey.Preferences, "preferences",
        ).setShortcuts([QKeySequence("Ctrl+,")])

        view_menu = self.bar.addMenu("&View")
        self.view_menu = view_menu
        self._action(view_menu, "&Filter the KB browser", do.focus_kb_filter, QKeySequence.StandardKey.Find)
        self._action(view_menu, "Go to the &question", do.focus_question, "Ctrl+L")
        view_menu.addSeparator()
        for i, (label, widget) in enumerate(panels):
            action = QAction(f"Show {label}", self.bar)
            action.setCheckable(True)
            action.setChecked(True)
            action.setObjectName(f"showPanel{i}")
            action.toggled.connect(widget.setVisible)
            view_menu.addAction(action)
        view_menu.addSeparator()
        self._action(view_menu, "&Reset layout", do.reset_layout)
        self._action(view_menu, "Rebuild the semantic &index", do.rebuild_index)

        help_menu = self.bar.addMenu("&Help")
        self._action(help_menu, "&Keyboard shortcuts", do.shortcuts, None, "shortcuts")
        self._action(help_menu, "&Diagnose data folder…", do.diagnose, None, "diagnoseDataFolder")
        self._action(help_menu, "&About KMDS Desktop", do.about, None, "about")
        self.update_recent()

    def _fill_export_menu(self) -> None:
        self.export_menu.clear()
        formats = (("CSV…", "csv"), ("RIS…", "ris"), ("BibTeX…", "bibtex"))
        for label, fmt in formats:
            action = self.export_menu.addAction(f"Documents as {label}")
            action.setObjectName(f"export:{fmt}")
            action.triggered.connect(lambda _c=False, f=fmt: self.commands.export_documents(f))
        log_action = self.export_menu.addAction("Search log (JSON)…")
        log_action.setObjectName("export:log")
        log_action.triggered.connect(lambda _c=False: self.commands.export_search_log())
        self.export_menu.addSeparator()
        answer_action = self.export_menu.addAction("Answer as Markdown…")
        answer_action.setObjectName("export:answer")
        answer_action.triggered.connect(lambda _c=False: self.commands.export_answer())

    def update_recent(self) -> None:
        """The recent files as the settings hold them now (after a KB opened or was saved)."""
        self.recent_menu.clear()
        recent = list(self.settings.ui.recent_files)
        for path in recent:
            action = self.recent_menu.addAction(path)
            action.triggered.connect(lambda _c=False, p=path: self.commands.open_kb(p))
        if not recent:
            empty = self.recent_menu.addAction("(none yet)")
            empty.setEnabled(False)
        else:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction("Clear the list", self._clear_recent)
        self.recent_menu.addSeparator()
        self.recent_menu.addAction("Demo knowledge base",
                                   lambda: self.commands.open_kb(workspace.installed_demo_path()))

    def _clear_recent(self) -> None:
        self.commands.clear_recent()
        self.update_recent()
