"""Running a literature session's ticked rows: the one sequence the window and the CLI both follow.

Why one place: a search is plan -> (coverage question) -> number the run in the search history ->
run the rows ID-only -> merge -> fetch once -> apply to the session -> complete the history's set.
Written twice (the window's job wiring and ``literature search``), the two drifted; here it is one
:class:`SearchRun`, whose steps the window spreads over threads and :func:`run_search` calls in a row.

Threads
    :meth:`SearchRun.execute` touches no session state (what it needs is read when the run is
    made), so the window calls it on a worker with a progress callback and a cancel token;
    :meth:`SearchRun.apply` changes the session and runs where the session lives (the GUI thread,
    the CLI's thread); :meth:`SearchRun.record` writes the history file, on a worker again in the
    window. A failure or a cancel while the rows run drops the set's number (see
    :func:`~kmds_desktop.app.strategy.run_numbered`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kmds_desktop.app.literature import LiteratureSession
from kmds_desktop.app.literature_plan import RunPlan, RunRecord
from kmds_desktop.app.search_log import utc_now
from kmds_desktop.app.strategy import NumberedRun, finish_recording, run_details, run_numbered
from kmds_desktop.literature.strategy.history import SavedSet
from kmds_desktop.literature.strategy.workbench import SearchWorkbench
from kmds_desktop.tasks import CancelToken, ProgressFn

__all__ = ["SearchOutcome", "SearchRun", "run_search"]


@dataclass(frozen=True)
class SearchRun:
    """One run of a session's ticked rows, made on the session's thread (:meth:`start`)."""

    session: LiteratureSession
    plan: RunPlan
    agent: Any
    workbench: SearchWorkbench | None
    max_rows: int
    question: str
    details: dict[str, Any]

    @classmethod
    def start(cls, session: LiteratureSession, plan: RunPlan, agent: Any, workbench: SearchWorkbench | None,
              *, max_rows: int) -> SearchRun:
        """The run of ``plan`` (from :meth:`LiteratureSession.plan_run`); ``workbench`` None: the run
        is not kept in the search history (the history could not be opened)."""
        return cls(session, plan, agent, workbench, max_rows, session.question,
                   run_details(session, plan, None))

    def execute(self, progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> NumberedRun:
        """Number the run in the history, then run the rows ID-only, merge and fetch (any thread)."""
        return run_numbered(self.workbench, self.question, self.details, self.agent, self.plan,
                            max_rows=self.max_rows, progress=progress, cancel=cancel)

    def apply(self, numbered: NumberedRun, finished_at: str) -> RunRecord:
        """Give the result to the session (the session's thread); the run is its screening source."""
        run = self.session.apply_run(self.plan, numbered.result, finished_at)
        if numbered.number is not None:
            self.session.recorded(run, numbered.number)
        return run

    def record(self, number: int, run: RunRecord, *, progress: ProgressFn | None = None,
               cancel: CancelToken | None = None) -> SavedSet:
        """Complete the history's set ``number`` with the applied run (any thread)."""
        if self.workbench is None:
            raise ValueError("this run has no search history to be recorded in")
        return finish_recording(self.workbench, number, run)


@dataclass(frozen=True)
class SearchOutcome:
    """What :func:`run_search` did: the applied run and the set it was saved as (None: not kept)."""

    run: RunRecord
    saved: SavedSet | None

    @property
    def result(self) -> Any:
        """The run's :class:`~kmds_desktop.literature.queries.agent.ReviewedSearchResult`."""
        return self.run.result


def run_search(session: LiteratureSession, agent: Any, *, max_rows: int,
               workbench: SearchWorkbench | None = None, warn: Callable[[str], None] | None = None,
               progress: ProgressFn | None = None, cancel: CancelToken | None = None,
               now: Callable[[], str] = utc_now) -> SearchOutcome:
    """Plan, run, apply and record the session's ticked rows on this thread (``literature search``).

    ``warn`` hears the coverage question the window asks before semantic rows search a partly
    embedded database (:meth:`LiteratureSession.coverage_warning`, by the session's newest status
    read); here the run goes on. Raises the review rules' ``QueryAgentError`` when nothing can run;
    ``workbench`` defaults to the session's search history.
    """
    plan = session.plan_run(now())
    warning = session.coverage_warning(plan)
    if warning and warn is not None:
        warn(warning)
    search = SearchRun.start(session, plan, agent, workbench if workbench is not None else session.history(),
                             max_rows=max_rows)
    numbered = search.execute(progress, cancel)
    run = search.apply(numbered, now())
    saved = search.record(numbered.number, run) if numbered.number is not None else None
    if saved is not None:
        session.history_saved(saved.number)
    return SearchOutcome(run, saved)
