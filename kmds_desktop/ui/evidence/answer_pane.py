"""The answer pane of the Evidence view: the offline answer, each quote followed by its ``[n]`` as a
link to the cited page, the sources with their pages, the notes (quotes dropped, weak evidence), and
Export as Markdown."""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import QUrl, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QTextBrowser, QVBoxLayout, QWidget

CITE_SCHEME = "cite"


def answer_html(answer: Any) -> str:
    """The answer as HTML: quotes with ``[n]`` links (``cite:n``), then sources and notes."""
    parts = [f"<p><b>{html.escape(answer.question)}</b></p>"]
    if answer.answered:
        quotes = " ".join(
            f"\u201c{html.escape(q.text)}\u201d <a href='{CITE_SCHEME}:{q.source}'>[{q.source}]</a>"
            for q in answer.quotes)
        parts.append(f"<p>{quotes}</p>")
    else:
        parts.append(f"<p><i>{html.escape(answer.text)}</i></p>")
    if answer.sources:
        rows = "".join(
            f"<li><a href='{CITE_SCHEME}:{s.number}'>[{s.number}]</a> "
            f"{html.escape(s.title or s.label)}{' (' + html.escape(s.doi) + ')' if s.doi and s.title else ''}"
            f", {html.escape(s.page_text)}</li>"
            for s in answer.sources)
        parts.append(f"<p>Sources</p><ul>{rows}</ul>")
    parts.append(notes_html(answer.notes))
    return "".join(parts)


def notes_html(notes: list[str]) -> str:
    """The notes under an answer or a choice, greyed (nothing when there are none)."""
    if not notes:
        return ""
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    return f"<p style='color:#666'>Notes</p><ul style='color:#666'>{items}</ul>"


class AnswerPane(QWidget):
    """Emits ``citation_opened(n)`` when ``[n]`` is clicked and ``export_requested`` for the button."""

    citation_opened = Signal(int)
    export_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.answer: Any = None
        self.browser = QTextBrowser()
        self.browser.setObjectName("evidenceAnswerText")
        self.browser.setOpenLinks(False)
        self.browser.setPlaceholderText("Answer shows the papers' own sentences here, each cited [n] with "
                                        "its page; click [n] to see the page.")
        self.browser.anchorClicked.connect(self._clicked)
        self.export_button = QPushButton("Export as Markdown…")
        self.export_button.setObjectName("evidenceExport")
        self.export_button.setEnabled(False)
        self.export_button.clicked.connect(self.export_requested)
        header = QHBoxLayout()
        header.setContentsMargins(0, 0, 0, 0)
        header.addWidget(QLabel("Answer"), 1)
        header.addWidget(self.export_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(header)
        layout.addWidget(self.browser, 1)

    def show_answer(self, answer: Any) -> None:
        self.answer = answer
        self.browser.setHtml(answer_html(answer))
        self.export_button.setEnabled(True)

    def _clicked(self, url: QUrl) -> None:
        if url.scheme() == CITE_SCHEME and url.path().isdigit():
            self.citation_opened.emit(int(url.path()))
