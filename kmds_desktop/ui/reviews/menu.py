"""The window's reviews: File → New / Open / Recent reviews / Update / Rename / Delete / Export / Import /
Merge, and the window reopening where the user left the review.

Why a part of its own, composed by the main window (not a mixin): it needs only the window's job runner,
message bar and literature panel, and everything it does is a call into
:mod:`kmds_desktop.app.review_resume` / :mod:`kmds_desktop.app.reviews` on a worker. The open review is
shown in two places: its search (question, rows, documents) in the literature panel and its screening in
a :class:`~kmds_desktop.ui.screening.window.ScreeningWindow`. Where the user is (the review, its search, the
record on screen) is written to the data folder on each change and when the window closes, and read back
on start (:meth:`ReviewMenu.restore`).

A change of the literature database (an import, a withdrawal, or a start after either elsewhere) is
noticed by :class:`~kmds_desktop.ui.reviews.watch.DatabaseWatch`; the reviews' strategies are then checked
on a worker and :class:`~kmds_desktop.ui.reviews.dialogs.NewRecordsBar` says "2 reviews have 14 new
records — Update". An update's new records are screened alone under
:class:`~kmds_desktop.ui.reviews.dialogs.OnlyNewBadge` ("Update 2: 14 new records only", "Show all").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QMessageBox, QWidget

from kmds_desktop.app import last_folders, strategy
from kmds_desktop.app import review_resume as resume
from kmds_desktop.app import screening as screening_events
from kmds_desktop.app.events import Change
from kmds_desktop.app.presentation import plural
from kmds_desktop.app.screening_start import close_session
from kmds_desktop.ui.reviews.dialogs import (
    NameDialog,
    NewRecordsBar,
    OnlyNewBadge,
    ReportDialog,
    ReviewPicker,
)
from kmds_desktop.ui.reviews.report import ReviewReports
from kmds_desktop.ui.reviews.watch import DatabaseWatch
from kmds_desktop.ui.shell import file_dialogs

REVIEW_FILTER = "KMDS review files (*.kmds-review.json *.json);;All files (*)"
#: The job kinds of this part: one review command at a time; opening waits behind it.
KIND, OPEN_KIND = "reviews", "reviews.open"


class _Relay(QObject):
    """Brings a screening session's events to the GUI thread (training announces from its thread)."""

    arrived = Signal(object)  # a Change


