"""The literature view's windows over what a search left: the search history and screening.

A part given the session and the window's job runner. The search history window opens over the
session's history (:meth:`~kmds_desktop.app.literature.LiteratureSession.history`, whose database the
session keeps current); its Re-run calls the ``run_search`` it was opened with.
Screen these results opens a screening window on the session's documents, named as a source by
the run's set in the history (``#12``). Windows are given the widget they belong to as ``owner``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from kmds_desktop.app import strategy
from kmds_desktop.app.literature import LiteratureSession
from kmds_desktop.app.messages import user_message
from kmds_desktop.app.search_log import utc_now
from kmds_desktop.ui.jobs.runner import JobRunner


class SearchRecords(QObject):
    """Opens the search history window and screening windows (see the module docstring)."""

    message = Signal(str, str)  # level, text

    def __init__(self, session: LiteratureSession, jobs: JobRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.jobs = jobs
        self.history_dialog: Any = None
        self.screening_window: Any = None

    def open_history(self, owner: QWidget, run_search: Callable[[strategy.SavedSearch], Any]) -> Any:
        """Show the search history window (one per view, non-modal); its Re-run calls ``run_search``
        (load the saved search into the review table and run it; None when it cannot run now)."""
        # why: start-up time: the history window is built on first use, not with the main window
        from kmds_desktop.ui.literature.search_history import SearchHistoryDialog

        if self.history_dialog is None:
            try:
                workbench = self.session.history()
            except Exception as exc:  # noqa: BLE001 - e.g. a history file that is not a database
                self.message.emit("error", user_message(exc))
                return None
            self.history_dialog = SearchHistoryDialog(workbench, self.jobs, owner,
                                                      known=self.session.known_papers,
                                                      run_search=run_search)
        else:
            self.history_dialog.refresh()
        self.history_dialog.show()
        self.history_dialog.raise_()
        return self.history_dialog

    def saved(self, number: int) -> None:
        """The history saved set ``number``: an open history window shows and selects it."""
        if self.history_dialog is not None:
            self.history_dialog.refresh(select=number)

    def screen_results(self, owner: QWidget, question: str, store_path: str | Path | None = None) -> Any:
        """Open a screening window on the session's documents (the question's review)."""
        # why: start-up time: the screening session loads scikit-learn; the window need not wait for it
        from kmds_desktop.ui.screening.opening import open_screening

        run = self.session.last_run
        if not self.session.documents:
            self.message.emit("warning", "There is nothing to screen: run the ticked queries first.")
            return None
        # the run's own question first: the documents are that run's, and a new question typed or
        # generated for since (not run yet) is not what they were found for
        question = (run.plan.question if run is not None else "") or self.session.question or question
        self.screening_window = open_screening(
            owner, self.jobs, self.session.documents, question=question,
            origin=strategy.screening_origin(run, self.session.recorded_number(), utc_now()),
            store_path=store_path, database=self.session.database,
            encoder=self.session.encoder)  # vectors join the order's features
        return self.screening_window
