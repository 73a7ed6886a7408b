"""Running reviewed rows: each one ID-only and serially, the ranked lists fused, the union fetched once.

Why here and not in the query agent: generating queries (:mod:`kmds_desktop.literature.queries`) and
running them are two jobs. What runs is exactly the list the user reviewed (a :class:`QueryRun` never
generates); each row runs as an ID-only query (cheap: no abstracts cross the wire), one after the
other, so the database is not flooded; the ranked ID lists are merged as the ``retrieval`` settings
say (:mod:`~kmds_desktop.literature.retrieval.fusion`: the best rank any row gave a document, or
reciprocal rank fusion, optionally re-ranked by similarity to the question); the union is fetched
**once** in batches. A semantic or hypothetical row embeds its text and asks the document vectors
(:mod:`~kmds_desktop.literature.retrieval.semantic`, :mod:`~kmds_desktop.literature.retrieval.vector_choice`).
:class:`~kmds_desktop.literature.queries.agent.QueryAgent.run_reviewed_queries` is the documented way
in; it makes a :class:`QueryRun` with its settings.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any

from kmds_desktop.config import DEFAULT_OLLAMA_HOST, RetrievalSettings
from kmds_desktop.literature.errors import InvalidQuery, QueryAgentError
from kmds_desktop.literature.retrieval.fusion import (
    best_lexical_scores,
    merge_ranked,
    reciprocal_rank_fusion,
    rerank_by_similarity,
)
from kmds_desktop.literature.retrieval.semantic import (
    ROW_TSQUERY,
    SearchRow,
    as_row,
    similarities_to_question,
)
from kmds_desktop.tasks import Cancelled, CancelToken, ProgressFn, check, report
from kmds_desktop.text import shorten

log = logging.getLogger(__name__)

#: How much of a query a message quotes: enough to recognise it (the table and the log keep it whole);
#: a 60 KB query quoted whole made a message no one could read.
QUOTED_QUERY_CHARS = 80


@dataclass
class QueryRunStats:
    """What one reviewed query did in the database."""

    index: int
    query: str
    normalized: str | None = None
    matches: int | None = None  # documents matching in the whole database (with the same filters)
    ids_returned: int = 0  # at most max_rows
    unique_ids: int = 0  # returned by this query and no other one
    time_s: float = 0.0
    error: str | None = None
    #: "invalid": the server rejected the query text (the query itself is wrong); "failed": a valid
    #: query could not run (lost connection, timeout...), so the search lost its results.
    error_kind: str | None = None
    ids: list[int] = field(default_factory=list, repr=False)  # best rank first
    #: full-text rows: each id's rank score, in ``ids`` order (for re-ranking; not in the search log)
    scores: list[float] = field(default_factory=list, repr=False)
    # Set by ``QueryAgent.check_query`` only (the review table's check before anything runs).
    valid: bool | None = field(default=None, repr=False)
    invalid_reason: str | None = field(default=None, repr=False)
    estimated: bool = field(default=False, repr=False)
    #: ``QueryAgent.check_query`` only: the valid query's terms that no document has (``'fungal':*``).
    absent_terms: list[str] = field(default_factory=list, repr=False)
    kind: str = ROW_TSQUERY  # "tsquery", "semantic" or "hypothetical" (see literature.retrieval.semantic)
    #: semantic rows: cosine similarity of the first and the last document returned
    best_similarity: float | None = None
    last_similarity: float | None = None
    #: semantic rows: every document under the same filters, with or without a vector (``matches`` of
    #: ``searchable`` is the row's coverage: a partly embedded database hides the rest from it)
    searchable: int | None = None
    #: semantic rows on vectors the database already holds (a BMLibrarian database's own): whose they
    #: are ("the database's own snowflake-arctic-embed2:latest vectors"), the model that embedded the
    #: row's text, and whether ``matches``/``searchable`` are the planner's estimates (a large database)
    vectors: str | None = None
    vectors_model: str | None = None
    coverage_estimated: bool = False
    #: full-text rows: ranked by the fast index within its impact tier (a broad AND too large to walk
    #: within the row budget): every id a true match with its exact BM25 score, the order the best of
    #: the documents where one of the row's terms weighs most (see literature.store.topk_tiers)
    ranked_in_tier: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def capped(self) -> bool:
        """A full-text row that matched more documents than it returned: the documents-per-row limit
        (``literature.max_rows``) cut it, and whoever reads its results must be told (142 matches
        shown as 100 looked like 100 matches). A semantic row ranks every document with a vector, so
        its cut is its nature, not a limit to point at."""
        return (self.ok and self.kind == ROW_TSQUERY and self.matches is not None
                and self.ids_returned < self.matches)

    def to_dict(self, with_ids: bool = True) -> dict[str, Any]:
        data = asdict(self)
        for key in ("valid", "invalid_reason", "estimated", "scores"):
            data.pop(key)
        if not with_ids:
            data.pop("ids")
        return data


@dataclass
class ReviewedSearchResult:
    """The outcome of running a reviewed list of queries (the GUI's documents table and search log)."""

    queries: list[QueryRunStats]
    ids: list[int]  # merged, ordered by the best rank any query gave the document
    found_by: dict[int, list[int]]  # document id -> indices (into ``queries``) of queries that found it
    documents: list[dict[str, Any]]
    total_time_s: float = 0.0
    fusion: str = "best_rank"  # how ``ids`` were ordered: "best_rank", "rrf" or "rrf+rerank"

    @property
    def ok_queries(self) -> list[QueryRunStats]:
        return [q for q in self.queries if q.ok]

    @property
    def failed_queries(self) -> list[QueryRunStats]:
        return [q for q in self.queries if not q.ok]

    @property
    def lost_queries(self) -> list[QueryRunStats]:
        """Valid queries that could not run (not those whose text the server rejected)."""
        return [q for q in self.queries if q.error_kind == "failed"]

    @property
    def incomplete(self) -> bool:
        """True when a query that should have run did not: the documents are not all it finds."""
        return bool(self.lost_queries)

    def incomplete_message(self) -> str:
        """One line naming the queries that could not run and why (empty when complete)."""
        lost = self.lost_queries
        if not lost:
            return ""
        reasons = "; ".join(f"'{shorten(q.query, QUOTED_QUERY_CHARS)}': {shorten(q.error or '')}"
                            for q in lost)
        return (f"the search is incomplete: {len(lost)} of {len(self.queries)} queries could not run, "
                f"their documents are missing ({reasons})")

    def queries_for(self, doc_id: int) -> list[str]:
        """The query texts that found ``doc_id`` (the documents table's "found by" column)."""
        return [self.queries[i].query for i in self.found_by.get(doc_id, [])]

    def to_dict(self) -> dict[str, Any]:
        return {
            "queries": [q.to_dict() for q in self.queries],
            "ids": list(self.ids),
            "found_by": {str(k): v for k, v in self.found_by.items()},
            "documents": [_jsonable(d) for d in self.documents],
            "total_time_s": self.total_time_s,
            "incomplete": self.incomplete,
            "failed_queries": [{"query": q.query, "error": q.error, "kind": q.error_kind}
                               for q in self.failed_queries],
            "fusion": self.fusion,
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if isinstance(value, date):
        return value.isoformat()
    if hasattr(value, "__dataclass_fields__"):
        return _jsonable(asdict(value))
    return value


def _doc_id(document: Any) -> int | None:
    value = document.get("id") if isinstance(document, dict) else getattr(document, "id", None)
    return int(value) if value is not None else None


def _as_dict(document: Any) -> dict[str, Any]:
    if isinstance(document, dict):
        return dict(document)
    if hasattr(document, "__dataclass_fields__"):
        return asdict(document)
    if hasattr(document, "_asdict"):
        return dict(document._asdict())
    return dict(vars(document))



@dataclass
class QueryRun:
    """One run of reviewed rows on ``database`` with the ``retrieval`` settings.

    ``embedding_model`` and ``encoder`` embed the semantic rows' texts (``encoder`` None: this
    process; see ``literature.store.vectors.Encoder``); ``ollama_host`` and ``timeout_s`` reach the
    model of a BMLibrarian database's own vectors. Which vectors the semantic rows search is looked
    up once per run (a model pulled since the last run is used from this one on).
    """

    database: Any
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    embedding_model: str = "all-MiniLM-L6-v2"
    encoder: Any = None
    ollama_host: str = DEFAULT_OLLAMA_HOST
    timeout_s: float = 120.0
    fetch_batch_size: int = 50
    _vectors: Any = field(default=None, init=False, repr=False)

    def run(
        self, queries: Sequence[str | SearchRow], max_rows: int = 100, use_pubmed: bool = True,
        use_medrxiv: bool = True, use_others: bool = True, from_date: date | None = None,
        to_date: date | None = None, *, progress: ProgressFn | None = None,
        cancel: CancelToken | None = None, on_query: Callable[[QueryRunStats], None] | None = None,
        fetch: bool = True, question: str | None = None,
    ) -> ReviewedSearchResult:
        """Run exactly ``queries`` (never regenerates): validate, run ID-only, merge, fetch once.

        ``queries`` are tsquery strings or :class:`SearchRow` of any kind. The ranked ID lists are
        merged per ``retrieval.fusion``; with ``retrieval.rerank`` and a ``question`` the first
        ``rerank_candidates`` merged documents are re-ranked by similarity to the question.

        Invalid or failing queries are reported (``on_query`` and the result) and skipped; a valid
        query that could not run makes the result ``incomplete`` (it lists them); if every query
        fails, :class:`QueryAgentError` says why each did. ``on_query`` is called as each query
        finishes; ``unique_ids`` (IDs no other query found) is only known once all have run, so it is
        filled in on the returned result's statistics, not in the callback's. ``fetch=False`` skips
        the document fetch (e.g. for counting only).
        """
        if self.database is None:
            raise QueryAgentError("no literature database is open: open one before running queries")
        rows = [SearchRow(r.text.strip(), r.kind) for r in map(as_row, queries)]
        self._vectors = None  # a model pulled since the last run is used from this one on
        if not any(r.text for r in rows):
            raise QueryAgentError("there is no query to run")
        started = time.perf_counter()
        filters = {"use_pubmed": use_pubmed, "use_medrxiv": use_medrxiv, "use_others": use_others,
                   "from_date": from_date, "to_date": to_date}
        total = len(rows) + (1 if fetch else 0)
        stats: list[QueryRunStats] = []
        for index, row in enumerate(rows):
            check(cancel)
            report(progress, index, total, f"{row.kind} row {index + 1} of {len(rows)}: {row.text[:80]}")
            if row.semantic:
                stat = self._run_semantic(index, row, max_rows, filters, cancel)
            else:
                stat = self._run_fulltext(index, row.text, max_rows, filters, cancel)
            stats.append(stat)
            if on_query is not None:
                on_query(stat)
        ok = [s for s in stats if s.ok]
        if not ok:
            reasons = "; ".join(f"'{shorten(s.query, QUOTED_QUERY_CHARS)}': {shorten(s.error or '')}"
                                for s in stats)
            raise QueryAgentError(f"none of the {len(stats)} queries could run: {reasons}")
        ids, found_by, fusion = self._merge(stats, question, cancel)
        for stat in ok:
            stat.unique_ids = sum(1 for i in stat.ids if found_by[i] == [stat.index])
        documents: list[dict[str, Any]] = []
        if fetch and ids:
            check(cancel)
            report(progress, len(rows), total, f"fetching {len(ids)} documents")
            documents = self._fetch(ids, cancel)
        report(progress, total, total, f"{len(ids)} documents from {len(ok)} queries")
        return ReviewedSearchResult(stats, ids, found_by, documents, time.perf_counter() - started,
                                    fusion=fusion)

    def _merge(self, stats: list[QueryRunStats], question: str | None,
               cancel: CancelToken | None) -> tuple[list[int], dict[int, list[int]], str]:
        """Merge the rows' ranked lists as the ``retrieval`` settings say; see the module docstring."""
        r = self.retrieval
        lists = [s.ids for s in stats]
        if r.fusion == "best_rank":
            ids, found_by = merge_ranked(lists)
            fusion = "best_rank"
        else:
            weights = [r.semantic_weight if s.kind != ROW_TSQUERY else 1.0 for s in stats]
            ids, _, found_by = reciprocal_rank_fusion(lists, k=r.fusion_k, weights=weights)
            fusion = "rrf"
        if r.rerank and question and question.strip() and ids and r.rerank_weight > 0:
            # why: start-up time: it loads psycopg
            from kmds_desktop.literature.store.vectors import embed_text

            head = ids[: r.rerank_candidates]
            try:
                choice = self._vector_choice(cancel)
                if choice.vectors is not None:  # the database's own vectors: only the question is embedded
                    # why: start-up time: it loads psycopg
                    from kmds_desktop.literature.store.bmlibrarian_vectors import database_similarities

                    sims = database_similarities(self.database, choice.vectors,
                                                 choice.embed(question, cancel=cancel), head, cancel=cancel)
                else:
                    sims = similarities_to_question(
                        self.database, embed_text(question, self.embedding_model, self.encoder), head,
                        model_name=self.embedding_model, cancel=cancel, encoder=self.encoder)
            except Cancelled:
                raise
            except Exception as err:  # noqa: BLE001 - re-ranking is an improvement, never a reason to fail
                log.info("results not re-ranked: %s", err)  # (the embedding model failing to load, too)
            else:
                full_text = [s for s in stats if s.kind == ROW_TSQUERY and len(s.scores) == len(s.ids)]
                lexical = best_lexical_scores([(s.ids, s.scores) for s in full_text])
                ids = rerank_by_similarity(head, sims, r.rerank_weight, lexical=lexical) + ids[len(head):]
                fusion += "+rerank"
        return ids, found_by, fusion

    def _vector_choice(self, cancel: CancelToken | None) -> Any:
        """Which vectors this run's semantic rows search (looked up once per run)."""
        if self._vectors is None:
            # why: start-up time: it loads psycopg
            from kmds_desktop.literature.retrieval.vector_choice import choose_vectors

            self._vectors = choose_vectors(
                self.database, use_database_vectors=self.retrieval.use_database_vectors,
                ollama_host=self.ollama_host, timeout_s=self.timeout_s, cancel=cancel)
        return self._vectors

    def _run_semantic(self, index: int, row: SearchRow, max_rows: int, filters: dict[str, Any],
                      cancel: CancelToken | None) -> QueryRunStats:
        """A semantic or hypothetical row: embed its text, nearest neighbours ID-only, its statistics
        (``matches`` = documents with a vector under the same filters). On a database holding vectors
        of its own whose model is on the Ollama server, those are searched (see
        :mod:`kmds_desktop.literature.retrieval.vector_choice`)."""
        # why: start-up time: it loads psycopg
        from kmds_desktop.literature.store.vectors import (
            VectorsUnavailable,
            embed_text,
            nearest_ids,
            vector_coverage,
        )

        stat = QueryRunStats(index=index, query=row.text, kind=row.kind)
        start = time.perf_counter()
        choice = None
        try:
            if not row.text:
                raise QueryAgentError("the row's text is empty")
            choice = self._vector_choice(cancel)
            if choice.vectors is not None:
                # why: start-up time: it loads psycopg
                from kmds_desktop.literature.store.bmlibrarian_vectors import (
                    database_vector_coverage,
                    nearest_document_ids,
                )

                ranked = nearest_document_ids(self.database, choice.vectors,
                                              choice.embed(row.text, cancel=cancel), max_rows=max_rows,
                                              cancel=cancel, **filters)
                stat.matches, stat.searchable, stat.coverage_estimated = database_vector_coverage(
                    self.database, choice.vectors, cancel=cancel, **filters)
                stat.vectors, stat.vectors_model = choice.vectors.describe(), choice.vectors.model_name
            else:
                ranked = nearest_ids(self.database, embed_text(row.text, self.embedding_model, self.encoder),
                                     max_rows=max_rows, cancel=cancel, **filters)
                stat.matches, stat.searchable = vector_coverage(self.database, cancel=cancel, **filters)
            stat.ids = [i for i, _ in ranked]
            stat.ids_returned = len(stat.ids)
            if ranked:
                stat.best_similarity, stat.last_similarity = ranked[0][1], ranked[-1][1]
        except Cancelled:
            raise
        except Exception as err:  # noqa: BLE001 - one failing row is reported, the others run
            # No vectors here (or an empty text) is the row's own problem, like an invalid tsquery; a
            # lost connection or a timeout means the search lost results.
            _row_failed(stat, err, cancel, own_problem=isinstance(err, (VectorsUnavailable, QueryAgentError)),
                        what="semantic row", text=row.text)
            if isinstance(err, VectorsUnavailable) and choice is not None and choice.note:
                stat.error += "; " + choice.note  # how to search the vectors the database already has
            stat.matches = stat.searchable = None
        finally:
            stat.time_s = time.perf_counter() - start
        return stat

    def _run_fulltext(self, index: int, query: str, max_rows: int, filters: dict[str, Any],
                 cancel: CancelToken | None) -> QueryRunStats:
        db = self.database
        stat = QueryRunStats(index=index, query=query)
        start = time.perf_counter()
        try:
            if not query:
                raise QueryAgentError("the query is empty")
            valid, normalized = db.validate_tsquery(query)
            if not valid:
                stat.error = f"invalid query: {normalized}"
                stat.error_kind = "invalid"
                return stat
            stat.normalized = normalized
            ranked = db.find_abstract_ids_ranked(query, max_rows=max_rows, cancel=cancel,
                                                 ranking=self.retrieval.fulltext_ranking,
                                                 exact_order=self.retrieval.exact_broad_rows, **filters)
            stat.ids = _ranked_ids(ranked)
            stat.scores = [float(item[1]) for item in ranked if isinstance(item, (tuple, list))]
            stat.ranked_in_tier = bool(getattr(ranked, "approximate", False))
            stat.ids_returned = len(stat.ids)
            # kept as it comes: a MatchCount says whether it is the planner's estimate (int() dropped that,
            # and the history and the search report showed every estimate as exact)
            stat.matches = db.count_matches(query, cancel=cancel, **filters)
        except Cancelled:
            raise
        except Exception as err:  # noqa: BLE001 - one failing query is reported, the others run
            _row_failed(stat, err, cancel, own_problem=isinstance(err, (InvalidQuery, QueryAgentError)),
                        what="literature query", text=query)
        finally:
            stat.time_s = time.perf_counter() - start
        return stat

    def _fetch(self, ids: list[int], cancel: CancelToken | None) -> list[dict[str, Any]]:
        """One batched fetch of the union, returned in merged-rank order."""
        fetched = self.database.fetch_documents_by_ids(list(ids), batch_size=self.fetch_batch_size,
                                                       cancel=cancel)
        if isinstance(fetched, dict):
            fetched = list(fetched.values())
        by_id = {}
        for document in fetched:
            doc_id = _doc_id(document)
            if doc_id is not None:
                by_id[doc_id] = _as_dict(document)
        return [by_id[i] for i in ids if i in by_id]


def _row_failed(stat: QueryRunStats, err: Exception, cancel: CancelToken | None, *, own_problem: bool,
                what: str, text: str) -> None:
    """Record why one row failed, so the other rows still run and the table says which failed and how.

    A failure while the user cancels is the cancellation (a closed connection, not a broken row).
    ``own_problem`` (an invalid query, an empty text, no vectors) marks the row "invalid"; anything else
    (a lost connection, a timeout) "failed", which means the search lost results."""
    if cancel is not None and cancel.cancelled:
        raise Cancelled("cancelled by the user") from None
    stat.error = str(err) or type(err).__name__
    stat.error_kind = "invalid" if own_problem else "failed"
    stat.ids, stat.ids_returned = [], 0
    log.info("%s %r failed: %s", what, text[:80], stat.error)


def _ranked_ids(ranked: Any) -> list[int]:
    """IDs in rank order from whatever the ranked look-up returns (ids, (id, rank) pairs, or a set)."""
    if isinstance(ranked, (set, frozenset)):
        return sorted(int(i) for i in ranked)
    out: list[int] = []
    for item in ranked:
        if isinstance(item, (tuple, list)):
            out.append(int(item[0]))
        elif isinstance(item, dict):
            out.append(int(item["id"]))
        else:
            out.append(int(item))
    return out
