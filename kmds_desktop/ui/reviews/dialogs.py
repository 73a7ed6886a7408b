"""The review menu's small dialogs: a name (New review, Rename), the list to open one from, the bar that
says which reviews have new records.

Why non-modal dialogs opened with ``open()`` and a signal: a nested event loop (``exec()``) would let
the window's jobs deliver results into a half-finished action, and a test could not click them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)


class NameDialog(QDialog):
    """Asks for a review's name; ``named(text)`` when the user confirms a non-empty one."""

    named = Signal(str)

    def __init__(self, title: str, prompt: str, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("reviewNameDialog")
        self.setWindowTitle(title)
        self.prompt = QLabel(prompt)
        self.prompt.setWordWrap(True)
        self.name_edit = QLineEdit(text)
        self.name_edit.selectAll()
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.buttons.accepted.connect(self._confirm)
        self.buttons.rejected.connect(self.reject)
        self.name_edit.textChanged.connect(lambda t: self.ok_button.setEnabled(bool(t.strip())))
        self.ok_button.setEnabled(bool(text.strip()))
        layout = QVBoxLayout(self)
        layout.addWidget(self.prompt)
        layout.addWidget(self.name_edit)
        layout.addWidget(self.buttons)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.resize(460, self.sizeHint().height())

    def _confirm(self) -> None:
        text = " ".join(self.name_edit.text().split())
        if text:
            self.accept()
            self.named.emit(text)


class ReviewPicker(QDialog):
    """The data folder's reviews, one line each (screened, included, updates, question); ``chosen(id)``
    on Open or a double click."""

    chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("reviewPicker")
        self.setWindowTitle("Open review")
        self.list = QListWidget()
        self.list.setWordWrap(True)
        self.list.itemActivated.connect(lambda _item: self._confirm())
        self.hint = QLabel("Reading the reviews…")
        self.hint.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Open
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.open_button = self.buttons.button(QDialogButtonBox.StandardButton.Open)
        self.open_button.setEnabled(False)
        self.buttons.accepted.connect(self._confirm)
        self.buttons.rejected.connect(self.reject)
        self.list.currentItemChanged.connect(lambda item, _p: self.open_button.setEnabled(item is not None))
        layout = QVBoxLayout(self)
        layout.addWidget(self.hint)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.buttons)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.resize(720, 420)

    def show_reviews(self, choices: Sequence[Any]) -> None:
        self.list.clear()
        for choice in choices:
            item = QListWidgetItem(choice.line)
            item.setData(Qt.ItemDataRole.UserRole, choice.id)
            self.list.addItem(item)
        self.hint.setText("Choose a review to open (its search, results and screening come back):"
                          if choices else "No review yet: make one with File → New review…")
        if choices:
            self.list.setCurrentRow(0)

    def select(self, review: str) -> bool:
        for row in range(self.list.count()):
            if self.list.item(row).data(Qt.ItemDataRole.UserRole) == review:
                self.list.setCurrentRow(row)
                return True
        return False

    def _confirm(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            self.accept()
            self.chosen.emit(str(item.data(Qt.ItemDataRole.UserRole)))


class NewRecordsBar(QWidget):
    """"2 reviews have 14 new records — Update": shown after an import, or on start when the database
    changed; ``update_requested(review)`` for the review with most new records."""

    update_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("newRecordsBar")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.setStyleSheet("#newRecordsBar { background: #e3efff; }")
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.update_button = QPushButton("Update")
        self.update_button.setToolTip("Re-run the review's saved search and screen only its new records")
        self.update_button.clicked.connect(lambda: self.update_requested.emit(self.review))
        close = QToolButton()
        close.setText("✕")
        close.setToolTip("Dismiss")
        close.clicked.connect(lambda: self.setVisible(False))
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 4, 6, 4)
        row.addWidget(self.label, 1)
        row.addWidget(self.update_button)
        row.addWidget(close)
        self.review = ""
        self.setVisible(False)

    def show_new(self, line: str, new_per_review: dict[str, int]) -> None:
        if not line:
            self.setVisible(False)
            return
        self.review = min(new_per_review.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        self.label.setText(f"{line} — Update screens the new records of {self.review}")
        self.update_button.setText(f"Update {self.review}")
        self.setVisible(True)
