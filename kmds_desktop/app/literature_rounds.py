"""A generation round: the models asked, each attempt as it finishes, and the rows the retrieval settings add.

Why its own module: a round is state the session keeps (:class:`GenerationRound`, its status line and
summary) plus the slow step that fills it (:func:`generate_round`, run on a worker by the window and in
sequence by ``literature search``); both speak of models, attempts and the hypothetical abstract, and
nothing else of the session.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kmds_desktop.app.literature_rows import noun
from kmds_desktop.config import QueryGenerationSettings
from kmds_desktop.literature.errors import QueryAgentError, VectorsUnavailable
from kmds_desktop.literature.queries.agent import QueryAgent
from kmds_desktop.literature.queries.query_generation import QueryGenerationResult
from kmds_desktop.literature.store.facade import LiteratureStore
from kmds_desktop.tasks import Cancelled, CancelToken, ProgressFn, check, report

log = logging.getLogger(__name__)


@dataclass
class ModelProgress:
    """How one model is doing in the current round (the status line names the right model)."""

    model: str
    expected: int
    answered: int = 0
    queries: int = 0
    seconds: float = 0.0
    error: str | None = None

    @property
    def finished(self) -> bool:
        return self.answered >= self.expected

    def describe(self, running: bool, stopped: bool = False, interrupted: bool = False) -> str:
        """The model's part of the status line; ``stopped``: the round ended before it finished (Stop
        generating), so it is no longer "waiting"; ``interrupted``: it was answering then."""
        if self.finished:
            if self.queries and self.queries < self.expected:
                missing = self.expected - self.queries
                return (f"{self.model}: ✓ {self.queries} of {self.expected} ({self.seconds:.1f} s), "
                        f"{missing} failed: {self.error or 'no query'}")
            if self.queries:
                return f"{self.model}: ✓ {self.queries} ({self.seconds:.1f} s)"
            return f"{self.model}: ✗ {self.error or 'no query'}"
        if stopped:
            if self.queries:
                return f"{self.model}: ✓ {self.queries}, then stopped"
            return f"{self.model}: stopped" if interrupted else f"{self.model}: not asked (stopped)"
        if running:
            return f"{self.model}: query {self.answered + 1} of {self.expected}"
        return f"{self.model}: waiting"


@dataclass
class RetrievalRows:
    """What a round adds besides the models' queries (see :func:`plan_retrieval_rows`)."""

    semantic: str | None = None  # the question, as a semantic row
    hypothetical_model: str | None = None  # the LLM asked for a hypothetical abstract
    with_vectors: int = 0  # documents with a vector (none: neither row is added)
    reason: str = ""  # why no row is added, for a status line


@dataclass
class HypotheticalAttempt:
    """An LLM's hypothetical abstract for the question, or why it could not write one."""

    model: str
    abstract: str = ""
    seconds: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return bool(self.abstract) and self.error is None


@dataclass
class GenerationRound:
    """One press of Generate: the question, the plan, and every attempt as it finished."""

    number: int
    question: str
    models: list[str]
    queries_per_model: int
    temperature: float
    system_prompt: str
    generated_at: str
    attempts: list[QueryGenerationResult] = field(default_factory=list)
    progress: dict[str, ModelProgress] = field(default_factory=dict)
    finished: bool = False
    cancelled: bool = False
    offered: list[str] = field(default_factory=list)  # the queries this round added as rows
    repeats_dropped: int = 0  # proposals equal to a row already shown
    #: Rows of an earlier question that stayed in the table and were unticked when the round began.
    unticked_previous: int = 0
    #: The model asked for a hypothetical abstract after the query models (None: none is asked).
    hypothetical_model: str | None = None
    hypothetical: HypotheticalAttempt | None = None  # its outcome, once it answered

    @property
    def current_model(self) -> str | None:
        """The model answering now (None when every model has answered)."""
        if self.finished or self.cancelled:
            return None
        for model in self.models:
            if not self.progress[model].finished:
                return model
        return None

    def status_line(self) -> str:
        current = self.current_model
        stopped = self.cancelled or self.finished
        # Models answer one after another: the first unfinished one was answering when it stopped.
        interrupted = next((m for m in self.models if not self.progress[m].finished), None)
        parts = [self.progress[m].describe(m == current, stopped, stopped and m == interrupted)
                 for m in self.models]
        if self.hypothetical_model is not None:
            parts.append(self._hypothetical_status(running=current is None))
        return " · ".join(parts)

    def _hypothetical_status(self, running: bool) -> str:
        done = self.hypothetical
        if done is not None and done.ok:
            return f"hypothetical abstract: ✓ {done.model} ({done.seconds:.1f} s)"
        if done is not None:
            return f"hypothetical abstract: ✗ {done.error}"
        if self.finished or self.cancelled:
            return "hypothetical abstract: not written"
        return f"hypothetical abstract: {self.hypothetical_model} writing" if running else \
            "hypothetical abstract: waiting"

    @property
    def hypothetical_failed(self) -> bool:
        return self.hypothetical is not None and not self.hypothetical.ok

    def summary(self) -> str:
        """What the round produced, counting only what really happened."""
        ok = [p for p in self.progress.values() if p.queries]
        failed = [p for p in self.progress.values() if p.finished and not p.queries]
        proposals = sum(p.queries for p in ok)
        head = "Generation cancelled" if self.cancelled else "Generated"
        text = (f"{head}: {proposals} {noun(proposals, 'query', 'queries')} from "
                f"{len(ok)} of {len(self.models)} {noun(len(self.models), 'model', 'models')}")
        if self.repeats_dropped:
            text += f" ({self.repeats_dropped} already in the table)"
        if self.unticked_previous:
            n = self.unticked_previous
            text += (f"; {n} {noun(n, 'row', 'rows')} of the previous question "
                     f"{noun(n, 'was', 'were')} unticked (New search clears them)")
        if failed:
            text += "; failed: " + "; ".join(f"{p.model}: {p.error or 'no query'}" for p in failed)
        partial = [p for p in ok if p.finished and p.queries < p.expected]
        if partial:
            text += "; fewer than asked: " + "; ".join(
                f"{p.model}: {p.queries} of {p.expected} ({p.error or 'no query'})" for p in partial)
        if self.hypothetical is not None and self.hypothetical.ok:
            text += f"; a hypothetical abstract from {self.hypothetical.model}"
        elif self.hypothetical is not None:
            text += f"; no hypothetical-abstract row: {self.hypothetical.error}"
        return text

    def summary_level(self) -> str:
        """How the :meth:`summary` is shown: ``"warning"`` when the round was stopped, a model gave
        no query or the hypothetical abstract failed (the user should read why), else ``"info"``."""
        failed = any(p.finished and p.queries < p.expected for p in self.progress.values())
        return "warning" if failed or self.cancelled or self.hypothetical_failed else "info"


