"""The literature panel's link to the search history and to screening.

A mixin of :class:`~kmds_desktop.ui.literature.panel.LiteraturePanel`: a run is recorded with the
one protocol of :mod:`kmds_desktop.app.strategy` (numbered on the worker that runs it, completed on
a worker once the session applied it, as ``literature search`` records it); the search history
window opens over the same workbench (its Re-run loads a search back into this panel and runs it:
:meth:`LiteratureRecords.rerun_saved_search`), and Screen these results opens a screening window on
the documents the panel shows, named as a source by the run's set in the history (``#12``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kmds_desktop.app import literature as app_lit
from kmds_desktop.app import strategy
from kmds_desktop.app.messages import user_message
from kmds_desktop.app.presentation import SearchHistory, SearchWorkbench, plural
from kmds_desktop.app.search_log import utc_now
from kmds_desktop.ui.jobs.runner import Job
from kmds_desktop.ui.literature.jobs import KINDS

if TYPE_CHECKING:
    from kmds_desktop.ui.literature.panel import LiteraturePanel


class LiteratureRecords:
    """The search history and screening of the literature panel (see the module docstring)."""

    def workbench(self: LiteraturePanel) -> Any:
        """The search history of the data folder with this panel's database (opened on first use)."""
        if self._workbench is None:
            self._workbench = SearchWorkbench(SearchHistory(), self.database)
        self._workbench.database = self.database
        return self._workbench

    def _history_or_none(self: LiteraturePanel) -> Any:
        """The workbench a run is numbered in, or None (with a warning) when the history cannot be
        opened: the search still runs, it is only not kept."""
        try:
            return self.workbench()
        except Exception as exc:  # noqa: BLE001 - the search itself can go on; say why it is not kept
            self.show_message(f"The run is not added to the search history: {user_message(exc)}", "warning")
            return None

    def _finish_record(self: LiteraturePanel, number: int | None, run: app_lit.RunRecord) -> Job | None:
        """Complete the set the run was numbered as, on a worker (:func:`strategy.finish_recording`,
        the CLI's call too)."""
        if number is None:
            return None
        # The screening source of these results is this set (see screen_results).
        self.recorded_run = (run, number)
        return self.jobs.submit(
            KINDS["record"], strategy.finish_recording, self.workbench(), number, run,
            label="Saving the run in the search history", policy="queue", busy_cursor=False,
            on_result=self._recorded,
            on_error=lambda exc: self.show_message(
                f"The run was not added to the search history: {user_message(exc)}", "warning"),
        )

    def _recorded(self: LiteraturePanel, saved: Any) -> None:
        self.last_recorded = saved.number
        if self.progress_label.text().startswith("Search finished"):  # nothing newer to keep on screen
            self._set_progress(f"Search finished: {plural(saved.document_count or 0, 'document')}, saved as "
                               f"#{saved.number} in the search history.")
        self.history_recorded.emit(saved.number)
        if self.history_dialog is not None:
            self.history_dialog.refresh(select=saved.number)

    def open_history(self: LiteraturePanel) -> Any:
        """Show the search history window (one per panel, non-modal)."""
        # Imported here: the history window is built on first use, not with the main window.
        from kmds_desktop.ui.literature.search_history import SearchHistoryDialog

        if self.history_dialog is None:
            try:
                workbench = self.workbench()
            except Exception as exc:  # noqa: BLE001 - e.g. a history file that is not a database
                self.show_message(user_message(exc))
                return None
            self.history_dialog = SearchHistoryDialog(workbench, self.jobs, self,
                                                      database=lambda: self.database,
                                                      known=self.session.known_papers,
                                                      run_search=self.rerun_saved_search)
        else:
            self.history_dialog.refresh()
        self.history_dialog.show()
        self.history_dialog.raise_()
        return self.history_dialog

    def rerun_saved_search(self: LiteraturePanel, search: strategy.SavedSearch) -> Job | None:
        """The history's Re-run: put ``search`` back in the review table (its question, its rows
        ticked; unsaved rows of the user's kept, unticked) and run it. None when it cannot run now
        (the message says why)."""
        if self._busy():
            self.show_message("Wait for the running search, import or generation to finish, or cancel it; "
                              f"then re-run {search.title} again.", "warning")
            return None
        self._check_timer.stop()
        self.results.clear()
        self.review.beginResetModel()
        try:
            loaded = strategy.load_saved_search(self.session, search)
        finally:
            self.review.endResetModel()
        if search.question:  # a search of hand-written rows alone has none: the bar keeps its text
            self.question.setText(search.question)
        self.documents_changed.emit(0)
        self._set_progress(loaded.line())
        self._update_buttons()
        return self.run_selected()

    def screen_results(self: LiteraturePanel, store_path: str | Path | None = None) -> Any:
        """Open a screening window on the documents the panel shows (the question's review)."""
        # Imported here: the screening session loads scikit-learn, which the window's start need not wait for.
        from kmds_desktop.ui.screening_view import open_screening

        run = self.session.last_run
        if not self.session.documents:
            self.show_message("There is nothing to screen: run the ticked queries first.", "warning")
            return None
        recorded = self.recorded_run
        number = recorded[1] if recorded is not None and recorded[0] is run else None
        question = self.session.question or (run.plan.question if run is not None else "") \
            or self.question.text().strip()
        self.screening_window = open_screening(
            self, self.jobs, self.session.documents, question=question,
            origin=strategy.screening_origin(run, number, utc_now()), store_path=store_path,
            database=self.database, encoder=self.session.encoder)  # vectors join the order's features
        return self.screening_window
