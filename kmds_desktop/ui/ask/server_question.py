"""The bar that asks before "Automatic" uses a server it found: "Found llama.cpp at 127.0.0.1:8080 —
use it?" with Yes and No.

Why a bar and not a dialog: the question comes from the status probe, a background job, at any
moment (the window starting, Preferences saved); a modal dialog would steal the focus from whatever
the user is typing. The bar waits above the panels until answered; the window remembers the answer
(:func:`~kmds_desktop.app.llm_status.confirm_server` or
:func:`~kmds_desktop.app.llm_status.decline_server`).
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget


class ServerQuestionBar(QWidget):
    """One line: the question, Yes, No. ``answered(base_url, yes)`` is emitted once per question."""

    answered = Signal(str, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("serverQuestion")
        self.setStyleSheet("#serverQuestion { background: #e8f1fb; }")
        self.setAutoFillBackground(True)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 8, 4)
        self.label = QLabel("")
        self.label.setObjectName("serverQuestionText")
        self.label.setWordWrap(True)
        self.yes_button = QPushButton("Yes, use it")
        self.yes_button.setObjectName("serverQuestionYes")
        self.no_button = QPushButton("No")
        self.no_button.setObjectName("serverQuestionNo")
        row.addWidget(self.label, 1)
        row.addWidget(self.yes_button)
        row.addWidget(self.no_button)
        self.base_url = ""
        self.yes_button.clicked.connect(lambda: self._answer(True))
        self.no_button.clicked.connect(lambda: self._answer(False))
        self.hide()

    def ask(self, question: str, base_url: str, detail: str = "") -> None:
        """Show ``question`` about the server at ``base_url`` (``detail``: its models, as a tooltip)."""
        self.base_url = base_url
        self.label.setText(f"{question} Nothing is sent to it until you say yes: on a shared computer it "
                           "may be someone else's.")
        self.label.setToolTip(detail)
        self.show()

    def _answer(self, yes: bool) -> None:
        if not self.base_url:
            return
        base_url, self.base_url = self.base_url, ""
        self.hide()
        self.answered.emit(base_url, yes)
