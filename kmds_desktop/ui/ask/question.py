"""The question box: Ctrl+Enter asks; Up/Down on the first/last line walk the earlier questions."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit, QWidget

from kmds_desktop.app.ask import remember_question


class QuestionEdit(QPlainTextEdit):
    """Multi-line question box: Ctrl+Enter asks; Up/Down on the first/last line walk the history."""

    submitted = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.history: list[str] = []
        self._pos: int | None = None  # index into history while browsing; None = editing a new one
        self._draft = ""
        self.setPlaceholderText("Ask the knowledge base… (Ctrl+Enter to ask, Up/Down for earlier questions)")
        self.setTabChangesFocus(True)
        self.setMaximumHeight(78)

    def add_to_history(self, question: str) -> None:
        """``question`` joins the history the box walks (the app's rule: :func:`remember_question`)."""
        remember_question(self.history, question)
        self._pos = None

    def show_history(self, history: list[str]) -> None:
        """Walk ``history`` (the session's list, shared, not copied) from the newest question."""
        self.history = history
        self._pos = None

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt API
        key = event.key()
        mods = event.modifiers()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and mods & Qt.KeyboardModifier.ControlModifier:
            self.submitted.emit()
            return
        cursor = self.textCursor()
        if key == Qt.Key.Key_Up and not mods and cursor.blockNumber() == 0 and self.history:
            if self._pos is None:
                self._draft = self.toPlainText()
                self._pos = len(self.history)
                if self._draft.strip() == self.history[-1]:
                    self._pos -= 1  # the box still shows the last question: Up goes to the one before
            if self._pos > 0:
                self._pos -= 1
                self.setPlainText(self.history[self._pos])
                self.moveCursor(self.textCursor().MoveOperation.End)
            return
        last_block = cursor.blockNumber() == self.document().blockCount() - 1
        if key == Qt.Key.Key_Down and not mods and last_block and self._pos is not None:
            self._pos += 1
            if self._pos >= len(self.history):
                self._pos = None
                self.setPlainText(self._draft)
            else:
                self.setPlainText(self.history[self._pos])
            self.moveCursor(self.textCursor().MoveOperation.End)
            return
        super().keyPressEvent(event)
