"""The question box of the Evidence view: a line to type in, Find passages and Answer, and the
questions asked before (kept by the application layer in the data folder)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)


class QuestionBox(QWidget):
    """Emits ``search_requested`` (Enter or Find passages) and ``answer_requested`` (Answer) with the
    question; a question picked from the history is put back in the line and searched again."""

    search_requested = Signal(str)
    answer_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.line = QLineEdit()
        self.line.setObjectName("evidenceQuestion")
        self.line.setPlaceholderText("Ask the imported papers, e.g. what fraction of cells lost the marker?")
        self.line.setClearButtonEnabled(True)
        self.find_button = QPushButton("Find passages")
        self.find_button.setObjectName("evidenceFind")
        self.find_button.setToolTip("Rank the imported full texts' passages for the question (full-text "
                                    "and meaning, fused)")
        self.answer_button = QPushButton("Answer")
        self.answer_button.setObjectName("evidenceAnswer")
        self.answer_button.setToolTip("An offline answer: the best sentences, each quoted from its page "
                                      "and cited [n]; weak evidence says so")
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.line, 1)
        row.addWidget(self.find_button)
        row.addWidget(self.answer_button)
        self.history = QListWidget()
        self.history.setObjectName("evidenceHistory")
        self.history.setToolTip("Questions asked before: click one to search it again")
        self.history.setMaximumHeight(86)
        self.history.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.history.setTextElideMode(Qt.TextElideMode.ElideRight)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        label = QLabel("Questions asked")
        label.setObjectName("evidenceHistoryLabel")
        layout.addWidget(label)
        layout.addWidget(self.history)
        self.line.returnPressed.connect(self._search)
        self.find_button.clicked.connect(self._search)
        self.answer_button.clicked.connect(self._answer)
        self.history.itemClicked.connect(self._from_history)

    def question(self) -> str:
        return " ".join(self.line.text().split())

    def set_history(self, questions: list[str]) -> None:
        self.history.clear()
        for question in questions:
            item = QListWidgetItem(question)
            item.setToolTip(question)
            item.setData(Qt.ItemDataRole.UserRole, question)
            self.history.addItem(item)

    def set_busy(self, busy: bool) -> None:
        self.find_button.setEnabled(not busy)
        self.answer_button.setEnabled(not busy)

    def _search(self) -> None:
        self.search_requested.emit(self.question())

    def _answer(self) -> None:
        self.answer_requested.emit(self.question())

    def _from_history(self, item: QListWidgetItem) -> None:
        self.line.setText(str(item.data(Qt.ItemDataRole.UserRole)))
        self._search()
