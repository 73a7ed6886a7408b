"""The literature query agent: question -> generated queries -> review -> ID-only runs -> merged documents.

Why this shape: BMLibrarian regenerated queries behind the user's back and returned its newest, not
its best, hits. Here queries are generated **once**; what runs is exactly the list the user reviewed
(``run_reviewed_queries`` never generates); each query runs as an ID-only query (cheap: no abstracts
cross the wire), serially, so the database is not flooded; the ID sets are merged and ordered by the
best rank any query gave a document; the union is fetched **once** in batches.

How the ``query_generation`` settings act here:

- ``multi_model_enabled``: off -> ``queries_per_model`` queries from the first model; on -> every
  model in ``models`` x ``queries_per_model`` (default 3: strict, medium, broad for the built-in
  generator).
- ``models``, ``queries_per_model``, ``temperature``, ``ollama_host``, ``timeout_s``: passed to the
  generator.
- ``deduplicate_results``: off -> every successful query is kept, so equal queries run twice (the
  statistics then show it); on -> case/spacing-insensitive de-duplication before anything runs.
- ``show_all_queries_to_user``: the review table lists every query each model produced, repeats
  included (greyed, unticked) when on, only the unique ones when off (the GUI's choice). The
  human-in-the-loop modifier of :meth:`QueryAgent.find_abstracts_multi_query` receives the unique
  queries either way, as BMLibrarian documents (``human_query_modifier(result.unique_queries)``);
  whatever it returns is de-duplicated again (if de-duplication is on) before running.
- ``allow_query_selection``: off -> the modifier may edit queries but not drop any (returning fewer
  queries than it was shown raises :class:`QueryAgentError`); on -> it may tick a subset.
- ``execution_mode``: only "serial" exists (validated in :mod:`kmds_desktop.config`).

Rows of other kinds (:mod:`kmds_desktop.literature.retrieval.semantic`): a ``semantic`` row embeds
its sentence
and runs an ID-only nearest-neighbour query on the document vectors; a ``hypothetical`` row does the
same with an abstract an LLM wrote. The ticked rows' ranked ID lists are merged as the ``retrieval``
settings say (:mod:`kmds_desktop.literature.retrieval.fusion`): reciprocal rank fusion by default, optionally
re-ranked by similarity to the question. Running, fusing and fetching are retrieval's job
(:mod:`kmds_desktop.literature.retrieval.query_run`): :meth:`QueryAgent.run_reviewed_queries` hands the
reviewed rows to a :class:`~kmds_desktop.literature.retrieval.query_run.QueryRun` with the agent's
settings; this module generates and reviews.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import date
from typing import Any

from kmds_desktop.config import QueryGenerationSettings, RetrievalSettings
from kmds_desktop.literature.errors import LiteratureError, QueryAgentError
from kmds_desktop.literature.queries.keyword_queries import is_builtin
from kmds_desktop.literature.queries.query_cleaning import deduplicate_queries
from kmds_desktop.literature.queries.query_generation import (
    DEFAULT_SYSTEM_PROMPT,
    ChatBackend,
    MultiModelQueryGenerator,
    MultiModelQueryResult,
    QueryGenerationResult,
)
from kmds_desktop.literature.retrieval.fusion import merge_ranked
from kmds_desktop.literature.retrieval.query_run import (
    QUOTED_QUERY_CHARS,
    QueryRun,
    QueryRunStats,
    ReviewedSearchResult,
)
from kmds_desktop.literature.retrieval.semantic import (
    ROW_HYPOTHETICAL,
    ROW_SEMANTIC,
    SearchRow,
)
from kmds_desktop.tasks import CancelToken, ProgressFn

#: Names that moved to :mod:`kmds_desktop.literature.retrieval.query_run` (running and fusing) stay
#: importable from here, where callers and the documented interface have always found them.
__all__ = [
    "QUOTED_QUERY_CHARS", "IncompleteSearch", "QueryAgent", "QueryAgentError", "QueryModifier",
    "QueryRunStats", "ReviewedSearchResult", "merge_ranked",
]

log = logging.getLogger(__name__)

#: ``modifier(queries) -> queries``: the human-in-the-loop review (edit, tick) before anything runs.
QueryModifier = Callable[[list[str]], Sequence[str]]


class IncompleteSearch(QueryAgentError):  # noqa: N818 - a public name: renaming it would break callers
    """Some reviewed queries could not run (lost connection, timeout): the documents are only part of
    what the reviewed list finds. ``result`` holds everything that did run, the failed queries included."""

    def __init__(self, result: ReviewedSearchResult) -> None:
        self.result = result
        super().__init__(result.incomplete_message())



class QueryAgent:
    """Generate, review and run literature queries against one :class:`LiteratureDatabase`.

    ``database`` is needed to run queries (and lets ``builtin:keywords`` stem words); ``settings`` is
    the ``query_generation`` section (defaults when None); ``backend`` answers the LLM models (when
    None, a :class:`~kmds_desktop.llm.ModelDispatch` made from the settings' servers).
    """

    def __init__(self, database: Any = None, settings: QueryGenerationSettings | None = None, *,
                 backend: ChatBackend | None = None, system_prompt: str | None = None,
                 fetch_batch_size: int = 50, retrieval: RetrievalSettings | None = None,
                 embedding_model: str = "all-MiniLM-L6-v2", encoder: Any = None) -> None:
        self.database = database
        self.settings = settings or QueryGenerationSettings()
        self.retrieval = retrieval or RetrievalSettings()
        self.embedding_model = embedding_model
        #: who embeds semantic rows' texts (None: this process; see ``literature.store.vectors.Encoder``)
        self.encoder = encoder
        self.system_prompt = system_prompt or DEFAULT_SYSTEM_PROMPT
        self.fetch_batch_size = fetch_batch_size
        # vectors (numpy, psycopg's vector type) loads on first use, as the semantic rows' imports do.
        from kmds_desktop.literature.store.vectors import encoder_for

        self.generator = MultiModelQueryGenerator(
            backend, ollama_host=self.settings.ollama_host, timeout=self.settings.timeout_s,
            database=database, deduplicate=self.settings.deduplicate_results,
            openai_base_url=self.settings.openai_base_url,
            encoder=(encoder_for(embedding_model, encoder) if self.settings.builtin_embedding_variants
                     else None),
            verbatim_models=self.settings.verbatim_query_models,
        )
        self.last_generation: MultiModelQueryResult | None = None
        self.last_result: ReviewedSearchResult | None = None

    # --- generation ---------------------------------------------------------------------------------
    def convert_question(self, question: str, *, cancel: CancelToken | None = None) -> str:
        """One query from the first configured model; raises :class:`QueryAgentError` when it fails."""
        result = self._single_model(question, cancel=cancel)
        row = result.all_queries[0]
        if not row.ok:
            raise QueryAgentError(f"model '{row.model}' produced no query for the question: {row.error}")
        return row.query

    def planned_models(self) -> tuple[list[str], int]:
        """The models a generation round asks and how many queries each.

        Multi-model generation off asks only the first model, but still ``queries_per_model`` times:
        the figures the project measures (three queries, strict to broad) are what a user with the
        default settings gets, and Preferences never shows a field that is silently ignored.
        """
        s = self.settings
        if not s.multi_model_enabled:
            return [str(m) for m in s.models[:1]], int(s.queries_per_model)
        return [str(m) for m in s.models], int(s.queries_per_model)

    def convert_question_multi_model(self, question: str, *, progress: ProgressFn | None = None,
                                     cancel: CancelToken | None = None,
                                     on_result: Callable[[QueryGenerationResult], None] | None = None,
                                     ) -> MultiModelQueryResult:
        """Every model x ``queries_per_model`` when multi-model is enabled, else one wrapped query."""
        models, per_model = self.planned_models()
        with _as_agent_error():
            return self.generator.generate_queries(
                question, self.system_prompt, models, per_model, temperature=self.settings.temperature,
                progress=progress, cancel=cancel, on_result=on_result,
            )

    def _single_model(self, question: str, *, progress: ProgressFn | None = None,
                      cancel: CancelToken | None = None,
                      on_result: Callable[[QueryGenerationResult], None] | None = None,
                      ) -> MultiModelQueryResult:
        s = self.settings
        with _as_agent_error():
            return self.generator.generate_queries(
                question, self.system_prompt, s.models[:1], 1, temperature=s.temperature,
                progress=progress, cancel=cancel, on_result=on_result,
            )

    # --- rows of other kinds ----------------------------------------------------------------------------
    def llm_model(self) -> str | None:
        """The first configured model that is an LLM (not ``builtin:``), or None."""
        models = self.settings.models if self.settings.multi_model_enabled else self.settings.models[:1]
        return next((m for m in models if not is_builtin(m)), None)

    def hypothetical_abstract(self, question: str, *, cancel: CancelToken | None = None) -> str:
        """An abstract the first LLM writes to answer ``question`` (the hypothetical row's text)."""
        model = self.llm_model()
        if model is None:
            raise QueryAgentError("a hypothetical-abstract row needs an LLM model in query_generation.models")
        try:  # written once: the concept round may have written it for its broad row's words
            return self.generator.hypothetical_abstract(
                model, question, temperature=self.settings.temperature, cancel=cancel)
        except LiteratureError as err:
            raise QueryAgentError(str(err)) from None

    def semantic_rows(self, question: str, *, cancel: CancelToken | None = None) -> list[SearchRow]:
        """The rows the ``retrieval`` settings add beside the generated queries: the question as a
        semantic row, and a hypothetical abstract when an LLM is configured (its failure is logged and
        the row left out, so a search never depends on it)."""
        rows: list[SearchRow] = []
        if not question.strip():
            return rows
        if self.retrieval.semantic_row:
            rows.append(SearchRow(question.strip(), ROW_SEMANTIC))
        if self.retrieval.hypothetical_row and self.llm_model() is not None:
            try:
                rows.append(SearchRow(self.hypothetical_abstract(question, cancel=cancel), ROW_HYPOTHETICAL))
            except QueryAgentError as err:
                log.info("no hypothetical-abstract row: %s", err)
        return rows

    # --- the whole flow -----------------------------------------------------------------------------
    def find_abstracts_multi_query(
        self, question: str, max_rows: int = 100, use_pubmed: bool = True, use_medrxiv: bool = True,
        use_others: bool = True, from_date: date | None = None, to_date: date | None = None,
        human_in_the_loop: bool = False, human_query_modifier: QueryModifier | None = None, *,
        progress: ProgressFn | None = None, cancel: CancelToken | None = None,
        on_query: Callable[[QueryRunStats], None] | None = None, allow_incomplete: bool = False,
    ) -> Iterator[dict[str, Any]]:
        """Generate once, let the modifier edit/select, run the queries, and stream the documents.

        A generator: nothing happens until it is iterated. The last :class:`ReviewedSearchResult` is
        kept on ``self.last_result`` (statistics, merged IDs, which query found what).

        When a valid query could not run (the connection was lost, it timed out) the documents of the
        others are yielded and then :class:`IncompleteSearch` is raised, naming the lost queries, so a
        systematic search is never silently partial; ``allow_incomplete=True`` only logs a warning
        (``self.last_result.incomplete`` still says so).
        """
        generated = self.convert_question_multi_model(question, progress=progress, cancel=cancel)
        self.last_generation = generated
        queries = self._reviewed(generated, human_in_the_loop, human_query_modifier)
        result = self.run_reviewed_queries(
            queries, max_rows=max_rows, use_pubmed=use_pubmed, use_medrxiv=use_medrxiv,
            use_others=use_others, from_date=from_date, to_date=to_date, progress=progress,
            cancel=cancel, on_query=on_query,
        )
        self.last_result = result
        yield from result.documents
        if result.incomplete:
            if not allow_incomplete:
                raise IncompleteSearch(result)
            log.warning("%s", result.incomplete_message())

    def find_abstracts(
        self, question: str, max_rows: int = 100, use_pubmed: bool = True, use_medrxiv: bool = True,
        use_others: bool = True, from_date: date | None = None, to_date: date | None = None,
        batch_size: int | None = None, use_ranking: bool = True, human_in_the_loop: bool = False,
        human_query_modifier: Callable[[str], str] | None = None, *,
        progress: ProgressFn | None = None, cancel: CancelToken | None = None,
    ) -> Iterator[dict[str, Any]]:
        """BMLibrarian's single-query search: one query from the first model, then its documents.

        A generator, like BMLibrarian's: nothing happens until it is iterated. With
        ``human_in_the_loop`` the ``human_query_modifier(query) -> query`` callback sees the
        generated query and may edit it (an empty reply cancels nothing: the original runs).
        ``batch_size`` is the fetch batch (default: the agent's). Documents always come best
        ranked first (``use_ranking`` is accepted for compatibility; ranking is never switched
        off, because an unranked ``max_rows`` cut would drop arbitrary matches).
        """
        query = self.convert_question(question, cancel=cancel)
        if human_in_the_loop and human_query_modifier is not None:
            edited = human_query_modifier(query)
            query = str(edited).strip() if edited and str(edited).strip() else query
        saved = self.fetch_batch_size
        if batch_size is not None:
            if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
                raise QueryAgentError(f"batch_size must be a whole number of at least 1, not {batch_size!r}")
            self.fetch_batch_size = batch_size
        try:
            result = self.run_reviewed_queries(
                [query], max_rows=max_rows, use_pubmed=use_pubmed, use_medrxiv=use_medrxiv,
                use_others=use_others, from_date=from_date, to_date=to_date, progress=progress,
                cancel=cancel,
            )
        finally:
            self.fetch_batch_size = saved
        self.last_result = result
        yield from result.documents

    def _reviewed(self, generated: MultiModelQueryResult, human_in_the_loop: bool,
                  modifier: QueryModifier | None) -> list[str]:
        """The queries to run: the generated ones, or what the human review made of them."""
        if not generated.unique_queries:
            errors = "; ".join(f"{r.model} #{r.attempt_number}: {r.error}" for r in generated.failed)
            raise QueryAgentError(f"no query could be generated for the question ({errors or 'no models'})")
        if not human_in_the_loop or modifier is None:
            return list(generated.unique_queries)
        offered = list(generated.unique_queries)
        return self.apply_review(offered, [str(q) for q in (modifier(list(offered)) or [])])

    def apply_review(self, offered: Sequence[str], returned: Sequence[str]) -> list[str]:
        """The review rules, one definition for the CLI and the window: ``returned`` (the queries the
        reviewer kept, edited or added) may drop some of ``offered`` only when
        ``allow_query_selection`` is on; with ``deduplicate_results`` equal queries run once."""
        s = self.settings
        returned = [str(q) for q in returned]
        if not s.allow_query_selection and len(returned) < len(offered):
            raise QueryAgentError(
                f"the review returned {len(returned)} of {len(offered)} queries, but query selection is "
                "switched off (query_generation.allow_query_selection = false): edit queries, keep them all"
            )
        kept = deduplicate_queries(returned) if s.deduplicate_results else [q for q in returned if q.strip()]
        if not kept:
            raise QueryAgentError("the review left no query to run")
        return kept

    # --- the review table's checks -----------------------------------------------------------------
    def check_query(self, query: str, use_pubmed: bool = True, use_medrxiv: bool = True,
                    use_others: bool = True, from_date: date | None = None, to_date: date | None = None,
                    *, cancel: CancelToken | None = None) -> QueryRunStats:
        """Validate one (possibly edited) query and count its matches, without fetching anything.

        For the review table: ``valid`` says whether PostgreSQL accepts it, ``invalid_reason`` the
        server's explanation when not (also in ``error``), ``normalized`` how it reads a valid one
        (stemmed lexemes), ``matches`` how many documents it finds (``estimated`` when the count is
        the planner's estimate). A failing database raises (:class:`LiteratureError`): that is not a
        verdict on the query.
        """
        if self.database is None:
            raise QueryAgentError("no literature database is open: open one before checking queries")
        stat = QueryRunStats(index=0, query=(query or "").strip())
        start = time.perf_counter()
        try:
            valid, normalized = self.database.validate_tsquery(stat.query)
            stat.valid = bool(valid)
            if not valid:
                stat.invalid_reason = normalized
                stat.error = f"invalid query: {normalized}"
                return stat
            stat.normalized = normalized
            count = self.database.count_matches(
                stat.query, use_pubmed=use_pubmed, use_medrxiv=use_medrxiv, use_others=use_others,
                from_date=from_date, to_date=to_date, cancel=cancel)
            stat.matches = int(count)
            stat.estimated = bool(getattr(count, "estimated", False))
            absent = getattr(self.database, "absent_terms", None)
            if callable(absent):
                stat.absent_terms = list(absent(stat.query, cancel=cancel))
        finally:
            stat.time_s = time.perf_counter() - start
        return stat

    # --- running a reviewed list --------------------------------------------------------------------
    def run_reviewed_queries(
        self, queries: Sequence[str | SearchRow], max_rows: int = 100, use_pubmed: bool = True,
        use_medrxiv: bool = True, use_others: bool = True, from_date: date | None = None,
        to_date: date | None = None, *, progress: ProgressFn | None = None,
        cancel: CancelToken | None = None, on_query: Callable[[QueryRunStats], None] | None = None,
        fetch: bool = True, question: str | None = None,
    ) -> ReviewedSearchResult:
        """Run exactly ``queries`` (never regenerates): validate, run ID-only, merge, fetch once.

        A :class:`~kmds_desktop.literature.retrieval.query_run.QueryRun` with this agent's database
        and settings does it (see :meth:`~kmds_desktop.literature.retrieval.query_run.QueryRun.run`:
        tsquery strings or :class:`SearchRow` s of any kind; failing rows reported and skipped, the
        result ``incomplete`` when a valid one could not run; :class:`QueryAgentError` when none ran).
        """
        if self.database is None:
            raise QueryAgentError("no literature database is open: open one before running queries")
        run = QueryRun(self.database, self.retrieval, self.embedding_model, self.encoder,
                       ollama_host=self.settings.ollama_host, timeout_s=self.settings.timeout_s,
                       fetch_batch_size=self.fetch_batch_size)
        return run.run(queries, max_rows=max_rows, use_pubmed=use_pubmed, use_medrxiv=use_medrxiv,
                       use_others=use_others, from_date=from_date, to_date=to_date, progress=progress,
                       cancel=cancel, on_query=on_query, fetch=fetch, question=question)


@contextmanager
def _as_agent_error() -> Iterator[None]:
    """Bad input to the generator (an empty question, no model) as the agent's error, which every
    caller (CLI, GUI) already reports as a message instead of a crash."""
    try:
        yield
    except ValueError as err:
        raise QueryAgentError(str(err)) from None

