"""A run of the ticked rows: what was planned, what ran, and what the user must read about it.

Why its own module: :class:`RunPlan` is made on the session's thread and carried to a worker,
:func:`execute_run` runs it there, and :class:`RunRecord` is what the session keeps afterwards (the
search log, the history and the report read it); the sentences about a finished run (how many
documents, what a semantic row could not see, which rows were cut or lost) are the record's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kmds_desktop.app.literature_rows import MAX_ROWS_WHERE, noun
from kmds_desktop.app.run_facts import run_coverage
from kmds_desktop.literature.queries.agent import QueryAgent
from kmds_desktop.literature.retrieval.query_run import QUOTED_QUERY_CHARS, ReviewedSearchResult
from kmds_desktop.literature.retrieval.semantic import ROW_TSQUERY, SearchRow
from kmds_desktop.literature.store.topk_tiers import tier_sentence
from kmds_desktop.tasks import CancelToken, ProgressFn
from kmds_desktop.text import shorten


@dataclass
class RunPlan:
    """The ticked rows as they were when Run was pressed, and the queries the agent will run."""

    rows: list[tuple[int, int, str]]  # (uid, revision, text) of each ticked row, in table order
    queries: list[str]  # after the review rules (de-duplication): exactly what runs
    row_of_query: list[int]  # uid of the row each query came from
    started_at: str = ""
    kinds: list[str] = field(default_factory=list)  # per query: its row type ("tsquery" when empty)
    question: str = ""  # what semantic re-ranking compares the candidates with

    def search_rows(self) -> list[SearchRow]:
        """The queries with their row types, as the agent runs them."""
        kinds = self.kinds or [ROW_TSQUERY] * len(self.queries)
        return [SearchRow(q, k) for q, k in zip(self.queries, kinds, strict=True)]


@dataclass
class RunRecord:
    """The last finished run: what ran, what it found, when."""

    plan: RunPlan
    result: ReviewedSearchResult
    provenance: list[dict[str, Any]]  # per query that ran, as the rows said when it ran
    labels: list[str]  # per query that ran: the Model column at the time
    started_at: str
    finished_at: str
    database: str
    #: the retrieval as it ran (embedding model, vector coverage, fusion, re-ranking), taken when the
    #: run was applied: :func:`kmds_desktop.app.run_facts.retrieval_facts`
    facts: dict[str, Any] = field(default_factory=dict)

    def results_line(self) -> str:
        """The line above the documents: how many, from how many queries, how long, and INCOMPLETE
        when a valid query could not run."""
        result = self.result
        incomplete = " (INCOMPLETE: see the failed rows' Error column)" if result.incomplete else ""
        n = len(result.queries)
        return (f"{len(result.documents):,} documents from {len(result.ok_queries)} of {n} "
                f"{noun(n, 'query', 'queries')} ({result.total_time_s:.2f} s){incomplete}")

    def messages(self) -> list[tuple[str, str]]:
        """(level, text) the user must read after the run: an incomplete run is an error (a
        systematic search is never silently partial); failed rows a warning; a semantic row that
        searched a partly embedded database a warning that says how many documents it could not see."""
        result = self.result
        messages: list[tuple[str, str]] = []
        coverage = run_coverage(result.queries)
        if coverage is not None and coverage.partial and not result.failed_queries:
            if coverage.vectors:  # the database's own vectors: its own embedding run adds the others
                messages.append(("warning", f"{self.coverage_sentence()}; the other {coverage.missing:,} "
                                            f"{noun(coverage.missing, 'has', 'have')} no vector of that "
                                            "model in the database yet."))
            else:
                messages.append(("warning", f"{self.coverage_sentence()}; Embed documents to search the "
                                            f"other {coverage.missing:,}."))
        tiered = tier_sentence([q.index + 1 for q in result.queries if q.ok and q.ranked_in_tier])
        if tiered:  # the order of a broad row differs from ranking every match: the user is told
            messages.append(("info", tiered + "."))
        capped = [q for q in result.queries if q.capped]
        if capped:  # the documents are the best of each row, not all it matched: said, not silent
            rows = "; ".join(f"row {q.index + 1}: showing {q.ids_returned:,} of {q.matches or 0:,}"
                             for q in capped)
            messages.append(("info", f"{rows[:1].upper()}{rows[1:]} matching documents: raise the limit "
                                     f"in {MAX_ROWS_WHERE}."))
        if result.incomplete:
            message = result.incomplete_message()
            messages.append(("error", message[:1].upper() + message[1:]))
        elif result.failed_queries:
            messages.append(("warning", self.summary()))
        return messages

    def coverage_sentence(self) -> str:
        """What the run's semantic rows searched, as the log and the report say it ("" when no
        semantic row ran)."""
        coverage = run_coverage(self.result.queries)
        if coverage is None:
            return ""
        rows = sum(1 for q in self.result.queries if q.kind != ROW_TSQUERY and q.ok)
        sentence = coverage.sentence(rows)
        return sentence[:1].upper() + sentence[1:]

    def summary(self) -> str:
        """The run in one line: documents, queries, the merge, what a semantic row could not see, and
        the rows that could not run."""
        result = self.result
        text = (f"{len(result.documents):,} documents from {len(result.ok_queries)} of "
                f"{len(result.queries)} {noun(len(result.queries), 'query', 'queries')}")
        if any(q.kind != ROW_TSQUERY for q in result.queries) or result.fusion != "best_rank":
            text += f" (merged: {result.fusion})"
        coverage = run_coverage(result.queries)
        if coverage is not None:  # a reader must know what a semantic row could not see
            semantic = sum(1 for q in result.queries if q.kind != ROW_TSQUERY and q.ok)
            text += "; " + coverage.sentence(semantic)
        failed = result.failed_queries
        if failed:
            text += "; could not run: " + "; ".join(
                f"'{shorten(q.query, QUOTED_QUERY_CHARS)}': {shorten(q.error or '')}" for q in failed)
        return text


def execute_run(agent: QueryAgent, plan: RunPlan, *, max_rows: int, progress: ProgressFn | None = None,
                cancel: CancelToken | None = None) -> ReviewedSearchResult:
    """Run exactly the plan's queries (ID-only, merged, fetched once). Re-ranking by similarity to the
    question (``retrieval.rerank``) applies when a semantic row runs: only then are vectors at hand."""
    rows = plan.search_rows()
    question = plan.question if any(r.semantic for r in rows) else None
    return agent.run_reviewed_queries(rows, max_rows=max_rows, progress=progress, cancel=cancel,
                                      question=question)


