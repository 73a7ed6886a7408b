"""Small widgets of the literature panel: the document detail view."""

from __future__ import annotations

import html

from PySide6.QtWidgets import QTextBrowser, QWidget

from kmds_desktop.literature.export import ExportDocument


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
