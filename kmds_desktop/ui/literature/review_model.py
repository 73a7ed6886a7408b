"""The query-review table: a Qt view of the rows a :class:`LiteratureSession` holds.

The rows, their provenance and every rule about them (what generating again replaces, what an edit
resets, which answers are stale) live in :mod:`kmds_desktop.app.literature`; this model only shows
them and turns Qt edits into session operations, announcing each change to the view. Validation and
counting answers come back tagged with (uid, revision) and the session drops stale ones.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import (
    QAbstractItemModel,
    QEvent,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
    Signal,
)
from PySide6.QtGui import QBrush, QColor, QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemDelegate,
    QLineEdit,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from kmds_desktop.app.literature import (
    CHECKING,
    FAILED,
    HAND_WRITTEN,
    INVALID,
    UNCHECKED,
    VALID,
    CheckResult,
    HypotheticalAttempt,
    LiteratureSession,
    QueryGenerationResult,
    QueryRow,
    RetrievalRows,
)
from kmds_desktop.ui.literature.table_model import AnyIndex, HeaderedTableModel

__all__ = ["CHECKING", "FAILED", "HAND_WRITTEN", "INVALID", "UNCHECKED", "VALID", "LiveQueryDelegate",
           "QueryRow", "ReviewModel"]


class ReviewModel(HeaderedTableModel):
    """Table model over :class:`QueryRow` s (include, model, attempt, query, validity, matches, ...)."""

    COL_INCLUDE, COL_MODEL, COL_ATTEMPT, COL_QUERY, COL_VALID, COL_MATCHES = range(6)
    COL_RETURNED, COL_UNIQUE, COL_ERROR = range(6, 9)
    HEADERS = ("Run", "Model", "#", "Query", "Validity", "Matches", "IDs", "Unique", "Error")
    TOOLTIPS = (
        "Tick the queries to run",
        "Who wrote the query: a model, you (hand-written), or a model's query you edited; "
        "[semantic] and [hypothetical] mark rows searched by meaning",
        "Attempt number for this model",
        "The PostgreSQL tsquery, or for a semantic/hypothetical row the text searched by meaning; "
        "double-click to edit",
        "Checked against the database as you edit",
        "Documents matching in the database, counted before anything is fetched (~ = estimate)",
        "IDs this query returned in the last run",
        "IDs no other query found in the last run",
        "Why the query is invalid or could not run, or a note (e.g. a repeat)",
    )

    #: A row's query text changed or a row to check was added (uid). The session announces the same
    #: (``CHECKS_WANTED``); views that hold the session subscribe to it instead.
    query_edited = Signal(int)

    def __init__(self, session: LiteratureSession | None = None, parent: Any = None) -> None:
        super().__init__(parent)
        self.session = session if session is not None else LiteratureSession()

    @property
    def _rows(self) -> list[QueryRow]:
        return self.session.rows

    @property
    def selectable(self) -> bool:
        """False when ``query_generation.allow_query_selection`` is off: every query runs."""
        return self.session.selectable

    # --- Qt model API -----------------------------------------------------------------------------
    def row_total(self) -> int:
        return len(self._rows)

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
            if col == self.COL_VALID and row.weakness:
                return f"Valid, but weak: {row.weakness}."
            if col == self.COL_VALID and row.validity_message:
                return row.validity_message
            if col == self.COL_ERROR and self._error_text(row):
                return self._error_text(row)
            if col == self.COL_RETURNED and row.ranked_in_tier:
                return row.tier_note
            if col == self.COL_QUERY and row.query:
                why = f"\n\nWhy: {row.strategy_note}" if row.strategy_note else ""
                if row.original is not None:
                    return f"{row.query}\n\nEdited from the model's: {row.original}{why}"
                return row.query + why
            if col in (self.COL_MODEL, self.COL_ATTEMPT):
                made = row.describe_provenance()
                if row.generation_time is not None:
                    made += f"; written in {row.generation_time:.1f} s"
                return made
            return None
        if role == Qt.ItemDataRole.ForegroundRole:
            if col == self.COL_VALID and row.validity in (INVALID, FAILED):
                return QBrush(QColor("#b00020"))
            if col == self.COL_VALID and row.weakness:
                return QBrush(QColor("#9a5b00"))
            if col == self.COL_VALID and row.validity == VALID:
                return QBrush(QColor("#1b7a1b"))
            if col == self.COL_ERROR and (row.run_error or row.validity in (INVALID, FAILED)):
                return QBrush(QColor("#b00020"))
            if col == self.COL_MODEL and row.original is not None:
                return QBrush(QColor("#8a5a00"))
            return None
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (
            self.COL_ATTEMPT,
            self.COL_MATCHES,
            self.COL_RETURNED,
            self.COL_UNIQUE,
        ):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _display(self, row: QueryRow, col: int, edit: bool) -> Any:
        if col == self.COL_MODEL:
            return row.source_label
        if col == self.COL_ATTEMPT:
            return "" if row.attempt is None else str(row.attempt)
        if col == self.COL_QUERY:
            return row.query
        if col == self.COL_VALID:
            if row.weakness:
                return "⚠ valid, weak"
            return {
                UNCHECKED: "",
                CHECKING: "checking",
                VALID: "✓ valid",
                INVALID: "✗ invalid",
                FAILED: "? not checked",
            }[row.validity]
        if col == self.COL_MATCHES:
            if row.matches is None:
                return ""
            return f"{row.matches:,}" if row.matches_exact else f"~{row.matches:,}"
        if col == self.COL_RETURNED:
            if row.returned is None:
                return ""
            return f"{row.returned:,}" + (" (tier)" if row.ranked_in_tier else "")
        if col == self.COL_UNIQUE:
            return "" if row.unique is None else f"{row.unique:,}"
        if col == self.COL_ERROR:
            return self._error_text(row)
        return None

    @staticmethod
    def _error_text(row: QueryRow) -> str:
        if row.run_error:
            return row.run_error
        if row.validity in (INVALID, FAILED):
            return row.validity_message
        notes = [n for n in (row.weakness and f"Weak: {row.weakness}", row.note) if n]
        return "; ".join(notes)

    def setData(self, index: AnyIndex, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:  # noqa: N802
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return False
        row, col = self._rows[index.row()], index.column()
        if col == self.COL_INCLUDE and role == Qt.ItemDataRole.CheckStateRole:
            checked = _is_checked(value)
            if checked == row.included:
                return True
            if not self.session.set_included(row.uid, checked):
                return False
            self.dataChanged.emit(index, index, [Qt.ItemDataRole.CheckStateRole])
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

    def included_rows(self) -> list[QueryRow]:
        """Ticked rows with a query, in table order: exactly what Run executes."""
        return self.session.included_rows()

    # --- editing ----------------------------------------------------------------------------------
    def add_hand_written(self, text: str = "") -> QueryRow:
        """A query the user writes (empty: unticked, for editing in place)."""
        n = len(self._rows)
        self.beginInsertRows(QModelIndex(), n, n)
        row = self.session.add_hand_written(text)
        self.endInsertRows()
        self._announce_new(row)
        return row

    def add_semantic(self, text: str = "") -> QueryRow:
        """A semantic row: ``text`` (default: the question) searched by meaning on the document vectors."""
        n = len(self._rows)
        self.beginInsertRows(QModelIndex(), n, n)
        row = self.session.add_semantic(text)
        self.endInsertRows()
        self._announce_new(row)
        return row

    def begin_round(self, question: str, now: str) -> Any:
        """Start a generation round; the rows it replaces leave the table (see the session's rule)."""
        self.beginResetModel()
        try:
            rnd, _positions = self.session.start_round(question, now)
        finally:
            self.endResetModel()
        return rnd

    def new_search(self) -> int:
        """Clear every row for a new search (the session's rule); returns how many went."""
        self.beginResetModel()
        try:
            n = self.session.new_search()
        finally:
            self.endResetModel()
        return n

    def accept_attempt(self, result: QueryGenerationResult | RetrievalRows | HypotheticalAttempt,
                       ) -> QueryRow | None:
        """One item of the round (an attempt, the retrieval-rows plan, the hypothetical abstract); a row
        appears when it brought something to show."""
        row = self.session.consider(result)
        if row is None:
            # a proposal may have ticked an earlier row again, for this question: its tick and question
            self._changed_rows(0, len(self._rows) - 1)
            return None
        n = len(self._rows)
        self.beginInsertRows(QModelIndex(), n, n)
        self.session.append(row)
        self.endInsertRows()
        self._announce_new(row)
        return row

    def _announce_new(self, row: QueryRow) -> None:
        if row.validity == CHECKING:
            self.query_edited.emit(row.uid)

    def remove_rows(self, positions: list[int]) -> None:
        for i in sorted(set(positions), reverse=True):
            if 0 <= i < len(self._rows):
                self.beginRemoveRows(QModelIndex(), i, i)
                self.session.remove([self._rows[i].uid])
                self.endRemoveRows()

    def set_all_included(self, included: bool) -> None:
        """Tick all / none (rows without a query stay unticked)."""
        self.session.set_all_included(included)
        self._changed_rows(0, len(self._rows) - 1, [self.COL_INCLUDE])

    def set_query(self, i: int, text: str) -> None:
        """Replace the query text of row ``i`` (the session marks it edited and to be checked)."""
        row = self._rows[i]
        if not self.session.edit(row.uid, text):
            return
        self._changed_rows(i, i)
        self.query_edited.emit(row.uid)

    # --- results from workers ---------------------------------------------------------------------
    def apply_check(self, result: CheckResult) -> bool:
        """Apply a validation (and count) result; False when stale (row edited or removed since)."""
        if not self.session.apply_check(result):
            return False
        i = self.row_index(result.uid)
        self._changed_rows(i, i)
        return True

    def recheck_failed(self) -> list[int]:
        """Rows whose check failed go back to checking (the database answers again)."""
        uids = self.session.mark_failed_for_recheck()
        for uid in uids:
            i = self.row_index(uid)
            self._changed_rows(i, i, [self.COL_VALID, self.COL_ERROR])
        return uids

    def database_counted(self, documents: int | None, searchable: int | None,
                         exact: bool = True) -> list[int]:
        """The database's counts were read again (after an import or embedding): the rows' Matches
        follow (:meth:`~kmds_desktop.app.literature.LiteratureSession.database_counted`)."""
        uids = self.session.database_counted(documents, searchable, exact=exact)
        for uid in uids:
            i = self.row_index(uid)
            self._changed_rows(i, i, [self.COL_VALID, self.COL_MATCHES])
        return uids

    def refresh(self) -> None:
        """Every row may have changed (a run's statistics arrived)."""
        self._changed_rows(0, len(self._rows) - 1)

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


class LiveQueryDelegate(QStyledItemDelegate):
    """The Query cell's editor hands each keystroke to the model, so the row is checked while it is
    being typed (the panel's timer waits :data:`~kmds_desktop.app.literature.CHECK_DELAY_S` after the
    last key), not only once the cell is committed: the old "✓ valid" must not stand beside
    ``pseudomonas & (``. Escape puts back the text the cell had when the editor opened."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._targets: dict[int, tuple[QPersistentModelIndex, str]] = {}  # id(editor) -> (cell, text)

    def createEditor(self, parent: QWidget, option: QStyleOptionViewItem,  # noqa: N802 - Qt API
                     index: AnyIndex) -> QWidget:
        editor = super().createEditor(parent, option, index)
        if isinstance(editor, QLineEdit):
            target = QPersistentModelIndex(index)
            key = id(editor)
            self._targets[key] = (target, index.data(Qt.ItemDataRole.EditRole) or "")
            editor.destroyed.connect(lambda *_a: self._targets.pop(key, None))
            editor.textEdited.connect(lambda text: self._live(target, text))
        return editor

    def _live(self, index: QPersistentModelIndex, text: str) -> None:
        if index.isValid():
            index.model().setData(QModelIndex(index), text, Qt.ItemDataRole.EditRole)

    def setEditorData(self, editor: QWidget, index: AnyIndex) -> None:  # noqa: N802 - Qt API
        # The model echoes the live text back; rewriting the editor would move the cursor.
        if isinstance(editor, QLineEdit) and editor.text() == (index.data(Qt.ItemDataRole.EditRole) or ""):
            return
        super().setEditorData(editor, index)

    def setModelData(self, editor: QWidget, model: QAbstractItemModel,  # noqa: N802 - Qt API
                     index: AnyIndex) -> None:
        if isinstance(editor, QLineEdit) and editor.text() == (index.data(Qt.ItemDataRole.EditRole) or ""):
            return  # already handed over while typing
        super().setModelData(editor, model, index)

    def revert(self, editor: QWidget) -> None:
        """Escape: the text the cell had when editing began (the live edits are undone)."""
        target, original = self._targets.get(id(editor), (None, ""))
        if target is not None and target.isValid() and target.data(Qt.ItemDataRole.EditRole) != original:
            target.model().setData(QModelIndex(target), original, Qt.ItemDataRole.EditRole)

    def eventFilter(self, editor: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt API
        if (isinstance(editor, QLineEdit) and isinstance(event, QKeyEvent)
                and event.type() == QEvent.Type.KeyPress and event.key() == Qt.Key.Key_Escape):
            self.revert(editor)
            self.closeEditor.emit(editor, QAbstractItemDelegate.EndEditHint.RevertModelCache)
            return True
        return super().eventFilter(editor, event)
