"""The literature search panel: a view of a :class:`~kmds_desktop.app.literature.LiteratureSession`.

Public API (what the main window wires)
---------------------------------------
``LiteraturePanel(settings, jobs, parent=None, *, database=None, dsn=None, open_on_start=True)``
    ``settings`` is the app's :class:`kmds_desktop.config.Settings` (read at each action;
    ``apply_settings(settings)`` hands Preferences' new ones to the session at once); ``jobs`` the
    window's :class:`~kmds_desktop.ui.jobs.runner.JobRunner`.
    ``database`` injects an open :class:`LiteratureDatabase`; otherwise the panel opens one on a worker
    (``dsn`` or ``settings.literature``) when first needed (the rule is
    :class:`~kmds_desktop.app.literature_data.DatabaseOnDemand`'s).
Signals
    ``status_changed(str)`` — e.g. "Literature: 8,316 documents" for the status bar.
    ``message_shown(str, str)`` — (level, text): the panel's messages, for the window's one message bar.
    ``documents_changed(int)`` — number of documents in the results table (enable Export actions).
    ``wide_toggled(bool)`` — the user asked for the literature review to take the window's width.
    ``history_recorded(int)`` — a finished run was saved in the search history as set #N.
    ``search_cleared()`` / ``stage_started()`` — New search cleared the panel / a generation or a run
    started: the panel's message on the window's bar was about what came before, and goes.
Methods for the File menu
    ``import_files(paths) -> Job | None`` and ``import_files_dialog()`` — MEDLINE XML, JSONL, PubMedQA JSON.
    ``export_documents(fmt, path=None)`` (``fmt`` in ``"csv" | "ris" | "bibtex"``) and
    ``export_log(path=None)`` — ask for a file name when ``path`` is None.
    ``refresh_status()`` (documents and vectors, for the status bar), ``generate()``, ``run_selected()``,
    ``cancel()``, ``has_documents()``, ``embed_documents()`` (vectors for semantic rows, in the background),
    ``open_history()`` (the search history window: sets, set algebra, known papers, report),
    ``shutdown()`` (closes the database the panel opened; call after ``jobs.shutdown()``).

Where the parts are
-------------------
The widgets on screen are :mod:`~kmds_desktop.ui.literature.sections`' (question bar, review
table, results); the job wiring is :mod:`~kmds_desktop.ui.literature.jobs`' (database, generation,
checks, runs); import, embedding and export are :mod:`~kmds_desktop.ui.literature.files`'; the
search history and screening :mod:`~kmds_desktop.ui.literature.records`'. This module puts them
together, forwards clicks and renders what the session announces (``session.subscribe``).

What the panel decides, and what it does not
--------------------------------------------
Every rule about the search (provenance, what generating again replaces, the review rules, the run,
the search log) is the session's (:mod:`kmds_desktop.app.literature`), the same code the CLI drives.
The panel renders the session's state, forwards clicks to it, and runs the session's slow functions
on workers: generation (one model after another; each attempt becomes a row as soon as it finishes;
with document vectors, the question's semantic row first and an LLM's hypothetical abstract last),
checks (after a pause in typing, :data:`~kmds_desktop.app.literature.CHECK_DELAY_S`; which rows
and whether an answer is stale are the session's), runs and
imports. A run may start while generation goes on (it takes the rows ready at that moment).
Messages go to one place, the window's message bar (``message_shown``); the panel's status line
says what the search is doing (which model is answering); progress bars and Cancel are the
window's one progress area (``Generate queries`` turns into ``Stop generating`` meanwhile).
"""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QLabel, QMessageBox, QSplitter, QVBoxLayout, QWidget

from kmds_desktop.app import literature as app_lit
from kmds_desktop.app import literature_data as lj
from kmds_desktop.app.events import Change
from kmds_desktop.app.messages import user_message
from kmds_desktop.ui.jobs.runner import Job, JobRunner
from kmds_desktop.ui.literature.documents_model import DocumentsModel
from kmds_desktop.ui.literature.files import LiteratureFiles
from kmds_desktop.ui.literature.jobs import KINDS, LiteratureJobs
from kmds_desktop.ui.literature.records import LiteratureRecords
from kmds_desktop.ui.literature.review_model import QueryRow, ReviewModel
from kmds_desktop.ui.literature.sections import (
    EMPTY_DATABASE_HINT,
    QuestionBar,
    ResultsSection,
    ReviewSection,
)
from kmds_desktop.ui.literature.widgets import CoverageBar

__all__ = ["EMPTY_DATABASE_HINT", "KINDS", "LiteraturePanel"]

log = logging.getLogger(__name__)


