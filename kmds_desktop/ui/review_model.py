"""The query-review table: generated and hand-written queries the user ticks, edits and runs.

Each row has a stable ``uid`` and an edit ``revision``. Validation and counting run on workers; their
results come back tagged with (uid, revision) and are dropped when the row was edited (or removed)
since, so a stale answer can never overwrite what the user sees for newer text. Nothing here ever
regenerates or rewrites a query: what runs is exactly the text in the table.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor

HAND_WRITTEN = "hand-written"

# Validity states of a row.
UNCHECKED = "unchecked"
CHECKING = "checking"
VALID = "valid"
INVALID = "invalid"
FAILED = "failed"  # the check itself failed (database down): neither valid nor invalid

_uids = itertools.count(1)

AnyIndex = QModelIndex | QPersistentModelIndex


@dataclass
class QueryRow:
    """One query in the review table."""

    query: str
    model: str = HAND_WRITTEN
    attempt: int | None = None
    included: bool = True
    generation_time: float | None = None
    temperature: float | None = None
    error: str | None = None
    validity: str = UNCHECKED
    validity_message: str = ""
    normalized: str | None = None
    matches: int | None = None
    matches_exact: bool = True
    # Filled after a run (cleared on edit, since they describe the text that ran).
    returned: int | None = None
    unique: int | None = None
    run_time: float | None = None
    run_error: str | None = None
    ids: list[Any] = field(default_factory=list)
    unique_ids: list[Any] = field(default_factory=list)
    uid: int = field(default_factory=lambda: next(_uids))
    revision: int = 0

    @property
    def runnable(self) -> bool:
        return bool(self.query.strip())


class ReviewModel(QAbstractTableModel):
    """Table model over :class:`QueryRow` s (include, model, attempt, query, validity, matches, ...)."""

    COL_INCLUDE, COL_MODEL, COL_ATTEMPT, COL_QUERY, COL_VALID, COL_MATCHES = range(6)
    COL_GEN_TIME, COL_RETURNED, COL_UNIQUE, COL_ERROR = range(6, 10)
    HEADERS = ("Run", "Model", "#", "Query", "Validity", "Matches", "Gen. time", "IDs", "Unique", "Error")
    TOOLTIPS = (
        "Tick the queries to run",
        "The model that wrote the query",
        "Attempt number for this model",
        "The PostgreSQL tsquery; double-click to edit",
        "Checked against the database as you edit",
        "Documents matching in the database, counted before anything is fetched (~ = estimate)",
        "Seconds the model took to write the query",
        "IDs this query returned in the last run",
        "IDs no other query found in the last run",
        "Generation or run error",
    )

    #: A row's query text changed (uid): the panel schedules a debounced validation.
    query_edited = Signal(int)
    #: The set of ticked rows changed.
    selection_changed = Signal()

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[QueryRow] = []
        #: False when ``query_generation.allow_query_selection`` is off: every query runs.
        self.selectable = True

    # --- Qt model API -----------------------------------------------------------------------------
    def rowCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008, N802 - Qt API
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(  # noqa: N802
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation != Qt.Orientation.Horizontal or not 0 <= section < len(self.HEADERS):
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self.HEADERS[section]
        if role == Qt.ItemDataRole.ToolTipRole:
            return self.TOOLTIPS[section]
        return None

    def flags(self, index: AnyIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        if index.column() == self.COL_INCLUDE and self.selectable:
            flags |= Qt.ItemFlag.ItemIsUserCheckable
        elif index.column() == self.COL_QUERY:
            flags |= Qt.ItemFlag.ItemIsEditable
        return flags

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        row, col = self._rows[index.row()], index.column()
        if role == Qt.ItemDataRole.UserRole:
            return row
        if col == self.COL_INCLUDE:
            if role == Qt.ItemDataRole.CheckStateRole:
                return Qt.CheckState.Checked if row.included else Qt.CheckState.Unchecked
            return None
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            return self._display(row, col, edit=role == Qt.ItemDataRole.EditRole)
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == self.COL_VALID and row.validity_message:
                return row.validity_message
            if col == self.COL_ERROR and (row.error or row.run_error):
                return row.run_error or row.error
            if col == self.COL_QUERY and row.query:
                return row.query
            return None
        if role == Qt.ItemDataRole.ForegroundRole:
            if col == self.COL_VALID and row.validity in (INVALID, FAILED):
                return QBrush(QColor("#b00020"))
            if col == self.COL_VALID and row.validity == VALID:
                return QBrush(QColor("#1b7a1b"))
            if col == self.COL_ERROR:
                return QBrush(QColor("#b00020"))
            return None
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (
            self.COL_ATTEMPT,
            self.COL_MATCHES,
            self.COL_GEN_TIME,
            self.COL_RETURNED,
            self.COL_UNIQUE,
        ):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _display(self, row: QueryRow, col: int, edit: bool) -> Any:
        if col == self.COL_MODEL:
            return row.model
        if col == self.COL_ATTEMPT:
            return "" if row.attempt is None else str(row.attempt)
        if col == self.COL_QUERY:
            return row.query
        if col == self.COL_VALID:
            return {
                UNCHECKED: "",
                CHECKING: "checking…",
                VALID: "✓ valid",
                INVALID: f"✗ {row.validity_message}",
                FAILED: f"? {row.validity_message}",
            }[row.validity]
        if col == self.COL_MATCHES:
            if row.matches is None:
                return ""
            return f"{row.matches:,}" if row.matches_exact else f"~{row.matches:,}"
        if col == self.COL_GEN_TIME:
            return "" if row.generation_time is None else f"{row.generation_time:.1f} s"
        if col == self.COL_RETURNED:
            return "" if row.returned is None else f"{row.returned:,}"
        if col == self.COL_UNIQUE:
            return "" if row.unique is None else f"{row.unique:,}"
        if col == self.COL_ERROR:
            return row.run_error or row.error or ""
        return None

    def setData(self, index: AnyIndex, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:  # noqa: N802
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return False
        row, col = self._rows[index.row()], index.column()
        if col == self.COL_INCLUDE and role == Qt.ItemDataRole.CheckStateRole:
            checked = _is_checked(value)
            if checked == row.included:
                return True
            row.included = checked
            self.dataChanged.emit(index, index, [Qt.ItemDataRole.CheckStateRole])
            self.selection_changed.emit()
            return True
        if col == self.COL_QUERY and role == Qt.ItemDataRole.EditRole:
            self.set_query(index.row(), "" if value is None else str(value))
            return True
        return False

    # --- row access -------------------------------------------------------------------------------
    def rows(self) -> list[QueryRow]:
        return list(self._rows)

    def row(self, i: int) -> QueryRow:
        return self._rows[i]

    def row_index(self, uid: int) -> int:
        """Position of the row with ``uid``, or -1 when it was removed."""
        for i, row in enumerate(self._rows):
            if row.uid == uid:
                return i
        return -1

    def row_by_uid(self, uid: int) -> QueryRow | None:
        i = self.row_index(uid)
        return self._rows[i] if i >= 0 else None

    def included_rows(self) -> list[QueryRow]:
        """Ticked rows with a query, in table order: exactly what Run executes."""
        return [r for r in self._rows if r.included and r.runnable]

    # --- editing ----------------------------------------------------------------------------------
    def add_row(self, row: QueryRow) -> QueryRow:
        if row.runnable and row.validity == UNCHECKED:
            row.validity = CHECKING
        n = len(self._rows)
        self.beginInsertRows(QModelIndex(), n, n)
        self._rows.append(row)
        self.endInsertRows()
        if row.runnable:
            self.query_edited.emit(row.uid)
        self.selection_changed.emit()
        return row

    def remove_rows(self, positions: list[int]) -> None:
        for i in sorted(set(positions), reverse=True):
            if 0 <= i < len(self._rows):
                self.beginRemoveRows(QModelIndex(), i, i)
                del self._rows[i]
                self.endRemoveRows()
        self.selection_changed.emit()

    def clear(self) -> None:
        self.beginResetModel()
        self._rows.clear()
        self.endResetModel()
        self.selection_changed.emit()

    def set_all_included(self, included: bool) -> None:
        """Tick all / none (rows without a query stay unticked)."""
        for row in self._rows:
            row.included = included and row.runnable
        self._changed_rows(0, len(self._rows) - 1, [self.COL_INCLUDE])
        self.selection_changed.emit()

    def set_query(self, i: int, text: str) -> None:
        """Replace the query text of row ``i``; marks it unchecked and forgets stats of the old text."""
        row = self._rows[i]
        if text == row.query:
            return
        row.query = text
        row.revision += 1
        row.normalized = None
        row.matches = None
        row.validity = CHECKING if text.strip() else UNCHECKED
        row.validity_message = ""
        row.returned = row.unique = row.run_time = None
        row.run_error = None
        row.ids, row.unique_ids = [], []
        self._changed_rows(i, i)
        self.query_edited.emit(row.uid)

    # --- results from workers ---------------------------------------------------------------------
    def mark_checking(self, uid: int, revision: int) -> None:
        i = self.row_index(uid)
        if i >= 0 and self._rows[i].revision == revision and self._rows[i].validity != CHECKING:
            self._rows[i].validity = CHECKING
            self._changed_rows(i, i, [self.COL_VALID])

    def set_validation(
        self,
        uid: int,
        revision: int,
        ok: bool | None,
        message: str,
        matches: int | None = None,
        exact: bool = True,
    ) -> bool:
        """Apply a validation (and count) result; False when stale (row edited or removed since).

        ``ok`` None means the check itself failed (e.g. database down); ``message`` says why.
        """
        i = self.row_index(uid)
        if i < 0 or self._rows[i].revision != revision:
            return False
        row = self._rows[i]
        if ok is None:
            row.validity, row.validity_message, row.normalized = FAILED, message, None
        elif ok:
            row.validity, row.validity_message, row.normalized = VALID, "", message
        else:
            row.validity, row.validity_message, row.normalized = INVALID, message, None
        row.matches = matches if ok else None
        row.matches_exact = exact
        self._changed_rows(i, i)
        return True

    def set_run_stats(
        self,
        uid: int,
        revision: int,
        *,
        ids: list[Any],
        unique_ids: list[Any],
        time_s: float | None,
        error: str | None,
        matches: int | None = None,
    ) -> bool:
        """Store one query's run statistics; False when the row changed since it ran."""
        i = self.row_index(uid)
        if i < 0 or self._rows[i].revision != revision:
            return False
        row = self._rows[i]
        row.ids, row.unique_ids = list(ids), list(unique_ids)
        row.returned = None if error else len(row.ids)
        row.unique = None if error else len(row.unique_ids)
        row.run_time, row.run_error = time_s, error
        if matches is not None:
            row.matches, row.matches_exact = matches, True
        self._changed_rows(i, i)
        return True

    def _changed_rows(self, first: int, last: int, columns: list[int] | None = None) -> None:
        if last < first or not self._rows:
            return
        if columns:
            left, right = min(columns), max(columns)
        else:
            left, right = 0, len(self.HEADERS) - 1
        self.dataChanged.emit(self.index(first, left), self.index(last, right))


def _is_checked(value: Any) -> bool:
    if isinstance(value, Qt.CheckState):
        return value == Qt.CheckState.Checked
    try:
        return int(value) == Qt.CheckState.Checked.value
    except (TypeError, ValueError):
        return bool(value)
