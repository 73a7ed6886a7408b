"""Pieces every Preferences tab uses: error lines, scrolled pages, line edits that keep Enter."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFrame, QLabel, QLineEdit, QScrollArea, QWidget


def error_label() -> QLabel:
    label = QLabel()
    label.setStyleSheet("color: #b00020;")
    label.setWordWrap(True)
    label.setVisible(False)
    return label


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
