"""Help's boxes: About, Keyboard shortcuts, and the data folder's diagnosis.

:class:`HelpDialogs` is given the widget its boxes belong to, the job runner (the diagnosis runs on a
worker: it may bring the database server back, seconds) and the message bar; each box it opens is
announced with :attr:`HelpDialogs.dialog_opened`, so the window keeps the one open now.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QMessageBox, QPlainTextEdit, QVBoxLayout, QWidget

from kmds_desktop import __version__
from kmds_desktop.app import doctor
from kmds_desktop.app.presentation import data_dir
from kmds_desktop.ui.jobs.runner import JobRunner
from kmds_desktop.ui.shell.menus import app_icon
from kmds_desktop.ui.shell.message_bar import MessageBar

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


class HelpDialogs(QObject):
    """Help's three entries (see the module docstring)."""

    dialog_opened = Signal(object)  # the box opened now (modeless)

    def __init__(self, parent: QWidget, jobs: JobRunner, messages: MessageBar) -> None:
        super().__init__(parent)
        self.parent_widget = parent
        self.jobs = jobs
        self.messages = messages

    def _open(self, dialog: QWidget) -> None:
        self.dialog_opened.emit(dialog)
        dialog.open()  # type: ignore[attr-defined]

    def show_about(self) -> None:
        self._open(about_box(self.parent_widget))

    def show_shortcuts(self) -> None:
        self._open(shortcuts_box(self.parent_widget))

    def diagnose_data_folder(self) -> None:
        """Help > Diagnose data folder: the doctor runs on a worker, its report opens in a dialog
        (:mod:`kmds_desktop.app.doctor`)."""
        self.jobs.submit(
            "doctor", doctor.diagnose_data_folder, label="Diagnosing the data folder", policy="refuse",
            on_result=lambda report: self._open(diagnosis_dialog(self.parent_widget, report)),
            on_error=lambda exc: self.messages.show_exception(exc, "The data folder could not be diagnosed"),
        )


def about_box(parent: QWidget) -> QMessageBox:
    """Help > About (not yet open: the caller opens it)."""
    box = QMessageBox(parent)
    box.setWindowTitle("About KMDS Desktop")
    box.setIconPixmap(app_icon().pixmap(64, 64))
    box.setText(
        f"<h3>KMDS Desktop {__version__}</h3><p>Browse KMDS knowledge bases, ask them questions, "
        "and search a local literature database with queries that several LLMs propose "
        "and you review.</p>"
        f"<p>Data folder: <code>{data_dir()}</code></p><p>Apache-2.0</p>"
    )
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
    return box


def shortcuts_box(parent: QWidget) -> QMessageBox:
    """Help > Keyboard shortcuts (not yet open)."""
    box = QMessageBox(parent)
    box.setWindowTitle("Keyboard shortcuts")
    box.setText(SHORTCUTS_HTML)
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
    return box


def diagnosis_dialog(parent: QWidget, report: Any) -> QDialog:
    """Help > Diagnose data folder's report (:mod:`kmds_desktop.app.doctor`), not yet open."""
    dialog = QDialog(parent)
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
    return dialog
