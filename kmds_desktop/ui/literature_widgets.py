"""Small widgets of the literature panel: the non-modal message bar and the document detail view."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QTextBrowser, QWidget

from kmds_desktop.literature.export import ExportDocument

_STYLES = {
    "error": "background:#fdecea; color:#611a15; border:1px solid #f5c2c0;",
    "warning": "background:#fff4e5; color:#663c00; border:1px solid #ffd8a8;",
    "info": "background:#e8f4fd; color:#0d3c61; border:1px solid #b6dcf7;",
}


class MessageBar(QFrame):
    """A message shown inside the panel (never a modal dialog), dismissed by its close button.

    Errors must not stop the user from working: the queries they edited stay visible and editable
    beside the message.
    """

    dismissed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("literatureMessage")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QPushButton("✕")
        close.setFlat(True)
        close.setToolTip("Dismiss")
        close.setFixedWidth(28)
        close.clicked.connect(self.dismiss)
        layout.addWidget(self.label, 1)
        layout.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.level = ""
        self.hide()

    def show_message(self, text: str, level: str = "error") -> None:
        self.level = level
        self.label.setText(text)
        self.setStyleSheet(f"QFrame#literatureMessage {{{_STYLES.get(level, _STYLES['info'])}}}")
        self.show()

    def dismiss(self) -> None:
        self.hide()
        self.label.clear()
        self.dismissed.emit()

    def text(self) -> str:
        return "" if self.isHidden() else self.label.text()


def document_html(doc: ExportDocument) -> str:
    """The detail view of one document: title, authors, journal/year, identifiers, abstract."""
    e = html.escape
    parts = [f"<h3>{e(doc.title or '(untitled)')}</h3>"]
    if doc.authors:
        parts.append(f"<p><b>Authors:</b> {e(', '.join(doc.authors))}</p>")
    where = ", ".join(x for x in (doc.journal, str(doc.year or "")) if x)
    if where:
        parts.append(f"<p><b>Published:</b> {e(where)}</p>")
    ids = []
    if doc.doi:
        ids.append(f'DOI <a href="https://doi.org/{e(doc.doi)}">{e(doc.doi)}</a>')
    if doc.pmid:
        ids.append(f'PMID <a href="https://pubmed.ncbi.nlm.nih.gov/{e(doc.pmid)}/">{e(doc.pmid)}</a>')
    if doc.source:
        ids.append(f"source {e(doc.source)}" + (f" ({e(doc.external_id)})" if doc.external_id else ""))
    if ids:
        parts.append(f"<p>{' · '.join(ids)}</p>")
    if doc.found_by:
        items = "".join(f"<li><code>{e(q)}</code></li>" for q in doc.found_by)
        parts.append(f"<p><b>Found by:</b></p><ul>{items}</ul>")
    parts.append(f"<p>{e(doc.abstract) if doc.abstract else '<i>No abstract.</i>'}</p>")
    return "".join(parts)


class DocumentDetail(QTextBrowser):
    """Read-only view of the selected document; links open in the system browser."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenExternalLinks(True)
        self.setPlaceholderText("Select a document to see its abstract, authors and identifiers.")

    def show_document(self, doc: ExportDocument | None) -> None:
        if doc is None:
            self.clear()
        else:
            self.setHtml(document_html(doc))
