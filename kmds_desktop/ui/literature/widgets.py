"""Small widgets of the literature panel: the document detail view, the partly-embedded question."""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import Signal, SignalInstance
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QMessageBox, QPushButton, QTextBrowser, QWidget

from kmds_desktop.app.presentation import ExportDocument


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


class CoverageBar(QFrame):
    """Asks, inside the panel, before a semantic row runs on a partly embedded database: "Embed first"
    or "Run anyway". Inline rather than a modal dialog, so the rows stay visible and editable while
    the user decides (the verdict and its words come from ``app.run_facts.coverage_warning``)."""

    embed_first = Signal()
    run_anyway = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("coverageBar")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#coverageBar { background: #fff4d6; }")
        self.label = QLabel()
        self.label.setObjectName("coverageText")
        self.label.setWordWrap(True)
        self.embed_button = QPushButton("Embed first")
        self.embed_button.setObjectName("coverageEmbedFirst")
        self.embed_button.setToolTip("Embed the documents without a vector, then run the ticked rows")
        self.run_button = QPushButton("Run anyway")
        self.run_button.setObjectName("coverageRunAnyway")
        self.run_button.setToolTip("Run now: the semantic rows search only the documents with a vector")
        self.embed_button.clicked.connect(lambda _checked=False: self._answer(self.embed_first))
        self.run_button.clicked.connect(lambda _checked=False: self._answer(self.run_anyway))
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 4, 6, 4)
        row.addWidget(self.label, 1)
        row.addWidget(self.embed_button)
        row.addWidget(self.run_button)
        self.setVisible(False)

    def ask(self, text: str) -> None:
        self.label.setText(text)
        self.setVisible(True)

    def _answer(self, signal: SignalInstance) -> None:
        self.setVisible(False)
        signal.emit()


def ask_to_discard(parent: QWidget, question: str, discard: Callable[[], None]) -> QMessageBox:
    """Open (not exec) New search's "discard these queries?" box over ``parent``; ``discard()`` runs
    when the user chooses Discard. Returns the open box (Cancel is its default)."""
    box = QMessageBox(QMessageBox.Icon.Question, "New search", question,
                      QMessageBox.StandardButton.Discard | QMessageBox.StandardButton.Cancel, parent)
    box.setDefaultButton(QMessageBox.StandardButton.Cancel)

    def answered(_result: int) -> None:
        if box.standardButton(box.clickedButton()) == QMessageBox.StandardButton.Discard:
            discard()

    box.finished.connect(answered)
    box.open()
    return box
