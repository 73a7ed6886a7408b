"""The records behind an answer: their model and the table that shows them.

Row ``n-1`` is citation ``[n]``. The columns are fitted from the font's metrics of the few texts
shown, once per answer (:meth:`RecordsTable.fit_columns`), never by asking Qt to read every cell.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QStyle, QTableView, QWidget

from kmds_desktop.app.ask import one_line
from kmds_desktop.ui.kb.tree_model import CATEGORY_LABELS


class ResultsModel(QStandardItemModel):
    """The records behind an answer; row ``n-1`` is citation ``[n]``.

    The cells are stored in Qt's own item model, not answered by a Python ``data()``: painting the
    table asks each visible cell for about ten roles, and each call into Python waits for the GIL
    while a worker runs Python code (a fetch, an index build); a Python model's repaint took
    twice as long, and longer still beside a busy worker.
    """

    COLUMNS = ("#", "Finding", "Type", "Category", "Workflow", "Seq", "Score")
    _FLAGS = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
    _RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter

    def __init__(self, parent: Any = None) -> None:
        super().__init__(0, len(self.COLUMNS), parent)
        self.setHorizontalHeaderLabels(list(self.COLUMNS))
        self._rows: list[dict[str, Any]] = []

    def set_results(self, rows: list[dict[str, Any]]) -> bool:
        """Show ``rows``; returns False (and leaves the view alone) when they are already shown."""
        rows = list(rows or [])
        if rows == self._rows:
            return False
        self.beginResetModel()
        # Filled silently inside one reset: views re-read everything once, at endResetModel.
        blocked = self.blockSignals(True)
        try:
            self._rows = rows
            self.setRowCount(0)
            self.setRowCount(len(rows))
            for r, row in enumerate(rows):
                for c, item in enumerate(self._items(r, row)):
                    self.setItem(r, c, item)
        finally:
            self.blockSignals(blocked)
        self.endResetModel()
        return True

    def _items(self, r: int, row: dict[str, Any]) -> list[QStandardItem]:
        seq = row.get("finding_seq")
        score = row.get("score")
        texts = (
            f"[{r + 1}]",
            one_line(row.get("finding"), 120),
            row.get("obs_type") or "",
            CATEGORY_LABELS.get(row.get("category") or "", row.get("category") or ""),
            row.get("workflow_name") or "(unlinked)",
            "" if seq is None else str(seq),
            "" if score is None else f"{float(score):.3f}",
        )
        items = []
        for c, text in enumerate(texts):
            item = QStandardItem(text)
            item.setFlags(self._FLAGS)
            item.setData(row.get("iri"), Qt.ItemDataRole.UserRole)
            if c == 1:
                item.setToolTip(row.get("finding") or "")
            elif c in (2, 3, 4):
                item.setToolTip(text)  # the column may be capped
            else:
                item.setTextAlignment(self._RIGHT)
            items.append(item)
        return items

    def row_dict(self, row: int) -> dict[str, Any]:
        return self._rows[row]



class RecordsTable(QTableView):
    """The table of an answer's records: every column but the finding fitted to its texts."""

    def __init__(self, results: ResultsModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.results = results
        self.setObjectName("resultsTable")
        self.setModel(results)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().setVisible(False)
        self.setWordWrap(False)
        header = self.horizontalHeader()
        # Every column but the finding is fitted once per answer (fit_columns). ResizeToContents
        # would have Qt ask the model for every cell again at each layout change.
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.verticalHeader().setDefaultSectionSize(22)
        # PySide's first viewport() call costs ~20 ms (its wrapper type is set up lazily): pay it
        # while the window is built, not when the first answer arrives.
        self._results_viewport = self.viewport()

    def fit_columns(self, cap: int = 140) -> None:
        """Size every column but the finding to its text: type and category whole, workflow capped.

        Type and category are short words the user reads to tell records apart: capped, they
        showed "Data Q…" and "Explor…". They get their whole text on one line while the finding
        (the column the user reads) keeps a third of the free width; in a narrower panel their cells
        wrap onto two lines and the columns are as wide as the wider line (capped like the workflow
        only where even that would squeeze the finding). Long workflow names stay capped at ``cap``
        pixels (the full text is in each tooltip).
        Widths come from the font's metrics of the few strings shown: ``resizeColumnToContents``
        asks the model and the style for every cell and role and took 8-25 ms of the GUI thread.
        """
        rows = self.results.rowCount()
        table = self
        header = table.horizontalHeader()
        if rows == 0:
            # No records yet: every column as wide as its title, so the finding gets the rest (at
            # Qt's default width each, the finding's column was squeezed to a few letters).
            for col in (0, 2, 3, 4, 5, 6):
                table.setColumnWidth(col, header.sectionSizeHint(col))
            self.wrap_rows(False)
            return
        metrics = table.fontMetrics()
        # The item delegate's text margin: the focus frame's margin plus one pixel on each side.
        pad = 2 * (table.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, table) + 1) + 2

        def texts(col: int) -> list[str]:
            return [str(self.results.data(self.results.index(r, col)) or "") for r in range(rows)]

        def width(col: int) -> int:
            widest = max((metrics.horizontalAdvance(t) for t in texts(col)), default=0)
            return max(widest + pad, header.sectionSizeHint(col))

        def two_lines(col: int) -> int:
            """The width that holds each of the column's texts on at most two lines."""
            widest = 0
            for text in texts(col):
                words = text.split()
                splits = [max(metrics.horizontalAdvance(" ".join(words[:i])),
                              metrics.horizontalAdvance(" ".join(words[i:]))) for i in range(1, len(words))]
                widest = max(widest, min(splits, default=metrics.horizontalAdvance(text)))
            return max(widest + pad, header.sectionSizeHint(col))

        for col in (0, 5, 6):
            table.setColumnWidth(col, width(col))
        free = self._results_viewport.width() - sum(table.columnWidth(c) for c in (0, 5, 6))
        workflow = min(width(4), max(32, min(cap, free // 6)))  # a narrow panel: the finding keeps its share
        widths = {col: width(col) for col in (2, 3)}
        wrap = free - workflow - sum(widths.values()) < free // 3
        if wrap:
            widths = {col: two_lines(col) for col in (2, 3)}
            if free - workflow - sum(widths.values()) < free // 3:  # very narrow: capped, as the workflow
                widths = {col: min(w, max(32, min(cap, free // 6))) for col, w in widths.items()}
        for col, w in widths.items():
            table.setColumnWidth(col, w)
        table.setColumnWidth(4, workflow)
        self.wrap_rows(wrap)

    def wrap_rows(self, wrap: bool) -> None:
        """Rows one line tall, or two when the type and category columns wrap their words."""
        table = self
        table.setWordWrap(wrap)
        one_line_height = 22
        height = one_line_height + table.fontMetrics().lineSpacing() if wrap else one_line_height
        if table.verticalHeader().defaultSectionSize() != height:
            table.verticalHeader().setDefaultSectionSize(height)
