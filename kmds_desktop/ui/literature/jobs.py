"""The literature panel's job wiring: the database, generation, checks and runs on workers.

A mixin of :class:`~kmds_desktop.ui.literature.panel.LiteraturePanel`: each method hands one of the
session's slow functions (:mod:`kmds_desktop.app.literature`) to the window's
:class:`~kmds_desktop.ui.jobs.runner.JobRunner` and gives what comes back to the session, then shows
what the session says. Which rows a check takes, what a run runs, what a round's outcome means and
which messages a run leaves are the session's rules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kmds_desktop.app import literature as app_lit
from kmds_desktop.app import literature_data as lj
from kmds_desktop.app import run_facts, strategy
from kmds_desktop.app.doctor import server_notes
from kmds_desktop.app.messages import user_message
from kmds_desktop.app.presentation import plural
from kmds_desktop.app.search_log import utc_now
from kmds_desktop.ui.jobs.runner import Job

if TYPE_CHECKING:
    from kmds_desktop.ui.literature.panel import LiteraturePanel

#: The job kinds of the literature panel (one of each runs at a time; see JobRunner).
KINDS = {
    "open": "literature.open",
    "status": "literature.status",
    "check": "literature.check",
    "generate": "literature.generate",
    "run": "literature.run",
    "import": "literature.import",
    "embed": "literature.embed",
    "topk": "literature.topk",
    "export": "literature.export",
    "record": "history.record",
}


def _generate_round(agent: Any, question: str, *, chunk: Callable[[Any], None], progress: Any = None,
                    cancel: Any = None) -> Any:
    """The session's generation on a worker, with the rows the retrieval settings add (the question's
    semantic row, a hypothetical abstract): each item goes out as a chunk."""
    return app_lit.generate_round(agent, question, on_attempt=chunk, progress=progress, cancel=cancel,
                                  retrieval_rows=True)


class LiteratureJobs:
    """Database, generation, checks and runs of the literature panel (see the module docstring)."""

    # --- the database -----------------------------------------------------------------------------
    def _with_database(self: LiteraturePanel, then: Callable[[Any], None],
                       failed: Callable[[BaseException], None] | None = None) -> None:
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
    def database(self: LiteraturePanel) -> Any | None:
        """The open literature database, or None until something has needed it."""
        return self.db.database

    def _database_opened(self: LiteraturePanel, db: Any) -> None:
        for note in server_notes(db):  # the embedded server was found stuck and brought back
            self.show_message(note, "warning")
        for then in self.db.opened(db):
            then(db)

    def _database_failed(self: LiteraturePanel, exc: BaseException) -> None:
        waiting = self.db.failed(exc)
        self.status_changed.emit("Literature: database unavailable")
        self._show_error(exc, "The literature database is not available")
        for failed in waiting:
            failed(exc)

    def refresh_status(self: LiteraturePanel) -> None:
        """Count the documents in the database (status bar text and the empty-database hint)."""
        self._with_database(
            lambda db: self.jobs.submit(
                KINDS["status"], lj.database_status, db, self.session.embedding_model,
                use_database_vectors=self.settings.retrieval.use_database_vectors,
                label="Reading the literature database status",
                policy="latest", busy_cursor=False, on_result=self._status_arrived,
                on_error=lambda exc: self._show_error(exc, "Cannot read the literature database"),
            )
        )

    def _status_arrived(self: LiteraturePanel, status: dict[str, Any]) -> None:
        count = int(status.get("documents") or 0)
        self.document_count = count
        where = status.get("database") or ""
        self.vectors = status.get("vectors")
        self.database_vectors = status.get("database_vectors")
        vectors = lj.describe_vectors(self.vectors, self.database_vectors)
        self.topk = status.get("topk")
        fast = lj.describe_topk(self.topk, count)
        self.status_changed.emit(f"Literature: {count:,} documents" + (f", {vectors}" if vectors else "")
                                 + (f", {fast}" if fast else "") + (f" ({where})" if where else ""))
        # an import or an embedding run changed the counts: the rows' Matches follow
        self.review.database_counted(count, *lj.semantic_searchable(self.vectors, self.database_vectors))
        self.embed_button.setToolTip(self._embed_tooltip())
        self._update_buttons()  # Embed is offered only while some document lacks a vector
        self._update_results_page()
        self.recheck_failed()
        if self._run_after_embedding and not self.embedding:  # Embed first: the counts are new now
            self._run_after_embedding = False
            self.run_selected()

    def recheck_failed(self: LiteraturePanel) -> None:
        """Check again the rows whose check failed (database was down) once the database answers
        (the session announces them; the check timer starts on that)."""
        self.review.recheck_failed()

    # --- generation -------------------------------------------------------------------------------
    def generate(self: LiteraturePanel) -> Job | None:
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
        job = self.jobs.submit(
            KINDS["generate"], _generate_round, self.session.agent(self.database), question,
            label="Generating queries", policy="refuse", busy_cursor=False,
            on_chunk=self._on_attempt,
            on_result=lambda _result: self._generation_finished(rnd, cancelled=False),
            on_error=lambda exc: self._generation_failed(rnd, exc),
            on_cancelled=lambda: self._generation_finished(rnd, cancelled=True),
        )
        self._generation_job = job
        if job is not None:
            self.stage_started.emit()  # "Generated: …" of the round before is over
        self._set_progress("Generating: " + rnd.status_line())
        return self._watch(job)

    def _on_attempt(self: LiteraturePanel, result: Any) -> None:
        rnd = self.session.round
        self.review.accept_attempt(result)
        if rnd is not None and not rnd.finished:
            self._set_progress("Generating: " + rnd.status_line())

    def _generation_finished(self: LiteraturePanel, rnd: app_lit.GenerationRound, cancelled: bool) -> None:
        if self.session.round is not rnd:
            return
        self.session.finish_round(cancelled=cancelled)
        self._set_progress(rnd.status_line())
        self.show_message(rnd.summary(), rnd.summary_level())

    def _generation_failed(self: LiteraturePanel, rnd: app_lit.GenerationRound, exc: BaseException) -> None:
        if self.session.round is rnd:
            self.session.finish_round(cancelled=True)
            self._set_progress(rnd.status_line())
        self._show_error(exc, "Query generation failed")
        self._update_buttons()

    # --- checks -----------------------------------------------------------------------------------
    def _submit_checks(self: LiteraturePanel) -> None:
        """The pause in typing is over: check what the session says waits for a check."""
        items = self.session.take_checks()
        if not items:
            return
        self._with_database(
            lambda db: self._start_checks(db, items), lambda exc: self._checks_failed(items, exc)
        )

    def _start_checks(self: LiteraturePanel, db: Any, items: list[app_lit.CheckItem]) -> None:
        job = self.jobs.submit(
            KINDS["check"], app_lit.check_queries, self.session.agent(db), items, label="Checking queries",
            policy="latest", busy_cursor=False, on_chunk=self.review.apply_check,
            on_error=lambda exc: self._show_error(exc, "Cannot check the queries"),
        )
        if job is None:
            self._checks_ended(items)
            return
        job.finished.connect(lambda: self._checks_ended(items))

    def _checks_ended(self: LiteraturePanel, items: list[app_lit.CheckItem]) -> None:
        if self.session.checks_done(items):  # rows were edited meanwhile
            self._check_timer.start()

    def _checks_failed(self: LiteraturePanel, items: list[app_lit.CheckItem], exc: BaseException) -> None:
        for result in app_lit.not_checked(items, exc):
            self.review.apply_check(result)
        self._checks_ended(items)

    # --- running ----------------------------------------------------------------------------------
    def run_selected(self: LiteraturePanel, confirmed: bool = False) -> Job | None:
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
            plan.kinds,
            run_facts.coverage_from_status(self.document_count, self.vectors, self.database_vectors))
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

    def _start_run(self: LiteraturePanel, db: Any, plan: app_lit.RunPlan) -> Job | None:
        """Run the plan on a worker, numbered in the search history first (the one protocol of
        :mod:`kmds_desktop.app.strategy`, the CLI's too: a crash while it runs leaves the set
        incomplete; a failure or a cancel drops it)."""
        self.session.database_name = getattr(db, "display_name", "")
        n = len(plan.queries)
        job = self.jobs.submit(
            KINDS["run"], strategy.run_numbered, self._history_or_none(), self.session.question,
            strategy.run_details(self.session, plan, None), self.session.agent(db), plan,
            max_rows=self.settings.literature.max_rows, label="Running the ticked queries", policy="refuse",
            on_progress=lambda d, t, m: self._set_progress(f"Running ({d}/{t}): {m}"),
            on_result=lambda numbered: self._on_run_done(plan, numbered),
            on_error=self._on_run_failed,
            on_cancelled=lambda: self._set_progress("Search cancelled; the queries are unchanged."),
        )
        if job is None:
            return None
        self._work_job = job
        self.stage_started.emit()  # the generation's banner ends when its queries run
        self._set_progress(f"Running {n} {'query' if n == 1 else 'queries'}")
        return self._watch(job)

    def _on_run_failed(self: LiteraturePanel, exc: BaseException) -> None:
        self._set_progress("The search failed; your queries and ticks are unchanged.")
        self._show_error(exc, "The search failed")

    def _on_run_done(self: LiteraturePanel, plan: app_lit.RunPlan, numbered: strategy.NumberedRun) -> None:
        result = numbered.result
        run = self.session.apply_run(plan, result, utc_now())
        self._finish_record(numbered.number, run)
        self.review.refresh()
        self.results.show_documents(self.session.documents, self.session.results_line())
        self.results_label.setToolTip(self.session.coverage_sentence())
        self._set_progress(f"Search finished: {plural(len(result.documents), 'document')}.")
        for level, text in self.session.run_messages():
            self.show_message(text, level)
        self._update_results_page()
        if self.document_count == 0 and not result.documents:
            self.results.show_empty_hint(True)
        self.documents_changed.emit(self.documents.rowCount())
        self._update_buttons()
        self.recheck_failed()

    def _embed_then_run(self: LiteraturePanel) -> None:
        """Embed first: embed the documents without a vector, then run the ticked rows (asked again
        if embedding stopped short)."""
        self._run_after_embedding = True
        if self.embed_documents() is None and not self.embedding:
            self._run_after_embedding = False
