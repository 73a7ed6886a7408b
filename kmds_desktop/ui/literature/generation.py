"""Generation and checks of the literature view, on workers.

A part given the session, its review model, the window's job runner and the database link. It hands
the session's slow functions (:func:`~kmds_desktop.app.literature.generate_round`,
:func:`~kmds_desktop.app.literature.check_queries`) to the runner and gives what comes back to the
session (through the review model, which tells the table); which rows a check takes, what generating
again replaces and what a round's outcome means are the session's rules. Checks start after a pause
in typing (:data:`~kmds_desktop.app.literature.CHECK_DELAY_S`) once the session announces rows that
wait for one. What it has to say goes out as signals.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from kmds_desktop.app import literature as app_lit
from kmds_desktop.app.events import Change
from kmds_desktop.app.messages import user_message
from kmds_desktop.app.search_log import utc_now
from kmds_desktop.ui.jobs.job import Job
from kmds_desktop.ui.jobs.runner import JobRunner
from kmds_desktop.ui.literature.database import KINDS, DatabaseLink
from kmds_desktop.ui.literature.review_model import ReviewModel


def _generate_round(agent: Any, question: str, *, chunk: Callable[[Any], None], progress: Any = None,
                    cancel: Any = None) -> Any:
    """The session's generation on a worker, with the rows the retrieval settings add (the question's
    semantic row, a hypothetical abstract): each item goes out as a chunk."""
    return app_lit.generate_round(agent, question, on_attempt=chunk, progress=progress, cancel=cancel,
                                  retrieval_rows=True)


class QueryGeneration(QObject):
    """Generation rounds and query checks for one session (see the module docstring)."""

    message = Signal(str, str)  # level, text
    progress = Signal(str)
    #: A generation started: the banner about what came before has ended.
    stage_started = Signal()
    #: A generation started or ended (what the buttons offer may change).
    state_changed = Signal()

    def __init__(self, session: app_lit.LiteratureSession, review: ReviewModel, jobs: JobRunner,
                 link: DatabaseLink, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.review = review
        self.jobs = jobs
        self.link = link
        self._job: Job | None = None
        self.check_timer = QTimer(self)
        self.check_timer.setSingleShot(True)
        self.check_timer.setInterval(round(app_lit.CHECK_DELAY_S * 1000))
        self.check_timer.timeout.connect(self._submit_checks)
        self._unsubscribe = session.subscribe(self._session_changed)

    def _session_changed(self, change: Change) -> None:
        if change.kind == app_lit.CHECKS_WANTED:
            self.check_timer.start()

    @property
    def running(self) -> bool:
        """A generation round is under way."""
        return self._job is not None and not self._job.done

    # --- generation -------------------------------------------------------------------------------
    def generate(self, question: str) -> Job | None:
        """A generation round for ``question``: each configured model in turn, rows as they arrive.

        Generating again replaces the generated rows not yet edited or run (the session's rule);
        hand-written and edited rows stay, and a proposal equal to one of them is not added again.
        """
        if self.running:
            self.message.emit("warning", "Queries are being generated; stop that first or wait for it.")
            return None
        try:
            rnd = self.review.begin_round(question, utc_now())
        except ValueError:
            self.message.emit("warning", "Type a research question first.")
            return None
        job = self.jobs.submit(
            KINDS["generate"], _generate_round, self.session.agent(self.link.database), question,
            label="Generating queries", policy="refuse", busy_cursor=False,
            on_chunk=self._on_attempt,
            on_result=lambda _result: self._finished(rnd, cancelled=False),
            on_error=lambda exc: self._failed(rnd, exc),
            on_cancelled=lambda: self._finished(rnd, cancelled=True),
        )
        self._job = job
        if job is not None:
            self.stage_started.emit()  # "Generated: …" of the round before is over
            for signal in (job.result, job.error, job.cancelled, job.finished):
                signal.connect(lambda *_args: self.state_changed.emit())
        self.progress.emit("Generating: " + rnd.status_line())
        self.state_changed.emit()
        return job

    def stop(self) -> None:
        """Cancel the generation in progress (the model's request is aborted)."""
        if self._job is not None and self.running:
            self._job.cancel()

    def _on_attempt(self, result: Any) -> None:
        rnd = self.session.round
        self.review.accept_attempt(result)
        if rnd is not None and not rnd.finished:
            self.progress.emit("Generating: " + rnd.status_line())

    def _finished(self, rnd: app_lit.GenerationRound, cancelled: bool) -> None:
        if self.session.round is not rnd:
            return
        self.session.finish_round(cancelled=cancelled)
        self.progress.emit(rnd.status_line())
        self.message.emit(rnd.summary_level(), rnd.summary())

    def _failed(self, rnd: app_lit.GenerationRound, exc: BaseException) -> None:
        if self.session.round is rnd:
            self.session.finish_round(cancelled=True)
            self.progress.emit(rnd.status_line())
        self.message.emit("error", user_message(exc, "Query generation failed"))
        self.state_changed.emit()

    # --- checks -----------------------------------------------------------------------------------
    def _submit_checks(self) -> None:
        """The pause in typing is over: check what the session says waits for a check."""
        items = self.session.take_checks()
        if not items:
            return
        self.link.with_database(lambda db: self._start_checks(db, items),
                                lambda exc: self._checks_failed(items, exc))

    def _start_checks(self, db: Any, items: list[app_lit.CheckItem]) -> None:
        job = self.jobs.submit(
            KINDS["check"], app_lit.check_queries, self.session.agent(db), items, label="Checking queries",
            policy="latest", busy_cursor=False, on_chunk=self.review.apply_check,
            on_error=lambda exc: self.message.emit("error", user_message(exc, "Cannot check the queries")),
        )
        if job is None:
            self._checks_ended(items)
            return
        job.finished.connect(lambda: self._checks_ended(items))

    def _checks_ended(self, items: list[app_lit.CheckItem]) -> None:
        if self.session.checks_done(items):  # rows were edited meanwhile
            self.check_timer.start()

    def _checks_failed(self, items: list[app_lit.CheckItem], exc: BaseException) -> None:
        for result in app_lit.not_checked(items, exc):
            self.review.apply_check(result)
        self._checks_ended(items)

    def close(self) -> None:
        """Stop listening and checking (the panel is going)."""
        self.check_timer.stop()
        self._unsubscribe()
