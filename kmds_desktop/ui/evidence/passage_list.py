"""The ranked passages of the Evidence view: each with its paper, page(s) and the start of its text;
activating one (a click) asks for its page."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QListWidget, QListWidgetItem, QWidget

#: Characters of a passage shown in its row (the page view shows the whole of it in place).
PREVIEW_CHARS = 320


def passage_row_text(hit: Any) -> str:
    """``"1. Title (doi) · p. 3"`` over the passage's first words."""
    title = hit.title or hit.label
    paper = f"{title} ({hit.doi})" if hit.doi and hit.title else title
    text = " ".join(hit.text.split())
    preview = text[:PREVIEW_CHARS] + ("…" if len(text) > PREVIEW_CHARS else "")
    return f"{hit.rank}. {paper} · p. {hit.pages}\n{preview}"


class PassageList(QListWidget):
    """Emits ``passage_opened(hit)`` when a row is clicked or activated."""

    passage_opened = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("evidencePassages")
        self.setWordWrap(True)
        self.setAlternatingRowColors(True)
        self.setSpacing(3)  # rows of several lines read as separate passages
        self.setVerticalScrollMode(QListWidget.ScrollMode.ScrollPerPixel)
        self.itemClicked.connect(self._open)
        self.itemActivated.connect(self._open)

    def set_hits(self, hits: list[Any]) -> None:
        self.clear()
        for hit in hits:
            item = QListWidgetItem(passage_row_text(hit))
            item.setData(Qt.ItemDataRole.UserRole, hit)
            item.setToolTip(f"{hit.file}\npages {hit.pages}")
            self.addItem(item)

    def hit(self, row: int) -> Any:
        return self.item(row).data(Qt.ItemDataRole.UserRole)

    def _open(self, item: QListWidgetItem) -> None:
        self.passage_opened.emit(item.data(Qt.ItemDataRole.UserRole))
