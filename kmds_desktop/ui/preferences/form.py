"""What every Preferences page is made of: a form of rows, each with its hint and its error line.

:class:`PreferencesPage` is the page's base: it owns the page's fields and their error lines and
shows the errors that belong to them; each page says how it loads its fields from the settings
(``load``) and writes them back (``apply``), and asks the dialog for what only the dialog can do
through signals (check the whole form, show errors found before any validation). A page knows
nothing of the dialog that holds it.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFormLayout, QFrame, QLabel, QLineEdit, QScrollArea, QWidget

from kmds_desktop.app.presentation import Settings


def error_label() -> QLabel:
    """A red, wrapping line, hidden until it has an error to say."""
    label = QLabel()
    label.setStyleSheet("color: #b00020;")
    label.setWordWrap(True)
    label.setVisible(False)
    return label


def hint_label(text: str, name: str) -> QLabel:
    """A grey, wrapping line under a field that says what the field takes."""
    hint = QLabel(text)
    hint.setObjectName(name)
    hint.setStyleSheet("color: #666;")
    hint.setWordWrap(True)
    return hint


def scrolled(page: QWidget) -> QScrollArea:
    """``page`` in a frameless scroll area: a tab with many wrapped hints is taller than the dialog
    once errors show, and squeezed into it the hints' lines ran into the rows below them."""
    area = QScrollArea()
    area.setObjectName(page.objectName() + "Scroll")
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setWidgetResizable(True)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    area.setWidget(page)
    # As wide as the page needs (its check boxes do not wrap): with no horizontal bar, a narrower
    # area cut "Ask the LLM for a hypothetical abstract row (needs an LLM mod" at the dialog's edge.
    area.setMinimumWidth(page.minimumSizeHint().width() + area.verticalScrollBar().sizeHint().width())
    return area


class OwnEnterLineEdit(QLineEdit):
    """A line edit that keeps Enter for itself (``returnPressed``): in a dialog, an Enter the line
    edit lets through presses the default button, so typing a model and pressing Enter, as the
    field's hint says, would save and close the dialog instead of adding the model."""

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt's name
        super().keyPressEvent(event)
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            event.accept()


class PreferencesPage(QWidget):
    """One tab of the Preferences dialog: its fields (by settings key, ``section.name``), their
    error lines, and how they are loaded from and written back to the settings.

    ``check_requested`` asks for the whole form to be checked (Enter in a number field: a value
    is valid or not only with the others, which only the dialog has); ``errors_found`` carries
    ``{field key: message}`` for a problem the page found itself before anything was validated
    (a server address it cannot ask), shown as the dialog shows every error.
    """

    check_requested = Signal()
    errors_found = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.form = QFormLayout(self)
        self.fields: dict[str, QWidget] = {}
        self.field_errors: dict[str, QLabel] = {}

    def add_row(self, key: str, label: str, widget: QWidget, hint: str = "") -> None:
        """Add ``widget`` under ``label``, its ``hint`` and its (hidden) error line as rows of their own.

        The three once shared one cell's box: when an error appeared the form was squeezed and the
        box gave the wrapped hint less than its height, so its second line ran under the error.
        As separate form rows each label gets its own height for the width it has.
        """
        self.fields[key] = widget
        err = error_label()
        err.setObjectName(f"error:{key}")
        self.field_errors[key] = err
        self.form.addRow(label, widget)
        if hint:
            self.form.addRow("", hint_label(hint, f"hint:{key}"))
        self.form.addRow("", err)
        # A row with nothing to say still takes the form's spacing: it is shown with its error only.
        self.form.setRowVisible(err, False)

    def show_errors(self, errors: dict[str, str]) -> None:
        """Show each error of ``errors`` that belongs to one of this page's fields; clear the others."""
        for key, label in self.field_errors.items():
            message = errors.get(key)
            label.setText(message or "")
            self.form.setRowVisible(label, bool(message))

    def load(self, settings: Settings) -> None:
        """Show ``settings``' values in this page's fields."""
        raise NotImplementedError

    def apply(self, data: dict[str, Any]) -> None:
        """Write this page's fields into ``data``, the settings as a dict (as the app's validator
        takes it): values stay as typed, so a wrong one is reported by the validation under its field."""
        raise NotImplementedError