class ReviewMenu(QObject):
    """The reviews of the window (see the module docstring)."""

    #: A review was opened and is on screen (its id): tests and the title may follow it.
    review_opened = Signal(str)

    def __init__(self, parent: QWidget, jobs: Any, messages: Any, panel: Any) -> None:
        super().__init__(parent)
        self.window = parent
        self.jobs = jobs
        self.messages = messages
        self.panel = panel
        self.place = resume.read_place()
        self.screening_window: Any = None
        self.dialog: Any = None  #: the dialog open now (a name, the review list, a confirmation)
        self.new_records_bar = NewRecordsBar(parent)
        self.new_records_bar.update_requested.connect(self.update_review)
        self._relay = _Relay(self)
        self._relay.arrived.connect(self._session_event)
        self._unsubscribe: Callable[[], None] | None = None
        self.actions: dict[str, QAction] = {}
        self.recent_menu: QMenu | None = None
        self.only_badge: OnlyNewBadge | None = None  #: over the screening while an update is shown alone
        self.watch = DatabaseWatch(self)
        self.reports = ReviewReports(parent, jobs, messages, kind=KIND)

    # -- the menu ----------------------------------------------------------------------------------------
    def fill_menu(self, menu: QMenu) -> None:
        """Add the review entries to ``menu`` (the File menu)."""
        def add(name: str, text: str, slot: Callable[[], Any], tip: str) -> QAction:
            action = menu.addAction(text)
            action.setObjectName(f"review:{name}")
            action.setToolTip(tip)
            action.triggered.connect(lambda _checked=False: slot())
            self.actions[name] = action
            return action

        add("new", "&New review…", self.new_review,
            "A review of the search the literature panel shows (or an empty one): its question, strategy, "
            "screening and PRISMA flow")
        add("open", "Open re&view…", self.open_review_dialog, "Reopen a review: its search, results and "
            "screening where you left them")
        self.recent_menu = menu.addMenu("Re&cent reviews")
        self.recent_menu.setObjectName("review:recent")
        add("update", "&Update review", self.update_review,
            "Re-run the review's saved search on the database as it is now and screen only the new records")
        add("strategy", "Use this searc&h as the strategy", self.use_panel_search,
            "The search the literature panel shows becomes the open review's strategy: the next Update runs "
            "it, and the report logs the edit")
        add("report", "Review re&port…", self.show_report,
            "What happened in each round: the strategy it ran, the counts, the PRISMA 2020 flow per round")
        add("rename", "Rena&me review…", self.rename_review, "Give the open review another name (another "
            "review: Open review…, choose it, Rename…)")
        add("delete", "&Delete review…", self.delete_review, "Delete the open review and its decisions")
        add("export", "E&xport review…", self.export_review,
            "Write the open review to one file: to archive it, or to hand it to a second screener")
        add("import", "Import revie&w…", self.import_review, "Read a review file back (a name in use gets a "
            "new name)")
        add("merge", "Merge second screener's decisions…", self.merge_review,
            "Merge the review file a second screener returned: their decisions are kept beside yours")
        menu.aboutToShow.connect(self.update_actions)
        self.update_actions()

    def update_actions(self) -> None:
        """Entries on the open review are enabled only while one is open; Recent lists the last 8."""
        has = bool(self.place.review)
        for name in ("update", "strategy", "report", "rename", "delete", "export", "merge"):
            action = self.actions.get(name)
            if action is not None:
                action.setEnabled(has)
                if has:
                    action.setStatusTip(f"Review: {self.place.review}")
        if self.recent_menu is None:
            return
        self.recent_menu.clear()
        for review in self.place.recent:
            action = self.recent_menu.addAction(review)
            action.triggered.connect(lambda _c=False, r=review: self.open(r))
        if not self.place.recent:
            self.recent_menu.addAction("(none yet)").setEnabled(False)

    # -- the place ---------------------------------------------------------------------------------------
    def save_place(self) -> None:
        problem = resume.write_place(self.place)
        if problem:
            self.messages.show_message(problem, "warning", topic=KIND)

    def _session_event(self, change: Change) -> None:
        window = self.screening_window
        session = window.session if window is not None else None
        if session is None or change.kind not in (screening_events.RECORD_SHOWN, screening_events.DECIDED):
            return
        current = session.current
        if current is None and session.only is not None:
            # The update's new records are all screened: the rest of the queue (earlier records not
            # screened yet) follows, as the whole review's screening.
            self.show_all("The update's new records are screened; the review's other unscreened records "
                          "follow.")
            current = session.current
        key = current.key if current is not None else None
        if key != self.place.record:
            self.place.record = key
            self.save_place()

    def show_all(self, why: str = "Every unscreened record of the review is in the queue again.") -> None:
        """The queue offers every unscreened record again (the badge's Show all, or the update's new
        records are all screened); the next start opens the whole queue too."""
        window = self.screening_window
        if window is not None and window.session is not None and window.session.only is not None:
            window.session.show_only(None)
        self.place.only_round = None
        self.save_place()
        if self.only_badge is not None:
            self.only_badge.setVisible(False)
            self.only_badge.deleteLater()
            self.only_badge = None
        self.messages.show_message(why, "info", topic=KIND)

    def window_closing(self) -> None:
        """The main window closes: the place is written and the screening window closed with it."""
        window = self.screening_window
        if window is not None and window.session is not None and window.session.current is not None:
            self.place.record = window.session.current.key
        self.save_place()
        if window is not None:
            self._detach()
            session, window.session = window.session, None
            window.close()
            self.screening_window = None
            if session is not None:  # the app is quitting: the job runner stops next, so close it here
                close_session(session)

    def restore(self) -> None:
        """Reopen the review the user left, at the record that was on screen (start-up)."""
        if self.place.review:
            self.open(self.place.review, search_set=self.place.search_set, record=self.place.record,
                      only_round=self.place.only_round, restoring=True)

    # -- opening -----------------------------------------------------------------------------------------
    def _with_database(self, then: Callable[[Any], None]) -> None:
        """``then(database)``; ``then(None)`` when the literature database cannot be opened (a review
        still opens; only its search is not shown)."""
        if self.panel.database is not None:
            then(self.panel.database)
            return
        self.panel.link.with_database(then, lambda _exc: then(None))  # the panel's database step, shared

    def open(self, name: str, *, search_set: int | None = None, record: Any = None,
             only_round: int | None = None, restoring: bool = False) -> None:
        """Open review ``name``: its screening (back at ``record``) and its search in the panel."""
        def start(database: Any) -> None:
            job = self.jobs.submit(
                OPEN_KIND, resume.open_review, name, database=database, search_set=search_set, record=record,
                only_round=only_round, pass_progress=False, label=f"Opening review {name}", policy="queue",
                on_result=lambda opened: self._opened(opened, restoring),
                on_error=lambda exc: self._open_failed(name, exc, restoring))
            self.open_job = job

        self._with_database(start)

    def _open_failed(self, name: str, exc: BaseException, restoring: bool) -> None:
        if restoring:  # the review was deleted elsewhere, or its file is unreadable: start without it
            self.place.deleted(name)
            self.save_place()
            self.update_actions()
        self.messages.show_exception(exc, f"Review {name} could not be opened")

    def _opened(self, opened: resume.OpenedReview, restoring: bool) -> None:
        if self.screening_window is not None:
            self._detach()
            self.screening_window.close()
        from kmds_desktop.ui.screening.window import ScreeningWindow

        session = opened.session
        window = ScreeningWindow(session, jobs=self.jobs, parent=self.window,
                                 encoder=getattr(self.panel.session, "encoder", None))
        window.installEventFilter(self)
        self.screening_window = window
        self._unsubscribe = session.subscribe(self._relay.arrived.emit)
        search_number = opened.search.number if opened.search is not None else None
        self.place.opened(opened.review, search_number)
        self.place.only_round = opened.only_round
        self.place.record = session.current.key if session.current is not None else None
        self.save_place()
        self.update_actions()
        self._show_search(opened)
        if opened.only_round and opened.only_keys:
            self.only_badge = OnlyNewBadge(opened.only_round, len(opened.only_keys), window)
            self.only_badge.show_all.connect(lambda: self.show_all())
            window.layout().insertWidget(0, self.only_badge)
        else:
            self.only_badge = None
        window.show()
        where = "reopened where you left it" if restoring else "opened"
        only = (f"; showing only the {plural(len(opened.only_keys or ()), 'new record')} of update "
                f"{opened.only_round}" if opened.only_round else "")
        note = f" (its search is not shown: {opened.note})" if opened.note else ""
        self.messages.show_message(f"Review {opened.review} {where}: {session.progress().line()}{only}{note}",
                                   "info", topic=KIND)
        self.review_opened.emit(opened.review)

    def _show_search(self, opened: resume.OpenedReview) -> None:
        """The review's search back in the literature panel: question, rows as they ran, documents."""
        search, panel = opened.search, self.panel
        if search is None:
            return
        if panel._busy():  # noqa: SLF001 - the panel's own state
            panel.show_message(f"The review's search {search.title} is not shown: a search or import is "
                               "running in the panel", "warning")
            return
        panel.results.clear()
        panel.review.beginResetModel()
        try:
            loaded = strategy.load_saved_search(panel.session, search)
        finally:
            panel.review.endResetModel()
        if search.question:
            panel.question.setText(search.question)
        panel.session.documents = list(opened.documents)
        # "Screen these results" names these documents by their set, as the review's source does.
        panel.session.recorded_run = (panel.session.last_run, search.number)
        panel.results.show_documents(panel.session.documents,
                                     f"{len(opened.documents):,} documents of search {search.title}")
        panel.documents_changed.emit(panel.documents.rowCount())
        panel._set_progress(loaded.line())  # noqa: SLF001 - the panel's own progress
        panel._update_buttons()  # noqa: SLF001 - the panel's own buttons

    def _detach(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt API
        """The screening window closing: its session closes, so stop listening (the place stays: the
        review reopens there on the next start)."""
        if watched is self.screening_window and event.type() == QEvent.Type.Close:
            window = self.screening_window
            if window.session is not None and window.session.current is not None:
                self.place.record = window.session.current.key
                self.save_place()
            self._detach()
        return False

    # -- the commands ------------------------------------------------------------------------------------
    def _submit(self, fn: Callable[..., Any], *args: Any, label: str, done: Callable[[Any], None],
                failed: str, **kwargs: Any) -> Any:
        return self.reports.submit(fn, *args, label=label, done=done, failed=failed, **kwargs)

    def _show_dialog(self, dialog: Any) -> Any:
        self.dialog = dialog
        dialog.finished.connect(lambda _r: setattr(self, "dialog", None) if self.dialog is dialog else None)
        dialog.open()
        return dialog

    def new_review(self) -> NameDialog:
        """New review…: named by the user; made from the search the panel shows when there is one."""
        recorded = self.panel.session.recorded_run
        number = recorded[1] if recorded is not None and self.panel.session.documents else None
        question = self.panel.session.question or self.panel.question.text().strip()
        what = (f"Its strategy and first records: search #{number} in the literature panel."
                if number is not None else "An empty review: add records with Screen these results.")
        dialog = NameDialog("New review", f"Name of the new review. {what}", question[:60], self.window)
        dialog.setObjectName("newReviewDialog")
        dialog.named.connect(lambda name: self._make(name, question, number))
        return self._show_dialog(dialog)

    def _make(self, name: str, question: str, number: int | None) -> None:
        def start(database: Any) -> None:
            self._submit(resume.new_review, name, question,
                         search_set=number if database is not None else None, database=database,
                         label=f"Making review {name}",
                         done=lambda review: self.open(review, search_set=number),
                         failed=f"Review {name} could not be made")

        if number is None:
            start(None)
        else:
            self._with_database(start)

    def open_review_dialog(self) -> ReviewPicker:
        picker = ReviewPicker(self.window)
        picker.chosen.connect(lambda review: self.open(review))
        picker.rename_chosen.connect(lambda review: self.rename_review(review))
        picker.delete_chosen.connect(lambda review: self.delete_review(review))
        picker.export_chosen.connect(lambda review: self.export_review(name=review))
        def listed(choices: list[resume.ReviewChoice]) -> None:
            with contextlib.suppress(RuntimeError):  # the list was closed before the reviews were read
                picker.show_reviews(choices)
                picker.select(self.place.review)
            self.place.keep_only(c.id for c in choices)  # reviews deleted elsewhere leave Recent
            self.update_actions()

        self._submit(resume.review_choices, label="Reading the reviews", done=listed,
                     failed="The reviews could not be read")
        return self._show_dialog(picker)

    def show_report(self) -> ReportDialog | None:
        """Review report…: the open review's rounds and PRISMA flow per round, read on a worker."""
        if not self.place.review:
            return None
        return self._show_dialog(self.reports.open(self.place.review))

    def rename_review(self, name: str = "") -> NameDialog | None:
        """Rename… the open review, or ``name`` (chosen in the review list)."""
        old = name or self.place.review
        if not old:
            return None
        dialog = NameDialog("Rename review", f"New name of review {old}:", old, self.window)
        dialog.setObjectName("renameReviewDialog")
        dialog.named.connect(lambda new: self._submit(
            resume.rename_review, old, new, label=f"Renaming review {old}",
            done=lambda renamed: self._renamed(old, renamed), failed=f"Review {old} could not be renamed"))
        return self._show_dialog(dialog)

    def _renamed(self, old: str, new: str) -> None:
        self.place.renamed(old, new)
        self.save_place()
        self.update_actions()
        window = self.screening_window
        if window is not None and window.session is not None and window.session.review.id == old:
            window.session.review = window.session.store.review(new)
            window.setWindowTitle(f"Screening — {window.session.review.name}")
        self.messages.show_message(f"Review {old} is now called {new}.", "info", topic=KIND)

    def delete_review(self, name: str = "") -> QMessageBox | None:
        """Delete… the open review, or ``name`` (chosen in the review list), after a confirmation."""
        name = name or self.place.review
        if not name:
            return None
        box = QMessageBox(QMessageBox.Icon.Warning, "Delete review",
                          f"Delete review {name}: its records, decisions, strategy and log? This cannot be "
                          "undone (export it first to keep a copy).",
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel, self.window)
        box.setObjectName("deleteReviewBox")
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.button(QMessageBox.StandardButton.Yes).setText("Delete")

        def answered(result: int) -> None:
            if result == QMessageBox.StandardButton.Yes:
                if name == self.place.review and self.screening_window is not None:
                    # its session must not write into a deleted review
                    self._detach()
                    self.screening_window.close()
                    self.screening_window = None
                self._submit(resume.delete_review, name, label=f"Deleting review {name}",
                             done=lambda decided: self._deleted(name, decided),
                             failed=f"Review {name} could not be deleted")

        box.finished.connect(answered)
        return self._show_dialog(box)

    def _deleted(self, name: str, decided: int) -> None:
        self.place.deleted(name)
        self.save_place()
        self.update_actions()
        self.messages.show_message(f"Review {name} deleted ({plural(decided, 'decision')}).", "info",
                                   topic=KIND)

    def export_review(self, path: str | Path | None = None, name: str = "") -> Any:
        """Export… the open review, or ``name`` (chosen in the review list), to one review file."""
        name = name or self.place.review
        if not name:
            return None
        path = path or file_dialogs.save_file(self.window, last_folders.SCREENING, "Export review",
                                              f"{name}.kmds-review.json", REVIEW_FILTER)
        if not path:
            return None
        return self._submit(resume.export_review, name, str(path), label=f"Exporting review {name}",
                            done=lambda written: self.messages.show_message(
                                f"Review {name} written to {written}.", "info", topic=KIND),
                            failed=f"Review {name} could not be exported")

    def import_review(self, path: str | Path | None = None) -> Any:
        path = path or file_dialogs.open_file(self.window, last_folders.SCREENING, "Import review",
                                              REVIEW_FILTER)
        if not path:
            return None

        def imported(result: tuple[str, str]) -> None:
            review, line = result
            self.messages.show_message(line[:1].upper() + line[1:] + ".", "info", topic=KIND)
            self.open(review)

        return self._submit(resume.import_review, str(path), label="Importing a review", done=imported,
                            failed=f"{Path(path).name} could not be imported")

    def merge_review(self, path: str | Path | None = None) -> Any:
        name = self.place.review
        if not name:
            return None
        path = path or file_dialogs.open_file(self.window, last_folders.SCREENING,
                                              "Merge a second screener's review file", REVIEW_FILTER)
        if not path:
            return None
        return self._submit(resume.merge_review, name, str(path), label=f"Merging decisions into {name}",
                            done=lambda line: self.messages.show_message(line, "info", topic=KIND),
                            failed=f"{Path(path).name} could not be merged into review {name}")

    # -- updates -----------------------------------------------------------------------------------------
    def update_review(self, name: str = "") -> None:
        """Update: re-run the review's strategy on a worker, then screen only the new records."""
        name = name or self.place.review
        if not name:
            self.messages.show_message("Open a review first (File → Open review…), then update it.",
                                       "warning", topic=KIND)
            return
        self.new_records_bar.setVisible(False)

        def start(database: Any) -> None:
            if database is None:
                return  # the panel said why the database is not available
            self._submit(resume.update_review, name, database=database, label=f"Updating review {name}",
                         done=self._updated, failed=f"Review {name} could not be updated")

        self._with_database(start)

    def use_panel_search(self) -> None:
        """Use this search as the strategy: the panel's search (history set) is what the next Update runs."""
        name, recorded = self.place.review, self.panel.session.recorded_run
        if not name or recorded is None:
            self.messages.show_message("Run a search in the literature panel with a review open, then use it "
                                       "as the review's strategy.", "warning", topic=KIND)
            return
        self._submit(resume.use_search_as_strategy, name, recorded[1], label=f"Saving the strategy of {name}",
                     done=lambda line: self.messages.show_message(line, "info", topic=KIND),
                     failed=f"The strategy of review {name} could not be saved")

    def _updated(self, outcome: Any) -> None:
        text = (f"Update {outcome.round} of {outcome.review}: {outcome.found:,} found, "
                f"{outcome.known:,} already in the review, {plural(outcome.new, 'new record')}"
                + (f", {len(outcome.withdrawn):,} withdrawn since (flagged)" if outcome.withdrawn else ""))
        self.messages.show_message(text, "info", topic=KIND)
        self.open(outcome.review, only_round=outcome.round if outcome.new else None)
