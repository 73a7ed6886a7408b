"""The search history window: numbered sets, set algebra with a live count, known papers, the report.

It renders :class:`~kmds_desktop.literature.strategy.workbench.SearchWorkbench` (the same code as
``kmds-desktop literature history/combine/check/report``; the check, the overlap and the report are
the use-cases of :mod:`kmds_desktop.app.strategy`, shown by :mod:`~kmds_desktop.ui.literature.history_checks`)
and decides nothing of its own: every
operation, including listing and counting, runs on a worker of the window's :class:`JobRunner`, so
the GUI thread never waits on SQLite or PostgreSQL. The count follows the typing (debounced, only
the newest request kept); a bad expression shows its one-line error under the box, with the position.

*Re-run* loads the search back into the literature panel that opened the window (its question and
its rows, ticked, as they ran) and runs it there, so the results are where the user reads, exports
and screens them; the panel's run is saved as a new set. A window without a panel re-runs the set
in the history alone, as ``literature rerun`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.app.literature import KnownPapersInput
from kmds_desktop.app.messages import describe_error
from kmds_desktop.app.presentation import KnownCheck, SavedSet, SearchWorkbench, plural
from kmds_desktop.app.strategy import SavedSearch, human_datetime, search_of, set_actions
from kmds_desktop.ui.jobs.runner import JobRunner
from kmds_desktop.ui.literature.history_checks import KINDS, NO_DATABASE, SetChecks, simple_job

COUNT_DEBOUNCE_MS = 200
_KIND_LABEL = {"search": "search", "rerun": "re-run", "combination": "combination"}
_COLUMNS = ("Set", "Date", "Documents", "Kind", "Question or expression", "State")


def _list_sets(workbench: SearchWorkbench) -> list[SavedSet]:
    return workbench.history.list_sets()


def _count(workbench: SearchWorkbench, expression: str) -> Any:
    return workbench.count(expression)


def _combine(workbench: SearchWorkbench, expression: str, name: str) -> SavedSet:
    return workbench.combine(expression, name=name)


class SearchHistoryDialog(QDialog):
    """Non-modal window over the search history of one data folder."""

    #: A new set was saved (its number): the literature panel may want to show it.
    set_saved = Signal(int)

    def __init__(self, workbench: SearchWorkbench, jobs: JobRunner, parent: QWidget | None = None, *,
                 known: KnownPapersInput | None = None,
                 run_search: Callable[[SavedSearch], Any] | None = None) -> None:
        """``known``: where the known-papers box keeps its text (the literature session's, so it
        outlives this window); a window of its own when not given. ``run_search``: the literature
        panel's "load this search into the review table and run it" (Re-run uses it when given)."""
        super().__init__(parent)
        self.known = known if known is not None else KnownPapersInput()
        self.setWindowTitle("Search history")
        self.workbench = workbench
        self.jobs = jobs
        self._run_search = run_search
        self.sets: list[SavedSet] = []
        self.last_count: Any = None
        self._has_message = False

        self.table = QTableWidget(0, len(_COLUMNS))
        self.table.setHorizontalHeaderLabels(list(_COLUMNS))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        for col in range(len(_COLUMNS)):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(4, QHeaderView.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.table.itemSelectionChanged.connect(self._selection_changed)

        self.rename_button = QPushButton("Rename…")
        self.rerun_button = QPushButton("Re-run on today's database")
        self.delete_button = QPushButton("Delete")
        self.refresh_button = QPushButton("Refresh")
        self.rename_button.clicked.connect(lambda _checked=False: self.rename_selected())
        self.rerun_button.clicked.connect(lambda _checked=False: self.rerun_selected())
        self.delete_button.clicked.connect(lambda _checked=False: self.delete_selected())
        self.refresh_button.clicked.connect(lambda _checked=False: self.refresh())
        actions = QHBoxLayout()
        for button in (self.rename_button, self.rerun_button, self.delete_button):
            actions.addWidget(button)
        actions.addStretch(1)
        actions.addWidget(self.refresh_button)

        self.expression = QLineEdit()
        self.expression.setPlaceholderText("#1 AND (#2 OR #3) NOT #4")
        self.expression.setToolTip("#N is a set, #N.K row K of search N. AND and NOT bind tighter than OR; "
                                   "NOT keeps what is in the left set and not in the right one.")
        self.count_label = QLabel("Type an expression over the sets above.")
        self.count_label.setWordWrap(True)
        self.count_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.combine_button = QPushButton("Save as a new set")
        self.combine_button.setEnabled(False)
        self.combine_button.clicked.connect(lambda _checked=False: self.combine())
        self._count_timer = QTimer(self)
        self._count_timer.setSingleShot(True)
        self._count_timer.setInterval(COUNT_DEBOUNCE_MS)
        self._count_timer.timeout.connect(self._submit_count)
        self.expression.textChanged.connect(self._expression_changed)
        self.expression.returnPressed.connect(self.combine)
        algebra = QGroupBox("Combine sets")
        algebra_layout = QVBoxLayout(algebra)
        line = QHBoxLayout()
        line.addWidget(self.expression, 1)
        line.addWidget(self.combine_button)
        algebra_layout.addLayout(line)
        algebra_layout.addWidget(self.count_label)

        known = self.checks = SetChecks(workbench, jobs, self.known)
        self.checks.status.connect(self._set_status)
        self.known_edit, self.check_view = known.known_edit, known.check_view
        self.check_button, self.load_known_button = known.check_button, known.load_known_button
        self.check_button.clicked.connect(lambda _checked=False: self.check_known())

        self.overlap_button = QPushButton("Row overlap")
        self.overlap_button.setToolTip("Documents the rows share, each row's unique ones, and per model the "
                                       "documents no other model's rows found")
        self.overlap_button.clicked.connect(lambda _checked=False: self.show_overlap())
        self.documents_button = QPushButton("Export documents…")
        self.documents_button.setToolTip("The set's documents, best rank first, as RIS, BibTeX or CSV")
        self.documents_button.clicked.connect(lambda _checked=False: self.export_documents())
        self.export_button = QPushButton("Export report…")
        self.export_button.clicked.connect(lambda _checked=False: self.export_report())
        self.status = QLabel("")
        self.status.setWordWrap(True)
        bottom = QHBoxLayout()
        bottom.addWidget(self.status, 1)
        bottom.addWidget(self.overlap_button)
        bottom.addWidget(self.documents_button)
        bottom.addWidget(self.export_button)

        top = QWidget()
        top_layout = QVBoxLayout(top)
        top_layout.setContentsMargins(0, 0, 0, 0)
        top_layout.addWidget(self.table, 1)
        top_layout.addLayout(actions)
        top_layout.addWidget(algebra)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(top)
        splitter.addWidget(known)
        layout = QVBoxLayout(self)
        layout.addWidget(splitter, 1)
        layout.addLayout(bottom)
        self.resize(1000, 760)
        self._update_buttons()
        self.refresh()

    # --- the selected set's checks (the lower half, :class:`SetChecks`) ----------------------------
    def check_known(self) -> Any:
        saved = self._selected()
        return self.checks.check_known(saved.number) if saved is not None else None

    def show_overlap(self) -> Any:
        saved = self._selected()
        return self.checks.show_overlap(saved.number) if saved is not None else None

    def export_documents(self, path: str | None = None) -> Any:
        saved = self._selected()
        return self.checks.export_documents(saved.number, path) if saved is not None else None

    def export_report(self, path: str | None = None) -> Any:
        saved = self._selected()
        return self.checks.export_report(saved.number, path) if saved is not None else None

    @property
    def last_check(self) -> KnownCheck | None:
        return self.checks.last_check

    @property
    def last_report(self) -> Path | None:
        return self.checks.last_report

    @property
    def last_documents(self) -> Path | None:
        return self.checks.last_documents

    @property
    def overlap_markdown(self) -> str:
        return self.checks.overlap_markdown

    # --- state ------------------------------------------------------------------------------------
    def selected_number(self) -> int | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        item = self.table.item(rows[0].row(), 0)
        return int(item.data(Qt.ItemDataRole.UserRole)) if item is not None else None

    def select_set(self, number: int) -> None:
        for row in range(self.table.rowCount()):
            item = self.table.item(row, 0)
            if item is not None and item.data(Qt.ItemDataRole.UserRole) == number:
                self.table.selectRow(row)
                return

    def _selected(self) -> SavedSet | None:
        number = self.selected_number()
        return next((s for s in self.sets if s.number == number), None)

    def _update_buttons(self) -> None:
        """Enable what :func:`~kmds_desktop.app.strategy.set_actions` allows for the selected set."""
        allowed = set_actions(self._selected())
        self.rename_button.setEnabled(allowed.rename)
        self.delete_button.setEnabled(allowed.delete)
        self.rerun_button.setEnabled(allowed.rerun)
        self.check_button.setEnabled(allowed.check)
        self.export_button.setEnabled(allowed.report)
        self.overlap_button.setEnabled(allowed.overlap)
        self.documents_button.setEnabled(allowed.export_documents)

    def _selection_changed(self) -> None:
        """Another set selected: a check or overlap of the previous one goes, with its status line
        (reopened after a new search, the window showed #2 selected under "Rows of #1")."""
        if not self.checks.clear_result(self.selected_number()):
            return
        self._has_message = False
        self._set_status(self._list_status(), message=False)

    def _list_status(self) -> str:
        return (f"{plural(len(self.sets), 'set')} in the search history" if self.sets else
                "The search history is empty: every search you run is added here.")

    def _set_status(self, text: str, *, message: bool = True) -> None:
        """Show ``text``; a list refresh (``message=False``) never hides the result of an action."""
        if not message and self._has_message:
            return
        self._has_message = message
        self.status.setText(text)

    def _failed(self, what: str) -> Callable[[BaseException], None]:
        def show(exc: BaseException) -> None:
            self._set_status(f"{what}: {describe_error(exc)}")

        return show

    # --- the list ---------------------------------------------------------------------------------
    def refresh(self, select: int | None = None) -> Any:
        """Read the history again (on a worker) and show it; ``select`` a set afterwards."""
        keep = select if select is not None else self.selected_number()
        return self.jobs.submit(KINDS["list"], simple_job(_list_sets), self.workbench, policy="latest",
                                label="Reading the search history", busy_cursor=False,
                                on_result=lambda sets: self._show_sets(sets, keep),
                                on_error=self._failed("The search history cannot be read"))

    def _show_sets(self, sets: list[SavedSet], select: int | None) -> None:
        self.sets = list(sets)
        self.table.setRowCount(len(sets))
        for row, s in enumerate(sets):
            values = (f"#{s.number}", human_datetime(s.finished_at or s.started_at),
                      "" if s.document_count is None else f"{s.document_count:,}",
                      _KIND_LABEL.get(s.kind, s.kind),
                      s.title if not s.name else f"{s.name} — {s.question or s.expression}", s.state)
            for col, value in enumerate(values):
                item = QTableWidgetItem(value)
                if col == 0:
                    item.setData(Qt.ItemDataRole.UserRole, s.number)
                if col == 4:
                    rows = [f"#{s.number}.{r.position}: {r.text}  ({r.summary()})" for r in s.rows]
                    coverage = s.coverage_text()
                    item.setToolTip("\n".join([s.question or s.expression or "", *rows,
                                               *([coverage[:1].upper() + coverage[1:]] if coverage else [])]))
                self.table.setItem(row, col, item)
        if select is not None:
            self.select_set(select)
        elif sets:
            self.table.selectRow(len(sets) - 1)
        self._update_buttons()
        self._set_status(self._list_status(), message=False)

    # --- set algebra ------------------------------------------------------------------------------
    def _expression_changed(self, _text: str) -> None:
        self.combine_button.setEnabled(False)
        self.last_count = None
        self._count_timer.start()

    def _submit_count(self) -> Any:
        text = self.expression.text()
        if not text.strip():
            self.count_label.setText("Type an expression over the sets above.")
            return None
        return self.jobs.submit(KINDS["count"], simple_job(_count), self.workbench, text, policy="latest",
                                label="Counting", busy_cursor=False,
                                on_result=lambda c, text=text: self._show_count(text, c),
                                on_error=lambda exc, text=text: self._show_count_error(text, exc))

    def _show_count(self, text: str, count: Any) -> None:
        if text != self.expression.text():
            return  # the user typed on; a newer count is coming
        self.last_count = count
        self.count_label.setStyleSheet("")
        self.count_label.setText(f"{plural(count.count, 'document')}  —  read as {count.canonical}")
        self.combine_button.setEnabled(True)

    def _show_count_error(self, text: str, exc: BaseException) -> None:
        if text != self.expression.text():
            return
        self.last_count = None
        self.count_label.setStyleSheet("color: #b00020;")
        self.count_label.setText(str(exc))
        self.combine_button.setEnabled(False)

    def combine(self) -> Any:
        """Save the expression's result as a new set (after the count showed it is valid)."""
        text = self.expression.text()
        if self.last_count is None:
            self._count_timer.stop()
            self._submit_count()
            return None
        return self.jobs.submit(KINDS["combine"], simple_job(_combine), self.workbench, text, "",
                                policy="queue", label="Saving the combination", on_result=self._combined,
                                on_error=self._failed("The sets cannot be combined"))

    def _combined(self, saved: SavedSet) -> None:
        self._set_status(f"Saved #{saved.number}: {plural(saved.document_count or 0, 'document')} "
                         f"({saved.expression})")
        self.set_saved.emit(saved.number)
        self.refresh(select=saved.number)

    # --- editing ----------------------------------------------------------------------------------
    def rename_selected(self, name: str | None = None) -> Any:
        saved = self._selected()
        if saved is None:
            return None
        if name is None:
            name, ok = QInputDialog.getText(self, "Rename set", f"Name of #{saved.number}:", text=saved.name)
            if not ok:
                return None
        number = saved.number
        return self.jobs.submit(KINDS["combine"], simple_job(self.workbench.history.rename), number, name,
                                policy="queue", label="Renaming", busy_cursor=False,
                                on_result=lambda _s: self.refresh(select=number),
                                on_error=self._failed("The set cannot be renamed"))

    def delete_selected(self, confirm: bool = True) -> Any:
        saved = self._selected()
        if saved is None:
            return None
        if confirm:
            answer = QMessageBox.question(self, "Delete set", f"Delete #{saved.number} from the search "
                                          "history? Combinations made from it keep their documents.")
            if answer != QMessageBox.StandardButton.Yes:
                return None
        number = saved.number
        return self.jobs.submit(KINDS["combine"], simple_job(self.workbench.history.delete), number,
                                policy="queue", label="Deleting", busy_cursor=False,
                                on_result=lambda _r: (self._set_status(f"Deleted #{number}"), self.refresh()),
                                on_error=self._failed("The set cannot be deleted"))

    def rerun_selected(self) -> Any:
        """Re-run the selected search: in the literature panel (loaded into its review table and run
        there) when the window has one, else in the history alone."""
        saved = self._selected()
        if saved is None:
            return None
        if self._run_search is not None:
            try:
                search = search_of(saved)
            except Exception as exc:  # noqa: BLE001 - e.g. a combination: the status says what to do
                self._set_status(f"The re-run failed: {describe_error(exc)}")
                return None
            started = self._run_search(search)
            self._set_status(f"{search.title} loaded into the literature panel and "
                             + ("running there; the run is saved as a new set when it finishes."
                                if started is not None else "not run: the panel says why."))
            return started
        if self.workbench.database is None:  # the literature session keeps it current
            self._set_status(NO_DATABASE)
            return None
        return self.jobs.submit(KINDS["rerun"], _rerun, self.workbench, saved.number, policy="refuse",
                                label=f"Re-running #{saved.number}", on_result=self._rerun_done,
                                on_error=self._failed("The re-run failed"))

    def _rerun_done(self, result: Any) -> None:
        self._set_status(f"#{result.new.number}: re-run of #{result.original.number}: "
                         f"{plural(result.new.document_count or 0, 'document')} "
                         f"(was {result.original.document_count:,}), "
                         f"{len(result.added)} added, {len(result.removed)} removed")
        self.set_saved.emit(result.new.number)
        self.refresh(select=result.new.number)


def _rerun(workbench: SearchWorkbench, number: int, *, progress: Any = None, cancel: Any = None) -> Any:
    return workbench.rerun(number, cancel=cancel)
