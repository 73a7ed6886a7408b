"""Running the ticked rows of the literature view: the application's one search sequence on workers.

A part given the session, its review model, the window's job runner and the database link. The
sequence is :class:`~kmds_desktop.app.literature_run.SearchRun`'s, the one ``literature search``
follows: the run is numbered in the search history and its rows run on a worker, applied to the
session here (the GUI thread), and completed in the history on a worker again. The coverage question
(semantic rows on a partly embedded database) is the session's; this part asks it through
:attr:`coverage_asked`. What it has to say goes out as signals.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Signal

from kmds_desktop.app import literature as app_lit
from kmds_desktop.app.literature_run import SearchRun
from kmds_desktop.app.messages import user_message
from kmds_desktop.app.presentation import plural
from kmds_desktop.app.search_log import utc_now
from kmds_desktop.app.strategy import NumberedRun
from kmds_desktop.ui.jobs.job import Job
from kmds_desktop.ui.jobs.runner import JobRunner
from kmds_desktop.ui.literature.database import KINDS, DatabaseLink


class SearchRunner(QObject):
    """Runs the session's ticked rows and records the run (see the module docstring)."""

    message = Signal(str, str)  # level, text
    progress = Signal(str)
    #: A run started: the generation's banner ends when its queries run.
    stage_started = Signal()
    #: Semantic rows would search a partly embedded database: the question to ask (Embed first / Run anyway).
    coverage_asked = Signal(str)
    #: A run's result was applied to the session (the results are the session's documents now).
    finished = Signal()
    #: A run started or ended (what the buttons offer may change).
    state_changed = Signal()

    def __init__(self, session: app_lit.LiteratureSession, jobs: JobRunner, link: DatabaseLink,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.jobs = jobs
        self.link = link
        self._job: Job | None = None

    @property
    def running(self) -> bool:
        """A run is under way."""
        return self._job is not None and not self._job.done

    def cancel(self) -> None:
        """Cancel the running search (the backend call is aborted)."""
        if self._job is not None and self.running:
            self._job.cancel()

    def run(self, confirmed: bool = False) -> Job | None:
        """Run exactly the ticked rows as shown (never regenerates). When a semantic row would search a
        partly embedded database (the session's newest status read decides), :attr:`coverage_asked`
        asks first, unless ``confirmed``."""
        try:
            plan = self.session.plan_run(utc_now())
        except Exception as exc:  # noqa: BLE001 - the review rules' verdict, shown as a message
            self.message.emit("warning", user_message(exc))
            return None
        warning = None if confirmed else self.session.coverage_warning(plan)
        if warning:
            self.coverage_asked.emit(warning)
            self.progress.emit("Not run yet: choose Embed first or Run anyway above the table.")
            return None
        holder: dict[str, Job | None] = {}

        def start(db: Any) -> None:
            holder["job"] = self._start(db, plan)

        self.link.with_database(start)
        return holder.get("job")

    def _history_or_none(self) -> Any:
        """The search history a run is numbered in, or None (with a warning) when it cannot be
        opened: the search still runs, it is only not kept."""
        try:
            return self.session.history()
        except Exception as exc:  # noqa: BLE001 - the search itself can go on; say why it is not kept
            self.message.emit("warning", f"The run is not added to the search history: {user_message(exc)}")
            return None

    def _start(self, db: Any, plan: app_lit.RunPlan) -> Job | None:
        search = SearchRun.start(self.session, plan, self.session.agent(db), self._history_or_none(),
                                 max_rows=self.session.literature.max_rows)
        n = len(plan.queries)
        job = self.jobs.submit(
            KINDS["run"], self._execute, search, label="Running the ticked queries", policy="refuse",
            on_progress=lambda d, t, m: self.progress.emit(f"Running ({d}/{t}): {m}"),
            on_result=lambda numbered: self._done(search, numbered),
            on_error=self._failed,
            on_cancelled=lambda: self.progress.emit("Search cancelled; the queries are unchanged."),
        )
        if job is None:
            return None
        self._job = job
        for signal in (job.result, job.error, job.cancelled, job.finished):
            signal.connect(lambda *_args: self.state_changed.emit())
        self.stage_started.emit()
        self.progress.emit(f"Running {n} {'query' if n == 1 else 'queries'}")
        self.state_changed.emit()
        return job

    @staticmethod
    def _execute(search: SearchRun, *, progress: Any = None, cancel: Any = None) -> NumberedRun:
        return search.execute(progress, cancel)

    def _failed(self, exc: BaseException) -> None:
        self.progress.emit("The search failed; your queries and ticks are unchanged.")
        self.message.emit("error", user_message(exc, "The search failed"))

    def _done(self, search: SearchRun, numbered: NumberedRun) -> None:
        run = search.apply(numbered, utc_now())
        if numbered.number is not None:
            self._record(search, numbered.number, run)
        self.progress.emit(f"Search finished: {plural(len(run.result.documents), 'document')}.")
        self.finished.emit()
        for level, text in self.session.run_messages():
            self.message.emit(level, text)

    def _record(self, search: SearchRun, number: int, run: app_lit.RunRecord) -> None:
        """Complete the set the run was numbered as, on a worker."""
        self.jobs.submit(
            KINDS["record"], self._complete, search, number, run,
            label="Saving the run in the search history", policy="queue", busy_cursor=False,
            on_result=lambda saved: self.session.history_saved(saved.number),
            on_error=lambda exc: self.message.emit(
                "warning", f"The run was not added to the search history: {user_message(exc)}"),
        )

    @staticmethod
    def _complete(search: SearchRun, number: int, run: app_lit.RunRecord, *, progress: Any = None,
                  cancel: Any = None) -> Any:
        return search.record(number, run)
