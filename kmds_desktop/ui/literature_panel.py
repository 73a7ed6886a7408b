"""The literature search panel: generate queries, review them, run exactly those, read and export results.

Public API (what the main window wires)
---------------------------------------
``LiteraturePanel(settings, jobs, parent=None, *, database=None, dsn=None, open_on_start=True)``
    ``settings`` is the app's :class:`kmds_desktop.config.Settings` (read at each action, so changes
    made in Preferences apply at once); ``jobs`` the window's :class:`~kmds_desktop.ui.workers.JobRunner`.
    ``database`` injects an open :class:`LiteratureDatabase`; otherwise the panel opens one on a worker
    (``dsn`` or ``settings.literature``) when first needed.
Signals
    ``status_changed(str)`` — e.g. "Literature: 8,316 documents" for the status bar.
    ``message_shown(str, str)`` — (level, text) whenever the in-panel message bar shows something.
    ``documents_changed(int)`` — number of documents in the results table (enable Export actions).
Methods for the File menu
    ``import_files(paths) -> Job | None`` and ``import_files_dialog()`` — MEDLINE XML, JSONL, PubMedQA JSON.
    ``export_documents(fmt, path=None)`` (``fmt`` in ``"csv" | "ris" | "bibtex"``) and
    ``export_log(path=None)`` — ask for a file name when ``path`` is None.
    ``refresh_status()``, ``generate()``, ``run_selected()``, ``cancel()``, ``has_documents()``,
    ``shutdown()`` (closes the database the panel opened; call after ``jobs.shutdown()``).

Behaviour
---------
Generation runs the configured models strictly one after another on a worker; each result becomes a
row as soon as its model answers. Every query is validated and counted in the database on a worker,
debounced while the user types; an answer for text that has since been edited is dropped (rows carry
a revision). Run executes exactly the ticked rows as they are shown, never regenerating. Errors show
in a message bar inside the panel; rows, edits and ticks are never cleared by an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QItemSelectionModel, QModelIndex, QSortFilterProxyModel, Qt, QTimer, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.literature import export as export_mod
from kmds_desktop.ui import literature_jobs as lj
from kmds_desktop.ui.documents_model import DocumentsModel
from kmds_desktop.ui.literature_widgets import DocumentDetail, MessageBar
from kmds_desktop.ui.review_model import CHECKING, FAILED, HAND_WRITTEN, INVALID, QueryRow, ReviewModel
from kmds_desktop.ui.workers import Job, JobRunner

log = logging.getLogger(__name__)

#: Pause after the last keystroke before a query is validated and counted.
VALIDATE_DEBOUNCE_MS = 400

EMPTY_DATABASE_HINT = (
    "<h3>The literature database is empty</h3>"
    "<p>Fill it with <b>File &gt; Import literature…</b>, or drop a MEDLINE/PubMed XML file "
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
    "export": "literature.export",
}


class LiteraturePanel(QWidget):
    """Question -> generated queries (review table) -> run -> documents -> export."""

    status_changed = Signal(str)
    message_shown = Signal(str, str)  # level, text
    documents_changed = Signal(int)

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
        self.dsn = dsn
        self.database = database
        self._owns_database = database is None
        self._db_waiters: list[tuple[Callable[[Any], None], Callable[[BaseException], None] | None]] = []
        self._open_job: Job | None = None
        self._current_job: Job | None = None
        self._check_in_flight: set[tuple[int, int]] = set()
        self.document_count: int | None = None
        self.generation: dict[str, Any] = {}
        self.last_run: dict[str, Any] | None = None
        self._model_lines: dict[str, str] = {}

        self.review = ReviewModel(self)
        self.documents = DocumentsModel(self)
        self._check_timer = QTimer(self)
        self._check_timer.setSingleShot(True)
        self._check_timer.setInterval(VALIDATE_DEBOUNCE_MS)
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
        self.message = MessageBar(self)

        self.question = QLineEdit()
        self.question.setPlaceholderText("Research question, e.g. Does azithromycin help CF lung function?")
        self.question.returnPressed.connect(self.generate)
        self.generate_button = QPushButton("Generate queries")
        self.generate_button.setToolTip("Ask each configured model, one after another, for search queries")
        self.generate_button.clicked.connect(self.generate)
        top = QHBoxLayout()
        top.addWidget(QLabel("Question:"))
        top.addWidget(self.question, 1)
        top.addWidget(self.generate_button)

        self.progress_label = QLabel()
        self.progress_label.setWordWrap(True)
        self.progress_label.setObjectName("literatureProgress")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the running generation, search or import")
        self.cancel_button.clicked.connect(self.cancel)
        self.cancel_button.hide()
        progress_row = QHBoxLayout()
        progress_row.addWidget(self.progress_label, 1)
        progress_row.addWidget(self.cancel_button)

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
        header = self.review_view.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        # The query is what the user reads and edits: it gets the most room; long texts are elided
        # (full text in the tooltip) and the table scrolls sideways in a narrow panel.
        for col, width in ((ReviewModel.COL_QUERY, 300), (ReviewModel.COL_VALID, 160),
                           (ReviewModel.COL_ERROR, 160)):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive)
            header.resizeSection(col, width)
        header.setStretchLastSection(True)
        self.review_view.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 10)

        self.add_button = QPushButton("Add query")
        self.add_button.setToolTip("Add a hand-written query and start editing it")
        self.add_button.clicked.connect(self.add_query)
        self.remove_button = QPushButton("Remove")
        self.remove_button.setToolTip("Remove the selected queries (Delete)")
        self.remove_button.clicked.connect(self.remove_selected)
        delete = QShortcut(QKeySequence(QKeySequence.StandardKey.Delete), self.review_view)
        delete.setContext(Qt.ShortcutContext.WidgetShortcut)
        delete.activated.connect(self.remove_selected)
        self.all_button = QPushButton("Tick all")
        self.all_button.clicked.connect(lambda: self.review.set_all_included(True))
        self.none_button = QPushButton("Tick none")
        self.none_button.clicked.connect(lambda: self.review.set_all_included(False))
        self.run_button = QPushButton("Run selected")
        self.run_button.setToolTip("Run exactly the ticked queries as shown")
        self.run_button.clicked.connect(self.run_selected)
        buttons = QHBoxLayout()
        for b in (self.add_button, self.remove_button, self.all_button, self.none_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
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
        self.documents_view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.documents_view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.documents_view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.documents_view.setWordWrap(False)
        dh = self.documents_view.horizontalHeader()
        dh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        dh.setSectionResizeMode(DocumentsModel.COL_TITLE, QHeaderView.ResizeMode.Stretch)
        self.documents_view.selectionModel().currentRowChanged.connect(self._show_current_document)
        self.detail = DocumentDetail()

        self.results_label = QLabel("Run the ticked queries to see documents here.")
        self.export_button = QToolButton()
        self.export_button.setText("Export")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.export_button)
        menu.addAction("Documents as CSV…", lambda: self.export_documents("csv"))
        menu.addAction("Documents as RIS…", lambda: self.export_documents("ris"))
        menu.addAction("Documents as BibTeX…", lambda: self.export_documents("bibtex"))
        menu.addSeparator()
        menu.addAction("Search log as JSON…", self.export_log)
        self.export_button.setMenu(menu)
        results_bar = QHBoxLayout()
        results_bar.addWidget(self.results_label, 1)
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

        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(review_box)
        split.addWidget(self.results_stack)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)

        layout = QVBoxLayout(self)
        layout.addWidget(self.message)
        layout.addLayout(top)
        layout.addLayout(progress_row)
        layout.addWidget(split, 1)

    # --- messages and state -----------------------------------------------------------------------
    def show_message(self, text: str, level: str = "error") -> None:
        """Non-modal message inside the panel (errors never discard the user's queries)."""
        self.message.show_message(text, level)
        self.message_shown.emit(level, text)

    def has_documents(self) -> bool:
        return self.documents.rowCount() > 0

    def _busy(self) -> bool:
        return self._current_job is not None and not self._current_job.done

    def _update_buttons(self) -> None:
        busy = self._busy()
        n = len(self.review.included_rows())
        self.run_button.setText(f"Run selected ({n})")
        self.run_button.setEnabled(n > 0 and not busy)
        self.generate_button.setEnabled(not busy)
        self.remove_button.setEnabled(self.review.rowCount() > 0)
        selectable = getattr(self.settings.query_generation, "allow_query_selection", True)
        self.review.selectable = selectable
        self.all_button.setVisible(selectable)
        self.none_button.setVisible(selectable)
        self.export_button.setEnabled(self.has_documents() or self.last_run is not None)

    def _set_progress(self, text: str, cancellable: bool = False) -> None:
        self.progress_label.setText(text)
        self.cancel_button.setVisible(cancellable)
        self.cancel_button.setEnabled(cancellable)

    def _start_job(self, job: Job | None, label: str) -> Job | None:
        if job is None:
            return None
        self._current_job = job
        self._set_progress(label, cancellable=True)
        # Buttons come back as soon as the outcome is known, not only when the thread has ended.
        for signal in (job.result, job.error, job.cancelled, job.finished):
            signal.connect(self._job_done)
        self._update_buttons()
        return job

    def _job_done(self, *_args: Any) -> None:
        if self._current_job is not None and self._current_job.done:
            self._current_job = None
        self.cancel_button.hide()
        self._update_buttons()

    def cancel(self) -> None:
        """Cancel the running generation, search or import (the backend call is aborted)."""
        if self._current_job is not None:
            self.cancel_button.setEnabled(False)
            self.progress_label.setText(self.progress_label.text() + " — cancelling…")
            self._current_job.cancel()

    # --- database ---------------------------------------------------------------------------------
    def _with_database(
        self, then: Callable[[Any], None], failed: Callable[[BaseException], None] | None = None
    ) -> None:
        """Call ``then(db)`` once the database is open (opening it on a worker if needed)."""
        if self.database is not None:
            then(self.database)
            return
        self._db_waiters.append((then, failed))
        if self._open_job is not None and not self._open_job.done:
            return
        self._open_job = self.jobs.submit(
            KINDS["open"],
            lj.open_literature_database,
            self.settings.literature,
            self.dsn,
            label="Opening the literature database",
            policy="refuse",
            busy_cursor=False,
            on_result=self._database_opened,
            on_error=self._database_failed,
            on_cancelled=lambda: self._database_failed(RuntimeError("opening the database was cancelled")),
        )

    def _database_opened(self, db: Any) -> None:
        self.database = db
        waiters, self._db_waiters = self._db_waiters, []
        for then, _failed in waiters:
            then(db)

    def _database_failed(self, exc: BaseException) -> None:
        waiters, self._db_waiters = self._db_waiters, []
        self.status_changed.emit("Literature: database unavailable")
        self.show_message(f"The literature database is not available: {exc}")
        for _then, failed in waiters:
            if failed is not None:
                failed(exc)

    def refresh_status(self) -> None:
        """Count the documents in the database (status bar text and the empty-database hint)."""
        self._with_database(
            lambda db: self.jobs.submit(
                KINDS["status"], lj.database_status, db, label="Reading the literature database status",
                policy="latest", busy_cursor=False, on_result=self._status_arrived,
                on_error=lambda exc: self.show_message(f"Cannot read the literature database: {exc}"),
            )
        )

    def _status_arrived(self, status: dict[str, Any]) -> None:
        count = int(status.get("documents") or 0)
        self.document_count = count
        where = status.get("database") or ""
        self.status_changed.emit(f"Literature: {count:,} documents" + (f" ({where})" if where else ""))
        self._update_results_page()
        self.recheck_failed()

    def recheck_failed(self) -> None:
        """Check again the rows whose check failed (database was down) once the database answers."""
        failed = [r for r in self.review.rows() if r.validity == FAILED]
        for row in failed:
            self.review.mark_checking(row.uid, row.revision)
        if failed:
            self._check_timer.start()

    def _update_results_page(self) -> None:
        empty = self.document_count == 0 and not self.has_documents()
        self.results_stack.setCurrentWidget(self.empty_hint if empty else self.results_stack.widget(0))

    def shutdown(self) -> None:
        """Close the database the panel opened (call after the job runner has stopped its threads)."""
        self._check_timer.stop()
        if self.database is not None and self._owns_database:
            try:
                self.database.close()
            except Exception:  # noqa: BLE001 - closing on exit must not raise
                log.debug("closing the literature database failed", exc_info=True)
            self.database = None

    # --- generation -------------------------------------------------------------------------------
    def generate(self) -> Job | None:
        """Generate queries for the question with every configured model (serially)."""
        question = self.question.text().strip()
        if not question:
            self.show_message("Type a research question first.", "warning")
            return None
        if self._busy():
            self.show_message("Wait for the running task to finish, or cancel it.", "warning")
            return None
        qg = self.settings.query_generation
        # Generated rows the user never touched make way for the new ones; edited, hand-written
        # and already-run rows stay.
        stale = [i for i, r in enumerate(self.review.rows()) if r.model != HAND_WRITTEN and r.revision == 0
                 and r.returned is None]
        self.review.remove_rows(stale)
        models, per_model = lj.effective_models(qg)
        self.generation = {
            "question": question,
            "models": models,
            "temperature": qg.temperature,
            "queries_per_model": per_model,
            "system_prompt": _default_prompt(),
            "generated_at": export_mod.utc_now(),
        }
        self._model_lines = {m: "waiting" for m in models}
        self.message.dismiss()
        job = self.jobs.submit(
            KINDS["generate"],
            lj.generate_queries,
            question,
            qg,
            self.database,
            label="Generating queries",
            policy="refuse",
            on_chunk=self._on_generated,
            on_progress=self._on_generation_progress,
            on_result=self._on_generation_done,
            on_error=lambda exc: self.show_message(f"Query generation failed: {exc}"),
            on_cancelled=lambda: self._set_progress(
                f"Generation cancelled; {self.review.rowCount()} queries kept. " + self._models_line()
            ),
        )
        return self._start_job(job, "Generating queries… " + self._models_line())

    def _models_line(self) -> str:
        return " · ".join(f"{m}: {s}" for m, s in self._model_lines.items())

    def _on_generation_progress(self, done: int, total: int | None, message: str) -> None:
        model = message.split(":", 1)[0] if ":" in message else ""
        # ``builtin:keywords`` has a colon in its name: match the longest configured model prefix.
        for name in sorted(self._model_lines, key=len, reverse=True):
            if message.startswith(name + ":"):
                model = name
                break
        if model in self._model_lines and self._model_lines[model] == "waiting":
            self._model_lines[model] = "generating…"
        prefix = f"Generating ({done}/{total})… " if total else "Generating… "
        self._set_progress(prefix + self._models_line(), cancellable=True)

    def _on_generated(self, result: Any) -> None:
        qg = self.settings.query_generation
        model = result.model
        if result.error:
            self._model_lines[model] = "✗ " + _short_error(result.error)
        else:
            ok = sum(1 for r in self.review.rows() if r.model == model and r.query and r.returned is None) + 1
            self._model_lines[model] = f"✓ {ok} ({result.generation_time:.1f} s)"
        duplicate = False
        if result.query and qg.deduplicate_results:
            from kmds_desktop.literature.query_cleaning import query_key

            key = query_key(result.query)
            duplicate = any(query_key(r.query) == key for r in self.review.rows() if r.query)
        if not qg.show_all_queries_to_user and (duplicate or not result.query):
            return
        self.review.add_row(
            QueryRow(
                query=result.query,
                model=model,
                attempt=result.attempt_number,
                included=bool(result.query) and not duplicate,
                generation_time=result.generation_time,
                temperature=result.temperature,
                error=result.error or ("same as a query above" if duplicate else None),
            )
        )
        self._set_progress("Generating… " + self._models_line(), cancellable=True)

    def _on_generation_done(self, result: Any) -> None:
        failed = [r for r in result.all_queries if r.error]
        ok = [r for r in result.all_queries if not r.error]
        self._set_progress(
            f"Generated {len(ok)} queries with {result.model_count} models in "
            f"{result.total_generation_time:.1f} s. " + self._models_line()
        )
        if failed and not ok:
            self.show_message("No model produced a query: " + "; ".join(
                f"{r.model}: {r.error}" for r in failed if not r.error.startswith("skipped")))
        elif failed:
            self.show_message("Some models failed: " + "; ".join(
                f"{r.model}: {r.error}" for r in failed if not r.error.startswith("skipped")), "warning")

    # --- review table editing ---------------------------------------------------------------------
    def add_query(self, text: str = "") -> QueryRow:
        """Add a hand-written query; with no text, start editing the new row."""
        row = self.review.add_row(QueryRow(query=text, model=HAND_WRITTEN, included=bool(text.strip())))
        if not text:
            index = self.review.index(self.review.rowCount() - 1, ReviewModel.COL_QUERY)
            self.review_view.setCurrentIndex(index)
            self.review_view.edit(index)
        return row

    def remove_selected(self) -> None:
        rows = {i.row() for i in self.review_view.selectionModel().selectedRows()}
        if not rows and self.review_view.currentIndex().isValid():
            rows = {self.review_view.currentIndex().row()}
        self.review.remove_rows(sorted(rows))

    def _submit_checks(self) -> None:
        items = [
            lj.CheckItem(r.uid, r.revision, r.query)
            for r in self.review.rows()
            if r.validity == CHECKING and (r.uid, r.revision) not in self._check_in_flight
        ]
        if not items:
            return
        self._with_database(
            lambda db: self._start_checks(db, items), lambda exc: self._checks_failed(items, exc)
        )

    def _start_checks(self, db: Any, items: list[lj.CheckItem]) -> None:
        keys = {(i.uid, i.revision) for i in items}
        job = self.jobs.submit(
            KINDS["check"], lj.check_queries, db, items, label="Checking queries", policy="latest",
            busy_cursor=False, on_chunk=self._on_checked,
            on_error=lambda exc: self.show_message(f"Cannot check the queries: {exc}"),
        )
        if job is None:
            return
        self._check_in_flight |= keys

        def finished() -> None:
            self._check_in_flight -= keys
            if any(r.validity == CHECKING for r in self.review.rows()):
                self._check_timer.start()

        job.finished.connect(finished)

    def _checks_failed(self, items: list[lj.CheckItem], exc: BaseException) -> None:
        for item in items:
            self.review.set_validation(item.uid, item.revision, None, f"not checked: {exc}")

    def _on_checked(self, result: lj.CheckResult) -> None:
        self.review.set_validation(result.uid, result.revision, result.ok, result.message, result.matches,
                                   result.exact)

    # --- running ----------------------------------------------------------------------------------
    def run_selected(self) -> Job | None:
        """Run exactly the ticked rows as shown (never regenerates); results fill the documents table."""
        rows = self.review.included_rows()
        if not rows:
            self.show_message("Tick at least one query to run.", "warning")
            return None
        if self._busy():
            self.show_message("Wait for the running task to finish, or cancel it.", "warning")
            return None
        if all(r.validity == INVALID for r in rows):
            self.show_message(
                "All ticked queries are invalid; fix them in the table (the error is shown in each row): "
                + "; ".join(f"'{r.query}': {r.validity_message}" for r in rows)
            )
            return None
        snapshot = [(r.uid, r.revision, r.query) for r in rows]
        self.message.dismiss()
        holder: dict[str, Job | None] = {}

        def start(db: Any) -> None:
            holder["job"] = self._start_run(db, snapshot)

        self._with_database(start)
        return holder.get("job")

    def _start_run(self, db: Any, snapshot: list[tuple[int, int, str]]) -> Job | None:
        started = export_mod.utc_now()
        job = self.jobs.submit(
            KINDS["run"],
            lj.run_reviewed,
            db,
            [text for _, _, text in snapshot],
            self.settings.query_generation,
            max_rows=self.settings.literature.max_rows,
            batch_size=self.settings.literature.fetch_batch_size,
            label="Running the ticked queries",
            policy="refuse",
            on_progress=lambda d, t, m: self._set_progress(f"Running ({d}/{t}): {m}", cancellable=True),
            on_result=lambda result: self._on_run_done(snapshot, result, started),
            on_error=self._on_run_failed,
            on_cancelled=lambda: self._set_progress("Search cancelled; the queries are unchanged."),
        )
        return self._start_job(job, f"Running {len(snapshot)} queries…")

    def _on_run_failed(self, exc: BaseException) -> None:
        self._set_progress("The search failed; your queries and ticks are unchanged.")
        self.show_message(f"The search failed: {exc}")

    def _on_run_done(self, snapshot: list[tuple[int, int, str]], result: Any, started: str) -> None:
        for (uid, revision, _text), stat in zip(snapshot, result.queries, strict=False):
            unique = [i for i in stat.ids if result.found_by.get(i) == [stat.index]]
            self.review.set_run_stats(uid, revision, ids=list(stat.ids), unique_ids=unique,
                                      time_s=stat.time_s, error=stat.error, matches=stat.matches)
        found_by = {doc_id: result.queries_for(doc_id) for doc_id in result.ids}
        self.documents.set_documents(result.documents, found_by)
        self.documents_view.resizeColumnToContents(DocumentsModel.COL_YEAR)
        self.last_run = {
            "snapshot": snapshot,
            "result": result,
            "started": started,
            "finished": export_mod.utc_now(),
            "database": getattr(self.database, "display_name", ""),
        }
        n_ok = len([q for q in result.queries if q.error is None])
        incomplete = " — INCOMPLETE: see the failed rows' Error column" if result.incomplete else ""
        self.results_label.setText(
            f"{len(result.documents):,} documents from {n_ok} of {len(result.queries)} queries "
            f"({result.total_time_s:.2f} s){incomplete}"
        )
        self._set_progress(f"Search finished: {len(result.documents):,} documents.")
        failed = [q for q in result.queries if q.error]
        if result.incomplete:
            message = result.incomplete_message()
            self.show_message(message[:1].upper() + message[1:], "error")
        elif failed:
            reasons = "; ".join(f"'{q.query}': {q.error}" for q in failed)
            self.show_message(f"Some queries could not run: {reasons}", "warning")
        self._update_results_page()
        if self.document_count == 0 and not result.documents:
            self.results_stack.setCurrentWidget(self.empty_hint)
        self.documents_changed.emit(self.documents.rowCount())
        self._update_buttons()
        self.recheck_failed()

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
        if self._busy():
            self.show_message("Wait for the running task to finish, or cancel it.", "warning")
            return None
        holder: dict[str, Job | None] = {}

        def start(db: Any) -> None:
            names = ", ".join(Path(p).name for p in files)
            job = self.jobs.submit(
                KINDS["import"], lj.import_literature, db, files, label=f"Importing {names}", policy="refuse",
                on_progress=lambda d, t, m: self._set_progress(
                    f"Importing ({d:,}/{t:,}): {m}" if t else f"Importing: {m}", cancellable=True),
                on_result=self._on_imported,
                on_error=lambda exc: (self._set_progress("Import failed."),
                                      self.show_message(f"Import failed: {exc}"), self.refresh_status()),
                on_cancelled=lambda: (
                    self._set_progress("Import cancelled; files finished before it are kept."),
                    self.refresh_status(),
                ),
            )
            holder["job"] = self._start_job(job, f"Importing {names}…")

        self._with_database(start)
        return holder.get("job")

    def _on_imported(self, report: Any) -> None:
        summary = _import_summary(report)
        self._set_progress(summary)
        self.show_message(summary, "info")
        self.refresh_status()

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
            on_error=lambda exc: self.show_message(f"Cannot write {path}: {exc}"),
        )

    def search_log(self) -> export_mod.SearchLog:
        """The search log of the last run (question, models, prompt, queries as run, counts, IDs, times)."""
        gen = self.generation
        log_ = export_mod.SearchLog(
            question=gen.get("question") or self.question.text().strip(),
            models=list(gen.get("models", [])),
            system_prompt=gen.get("system_prompt") or _default_prompt(),
            temperature=gen.get("temperature"),
            queries_per_model=gen.get("queries_per_model"),
            generated_at=gen.get("generated_at"),
            app_version=_app_version(),
        )
        run = self.last_run
        if run is None:
            return log_
        result = run["result"]
        rows = {r.uid: r for r in self.review.rows()}
        for (uid, _rev, text), stat in zip(run["snapshot"], result.queries, strict=False):
            row = rows.get(uid)
            unique = [i for i in stat.ids if result.found_by.get(i) == [stat.index]]
            log_.queries.append(export_mod.LoggedQuery(
                query=text,
                model=row.model if row else "",
                attempt=row.attempt if row else None,
                generation_time=row.generation_time if row else None,
                matches=stat.matches,
                ids=list(stat.ids),
                unique_ids=unique,
                time_s=stat.time_s,
                error=stat.error,
            ))
        log_.merged_ids = list(result.ids)
        log_.document_count = len(result.documents)
        log_.incomplete = bool(getattr(result, "incomplete", False))
        log_.failed_queries = [{"query": q.query, "error": q.error, "kind": getattr(q, "error_kind", None)}
                               for q in result.queries if q.error]
        log_.run_started_at, log_.run_finished_at = run["started"], run["finished"]
        log_.database = run["database"]
        return log_

    def export_log(self, path: str | Path | None = None) -> Job | None:
        """Write the search log as JSON so the search can be reproduced."""
        if self.last_run is None:
            self.show_message("Run a search first: the log records the queries as they ran.", "warning")
            return None
        if path is None:
            path = self._ask_path("Export search log", "search-log.json", "JSON (*.json)")
            if path is None:
                return None
        return self.jobs.submit(
            KINDS["export"], lj.write_export, export_mod.export_search_log, self.search_log(), str(path),
            label="Exporting the search log", policy="queue", busy_cursor=False,
            on_result=lambda p: self._set_progress(f"Search log written to {p}"),
            on_error=lambda exc: self.show_message(f"Cannot write {path}: {exc}"),
        )


def _default_prompt() -> str:
    from kmds_desktop.literature.query_generation import DEFAULT_SYSTEM_PROMPT

    return DEFAULT_SYSTEM_PROMPT


def _app_version() -> str:
    try:
        from importlib.metadata import version

        return version("kmds-desktop")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return ""


def _short_error(error: str) -> str:
    text = error.split(": ", 1)[-1] if error.startswith(("LLM", "skipped")) else error
    return text if len(text) <= 80 else text[:77] + "…"


def _import_summary(report: Any) -> str:
    summary = getattr(report, "summary", None)
    return f"Imported {summary()}" if callable(summary) else f"Import finished: {report}"
