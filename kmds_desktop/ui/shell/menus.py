"""The main window's menus and its About and Keyboard shortcuts boxes.

A mixin of :class:`~kmds_desktop.ui.shell.main_window.MainWindow`: each menu entry forwards to the window,
a panel or the KB browser; the recent-files list is the settings' (kept by
:func:`kmds_desktop.app.workspace.remember_opened`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QFontDatabase, QIcon, QKeySequence
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QMenu, QMessageBox, QPlainTextEdit, QVBoxLayout

from kmds_desktop import __version__
from kmds_desktop.app import doctor, workspace
from kmds_desktop.app.presentation import data_dir, resources_dir

if TYPE_CHECKING:
    from kmds_desktop.ui.shell.main_window import MainWindow

APP_TITLE = "KMDS Desktop"
KB_FILE_FILTER = "KMDS knowledge bases (*.xml *.owl *.rdf);;All files (*)"

SHORTCUTS_HTML = """
<table cellpadding="3">
<tr><td><b>Ctrl+O</b></td><td>Open a knowledge base</td></tr>
<tr><td><b>Ctrl+S</b></td><td>Save the knowledge base</td></tr>
<tr><td><b>Ctrl+N</b></td><td>Add an observation</td></tr>
<tr><td><b>Ctrl+F</b></td><td>Filter the KB browser</td></tr>
<tr><td><b>Ctrl+L</b></td><td>Go to the question box</td></tr>
<tr><td><b>Ctrl+Enter</b></td><td>Ask the question</td></tr>
<tr><td><b>Up / Down</b></td><td>Previous / next question (in the question box)</td></tr>
<tr><td><b>Esc</b></td><td>Cancel the running answer</td></tr>
<tr><td><b>Ctrl+E</b></td><td>Show or hide Evidence (questions answered from your PDFs)</td></tr>
<tr><td><b>Ctrl+,</b></td><td>Preferences</td></tr>
<tr><td><b>Ctrl+Q</b></td><td>Quit</td></tr>
</table>
"""


def app_icon() -> QIcon:
    for name in ("kmds-desktop.svg", "kmds-desktop.png"):
        path = resources_dir() / "icons" / name
        if path.exists():
            return QIcon(str(path))
    return QIcon()


class WindowMenus:
    """Menus of :class:`MainWindow` (see the module docstring)."""

    def _action(self: MainWindow, menu: QMenu, text: str, slot: Any, shortcut: Any = None,
                name: str = "") -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        if name:
            action.setObjectName(name)
        action.triggered.connect(lambda _checked=False: slot())
        menu.addAction(action)
        return action

    def _build_menus(self: MainWindow) -> None:
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        self.open_action = self._action(
            file_menu, "&Open knowledge base…", self.open_kb_dialog, QKeySequence.StandardKey.Open, "openKb"
        )
        self.recent_menu = file_menu.addMenu("Open &recent")
        self.save_action = self._action(
            file_menu, "&Save knowledge base", self.save_kb, QKeySequence.StandardKey.Save, "saveKb"
        )
        self.save_as_action = self._action(
            file_menu,
            "Save knowledge base &as…",
            self.save_kb_as,
            QKeySequence.StandardKey.SaveAs,
            "saveKbAs",
        )
        file_menu.addSeparator()
        self.import_action = self._action(
            file_menu, "&Import literature…", self._import_literature, None, "importLiterature"
        )
        self.import_folder_action = self._action(
            file_menu, "Import literature f&older…", self.literature.import_folder_dialog, None,
            "importLiteratureFolder",
        )
        self.import_folder_action.setToolTip(
            "A folder such as the PubMed baseline (~1,200 .xml.gz): file by file in name order, one "
            "progress line; Cancel or a crash keeps the files done, and importing the folder again goes on")
        self.topk_action = self._action(
            file_menu, "Build &fast search index", self.literature.build_fast_index, None, "buildFastIndex"
        )
        self.topk_action.setToolTip("Index the literature database for fast full-text rows and counts at "
                                    "any size (read-only on the database; Cancel keeps what is done)")
        file_menu.addSeparator()
        self.reviews.fill_menu(file_menu)  # New / Open / Recent reviews, Update, Rename, ...
        file_menu.addSeparator()
        self.export_menu = file_menu.addMenu("&Export")
        self._fill_export_menu()
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence.StandardKey.Quit, "quit")

        edit_menu = bar.addMenu("&Edit")
        self._action(edit_menu, "Add &observation…", self.browser.add_observation, "Ctrl+N", "addObservation")
        self._action(edit_menu, "&Edit selected…", self.browser.edit_selected, None, "editSelected")
        self._action(
            edit_menu, "&Delete observation", self.browser.delete_observation, None, "deleteObservation"
        )
        self._action(edit_menu, "Add &workflow…", self.browser.add_workflow, None, "addWorkflow")
        edit_menu.addSeparator()
        self._action(
            edit_menu,
            "&Preferences…",
            self.open_preferences,
            QKeySequence.StandardKey.Preferences,
            "preferences",
        ).setShortcuts([QKeySequence("Ctrl+,")])

        view_menu = bar.addMenu("&View")
        self._action(view_menu, "&Filter the KB browser", self._focus_filter, QKeySequence.StandardKey.Find)
        self._action(view_menu, "Go to the &question", self.ask.focus_question, "Ctrl+L")
        view_menu.addSeparator()
        for i, (label, widget) in enumerate(
            (("KB browser", self.browser), ("Question and answer", self.ask), ("Literature", self.literature))
        ):
            action = QAction(f"Show {label}", self)
            action.setCheckable(True)
            action.setChecked(True)
            action.setObjectName(f"showPanel{i}")
            action.toggled.connect(widget.setVisible)
            view_menu.addAction(action)
        view_menu.addSeparator()
        self._action(view_menu, "&Reset layout", self.reset_layout)
        self._action(view_menu, "Rebuild the semantic &index", self.rebuild_index)

        help_menu = bar.addMenu("&Help")
        self._action(help_menu, "&Keyboard shortcuts", self.show_shortcuts, None, "shortcuts")
        self._action(help_menu, "&Diagnose data folder…", self.diagnose_data_folder, None,
                     "diagnoseDataFolder")
        self._action(help_menu, "&About KMDS Desktop", self.show_about, None, "about")
        self._update_recent_menu()

    def _fill_export_menu(self: MainWindow) -> None:
        self.export_menu.clear()
        formats = (("CSV…", "csv"), ("RIS…", "ris"), ("BibTeX…", "bibtex"))
        for label, fmt in formats:
            action = self.export_menu.addAction(f"Documents as {label}")
            action.setObjectName(f"export:{fmt}")
            action.triggered.connect(lambda _c=False, f=fmt: self._export(f))
        log_action = self.export_menu.addAction("Search log (JSON)…")
        log_action.setObjectName("export:log")
        log_action.triggered.connect(lambda _c=False: self._export("log"))
        self.export_menu.addSeparator()
        answer_action = self.export_menu.addAction("Answer as Markdown…")
        answer_action.setObjectName("export:answer")
        answer_action.triggered.connect(lambda _c=False: self.ask.export_answer_dialog())

    def _update_recent_menu(self: MainWindow) -> None:
        self.recent_menu.clear()
        recent = list(self.settings.ui.recent_files)
        for path in recent:
            action = self.recent_menu.addAction(path)
            action.triggered.connect(lambda _c=False, p=path: self.open_kb(p))
        if not recent:
            empty = self.recent_menu.addAction("(none yet)")
            empty.setEnabled(False)
        else:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction("Clear the list", self._clear_recent)
        self.recent_menu.addSeparator()
        self.recent_menu.addAction("Demo knowledge base",
                                   lambda: self.open_kb(workspace.installed_demo_path()))

    def _clear_recent(self: MainWindow) -> None:
        self.settings.ui.recent_files = []
        self.persist_settings()
        self._update_recent_menu()

    def _focus_filter(self: MainWindow) -> None:
        self.browser.filter_edit.setFocus()
        self.browser.filter_edit.selectAll()

    def _import_literature(self: MainWindow) -> None:
        self.literature.import_files_dialog()

    def _export(self: MainWindow, fmt: str) -> None:
        if fmt == "log":
            self.literature.export_log()
        else:
            self.literature.export_documents(fmt)

    def show_about(self: MainWindow) -> None:
        box = QMessageBox(self)
        box.setWindowTitle("About KMDS Desktop")
        box.setIconPixmap(app_icon().pixmap(64, 64))
        box.setText(
            f"<h3>KMDS Desktop {__version__}</h3><p>Browse KMDS knowledge bases, ask them questions, "
            "and search a local literature database with queries that several LLMs propose "
            "and you review.</p>"
            f"<p>Data folder: <code>{data_dir()}</code></p><p>Apache-2.0</p>"
        )
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.active_dialog = box
        box.open()

    def diagnose_data_folder(self: MainWindow) -> None:
        """Help > Diagnose data folder: the doctor runs on a worker (it may bring the database server
        back, seconds), its report opens in a dialog (:mod:`kmds_desktop.app.doctor`)."""
        self.jobs.submit(
            "doctor", doctor.diagnose_data_folder, label="Diagnosing the data folder", policy="refuse",
            on_result=self._show_diagnosis,
            on_error=lambda exc: self.messages.show_exception(exc, "The data folder could not be diagnosed"),
        )

    def _show_diagnosis(self: MainWindow, report: Any) -> None:
        dialog = QDialog(self)
        dialog.setObjectName("diagnosisDialog")
        dialog.setWindowTitle(f"Data folder diagnosis: {report.summary()}")
        text = QPlainTextEdit(report.to_text(), dialog)
        text.setObjectName("diagnosisReport")
        text.setReadOnly(True)
        text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, dialog)
        buttons.rejected.connect(dialog.reject)
        layout = QVBoxLayout(dialog)
        layout.addWidget(text)
        layout.addWidget(buttons)
        dialog.resize(900, 420)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.active_dialog = dialog
        dialog.open()

    def show_shortcuts(self: MainWindow) -> None:
        box = QMessageBox(self)
        box.setWindowTitle("Keyboard shortcuts")
        box.setText(SHORTCUTS_HTML)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.active_dialog = box
        box.open()
