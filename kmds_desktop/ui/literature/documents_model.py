"""The merged documents of a literature search run, best rank first (rank, title, year, journal, source,
found by). The view starts sorted by rank; clicking a header sorts by that column instead.

Rows are :class:`kmds_desktop.literature.strategy.reference_files.ExportDocument` s, so what the table
shows is exactly what the CSV/RIS/BibTeX exports write. ``UserRole`` returns the document for the detail view.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from PySide6.QtCore import Qt

from kmds_desktop.app.presentation import ExportDocument, normalize_document
from kmds_desktop.ui.literature.table_model import AnyIndex, HeaderedTableModel


class DocumentsModel(HeaderedTableModel):
    """Read-only table of documents; sorting is left to a ``QSortFilterProxyModel`` (SortRole)."""

    COL_RANK, COL_TITLE, COL_YEAR, COL_JOURNAL, COL_SOURCE, COL_FOUND_BY = range(6)
    HEADERS = ("Rank", "Title", "Year", "Journal", "Source", "Found by")
    TOOLTIPS = (
        "Fused rank of the ticked rows (Preferences > Retrieval: reciprocal rank fusion, or the best "
        "position any row gave the document)",
        "", "", "", "",
        "The rows that found the document: full-text queries, semantic rows (the start of the sentence) and "
        "hypothetical abstracts (the model that wrote it)",
    )
    #: Role returning a sortable value (rank and year as ints, found-by as the number of queries).
    SortRole = Qt.ItemDataRole.UserRole + 1

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._docs: list[ExportDocument] = []
        self._ranks: list[int] = []

    def set_documents(
        self, documents: Iterable[Any], found_by: Mapping[Any, Sequence[str]] | None = None
    ) -> None:
        """Replace the documents (in merged rank order, or each with a ``rank``); ``found_by`` maps a
        document id to the queries that found it (else each document's own ``found_by``)."""
        docs = []
        ranks = []
        for position, doc in enumerate(documents, start=1):
            rank = doc.get("rank") if isinstance(doc, Mapping) else None
            ranks.append(int(rank) if rank is not None else position)
            if isinstance(doc, ExportDocument):
                docs.append(doc)
                continue
            key = doc.get("id") if isinstance(doc, Mapping) else getattr(doc, "id", None)
            names = None
            if found_by is not None:
                names = found_by.get(key, found_by.get(str(key)))
            docs.append(normalize_document(doc, names))
        self.beginResetModel()
        self._docs = docs
        self._ranks = ranks
        self.endResetModel()

    def clear(self) -> None:
        self.set_documents([])

    def documents(self) -> list[ExportDocument]:
        return list(self._docs)

    def document(self, row: int) -> ExportDocument:
        return self._docs[row]

    def rank(self, row: int) -> int:
        return self._ranks[row]

    # --- Qt model API -----------------------------------------------------------------------------
    def row_total(self) -> int:
        return len(self._docs)

    def flags(self, index: AnyIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._docs):
            return None
        doc, col = self._docs[index.row()], index.column()
        if role == Qt.ItemDataRole.UserRole:
            return doc
        if role == self.SortRole:
            if col == self.COL_RANK:
                return self._ranks[index.row()]
            if col == self.COL_YEAR:
                return doc.year if doc.year is not None else 0
            if col == self.COL_FOUND_BY:
                return len(doc.found_by)
            return self._text(doc, col).lower()
        if role == Qt.ItemDataRole.DisplayRole:
            if col == self.COL_RANK:
                return str(self._ranks[index.row()])
            return self._text(doc, col)
        if role == Qt.ItemDataRole.TextAlignmentRole and col == self.COL_RANK:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole and col in (self.COL_TITLE, self.COL_FOUND_BY):
            return self._text(doc, col)
        return None

    def _text(self, doc: ExportDocument, col: int) -> str:
        if col == self.COL_TITLE:
            return doc.title or "(untitled)"
        if col == self.COL_YEAR:
            return "" if doc.year is None else str(doc.year)
        if col == self.COL_JOURNAL:
            return doc.journal
        if col == self.COL_SOURCE:
            return doc.source
        if col == self.COL_FOUND_BY:
            return "; ".join(doc.found_by)  # a semantic row's sentence may hold commas
        return ""
