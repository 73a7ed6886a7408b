"""What the literature panel's table models share: a flat table with fixed headers and their tooltips.

Why a base: the documents table and the query-review table answered Qt's row count, column count and
header questions with the same code, word for word; each now says only how many rows it has and what
a cell shows.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt

AnyIndex = QModelIndex | QPersistentModelIndex


class HeaderedTableModel(QAbstractTableModel):
    """A flat table whose columns are ``HEADERS``, each with its ``TOOLTIPS`` entry ("" for none)."""

    HEADERS: tuple[str, ...] = ()
    TOOLTIPS: tuple[str, ...] = ()

    def row_total(self) -> int:
        """How many rows the table shows now."""
        raise NotImplementedError

    def rowCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008, N802 - Qt API
        return 0 if parent.isValid() else self.row_total()

    def columnCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(  # noqa: N802
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation != Qt.Orientation.Horizontal or not 0 <= section < len(self.HEADERS):
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self.HEADERS[section]
        if role == Qt.ItemDataRole.ToolTipRole and self.TOOLTIPS[section]:
            return self.TOOLTIPS[section]
        return None
