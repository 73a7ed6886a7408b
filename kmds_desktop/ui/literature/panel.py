"""The literature search panel: a view of a :class:`~kmds_desktop.app.literature.LiteratureSession`.

Public API (what the main window wires)
---------------------------------------
``LiteraturePanel(settings, jobs, parent=None, *, database=None, dsn=None, open_on_start=True)``:
``settings`` the app's :class:`kmds_desktop.config.Settings` (``apply_settings`` hands new ones to the
session), ``jobs`` the window's :class:`~kmds_desktop.ui.jobs.runner.JobRunner`, ``database`` an open
database to use (else one is opened on a worker when first needed, from ``dsn`` or the settings).
Signals: ``status_changed(str)`` (the status bar's line), ``message_shown(level, text)``,
``documents_changed(int)``, ``wide_toggled(bool)``, ``history_recorded(int)`` (set #N saved),
``search_cleared()`` / ``stage_started()`` (the message about what came before goes). Methods for
the menus: ``import_files(paths)``, ``import_files_dialog()``, ``export_documents(fmt, path=None)``,
``export_log(path=None)``, ``refresh_status()``, ``generate()``, ``run_selected()``, ``cancel()``,
``embed_documents()``, ``build_fast_index()``, ``open_history()``, ``shutdown()`` (after ``jobs.shutdown()``).

Where the parts are
-------------------
The widgets on screen are :mod:`~kmds_desktop.ui.literature.sections`' (question bar, review
table, results). The work is done by parts given the session, each a QObject emitting signals and
knowing nothing of the panel: :class:`~kmds_desktop.ui.literature.database.DatabaseLink` (the
database and its status), :class:`~kmds_desktop.ui.literature.generation.QueryGeneration` (generation
and checks), :class:`~kmds_desktop.ui.literature.search_run.SearchRunner` (runs, the application's
one search sequence), :class:`~kmds_desktop.ui.literature.files.LiteratureFiles` (import, embedding,
the fast index, exports) and :class:`~kmds_desktop.ui.literature.records.SearchRecords` (the search
history window, screening). This module composes them, wires their signals, forwards clicks and
renders what the session announces (``session.subscribe``); the domain state (counts, vectors, the
top-k state, the search history, the recorded run) is the session's.

What the panel decides, and what it does not
--------------------------------------------
Every rule about the search (provenance, what generating again replaces, the review rules, the run,
the search log, the coverage question) is the session's (:mod:`kmds_desktop.app.literature`,
:mod:`kmds_desktop.app.literature_run`), the same code the CLI drives. Messages go to the window's
message bar (``message_shown``); the panel's status line says what the search is doing; progress
bars and Cancel are the window's one progress area.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QLabel, QMessageBox, QSplitter, QVBoxLayout, QWidget

from kmds_desktop.app import literature as app_lit
from kmds_desktop.app import literature_data as lj
from kmds_desktop.app import presentation as export_mod
from kmds_desktop.app import strategy
from kmds_desktop.app.events import Change
from kmds_desktop.ui.jobs.job import Job
from kmds_desktop.ui.jobs.runner import JobRunner
from kmds_desktop.ui.literature.database import DatabaseLink
from kmds_desktop.ui.literature.documents_model import DocumentsModel
from kmds_desktop.ui.literature.files import LiteratureFiles
from kmds_desktop.ui.literature.generation import QueryGeneration
from kmds_desktop.ui.literature.records import SearchRecords
from kmds_desktop.ui.literature.review_model import QueryRow, ReviewModel
from kmds_desktop.ui.literature.search_run import SearchRunner
from kmds_desktop.ui.literature.sections import (
    QuestionBar,
    ResultsSection,
    ReviewSection,
)
from kmds_desktop.ui.literature.widgets import CoverageBar, ask_to_discard

__all__ = ["LiteraturePanel"]

log = logging.getLogger(__name__)


class LiteraturePanel(QWidget):
    """Question -> generated queries (review table) -> run -> documents -> export."""

    status_changed = Signal(str)
    message_shown = Signal(str, str)  # level, text
    documents_changed = Signal(int)
    wide_toggled = Signal(bool)
    history_recorded = Signal(int)
    #: New search cleared the panel: messages about the previous search no longer hold.
    search_cleared = Signal()
    #: The next stage started (a generation, a run): the banner about the one before it ("Generated:
    #: …", a run's warnings) has ended with its event and goes (the window ends the panel's topic).
    stage_started = Signal()

    def __init__(
        self,
        settings: Any,
        jobs: JobRunner,
        parent: QWidget | None = None,
        *,
        database: Any | None = None,
        dsn: str | None = None,
        open_on_start: bool = True,
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self.jobs = jobs
        #: The newest message (level, text) the panel sent to the window's message bar.
        self.last_message: tuple[str, str] | None = None
        #: The open "discard these queries?" question of New search (None when none is open).
        self.confirm_box: QMessageBox | None = None
        self._run_after_embedding = False  # Embed first: run the ticked rows when embedding ends

        self.session = app_lit.LiteratureSession(settings.query_generation, settings.literature,
                                                 settings.retrieval, settings.index.embedding_model)
        self.review = ReviewModel(self.session, self)
        self.documents = DocumentsModel(self)
        on_demand = lj.DatabaseOnDemand(settings.literature, dsn, database)
        self.link = DatabaseLink(self.session, jobs, on_demand, self)
        self.generation = QueryGeneration(self.session, self.review, jobs, self.link, self)
        self.searches = SearchRunner(self.session, jobs, self.link, self)
        self.files = LiteratureFiles(self.session, jobs, self.link, self)
        self.records = SearchRecords(self.session, jobs, self)
        for part in (self.link, self.generation, self.searches, self.files, self.records):
            part.message.connect(lambda level, text: self.show_message(text, level))
        for part in (self.generation, self.searches, self.files):
            part.progress.connect(lambda text: self._set_progress(text))
            part.state_changed.connect(self._update_buttons)
        self.link.status_text.connect(self.status_changed.emit)
        self.generation.stage_started.connect(self.stage_started.emit)
        self.searches.stage_started.connect(self.stage_started.emit)
        self.searches.finished.connect(self._search_finished)

        self._build_ui()
        self.setAcceptDrops(True)
        # The session says what changed; the panel renders it (no re-polling after each click).
        self._unsubscribe = self.session.subscribe(self._session_changed)
        self._update_buttons()
        if open_on_start:
            QTimer.singleShot(0, self, self.refresh_status)

    # --- layout -----------------------------------------------------------------------------------
    def _build_ui(self) -> None:
        """The three sections, their controls named on the panel (the window and the tests use them),
        and the clicks forwarded to the panel's actions."""
        bar = self.question_bar = QuestionBar()
        self.question, self.generate_button = bar.question, bar.generate_button
        self.new_search_button, self.wide_button = bar.new_search_button, bar.wide_button
        self.question.returnPressed.connect(self.generate)
        self.question.textChanged.connect(self.session.set_draft_question)
        self.generate_button.clicked.connect(self._generate_clicked)
        self.new_search_button.clicked.connect(lambda _checked=False: self.new_search())
        self.wide_button.toggled.connect(self.wide_toggled.emit)

        self.progress_label = QLabel()
        self.progress_label.setWordWrap(True)
        self.progress_label.setObjectName("literatureProgress")

        rs = self.review_section = ReviewSection(self.review)
        self.review_view = rs.review_view
        self.add_button, self.semantic_button = rs.add_button, rs.semantic_button
        self.embed_button, self.remove_button = rs.embed_button, rs.remove_button
        self.all_button, self.none_button = rs.all_button, rs.none_button
        self.run_button = rs.run_button
        self.embed_button.setToolTip(lj.embed_tooltip(self.session.database_status))
        self.add_button.clicked.connect(lambda _checked=False: self.add_query())
        self.semantic_button.clicked.connect(lambda _checked=False: self.add_semantic_row())
        self.embed_button.clicked.connect(lambda _checked=False: self.embed_documents())
        self.remove_button.clicked.connect(lambda _checked=False: self.remove_selected())
        rs.remove_requested.connect(self.remove_selected)
        self.run_button.clicked.connect(lambda _checked=False: self.run_selected())

        results = self.results = ResultsSection(self.documents)
        self.results_stack = results
        self.proxy, self.documents_view, self.detail = results.proxy, results.documents_view, results.detail
        self.results_label, self.empty_hint = results.results_label, results.empty_hint
        self.export_button, self.history_button = results.export_button, results.history_button
        self.screen_button = results.screen_button
        results.export_requested.connect(self.export)
        self.history_button.clicked.connect(lambda _checked=False: self.open_history())
        self.screen_button.clicked.connect(lambda _checked=False: self.screen_results())

        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.addWidget(rs)
        self.split.addWidget(results)
        self.split.setStretchFactor(0, 1)
        self.split.setStretchFactor(1, 1)
        self.split.setChildrenCollapsible(False)

        # Asked before a semantic row runs on a partly embedded database (see run_selected).
        self.coverage_bar = CoverageBar()
        self.coverage_bar.embed_first.connect(self._embed_then_run)
        self.coverage_bar.run_anyway.connect(lambda: self.run_selected(confirmed=True))
        self.searches.coverage_asked.connect(self.coverage_bar.ask)
        layout = QVBoxLayout(self)
        layout.addWidget(bar)
        layout.addWidget(self.progress_label)
        layout.addWidget(self.coverage_bar)
        layout.addWidget(self.split, 1)

    # --- messages and state -----------------------------------------------------------------------
    def show_message(self, text: str, level: str = "error") -> None:
        """A message for the window's message bar (the one place messages appear)."""
        self.last_message = (level, text)
        self.message_shown.emit(level, text)

    def has_documents(self) -> bool:
        return self.documents.rowCount() > 0

    @property
    def database(self) -> Any | None:
        return self.link.database

    @property
    def generating(self) -> bool:
        return self.generation.running

    @property
    def embedding(self) -> bool:
        return self.files.embedding

    @property
    def history_dialog(self) -> Any:
        return self.records.history_dialog

    def _working(self) -> bool:
        return self.searches.running or self.files.importing

    def _busy(self) -> bool:
        return self.generating or self._working()

    def _sync_settings(self) -> None:
        """Hand the session the settings as they are now (before an action that uses them)."""
        self.session.configure(self.settings.query_generation, self.settings.literature,
                               self.settings.retrieval)

    def apply_settings(self, settings: Any) -> None:
        """New settings from Preferences: the session uses them from now on (it announces the change)."""
        self.settings = settings
        self._sync_settings()

    def _session_changed(self, change: Change) -> None:
        """The session announced a change: a status read renders the counts; a saved run is shown in
        the history; every change but a check's answer may change what the buttons offer."""
        if change.kind == app_lit.STATUS_READ:
            self._status_read()
        elif change.kind == app_lit.RECORDED:
            self._recorded()
        elif change.kind not in (app_lit.CHECKS_WANTED, app_lit.CHECK_APPLIED):
            self._update_buttons()

    def _status_read(self) -> None:
        status = self.session.database_status
        if status is None:
            return
        # an import or an embedding run changed the counts: the rows' Matches follow
        self.review.database_counted(status.documents, *status.semantic_searchable())
        self.embed_button.setToolTip(status.embed_tooltip())
        self._update_buttons()  # Embed is offered only while some document lacks a vector
        self._update_results_page()
        self.review.recheck_failed()
        if self._run_after_embedding and not self.embedding:  # Embed first: the counts are new now
            self._run_after_embedding = False
            self.run_selected()

    def _recorded(self) -> None:
        number = self.session.last_recorded
        if number is None:
            return
        if self.progress_label.text().startswith("Search finished"):  # nothing newer to keep on screen
            run = self.session.last_run
            found = len(run.result.documents) if run is not None else 0
            self._set_progress(f"Search finished: {export_mod.plural(found, 'document')}, saved as "
                               f"#{number} in the search history.")
        self.history_recorded.emit(number)
        self.records.saved(number)

    def _update_buttons(self) -> None:
        """Render what the buttons offer from the session's state and the running jobs (reads only)."""
        n = len(self.session.included_rows())
        self.run_button.setText(f"Run selected ({n})")
        self.run_button.setEnabled(n > 0 and not self._working())
        self.question_bar.show_generating(self.generating)
        self.generate_button.setEnabled(True)
        self.remove_button.setEnabled(bool(self.session.rows))
        selectable = self.session.selectable
        self.all_button.setVisible(selectable)
        self.none_button.setVisible(selectable)
        self.export_button.setEnabled(self.has_documents() or self.session.last_run is not None)
        # Whenever results are shown (also results brought back without a run of this session).
        self.screen_button.setEnabled(bool(self.session.documents))
        # Nothing to embed when every document has a vector (the tooltip says so); an import that
        # adds documents is followed by a status read, which enables it again.
        status = self.session.database_status
        everything = status is not None and status.everything_embedded
        self.embed_button.setEnabled(not self.embedding and not everything)

    def _set_progress(self, text: str) -> None:
        self.progress_label.setText(text)

    def cancel(self) -> None:
        """Cancel the running search or import (the backend call is aborted)."""
        if self._working():
            self._set_progress(self.progress_label.text() + " (cancelling)")
            self.searches.cancel()
            self.files.cancel_import()

    def stop_generating(self) -> None:
        """Cancel the generation in progress (the model's request is aborted)."""
        self.generation.stop()

    def _generate_clicked(self, _checked: bool = False) -> None:
        if self.generating:
            self.stop_generating()
        else:
            self.generate()

    def _update_results_page(self) -> None:
        self.results.show_empty_hint(self.session.documents_in_database == 0 and not self.has_documents())

    def select_document(self, row: int) -> None:
        """Select the document in (proxy) row ``row`` and show its detail."""
        self.results.select_document(row)

    def shutdown(self) -> None:
        """Close the database the panel opened (call after the job runner has stopped its threads)."""
        self.generation.close()
        self._unsubscribe()
        self.session.close_history()
        try:
            self.link.close()
        except Exception:  # closing on exit must not raise
            log.debug("closing the literature database failed", exc_info=True)

    # --- the database, generation and runs (the parts do the work) ---------------------------------
    def refresh_status(self) -> None:
        self.link.refresh_status()

    def generate(self) -> Job | None:
        """A generation round for the question in the bar (see :class:`QueryGeneration`)."""
        self._sync_settings()
        return self.generation.generate(self.question.text().strip())

    def run_selected(self, confirmed: bool = False) -> Job | None:
        """Run exactly the ticked rows as shown (never regenerates); results fill the documents table.

        Allowed while queries are still being generated: it takes the rows ready now. When a semantic
        row would search a partly embedded database the coverage bar asks first: Embed first, or Run
        anyway (``confirmed``).
        """
        if self._working():
            self.show_message("Wait for the running search or import to finish, or cancel it.", "warning")
            return None
        self._sync_settings()
        self.coverage_bar.setVisible(False)  # asked again (coverage_asked) when the session says so
        return self.searches.run(confirmed)

    def _search_finished(self) -> None:
        self.review.refresh()
        self.results.show_documents(self.session.documents, self.session.results_line())
        self.results_label.setToolTip(self.session.coverage_sentence())
        self._update_results_page()
        if self.session.documents_in_database == 0 and not self.session.documents:
            self.results.show_empty_hint(True)
        self.documents_changed.emit(self.documents.rowCount())
        self._update_buttons()
        self.review.recheck_failed()

    def _embed_then_run(self) -> None:
        """Embed first: embed the documents without a vector, then run the ticked rows (asked again
        if embedding stopped short)."""
        self._run_after_embedding = True
        if self.embed_documents() is None and not self.embedding:
            self._run_after_embedding = False

    # --- files: import, embedding, the fast index, exports -----------------------------------------
    def import_files_dialog(self) -> Job | None:
        return self.files.import_files_dialog(self)

    def import_folder_dialog(self) -> Job | None:
        return self.files.import_folder_dialog(self)

    def import_files(self, paths: Sequence[str | Path]) -> Job | None:
        """Import MEDLINE/PubMed XML, JSONL or PubMedQA JSON files, or folders of them, on a worker."""
        self._sync_settings()
        return self.files.import_files(paths, busy=self._working())

    def embed_documents(self) -> Job | None:
        return self.files.embed_documents()

    def build_fast_index(self) -> Job | None:
        return self.files.build_fast_index()

    def export(self, what: str) -> Job | None:
        """The Export menu's choice: ``"log"`` (the search log) or a document format."""
        return self.export_log() if what == "log" else self.export_documents(what)

    def export_documents(self, fmt: str, path: str | Path | None = None) -> Job | None:
        """Write the documents table as CSV, RIS or BibTeX (on a worker; asks for a file when no ``path``)."""
        return self.files.export_documents(self, fmt, self.documents.documents(), path)

    def search_log(self) -> dict[str, Any]:
        return self.files.search_log()

    def export_log(self, path: str | Path | None = None) -> Job | None:
        """Write the search log as JSON so the search can be reproduced (asks for a file when no ``path``)."""
        return self.files.export_log(self, path)

    # --- the search history and screening ------------------------------------------------------------
    def open_history(self) -> Any:
        """Show the search history window (one per panel, non-modal)."""
        return self.records.open_history(self, self.rerun_saved_search)

    def rerun_saved_search(self, search: strategy.SavedSearch) -> Job | None:
        """The history's Re-run: put ``search`` back in the review table (its question, its rows
        ticked; unsaved rows of the user's kept, unticked) and run it. None when it cannot run now
        (the message says why)."""
        if self._busy():
            self.show_message("Wait for the running search, import or generation to finish, or cancel it; "
                              f"then re-run {search.title} again.", "warning")
            return None
        self.generation.check_timer.stop()
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

    def screen_results(self, store_path: str | Path | None = None) -> Any:
        """Open a screening window on the documents the panel shows (the question's review)."""
        return self.records.screen_results(self, self.question.text().strip(), store_path)

    # --- a new search -----------------------------------------------------------------------------
    def new_search(self) -> bool:
        """Clear the question, the rows and the results for another search (the session's rule); asks
        first when edited or hand-written queries that never ran would be lost. True when cleared now."""
        if self._working():
            self.show_message("Wait for the running search or import to finish, or cancel it.", "warning")
            return False
        at_risk = self.session.rows_to_confirm()
        if not at_risk:
            self._clear_search()
            return True
        self.confirm_box = ask_to_discard(self, self.session.discard_question(at_risk), self._clear_search)
        self.confirm_box.finished.connect(lambda _result: setattr(self, "confirm_box", None))
        return False

    def _clear_search(self) -> None:
        self.stop_generating()
        self.generation.check_timer.stop()
        # the old rows' coverage question goes with them: its Run anyway ran the new rows unasked, and
        # an Embed first still running ran them when it ended
        self.coverage_bar.setVisible(False)
        self._run_after_embedding = False
        # The documents go before the session announces the clearing, so the buttons it re-renders
        # see none (Export stayed enabled on an empty table); the window ends the old search's messages.
        self.results.clear()
        self.review.new_search()
        self.question.clear()
        self.search_cleared.emit()
        self._set_progress("New search: type a question and generate queries, or add your own.")
        self.documents_changed.emit(0)
        self.question.setFocus()

    # --- review table editing ---------------------------------------------------------------------
    def add_query(self, text: str = "") -> QueryRow:
        """Add a hand-written query; with no text, start editing the new row."""
        text = text if isinstance(text, str) else ""
        row = self.review.add_hand_written(text)
        if not text:
            self.review_section.edit_last_row()
        return row

    def add_semantic_row(self, text: str = "") -> QueryRow:
        """Add a semantic row (the question by default); its type shows in the Model column."""
        if not (text or self.session.question):
            self.session.question = self.question.text().strip()
        return self.review.add_semantic(text if isinstance(text, str) else "")

    def remove_selected(self) -> None:
        self.review.remove_rows(self.review_section.selected_positions())

    # --- drag and drop ----------------------------------------------------------------------------
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt API
        urls = event.mimeData().urls() if event.mimeData().hasUrls() else []
        if any(u.isLocalFile() and lj.importable(u.toLocalFile()) for u in urls):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self.import_files(paths)
