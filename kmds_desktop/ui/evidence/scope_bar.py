"""Two small bars of the Evidence view: which papers a search reads (all, or a review's included
records), and which literature record the shown page's paper is, with the user's correction.

Why the correction sits under the page: the page is where a reader sees that a PDF is not the paper
its record says (a supplement, a preprint), and says so there; the store keeps it across re-imports.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QWidget

ALL_PAPERS = "All imported papers"


class ScopeBar(QWidget):
    """The review whose included records a search reads (``review()``: None for all papers)."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.combo = QComboBox()
        self.combo.setObjectName("evidenceScope")
        self.combo.setToolTip("Read all imported PDFs, or only those of the records a review included "
                              "(PDFs are matched to records by DOI or title, or by hand below the page)")
        self.combo.addItem(ALL_PAPERS, None)
        self.combo.currentIndexChanged.connect(lambda _i: self.changed.emit())
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QLabel("Papers:"))
        layout.addWidget(self.combo, 1)

    def set_reviews(self, names: list[str]) -> None:
        chosen = self.review()
        self.combo.blockSignals(True)
        self.combo.clear()
        self.combo.addItem(ALL_PAPERS, None)
        for name in names:
            self.combo.addItem(f"Included in review: {name}", name)
        index = self.combo.findData(chosen) if chosen else 0
        self.combo.setCurrentIndex(max(0, index))
        self.combo.blockSignals(False)

    def review(self) -> str | None:
        data = self.combo.currentData()
        return str(data) if data else None

    def choose(self, name: str | None) -> None:
        self.combo.setCurrentIndex(max(0, self.combo.findData(name)) if name else 0)


class RecordBar(QWidget):
    """The shown paper's record; ``record_set(paper_id, record_id or None)``, ``record_cleared(paper_id)``."""

    record_set = Signal(int, object)
    record_cleared = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.paper_id = 0
        self.label = QLabel("")
        self.label.setObjectName("evidenceRecord")
        self.label.setWordWrap(True)
        self.record_edit = QLineEdit()
        self.record_edit.setObjectName("evidenceRecordId")
        self.record_edit.setPlaceholderText("record id")
        self.record_edit.setMaximumWidth(110)
        self.set_button = QPushButton("This PDF is that record")
        self.set_button.setObjectName("evidenceSetRecord")
        self.none_button = QPushButton("No record")
        self.none_button.setObjectName("evidenceNoRecord")
        self.clear_button = QPushButton("Match automatically")
        self.clear_button.setObjectName("evidenceClearRecord")
        self.set_button.clicked.connect(self._set)
        self.none_button.clicked.connect(lambda: self.record_set.emit(self.paper_id, None))
        self.clear_button.clicked.connect(lambda: self.record_cleared.emit(self.paper_id))
        self.record_edit.returnPressed.connect(self._set)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label, 1)
        for widget in (self.record_edit, self.set_button, self.none_button, self.clear_button):
            layout.addWidget(widget)
        self.show_paper(None)

    def show_paper(self, paper: Any) -> None:
        """``paper``: a store paper row (None: no page shown)."""
        self.paper_id = paper.id if paper is not None else 0
        for widget in (self.record_edit, self.set_button, self.none_button, self.clear_button):
            widget.setEnabled(paper is not None)
        if paper is None:
            self.label.setText("")
        elif paper.record_match == "manual":
            self.label.setText(f"Record: {paper.record_id} (set by hand)" if paper.record_id is not None
                               else "Record: none (set by hand)")
        elif paper.record_match == "created":
            self.label.setText(f"Record: {paper.record_id} (made from this PDF)")
        elif paper.record_id is not None:
            self.label.setText(f"Record: {paper.record_id} (matched by {paper.record_match})")
        else:
            self.label.setText("Record: not matched")

    def _set(self) -> None:
        text = self.record_edit.text().strip()
        if text.isdigit():
            self.record_set.emit(self.paper_id, int(text))
        else:
            self.label.setText("Type the record's id (a number), then click again.")