def planned_models(qg: QueryGenerationSettings) -> tuple[list[str], int]:
    """Models and queries per model a round uses (the agent's own rule)."""
    return QueryAgent(None, qg).planned_models()


def plan_retrieval_rows(agent: QueryAgent, question: str, *,
                        cancel: CancelToken | None = None) -> RetrievalRows:
    """Which rows the ``retrieval`` settings add for ``question`` on the agent's database.

    Both need document vectors (a semantic row finds nothing without them, and a search must never
    wait for embedding): with none, neither is added and ``reason`` says why. The hypothetical
    abstract also needs an LLM among the configured models (``builtin:`` generators write none).
    """
    r = agent.retrieval
    question = (question or "").strip()
    if not question or not (r.semantic_row or r.hypothetical_row):
        return RetrievalRows(reason="semantic rows are off in Preferences > Retrieval")
    if agent.database is None:
        return RetrievalRows(reason="the literature database is not open")
    check(cancel)
    store = LiteratureStore(agent.database)
    try:  # one count (what the semantic row will search), not the status's count of those to embed
        with_vectors = store.documents_with_vectors(cancel=cancel)
    except VectorsUnavailable:
        with_vectors = 0
    except Exception as err:  # noqa: BLE001 - no vectors to search; the full-text rows still run
        if cancel is not None and cancel.cancelled:
            raise Cancelled("cancelled by the user") from None
        return RetrievalRows(reason=f"document vectors unavailable: {err}")
    if with_vectors == 0:  # a BMLibrarian database's own vectors serve the row too
        try:
            own = store.own_vectors(use_database_vectors=r.use_database_vectors, cancel=cancel)
        except Cancelled:
            raise
        except Exception as err:  # noqa: BLE001 - none to search; the full-text rows still run
            log.warning("the database's own vectors could not be read: %s", err)
            own = None
        with_vectors = int(own["with_vectors"]) if own else 0
    if with_vectors == 0:
        return RetrievalRows(reason="no document has a vector yet (embedding runs after an import)")
    model = agent.llm_model() if r.hypothetical_row else None
    return RetrievalRows(semantic=question if r.semantic_row else None, hypothetical_model=model,
                         with_vectors=with_vectors)


def write_hypothetical(agent: QueryAgent, question: str, *,
                       cancel: CancelToken | None = None) -> HypotheticalAttempt:
    """The agent's first LLM writes an abstract that would answer ``question``; a failure is returned
    (with the reason), not raised, so the other rows of the round stay usable. A cancel raises."""
    model = agent.llm_model() or "(no LLM)"
    started = time.perf_counter()
    try:
        abstract = agent.hypothetical_abstract(question, cancel=cancel)
    except QueryAgentError as err:
        if cancel is not None and cancel.cancelled:
            raise Cancelled("cancelled by the user") from None
        return HypotheticalAttempt(model, seconds=time.perf_counter() - started, error=str(err))
    return HypotheticalAttempt(model, abstract, time.perf_counter() - started)


def generate_round(agent: QueryAgent, question: str, *, on_attempt: Callable[[Any], None],
                   progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                   retrieval_rows: bool = False) -> Any:
    """Ask the models (through the agent, one call at a time); each attempt goes to ``on_attempt``.

    With ``retrieval_rows`` the round also gets the rows the ``retrieval`` settings add: first the
    :class:`RetrievalRows` plan, then the models' :class:`QueryGenerationResult` s, then (when the
    plan names a model) the :class:`HypotheticalAttempt`, all through ``on_attempt`` in that order.
    """
    plan = plan_retrieval_rows(agent, question, cancel=cancel) if retrieval_rows else None
    if plan is not None:
        on_attempt(plan)
    result = agent.convert_question_multi_model(question, progress=progress, cancel=cancel,
                                                on_result=on_attempt)
    if plan is not None and plan.hypothetical_model is not None:
        check(cancel)
        report(progress, 0, None, f"{plan.hypothetical_model} is writing a hypothetical abstract")
        on_attempt(write_hypothetical(agent, question, cancel=cancel))
    return result