class LiteraturePanel(LiteratureJobs, LiteratureFiles, LiteratureRecords, QWidget):
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
        self.db = lj.DatabaseOnDemand(settings.literature, dsn, database)
        self._open_job: Job | None = None
        self._generation_job: Job | None = None
        self._work_job: Job | None = None  # a run or an import (one at a time)
        self._embed_job: Job | None = None
        self._embed_again = False  # an import finished while embedding ran: one more run after it
        self._topk_job: Job | None = None
        #: The top-k index's state from the last status read (``app.literature_data.topk_status``).
        self.topk: dict[str, Any] | None = None
        self.document_count: int | None = None
        #: The last ``literature status`` count of document vectors (None until read).
        self.vectors: dict[str, Any] | None = None
        #: the vectors a BMLibrarian database holds itself (semantic rows search those), from the status
        self.database_vectors: dict[str, Any] | None = None
        self._workbench: Any = None
        self.history_dialog: Any = None
        self.screening_window: Any = None
        #: The set number the newest finished run was saved as.
        self.last_recorded: int | None = None
        #: (run, its set number in the history): the source name its screening uses (``#12``).
        self.recorded_run: tuple[Any, int] | None = None
        #: The newest message (level, text) the panel sent to the window's message bar.
        self.last_message: tuple[str, str] | None = None
        #: The open "discard these queries?" question of New search (None when none is open).
        self.confirm_box: QMessageBox | None = None
        self._run_after_embedding = False

        self.session = app_lit.LiteratureSession(settings.query_generation, settings.literature,
                                                 settings.retrieval, settings.index.embedding_model)
        self.review = ReviewModel(self.session, self)
        self.documents = DocumentsModel(self)
        self._check_timer = QTimer(self)
        self._check_timer.setSingleShot(True)
        self._check_timer.setInterval(round(app_lit.CHECK_DELAY_S * 1000))
        self._check_timer.timeout.connect(self._submit_checks)

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
        self.embed_button.setToolTip(self._embed_tooltip())
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

    def _show_error(self, exc: BaseException, context: str) -> None:
        self.show_message(user_message(exc, context))

    def has_documents(self) -> bool:
        return self.documents.rowCount() > 0

    @property
    def generating(self) -> bool:
        return self._generation_job is not None and not self._generation_job.done

    def _working(self) -> bool:
        return self._work_job is not None and not self._work_job.done

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
        """The session announced a change: rows waiting for a check start the pause-in-typing timer;
        every other change may change what the buttons offer."""
        if change.kind == app_lit.CHECKS_WANTED:
            self._check_timer.start()
        elif change.kind != app_lit.CHECK_APPLIED:
            self._update_buttons()

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
        self.embed_button.setEnabled(not self.embedding and not lj.everything_embedded(self.vectors))

    def _set_progress(self, text: str) -> None:
        self.progress_label.setText(text)

    def _watch(self, job: Job | None) -> Job | None:
        if job is None:
            return None
        # Buttons come back as soon as the outcome is known, not only when the thread has ended.
        for signal in (job.result, job.error, job.cancelled, job.finished):
            signal.connect(self._job_done)
        self._update_buttons()
        return job

    def _job_done(self, *_args: Any) -> None:
        self._update_buttons()

    def cancel(self) -> None:
        """Cancel the running search or import (the backend call is aborted)."""
        if self._working():
            self._set_progress(self.progress_label.text() + " (cancelling)")
            self._work_job.cancel()

    def stop_generating(self) -> None:
        """Cancel the generation in progress (the model's request is aborted)."""
        if self.generating:
            self._generation_job.cancel()

    def _generate_clicked(self, _checked: bool = False) -> None:
        if self.generating:
            self.stop_generating()
        else:
            self.generate()

    def _update_results_page(self) -> None:
        self.results.show_empty_hint(self.document_count == 0 and not self.has_documents())

    def select_document(self, row: int) -> None:
        """Select the document in (proxy) row ``row`` and show its detail."""
        self.results.select_document(row)

    def shutdown(self) -> None:
        """Close the database the panel opened (call after the job runner has stopped its threads)."""
        self._check_timer.stop()
        self._unsubscribe()
        if self._workbench is not None:
            self._workbench.history.close()
        try:
            self.db.close()
        except Exception:  # closing on exit must not raise
            log.debug("closing the literature database failed", exc_info=True)

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
        box = QMessageBox(
            QMessageBox.Icon.Question, "New search", self.session.discard_question(at_risk),
            QMessageBox.StandardButton.Discard | QMessageBox.StandardButton.Cancel, self,
        )
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        self.confirm_box = box

        def answered(_result: int) -> None:
            self.confirm_box = None
            if box.standardButton(box.clickedButton()) == QMessageBox.StandardButton.Discard:
                self._clear_search()

        box.finished.connect(answered)
        box.open()
        return False

    def _clear_search(self) -> None:
        self.stop_generating()
        self._check_timer.stop()
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
