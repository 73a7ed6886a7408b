"""The literature search panel: a view of a :class:`~kmds_desktop.app.literature.LiteratureSession`.

Public API (what the main window wires)
---------------------------------------
``LiteraturePanel(settings, jobs, parent=None, *, database=None, dsn=None, open_on_start=True)``
    ``settings`` is the app's :class:`kmds_desktop.config.Settings` (read at each action, so changes
    made in Preferences apply at once); ``jobs`` the window's :class:`~kmds_desktop.ui.workers.JobRunner`.
    ``database`` injects an open :class:`LiteratureDatabase`; otherwise the panel opens one on a worker
    (``dsn`` or ``settings.literature``) when first needed (the rule is
    :class:`~kmds_desktop.app.literature_data.DatabaseOnDemand`'s).
Signals
    ``status_changed(str)`` — e.g. "Literature: 8,316 documents" for the status bar.
    ``message_shown(str, str)`` — (level, text): the panel's messages, for the window's one message bar.
    ``documents_changed(int)`` — number of documents in the results table (enable Export actions).
    ``wide_toggled(bool)`` — the user asked for the literature review to take the window's width.
    ``history_recorded(int)`` — a finished run was saved in the search history as set #N.
Methods for the File menu
    ``import_files(paths) -> Job | None`` and ``import_files_dialog()`` — MEDLINE XML, JSONL, PubMedQA JSON.
    ``export_documents(fmt, path=None)`` (``fmt`` in ``"csv" | "ris" | "bibtex"``) and
    ``export_log(path=None)`` — ask for a file name when ``path`` is None.
    ``refresh_status()`` (documents and vectors, for the status bar), ``generate()``, ``run_selected()``,
    ``cancel()``, ``has_documents()``, ``embed_documents()`` (vectors for semantic rows, in the background),
    ``open_history()`` (the search history window: sets, set algebra, known papers, report),
    ``shutdown()`` (closes the database the panel opened; call after ``jobs.shutdown()``).

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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QEvent,
    QItemSelectionModel,
    QModelIndex,
    QObject,
    QSortFilterProxyModel,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QStyle,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.app import literature as app_lit
from kmds_desktop.app import literature_data as lj
from kmds_desktop.app import presentation as export_mod
from kmds_desktop.app import run_facts
from kmds_desktop.app.messages import user_message
from kmds_desktop.app.search_log import utc_now, write_search_log
from kmds_desktop.ui.documents_model import DocumentsModel
from kmds_desktop.ui.literature_widgets import CoverageBar, DocumentDetail
from kmds_desktop.ui.review_model import LiveQueryDelegate, QueryRow, ReviewModel
from kmds_desktop.ui.workers import Job, JobRunner

log = logging.getLogger(__name__)

#: The largest share of the documents table's width the "Found by" column takes after a run.
FOUND_BY_SHARE = 0.3
#: The share of the documents table's width the Title keeps when "Found by" is fitted (a narrow table).
TITLE_SHARE = 0.25
#: The review table's Error column: at least this wide, and as wide as its longest note up to
#: :data:`ERROR_SHARE` of the table (in Wide mode, a duplicate's whole "same as the query of …" note).
ERROR_MIN_WIDTH = 180
ERROR_SHARE = 0.34

EMPTY_DATABASE_HINT = (
    "<h3>The literature database is empty</h3>"
    "<p>Fill it with <b>File &gt; Import literature</b>, or drop a MEDLINE/PubMed XML file "
    "(<code>.xml</code>, <code>.xml.gz</code>) or a JSONL file (one record per line) onto this panel.</p>"
    "<p>Queries can be written and checked meanwhile; they match nothing until documents are imported.</p>"
)

KINDS = {
    "open": "literature.open",
    "status": "literature.status",
    "check": "literature.check",
    "generate": "literature.generate",
    "run": "literature.run",
    "import": "literature.import",
    "embed": "literature.embed",
    "export": "literature.export",
    "record": "history.record",
}


class LiteraturePanel(QWidget):
    """Question -> generated queries (review table) -> run -> documents -> export."""

    status_changed = Signal(str)
    message_shown = Signal(str, str)  # level, text
    documents_changed = Signal(int)
    wide_toggled = Signal(bool)
    history_recorded = Signal(int)

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
        self.document_count: int | None = None
        #: The last ``literature status`` count of document vectors (None until read).
        self.vectors: dict[str, Any] | None = None
        self._workbench: Any = None
        self.history_dialog: Any = None
        #: The set number the newest finished run was saved as.
        self.last_recorded: int | None = None
        #: The newest message (level, text) the panel sent to the window's message bar.
        self.last_message: tuple[str, str] | None = None
        #: The open "discard these queries?" question of New search (None when none is open).
        self.confirm_box: QMessageBox | None = None

        self.session = app_lit.LiteratureSession(settings.query_generation, settings.literature,
                                                 settings.retrieval, settings.index.embedding_model)
        self._embed_job: Job | None = None
        self.review = ReviewModel(self.session, self)
        self.documents = DocumentsModel(self)
        self._check_timer = QTimer(self)
        self._check_timer.setSingleShot(True)
        self._check_timer.setInterval(round(app_lit.CHECK_DELAY_S * 1000))
        self._check_timer.timeout.connect(self._submit_checks)
        self.review.query_edited.connect(lambda _uid: self._check_timer.start())
        self.review.selection_changed.connect(self._update_buttons)

        self._build_ui()
        self.setAcceptDrops(True)
        self._update_buttons()
        if open_on_start:
            QTimer.singleShot(0, self, self.refresh_status)

    # --- layout -----------------------------------------------------------------------------------
    def _build_ui(self) -> None:
        self.question = QLineEdit()
        self.question.setObjectName("literatureQuestion")
        # Short enough to show whole beside the buttons at 1600 px; the example is in the tooltip.
        self.question.setPlaceholderText("Your research question")
        self.question.setToolTip("A research question, e.g. Does azithromycin help CF lung function?")
        self.question.returnPressed.connect(self.generate)
        self.question.textChanged.connect(self.session.set_draft_question)
        self.generate_button = QPushButton("Generate queries")
        self.generate_button.setObjectName("generateQueries")
        self.generate_button.setToolTip("Ask each configured model, one after another, for search queries")
        self.generate_button.clicked.connect(self._generate_clicked)
        self.new_search_button = QPushButton("New search")
        self.new_search_button.setObjectName("newSearch")
        self.new_search_button.setToolTip("Clear the question and every row to start another search (each "
                                          "run stays in the search history); asks before discarding "
                                          "edited or hand-written queries that have not run")
        self.new_search_button.clicked.connect(lambda _checked=False: self.new_search())
        self.wide_button = QToolButton()
        self.wide_button.setObjectName("literatureWide")
        self.wide_button.setText("Wide")
        self.wide_button.setCheckable(True)
        self.wide_button.setToolTip("Give the literature search the whole window width (click again to "
                                    "bring back the KB browser and the question panel)")
        self.wide_button.toggled.connect(self.wide_toggled.emit)
        top = QHBoxLayout()
        top.addWidget(QLabel("Question:"))
        top.addWidget(self.question, 1)
        top.addWidget(self.generate_button)
        top.addWidget(self.new_search_button)
        top.addWidget(self.wide_button)

        self.progress_label = QLabel()
        self.progress_label.setWordWrap(True)
        self.progress_label.setObjectName("literatureProgress")
        progress_row = QHBoxLayout()
        progress_row.addWidget(self.progress_label, 1)

        self.review_view = QTableView()
        self.review_view.setObjectName("reviewTable")
        self.review_view.setModel(self.review)
        self.review_view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.review_view.setEditTriggers(
            QAbstractItemView.EditTrigger.DoubleClicked
            | QAbstractItemView.EditTrigger.EditKeyPressed
            | QAbstractItemView.EditTrigger.AnyKeyPressed
        )
        self.review_view.setWordWrap(False)
        self.review_view.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        # The query is checked while it is typed (0.4 s after the last key), not only on commit.
        self.review_view.setItemDelegateForColumn(ReviewModel.COL_QUERY, LiveQueryDelegate(self.review_view))
        header = self.review_view.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        # The query is what the user reads and edits: it takes the room that is left; the error
        # column has a fixed share (full text in its tooltip), so no column is pushed off to the side.
        header.setSectionResizeMode(ReviewModel.COL_QUERY, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(ReviewModel.COL_ERROR, QHeaderView.ResizeMode.Interactive)
        header.resizeSection(ReviewModel.COL_ERROR, ERROR_MIN_WIDTH)
        # Fitted to its notes when rows change or the table is resized (_fit_error_column): at a
        # fixed 180 px a duplicate's note was cut even with the whole window's width in Wide mode.
        self._error_fit = QTimer(self)
        self._error_fit.setSingleShot(True)
        self._error_fit.setInterval(0)
        self._error_fit.timeout.connect(self._fit_error_column)
        for changed in (self.review.dataChanged, self.review.rowsInserted, self.review.rowsRemoved,
                        self.review.modelReset):
            changed.connect(self._error_fit.start)
        header.setStretchLastSection(False)
        header.setMinimumSectionSize(28)
        self.review_view.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 10)

        self.add_button = QPushButton("Add query")
        self.add_button.setObjectName("addQuery")
        self.add_button.setToolTip("Add a hand-written query and start editing it")
        self.add_button.clicked.connect(lambda _checked=False: self.add_query())
        self.semantic_button = QPushButton("Add semantic row")
        self.semantic_button.setObjectName("addSemantic")
        self.semantic_button.setToolTip("Add a row that searches by meaning: the question (editable) is "
                                        "compared with the document vectors ('literature embed')")
        self.semantic_button.clicked.connect(lambda _checked=False: self.add_semantic_row())
        self.embed_button = QPushButton("Embed documents")
        self.embed_button.setObjectName("embedDocuments")
        self.embed_button.setToolTip(self._embed_tooltip())
        self.embed_button.clicked.connect(lambda _checked=False: self.embed_documents())
        self.remove_button = QPushButton("Remove")
        self.remove_button.setToolTip("Remove the selected queries (Delete)")
        self.remove_button.clicked.connect(lambda _checked=False: self.remove_selected())
        delete = QShortcut(QKeySequence(QKeySequence.StandardKey.Delete), self.review_view)
        delete.setContext(Qt.ShortcutContext.WidgetShortcut)
        delete.activated.connect(self.remove_selected)
        self.all_button = QPushButton("Tick all")
        self.all_button.clicked.connect(lambda: self.review.set_all_included(True))
        self.none_button = QPushButton("Tick none")
        self.none_button.clicked.connect(lambda: self.review.set_all_included(False))
        self.run_button = QPushButton("Run selected")
        self.run_button.setObjectName("runSelected")
        self.run_button.setToolTip("Run exactly the ticked queries as shown")
        self.run_button.clicked.connect(lambda _checked=False: self.run_selected())
        buttons = QHBoxLayout()
        for b in (self.add_button, self.semantic_button, self.remove_button, self.all_button,
                  self.none_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        buttons.addWidget(self.embed_button)
        buttons.addWidget(self.run_button)

        review_box = QWidget()
        rl = QVBoxLayout(review_box)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(self.review_view, 1)
        rl.addLayout(buttons)

        # Results: documents + detail, or the first-run hint when the database is empty.
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.documents)
        self.proxy.setSortRole(DocumentsModel.SortRole)
        self.documents_view = QTableView()
        self.documents_view.setObjectName("documentsTable")
        self.documents_view.setModel(self.proxy)
        self.documents_view.setSortingEnabled(True)
        # Best first: the merged rank order, until the user clicks another column's header.
        self.documents_view.sortByColumn(DocumentsModel.COL_RANK, Qt.SortOrder.AscendingOrder)
        self.documents_view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.documents_view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.documents_view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.documents_view.setWordWrap(False)
        self.documents_view.verticalHeader().setVisible(False)
        dh = self.documents_view.horizontalHeader()
        dh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        dh.setSectionResizeMode(DocumentsModel.COL_RANK, QHeaderView.ResizeMode.ResizeToContents)
        dh.setSectionResizeMode(DocumentsModel.COL_TITLE, QHeaderView.ResizeMode.Stretch)
        self.documents_view.selectionModel().currentRowChanged.connect(self._show_current_document)
        # "Found by" is sized for the width at the last run; when the table narrows (leaving Wide)
        # it is fitted again, or the stretched Title would be squeezed to "…" behind a scroll bar.
        self._found_by_need = 0
        self.documents_view.viewport().installEventFilter(self)
        self.review_view.viewport().installEventFilter(self)  # resized: the Error column is refitted
        self.detail = DocumentDetail()

        self.results_label = QLabel("Run the ticked queries to see documents here.")
        self.results_label.setWordWrap(True)
        # A push button sizes itself for its menu arrow; an instant-popup tool button drew the arrow
        # over its own text ("Export.").
        self.export_button = QPushButton("Export")
        menu = QMenu(self.export_button)
        menu.addAction("Documents as CSV", lambda: self.export_documents("csv"))
        menu.addAction("Documents as RIS", lambda: self.export_documents("ris"))
        menu.addAction("Documents as BibTeX", lambda: self.export_documents("bibtex"))
        menu.addSeparator()
        menu.addAction("Search log as JSON", lambda: self.export_log())
        self.export_button.setMenu(menu)
        self.history_button = QPushButton("Search history…")
        self.history_button.setToolTip("Every run is a numbered set: combine sets (#1 AND #2), check known "
                                       "papers, export the search report")
        self.history_button.clicked.connect(lambda _checked=False: self.open_history())
        results_bar = QHBoxLayout()
        results_bar.addWidget(self.results_label, 1)
        results_bar.addWidget(self.history_button)
        self.screen_button = QPushButton("Screen these results…")
        self.screen_button.setToolTip("Screen the run's documents one at a time: include, exclude, maybe")
        self.screen_button.clicked.connect(lambda _checked=False: self.screen_results())
        results_bar.addWidget(self.screen_button)
        results_bar.addWidget(self.export_button)

        docs_split = QSplitter(Qt.Orientation.Vertical)
        docs_split.addWidget(self.documents_view)
        docs_split.addWidget(self.detail)
        docs_split.setStretchFactor(0, 3)
        docs_split.setStretchFactor(1, 2)
        results_page = QWidget()
        rp = QVBoxLayout(results_page)
        rp.setContentsMargins(0, 0, 0, 0)
        rp.addLayout(results_bar)
        rp.addWidget(docs_split, 1)

        self.empty_hint = QLabel(EMPTY_DATABASE_HINT)
        self.empty_hint.setObjectName("emptyDatabaseHint")
        self.empty_hint.setWordWrap(True)
        self.empty_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.results_stack = QStackedWidget()
        self.results_stack.addWidget(results_page)
        self.results_stack.addWidget(self.empty_hint)

        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.addWidget(review_box)
        self.split.addWidget(self.results_stack)
        self.split.setStretchFactor(0, 1)
        self.split.setStretchFactor(1, 1)
        self.split.setChildrenCollapsible(False)

        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(progress_row)
        # Asked before a semantic row runs on a partly embedded database (see run_selected).
        self.coverage_bar = CoverageBar()
        self.coverage_bar.embed_first.connect(self._embed_then_run)
        self.coverage_bar.run_anyway.connect(lambda: self.run_selected(confirmed=True))
        self._run_after_embedding = False
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
        self.session.configure(self.settings.query_generation, self.settings.literature,
                               self.settings.retrieval)

    def _update_buttons(self) -> None:
        self._sync_settings()
        n = len(self.review.included_rows())
        self.run_button.setText(f"Run selected ({n})")
        self.run_button.setEnabled(n > 0 and not self._working())
        self.generate_button.setText("Stop generating" if self.generating else "Generate queries")
        self.generate_button.setEnabled(True)
        self.remove_button.setEnabled(self.review.rowCount() > 0)
        selectable = self.session.selectable
        self.all_button.setVisible(selectable)
        self.none_button.setVisible(selectable)
        self.export_button.setEnabled(self.has_documents() or self.session.last_run is not None)
        self.screen_button.setEnabled(bool(self.session.documents) and self.session.last_run is not None)
        self.embed_button.setEnabled(not self.embedding)

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

    # --- database ---------------------------------------------------------------------------------
    def _with_database(
        self, then: Callable[[Any], None], failed: Callable[[BaseException], None] | None = None
    ) -> None:
        """Call ``then(db)`` once the database is open (opening it on a worker if needed)."""
        if not self.db.when_open(then, failed):
            return
        self._open_job = self.jobs.submit(
            KINDS["open"],
            lj.open_literature_database,
            self.settings.literature,
            self.db.dsn,
            label="Opening the literature database",
            policy="refuse",
            busy_cursor=False,
            on_result=self._database_opened,
            on_error=self._database_failed,
            on_cancelled=lambda: self._database_failed(RuntimeError("opening the database was cancelled")),
        )

    @property
    def database(self) -> Any | None:
        """The open literature database, or None until something has needed it."""
        return self.db.database

    def _database_opened(self, db: Any) -> None:
        for then in self.db.opened(db):
            then(db)

    def _database_failed(self, exc: BaseException) -> None:
        waiting = self.db.failed(exc)
        self.status_changed.emit("Literature: database unavailable")
        self._show_error(exc, "The literature database is not available")
        for failed in waiting:
            failed(exc)

    def refresh_status(self) -> None:
        """Count the documents in the database (status bar text and the empty-database hint)."""
        self._with_database(
            lambda db: self.jobs.submit(
                KINDS["status"], lj.database_status, db, self.session.embedding_model,
                label="Reading the literature database status",
                policy="latest", busy_cursor=False, on_result=self._status_arrived,
                on_error=lambda exc: self._show_error(exc, "Cannot read the literature database"),
            )
        )

    def _status_arrived(self, status: dict[str, Any]) -> None:
        count = int(status.get("documents") or 0)
        self.document_count = count
        where = status.get("database") or ""
        self.vectors = status.get("vectors")
        vectors = lj.describe_vectors(self.vectors)
        self.status_changed.emit(f"Literature: {count:,} documents" + (f", {vectors}" if vectors else "")
                                 + (f" ({where})" if where else ""))
        self.embed_button.setToolTip(self._embed_tooltip())
        self._update_results_page()
        self.recheck_failed()
        if self._run_after_embedding and not self.embedding:  # Embed first: the counts are new now
            self._run_after_embedding = False
            self.run_selected()

    def recheck_failed(self) -> None:
        """Check again the rows whose check failed (database was down) once the database answers."""
        if self.review.recheck_failed():
            self._check_timer.start()

    def _update_results_page(self) -> None:
        empty = self.document_count == 0 and not self.has_documents()
        self.results_stack.setCurrentWidget(self.empty_hint if empty else self.results_stack.widget(0))

    def shutdown(self) -> None:
        """Close the database the panel opened (call after the job runner has stopped its threads)."""
        self._check_timer.stop()
        if self._workbench is not None:
            self._workbench.history.close()
        try:
            self.db.close()
        except Exception:  # noqa: BLE001 - closing on exit must not raise
            log.debug("closing the literature database failed", exc_info=True)

    # --- generation -------------------------------------------------------------------------------
    def generate(self) -> Job | None:
        """A generation round for the question: each configured model in turn, rows as they arrive.

        Generating again replaces the generated rows not yet edited or run (the session's rule);
        hand-written and edited rows stay, and a proposal equal to one of them is not added again.
        """
        if self.generating:
            self.show_message("Queries are being generated; stop that first or wait for it.", "warning")
            return None
        self._sync_settings()
        question = self.question.text().strip()
        try:
            rnd = self.review.begin_round(question, utc_now())
        except ValueError:
            self.show_message("Type a research question first.", "warning")
            return None
        agent = self.session.agent(self.database)
        job = self.jobs.submit(
            KINDS["generate"],
            _generate_round,
            agent,
            question,
            label="Generating queries",
            policy="refuse",
            busy_cursor=False,
            on_chunk=self._on_attempt,
            on_result=lambda _result: self._generation_finished(rnd, cancelled=False),
            on_error=lambda exc: self._generation_failed(rnd, exc),
            on_cancelled=lambda: self._generation_finished(rnd, cancelled=True),
        )
        self._generation_job = job
        self._set_progress("Generating: " + rnd.status_line())
        return self._watch(job)

    def _on_attempt(self, result: Any) -> None:
        rnd = self.session.round
        self.review.accept_attempt(result)
        if rnd is not None and not rnd.finished:
            self._set_progress("Generating: " + rnd.status_line())

    def _generation_finished(self, rnd: app_lit.GenerationRound, cancelled: bool) -> None:
        if self.session.round is not rnd:
            return
        self.session.finish_round(cancelled=cancelled)
        self._set_progress(rnd.status_line())
        failed = any(p.finished and not p.queries for p in rnd.progress.values()) or rnd.hypothetical_failed
        self.show_message(rnd.summary(), "warning" if failed or cancelled else "info")
        self._update_buttons()

    def _generation_failed(self, rnd: app_lit.GenerationRound, exc: BaseException) -> None:
        if self.session.round is rnd:
            self.session.finish_round(cancelled=True)
            self._set_progress(rnd.status_line())
        self._show_error(exc, "Query generation failed")
        self._update_buttons()

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
        n = len(at_risk)
        box = QMessageBox(
            QMessageBox.Icon.Question, "New search",
            f"Discard {n} edited or hand-written {'query' if n == 1 else 'queries'} that "
            f"{'has' if n == 1 else 'have'} not run?\n\n" + "\n".join(f"• {r.query}" for r in at_risk[:8])
            + ("\n…" if n > 8 else ""),
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
        self.review.new_search()
        self.question.clear()
        self.documents.set_documents([])
        self.detail.show_document(None)
        self.results_label.setText("Run the ticked queries to see documents here.")
        self._set_progress("New search: type a question and generate queries, or add your own.")
        self.documents_changed.emit(0)
        self._update_buttons()
        self.question.setFocus()

    # --- review table editing ---------------------------------------------------------------------
    def add_query(self, text: str = "") -> QueryRow:
        """Add a hand-written query; with no text, start editing the new row."""
        text = text if isinstance(text, str) else ""
        row = self.review.add_hand_written(text)
        if not text:
            index = self.review.index(self.review.rowCount() - 1, ReviewModel.COL_QUERY)
            self.review_view.setCurrentIndex(index)
            self.review_view.edit(index)
        return row

    def add_semantic_row(self, text: str = "") -> QueryRow:
        """Add a semantic row (the question by default); its type shows in the Model column."""
        if not (text or self.session.question):
            self.session.question = self.question.text().strip()
        return self.review.add_semantic(text if isinstance(text, str) else "")

    def remove_selected(self) -> None:
        rows = {i.row() for i in self.review_view.selectionModel().selectedRows()}
        if not rows and self.review_view.currentIndex().isValid():
            rows = {self.review_view.currentIndex().row()}
        self.review.remove_rows(sorted(rows))

    def _submit_checks(self) -> None:
        """The pause in typing is over: check what the session says waits for a check."""
        items = self.session.take_checks()
        if not items:
            return
        self._with_database(
            lambda db: self._start_checks(db, items), lambda exc: self._checks_failed(items, exc)
        )

    def _start_checks(self, db: Any, items: list[app_lit.CheckItem]) -> None:
        job = self.jobs.submit(
            KINDS["check"], _check_queries, self.session.agent(db), items, label="Checking queries",
            policy="latest", busy_cursor=False, on_chunk=self.review.apply_check,
            on_error=lambda exc: self._show_error(exc, "Cannot check the queries"),
        )
        if job is None:
            self._checks_ended(items)
            return
        job.finished.connect(lambda: self._checks_ended(items))

    def _checks_ended(self, items: list[app_lit.CheckItem]) -> None:
        if self.session.checks_done(items):  # rows were edited meanwhile
            self._check_timer.start()

    def _checks_failed(self, items: list[app_lit.CheckItem], exc: BaseException) -> None:
        for result in app_lit.not_checked(items, exc):
            self.review.apply_check(result)
        self._checks_ended(items)

    # --- running ----------------------------------------------------------------------------------
    def run_selected(self, confirmed: bool = False) -> Job | None:
        """Run exactly the ticked rows as shown (never regenerates); results fill the documents table.

        Allowed while queries are still being generated: it takes the rows ready now. When a semantic
        row would search a partly embedded database (the last status count; ``run_facts`` decides),
        the coverage bar asks first: Embed first, or Run anyway (``confirmed``).
        """
        if self._working():
            self.show_message("Wait for the running search or import to finish, or cancel it.", "warning")
            return None
        self._sync_settings()
        try:
            plan = self.session.plan_run(utc_now())
        except Exception as exc:  # noqa: BLE001 - the review rules' verdict, shown as a message
            self.show_message(user_message(exc), "warning")
            return None
        warning = None if confirmed else run_facts.coverage_warning(
            plan.kinds, run_facts.coverage_from_status(self.document_count, self.vectors))
        if warning:
            self.coverage_bar.ask(warning)
            self._set_progress("Not run yet: choose Embed first or Run anyway above the table.")
            return None
        self.coverage_bar.setVisible(False)
        holder: dict[str, Job | None] = {}

        def start(db: Any) -> None:
            holder["job"] = self._start_run(db, plan)

        self._with_database(start)
        return holder.get("job")

    def _start_run(self, db: Any, plan: app_lit.RunPlan) -> Job | None:
        self.session.database_name = getattr(db, "display_name", "")
        n = len(plan.queries)
        job = self.jobs.submit(
            KINDS["run"],
            _execute_run,
            self.session.agent(db),
            plan,
            max_rows=self.settings.literature.max_rows,
            label="Running the ticked queries",
            policy="refuse",
            on_progress=lambda d, t, m: self._set_progress(f"Running ({d}/{t}): {m}"),
            on_result=lambda result: self._on_run_done(plan, result),
            on_error=self._on_run_failed,
            on_cancelled=lambda: self._set_progress("Search cancelled; the queries are unchanged."),
        )
        if job is None:
            return None
        self._work_job = job
        self._set_progress(f"Running {n} {'query' if n == 1 else 'queries'}")
        return self._watch(job)

    def _on_run_failed(self, exc: BaseException) -> None:
        self._set_progress("The search failed; your queries and ticks are unchanged.")
        self._show_error(exc, "The search failed")

    def _on_run_done(self, plan: app_lit.RunPlan, result: Any) -> None:
        run = self.session.apply_run(plan, result, utc_now())
        self._record_run(plan, run)
        self.review.refresh()
        # A model reset drops the selection without a signal: the detail would keep showing a
        # document of the previous search.
        self.detail.show_document(None)
        self.documents.set_documents(self.session.documents)
        self.documents_view.sortByColumn(DocumentsModel.COL_RANK, Qt.SortOrder.AscendingOrder)
        self.documents_view.resizeColumnToContents(DocumentsModel.COL_YEAR)
        self._fit_found_by()
        incomplete = " (INCOMPLETE: see the failed rows' Error column)" if result.incomplete else ""
        self.results_label.setText(
            f"{len(result.documents):,} documents from {len(result.ok_queries)} of {len(result.queries)} "
            f"{'query' if len(result.queries) == 1 else 'queries'} ({result.total_time_s:.2f} s){incomplete}")
        self._show_coverage(result)
        self._set_progress(f"Search finished: {len(result.documents):,} documents.")
        if result.incomplete:
            message = result.incomplete_message()
            self.show_message(message[:1].upper() + message[1:], "error")
        elif result.failed_queries:
            self.show_message(self.session.run_summary(), "warning")
        self._update_results_page()
        if self.document_count == 0 and not result.documents:
            self.results_stack.setCurrentWidget(self.empty_hint)
        self.documents_changed.emit(self.documents.rowCount())
        self._update_buttons()
        self.recheck_failed()

    def _show_coverage(self, result: Any) -> None:
        """Say what the semantic rows searched, as the run recorded it (the log and the report say the
        same): in the results line's tooltip, and in the message bar when some documents had no vector.
        Not in the results line itself: a longer line there narrows the documents table."""
        coverage = run_facts.run_coverage(result.queries)
        if coverage is None:
            self.results_label.setToolTip("")
            return
        rows = sum(1 for q in result.queries if q.kind != "tsquery" and q.ok)
        sentence = coverage.sentence(rows)
        sentence = sentence[:1].upper() + sentence[1:]
        self.results_label.setToolTip(sentence)
        if coverage.partial and not result.failed_queries:
            self.show_message(f"{sentence}; Embed documents to search the other {coverage.missing:,}.",
                              "warning")

    def _embed_then_run(self) -> None:
        """Embed first: embed the documents without a vector, then run the ticked rows (asked again
        if embedding stopped short)."""
        self._run_after_embedding = True
        if self.embed_documents() is None and not self.embedding:
            self._run_after_embedding = False

    def _fit_found_by(self) -> None:
        """Give "Found by" the width its names need, up to :data:`FOUND_BY_SHARE` of the table (the
        title keeps the rest; the full list is in the tooltip and the document's detail)."""
        view = self.documents_view
        column = DocumentsModel.COL_FOUND_BY
        header = view.horizontalHeader()
        self._found_by_need = max(view.sizeHintForColumn(column), header.sectionSizeHint(column))
        self._refit_found_by()

    def _refit_found_by(self) -> None:
        """Keep "Found by" within its share of the table's current width (and the Title stretched)."""
        if not self._found_by_need:
            return
        view = self.documents_view
        header = view.horizontalHeader()
        width = view.viewport().width()
        others = sum(view.columnWidth(c) for c in range(self.documents.columnCount())
                     if c not in (DocumentsModel.COL_TITLE, DocumentsModel.COL_FOUND_BY))
        share = min(self._found_by_need, int(width * FOUND_BY_SHARE),
                    width - others - int(width * TITLE_SHARE))
        view.setColumnWidth(DocumentsModel.COL_FOUND_BY, max(header.minimumSectionSize(), share))

    def _fit_error_column(self) -> None:
        """Give the Error column the width of its longest note, within :data:`ERROR_SHARE` of the
        table and never under :data:`ERROR_MIN_WIDTH` (the full note is also in the cell's tooltip).
        The width comes from the font's metrics of the few notes shown, not from asking the style
        for every cell."""
        view = self.review_view
        column = ReviewModel.COL_ERROR
        metrics = view.fontMetrics()
        notes = (str(self.review.index(r, column).data() or "") for r in range(self.review.rowCount()))
        margin = 2 * (view.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, view) + 1) + 4
        need = max((metrics.horizontalAdvance(n) for n in notes if n), default=0) + margin
        width = max(ERROR_MIN_WIDTH, min(need, int(view.viewport().width() * ERROR_SHARE)))
        if view.columnWidth(column) != width:
            view.setColumnWidth(column, width)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if watched is self.documents_view.viewport() and event.type() == QEvent.Type.Resize:
            self._refit_found_by()
        elif watched is self.review_view.viewport() and event.type() == QEvent.Type.Resize:
            self._error_fit.start()
        return super().eventFilter(watched, event)

    # --- the search history -----------------------------------------------------------------------
    def workbench(self) -> Any:
        """The search history of the data folder with this panel's database (opened on first use)."""
        if self._workbench is None:
            from kmds_desktop.app.presentation import SearchHistory, SearchWorkbench

            self._workbench = SearchWorkbench(SearchHistory(), self.database)
        self._workbench.database = self.database
        return self._workbench

    def _record_run(self, plan: app_lit.RunPlan, run: app_lit.RunRecord) -> Job | None:
        """Save the finished run as the next numbered set, on a worker (the same rule as the CLI)."""
        from kmds_desktop.app import strategy

        try:
            workbench = self.workbench()
        except Exception as exc:  # noqa: BLE001 - the search itself succeeded; say why it is not kept
            self.show_message(f"The run was not added to the search history: {user_message(exc)}", "warning")
            return None
        details = strategy.run_details(self.session, plan, None)
        return self.jobs.submit(
            KINDS["record"], strategy.record_run, workbench, self.session.question, details,
            strategy.run_rows(run), run.result, label="Saving the run in the search history", policy="queue",
            busy_cursor=False, on_result=self._recorded,
            on_error=lambda exc: self.show_message(
                f"The run was not added to the search history: {user_message(exc)}", "warning"),
        )

    def _recorded(self, saved: Any) -> None:
        self.last_recorded = saved.number
        if self.progress_label.text().startswith("Search finished"):  # nothing newer to keep on screen
            self._set_progress(f"Search finished: {saved.document_count:,} documents, saved as "
                               f"#{saved.number} in the search history.")
        self.history_recorded.emit(saved.number)
        if self.history_dialog is not None:
            self.history_dialog.refresh(select=saved.number)

    def open_history(self) -> Any:
        """Show the search history window (one per panel, non-modal)."""
        from kmds_desktop.ui.search_history import SearchHistoryDialog

        if self.history_dialog is None:
            try:
                workbench = self.workbench()
            except Exception as exc:  # noqa: BLE001 - e.g. a history file that is not a database
                self.show_message(user_message(exc))
                return None
            self.history_dialog = SearchHistoryDialog(workbench, self.jobs, self,
                                                      database=lambda: self.database,
                                                      known=self.session.known_papers)
        else:
            self.history_dialog.refresh()
        self.history_dialog.show()
        self.history_dialog.raise_()
        return self.history_dialog

    def screen_results(self, store_path: str | Path | None = None) -> Any:
        """Open a screening window on the last run's merged documents (the question's review)."""
        # Imported here: the screening session loads scikit-learn, which the window's start need not wait for.
        from kmds_desktop.ui.screening_view import open_screening

        run = self.session.last_run
        if run is None or not self.session.documents:
            self.show_message("There is nothing to screen: run the ticked queries first.", "warning")
            return None
        self.screening_window = open_screening(
            self, self.jobs, self.session.documents, question=self.session.question or run.plan.question,
            origin=f"search {run.finished_at}", store_path=store_path)
        return self.screening_window

    def _show_current_document(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if not current.isValid():
            self.detail.show_document(None)
            return
        source = self.proxy.mapToSource(current)
        self.detail.show_document(self.documents.document(source.row()))

    def select_document(self, row: int) -> None:
        """Select the document in (proxy) row ``row`` and show its detail."""
        index = self.proxy.index(row, 0)
        self.documents_view.selectionModel().setCurrentIndex(
            index, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
        )

    # --- import -----------------------------------------------------------------------------------
    def import_files_dialog(self) -> Job | None:
        paths, _ = QFileDialog.getOpenFileNames(
            self, "Import literature", str(Path.home()),
            "Literature files (*.xml *.xml.gz *.jsonl *.jsonl.gz *.json *.ndjson);;All files (*)",
        )
        return self.import_files(paths) if paths else None

    def import_files(self, paths: Sequence[str | Path]) -> Job | None:
        """Import MEDLINE/PubMed XML, JSONL or PubMedQA JSON files on a worker (progress, Cancel)."""
        files = [str(p) for p in paths]
        wrong = [p for p in files if not lj.importable(p)]
        files = [p for p in files if lj.importable(p)]
        if wrong:
            self.show_message(
                "Not a literature file (expected .xml, .xml.gz, .jsonl or .json): " + ", ".join(wrong),
                "warning",
            )
        if not files:
            return None
        if self._working():
            self.show_message("Wait for the running search or import to finish, or cancel it.", "warning")
            return None
        holder: dict[str, Job | None] = {}

        def start(db: Any) -> None:
            names = ", ".join(Path(p).name for p in files)
            job = self.jobs.submit(
                KINDS["import"], lj.import_literature, db, files, label=f"Importing {names}", policy="refuse",
                on_progress=lambda d, t, m: self._set_progress(
                    f"Importing ({d:,}/{t:,}): {m}" if t else f"Importing: {m}"),
                on_result=self._on_imported,
                on_error=lambda exc: (self._set_progress("Import failed."),
                                      self._show_error(exc, "Import failed"), self.refresh_status()),
                on_cancelled=lambda: (
                    self._set_progress("Import cancelled; files finished before it are kept."),
                    self.refresh_status(),
                ),
            )
            if job is not None:
                self._work_job = job
                self._set_progress(f"Importing {names}")
            holder["job"] = self._watch(job)

        self._with_database(start)
        return holder.get("job")

    def _on_imported(self, report: Any) -> None:
        summary = _import_summary(report)
        self._set_progress("Import finished.")
        self.show_message(summary, "info")
        self.refresh_status()
        if self.settings.retrieval.embed_after_import:
            self.embed_documents()

    def embed_documents(self) -> Job | None:
        """Embed new or changed documents in the background (semantic rows use them; searches never
        wait for it). Through the session's encoder, so the window's process never loads torch.

        The job is in the window's one progress area (its Cancel stops it after the batch in flight;
        the batches written are kept and the next run goes on from there); the status line counts the
        documents with vectors when it ends.
        """
        if self._embed_job is not None and not self._embed_job.done:
            self.show_message("Documents are being embedded already (see the progress area).", "info")
            return None

        def start(db: Any) -> None:
            job = self.jobs.submit(
                KINDS["embed"], lj.embed_literature, db, self.session.embedding_model, self.session.encoder,
                self.settings.retrieval,
                label="Embedding documents for semantic rows", policy="refuse", busy_cursor=False,
                on_progress=lambda d, t, m: self._set_progress(f"Embedding for semantic rows: {m}"),
                on_result=self._embedded,
                on_error=lambda exc: self.show_message(
                    user_message(exc, "Documents were not embedded (full-text rows still work)"), "warning"),
                on_cancelled=lambda: self._set_progress(
                    "Embedding cancelled; the documents embedded so far keep their vectors, and the next "
                    "run (Embed documents, or the next import) goes on from there."),
                on_finished=self._embed_finished,
            )
            self._embed_job = job
            self._update_buttons()

        self._with_database(start)
        return self._embed_job

    def _embedded(self, rep: Any) -> None:
        self._set_progress(f"Embedded {rep.embedded:,} documents for semantic rows"
                           + (f" ({rep.remaining:,} left for the next run)" if rep.remaining else ""))

    def _embed_finished(self) -> None:
        self._embed_job = None
        self._update_buttons()
        self.refresh_status()

    @property
    def embedding(self) -> bool:
        return self._embed_job is not None and not self._embed_job.done

    def _embed_tooltip(self) -> str:
        vectors = lj.describe_vectors(self.vectors)
        return ("Embed the documents that have no vector yet, in the background, for semantic rows"
                + (f" (now: {vectors})" if vectors else ""))

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

    # --- export -----------------------------------------------------------------------------------
    def _ask_path(self, title: str, suggested: str, filters: str) -> str | None:
        path, _ = QFileDialog.getSaveFileName(self, title, str(Path.home() / suggested), filters)
        return path or None

    def export_documents(self, fmt: str, path: str | Path | None = None) -> Job | None:
        """Write the documents table as CSV, RIS or BibTeX (on a worker)."""
        key = {"bib": "bibtex"}.get(fmt.lower(), fmt.lower())
        if key not in export_mod.DOCUMENT_FORMATS:
            self.show_message(f"Unknown export format {fmt!r}.", "warning")
            return None
        if not self.has_documents():
            self.show_message("There are no documents to export: run the ticked queries first.", "warning")
            return None
        suffix = export_mod.DOCUMENT_FORMATS[key]
        if path is None:
            path = self._ask_path("Export documents", f"literature{suffix}", f"{key.upper()} (*{suffix})")
            if path is None:
                return None
        docs = self.documents.documents()
        return self.jobs.submit(
            KINDS["export"], lj.write_export, export_mod.export_documents, docs, str(path), key,
            label=f"Exporting {len(docs)} documents", policy="queue", busy_cursor=False,
            on_result=lambda p: self._set_progress(f"Exported {len(docs)} documents to {p}"),
            on_error=lambda exc: self._show_error(exc, f"Cannot write {path}"),
        )

    def search_log(self) -> dict[str, Any]:
        """The search log of the last run: the same document ``literature search --json`` prints."""
        from kmds_desktop import __version__

        return self.session.search_log(app_version=__version__)

    def export_log(self, path: str | Path | None = None) -> Job | None:
        """Write the search log as JSON so the search can be reproduced (on any copy of the literature)."""
        if self.session.last_run is None:
            self.show_message("Run a search first: the log records the queries as they ran.", "warning")
            return None
        if path is None:
            path = self._ask_path("Export search log", "search-log.json", "JSON (*.json)")
            if path is None:
                return None
        return self.jobs.submit(
            KINDS["export"], lj.write_export, write_search_log, self.search_log(), str(path),
            label="Exporting the search log", policy="queue", busy_cursor=False,
            on_result=lambda p: self._set_progress(f"Search log written to {p}"),
            on_error=lambda exc: self._show_error(exc, f"Cannot write {path}"),
        )


def _generate_round(agent: Any, question: str, *, chunk: Callable[[Any], None], progress: Any = None,
                    cancel: Any = None) -> Any:
    """The session's generation on a worker, with the rows the retrieval settings add (the question's
    semantic row, a hypothetical abstract): each item goes out as a chunk."""
    return app_lit.generate_round(agent, question, on_attempt=chunk, progress=progress, cancel=cancel,
                                  retrieval_rows=True)


_check_queries = app_lit.check_queries
_execute_run = app_lit.execute_run


def _import_summary(report: Any) -> str:
    summary = getattr(report, "summary", None)
    return f"Imported {summary()}" if callable(summary) else f"Import finished: {report}"
