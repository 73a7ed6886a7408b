"""A literature search as a user drives it: question, review rows, generation rounds, checks, runs, log.

Why a session: the window and ``kmds-desktop literature search`` must mean the same thing by every
setting and produce the same search log. The :class:`LiteratureSession` holds the state (the rows
the user reviews, each with its provenance; the last generation round; the last run) and offers the
quick operations that change it. The slow parts are plain functions (:func:`generate_round`,
:func:`check_queries`, :func:`execute_run`) that take ``progress=``/``cancel=``: the window runs them
on workers and feeds what they report back into the session on the GUI thread; the CLI calls them
in sequence. Generation, checks and runs all go through
:class:`~kmds_desktop.literature.queries.agent.QueryAgent`, so ``allow_query_selection``,
``show_all_queries_to_user`` and ``deduplicate_results`` are applied by one piece of code.

Rules the session keeps (and docs/guide/literature-search.md states):

- **Provenance.** A row is *generated* (model, attempt, temperature, time), *hand-written*, or
  *edited* (a generated row whose text the user changed: the model's original text is kept and
  shown, and goes into the log).
- **Generating again replaces, never appends duplicates.** A new round removes the generated rows
  the user has neither edited nor run; edited, hand-written and already-run rows stay. A query the
  new round proposes that equals (case/spacing-insensitively) a row that stayed is not added again.
  Within one round, ``show_all_queries_to_user`` shows repeats of an earlier row (unticked, marked
  as a repeat, when ``deduplicate_results`` is on); off, only the first of equal queries is shown.
- **Failed attempts are not rows.** They are kept on the round (per model: how many queries, or
  why it failed) and in the log.
- **Running** takes the ticked rows as shown, lets the agent apply the review rules, runs exactly
  those queries (never regenerating), and lists the merged documents best rank first.
- **Row types.** Besides full-text (tsquery) rows, a row can be *semantic* (a sentence, the question
  by default, searched by meaning on the document vectors) or *hypothetical* (an abstract an LLM wrote
  for the question, searched the same way); see :mod:`kmds_desktop.literature.retrieval.semantic`. They are
  shown, edited and ticked like the others, need no tsquery check, and their type is shown in the
  Model column and recorded in the log. The rows' ranked lists are merged by the ``retrieval``
  settings (reciprocal rank fusion, re-ranking by similarity to the question when a semantic row ran).
- **Rows the retrieval settings add.** When the database has document vectors, a generation round
  (:func:`generate_round` with ``retrieval_rows=True``; the CLI's ``literature search`` by the same
  :func:`plan_retrieval_rows`) adds the question as a semantic row (``retrieval.semantic_row``) and,
  when an LLM is configured, asks it for a hypothetical abstract (``retrieval.hypothetical_row``),
  after the query models. A failed abstract is reported on the round and adds no row; every other
  row stays usable. Generating again replaces the abstract unless the user edited or ran it (the
  same rule as for generated rows); the question's semantic row is replaced only when the question
  changed, so a row the user unticked stays unticked when the same question is generated again.
- **Rows belong to a question.** Each row records the question it was made for (a hand-written row:
  the question being typed when it was added). Generating for a different question unticks the rows
  of the previous one that stay (edited, hand-written, already run), so Run selected never mixes
  two searches unnoticed; they are kept, and can be ticked again. **New search** clears every row,
  the round and the last run (each run is already a set in the search history);
  :meth:`LiteratureSession.rows_to_confirm` names the rows the user should be asked about first
  (edited or hand-written text that has not run).
"""

from __future__ import annotations

import itertools
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kmds_desktop.app.events import Observable
from kmds_desktop.app.literature_data import DatabaseStatus
from kmds_desktop.app.run_facts import (
    coverage_from_status,
    coverage_warning,
    retrieval_facts,
    row_kind_of,
    run_coverage,
)
from kmds_desktop.app.search_log import build_search_log
from kmds_desktop.config import LiteratureSettings, QueryGenerationSettings, RetrievalSettings
from kmds_desktop.literature.errors import QueryAgentError
from kmds_desktop.literature.queries.agent import QUOTED_QUERY_CHARS, QueryAgent, ReviewedSearchResult
from kmds_desktop.literature.queries.query_cleaning import query_key
from kmds_desktop.literature.queries.query_generation import (
    DEFAULT_SYSTEM_PROMPT,
    FATAL_FOR_MODEL,
    QueryGenerationResult,
)
from kmds_desktop.literature.retrieval.semantic import (
    ROW_HYPOTHETICAL,
    ROW_SEMANTIC,
    ROW_TSQUERY,
    SEMANTIC_KINDS,
    SearchRow,
)
from kmds_desktop.literature.store.topk_tiers import tier_sentence
from kmds_desktop.literature.strategy.history import SearchHistory
from kmds_desktop.literature.strategy.workbench import SearchWorkbench
from kmds_desktop.tasks import Cancelled, CancelToken, ProgressFn, check, report
from kmds_desktop.text import shorten

log = logging.getLogger(__name__)

GENERATED = "generated"
#: The Model column of the question's semantic row (added by the retrieval settings, not edited).
QUESTION_ROW = "question"
HAND_WRITTEN = "hand-written"
EDITED = "edited"

# Validity states of a row.
UNCHECKED = "unchecked"
CHECKING = "checking"
VALID = "valid"
INVALID = "invalid"
FAILED = "failed"  # the check itself failed (database down): neither valid nor invalid

_uids = itertools.count(1)

#: Where the documents-per-row limit (``literature.max_rows``) is raised, in the window and the CLI:
#: every row it cuts says so with this.
MAX_ROWS_WHERE = "Preferences → Literature database → Documents per query (or --max-rows)"


def cap_note(returned: int, matches: int) -> str:
    """What a row cut by the documents-per-row limit says: "showing 100 of 142: raise the limit in …".

    Why: the row's true count sits beside the documents it returned, and a reader who sees 100
    documents takes them for everything the query found unless the cut is said where it applies."""
    return f"showing {returned:,} of {matches:,}: raise the limit in {MAX_ROWS_WHERE}"


#: Quiet time after the last keystroke before an edited query is checked: a check per keystroke
#: would keep the database busy with queries the user is still writing (the window's timer waits it).
CHECK_DELAY_S = 0.4

#: Longest start of a semantic row's sentence "found by" names (the log has it all): a question is
#: named whole (at 40 the document detail cut it to "…diagnose cy…"); the table elides to its width.
FOUND_BY_CHARS = 160


@dataclass
class QueryRow:
    """One query the user reviews: its text, where it came from, its check and its last run."""

    query: str
    model: str = HAND_WRITTEN  # the model that wrote it, or HAND_WRITTEN
    attempt: int | None = None
    included: bool = True
    generation_time: float | None = None
    temperature: float | None = None
    #: The text as the model wrote it, when the user has edited it since (None: not edited).
    original: str | None = None
    #: A note about the row (e.g. it repeats a query above); never a failed attempt.
    note: str | None = None
    round: int = 0  # the generation round that made it (0: hand-written)
    validity: str = UNCHECKED
    validity_message: str = ""
    normalized: str | None = None
    matches: int | None = None
    matches_exact: bool = True
    # Filled after a run (cleared on edit, since they describe the text that ran).
    returned: int | None = None
    unique: int | None = None
    run_time: float | None = None
    run_error: str | None = None
    #: The last run ranked it within the fast index's impact tier (a broad AND at this size).
    ranked_in_tier: bool = False
    ids: list[int] = field(default_factory=list)
    unique_ids: list[int] = field(default_factory=list)
    uid: int = field(default_factory=lambda: next(_uids))
    revision: int = 0
    #: "tsquery" (full-text), "semantic" (a sentence searched by meaning) or "hypothetical" (an abstract
    #: an LLM wrote for the question, searched by meaning).
    kind: str = ROW_TSQUERY
    #: Added by the ``retrieval`` settings (the question's semantic row): a new round for another
    #: question replaces it unless it was edited (``revision``) or ran.
    from_settings: bool = False
    #: The research question the row was made for ("" until a question is known): a round for another
    #: question unticks it.
    question: str = ""
    #: Why the generator wrote the query so (the built-in generator's concepts, variants and reasons).
    strategy_note: str = ""
    #: The app unticked it when a round began for another question (the user did not): a later
    #: round that proposes the same query ticks it again for its question.
    auto_unticked: bool = False
    #: Generated by an LLM: where it ran ("ollama <host>") and how it was asked ("schema"/"text").
    server: str = ""

    @property
    def tier_note(self) -> str:
        """The IDs cell's tooltip for a row ranked within the impact tier ("" otherwise)."""
        if not self.ranked_in_tier:
            return ""
        return ("Ranked within the fast index's impact tier (a broad AND at this database's size): every "
                "document returned matches and keeps its exact BM25 score; the order is the best among "
                "the documents where one of the row's terms weighs most. Preferences > Retrieval ranks "
                "such rows over every match.")
    reply_format: str = ""
    #: The check's terms that no document has (as PostgreSQL prints them: ``'fungal':*``).
    absent_terms: list[str] = field(default_factory=list)

    @property
    def runnable(self) -> bool:
        return bool(self.query.strip())

    @property
    def weakness(self) -> str:
        """Why a valid full-text query is weaker than it reads ("" when it is not): it matches no
        document, or some of its terms are in no document (a typo, an invented or foreign term; inside
        an OR the query still matches, without them). The review table flags the row with it."""
        if self.validity != VALID or self.kind != ROW_TSQUERY:
            return ""
        absent = [re.sub(r"'((?:[^']|'')*)'", lambda m: m.group(1).replace("''", "'"), t)
                  for t in self.absent_terms]
        named = ", ".join(f"'{t}'" for t in absent[:5]) + (" …" if len(absent) > 5 else "")
        if self.matches == 0:
            return "no document matches" + (f" (no document has {named})" if absent else "")
        if absent:
            return f"no document has {named}"
        return ""

    @property
    def semantic(self) -> bool:
        return self.kind in SEMANTIC_KINDS

    @property
    def origin(self) -> str:
        """``generated``, ``hand-written`` or ``edited``."""
        if self.model == HAND_WRITTEN:
            return HAND_WRITTEN
        return EDITED if self.original is not None else GENERATED

    @property
    def source_label(self) -> str:
        """The Model column: the model's name, "hand-written", "<model> (edited)", or for the semantic
        row the retrieval settings added, "question" until it is edited."""
        label = f"{self.model} (edited)" if self.origin == EDITED else self.model
        if self.from_settings and self.revision == 0 and self.kind == ROW_SEMANTIC:
            label = QUESTION_ROW
        return label if self.kind == ROW_TSQUERY else f"[{self.kind}] {label}"

    def provenance(self) -> dict[str, Any]:
        """Where the query came from, as the search log records it. A semantic or hypothetical row also
        says its ``row_type`` and ``row_kind`` (see :mod:`kmds_desktop.app.run_facts`); the question's
        semantic row is ``"question"`` (the retrieval settings added it), not hand-written."""
        typed: dict[str, Any] = {} if self.kind == ROW_TSQUERY else {
            "row_type": self.kind, "row_kind": row_kind_of(self.kind, self.query, self.question)}
        if self.from_settings and self.kind == ROW_SEMANTIC:
            if query_key(self.query) == query_key(self.question):
                return {"kind": QUESTION_ROW, **typed}
            return {"kind": EDITED, "edited_from": self.question, "from_question": True, **typed}
        if self.origin == HAND_WRITTEN:
            return {"kind": HAND_WRITTEN, **typed}
        data: dict[str, Any] = {"kind": self.origin, "model": self.model, "attempt": self.attempt,
                                "temperature": self.temperature, "generation_time": self.generation_time,
                                **typed}
        if self.server or self.reply_format:
            data["server"], data["reply_format"] = self.server, self.reply_format
        if self.original is not None:
            data["edited_from"] = self.original
        return data

    def describe_provenance(self) -> str:
        """One line for a tooltip: "generated by M, attempt A", "hand-written", "edited from '…'"."""
        if self.from_settings and self.kind == ROW_SEMANTIC:
            if query_key(self.query) == query_key(self.question):
                return "the question, added by the retrieval settings"
            return f"edited from the question '{self.question}'"
        if self.origin == HAND_WRITTEN:
            return "hand-written"
        made = f"generated by {self.model}, attempt {self.attempt}"
        return f"edited from '{self.original}' ({made})" if self.original is not None else made


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
        text = (f"{head}: {proposals} {_plural(proposals, 'query', 'queries')} from "
                f"{len(ok)} of {len(self.models)} {_plural(len(self.models), 'model', 'models')}")
        if self.repeats_dropped:
            text += f" ({self.repeats_dropped} already in the table)"
        if self.unticked_previous:
            n = self.unticked_previous
            text += (f"; {n} {_plural(n, 'row', 'rows')} of the previous question "
                     f"{_plural(n, 'was', 'were')} unticked (New search clears them)")
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


@dataclass
class CheckItem:
    """One query to validate and count: the row's uid and revision travel with the answer."""

    uid: int
    revision: int
    text: str


@dataclass
class CheckResult:
    uid: int
    revision: int
    ok: bool | None  # None: the check itself failed (database down)
    message: str  # normalized query when ok, else the error
    matches: int | None = None
    exact: bool = True
    #: The query's terms no document has (see :attr:`QueryRow.weakness`).
    absent: list[str] = field(default_factory=list)


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


def planned_models(qg: QueryGenerationSettings) -> tuple[list[str], int]:
    """Models and queries per model a round uses (the agent's own rule)."""
    return QueryAgent(None, qg).planned_models()


@dataclass
class KnownPapersInput:
    """What the search history window's known-papers box holds: pasted IDs, or the file loaded there.

    It belongs to the session, not the window, so closing and reopening the history window (or a
    window made anew) shows what was pasted instead of an empty box.
    """

    text: str = ""
    file: str = ""  # a RIS / BibTeX file loaded instead of pasted text ("" when none)


#: What a :class:`LiteratureSession` announces (``session.subscribe(listener)``; see
#: :mod:`kmds_desktop.app.events`): rows added or removed; which rows are ticked; rows that now wait
#: for a check (their uids); a check answered; a generation round started or finished; a run applied;
#: new settings; everything cleared by New search.
ROWS_CHANGED = "rows"
TICKS_CHANGED = "ticks"
CHECKS_WANTED = "checks"
CHECK_APPLIED = "checked"
ROUND_CHANGED = "round"
RUN_APPLIED = "run"
SETTINGS_CHANGED = "settings"
CLEARED = "cleared"
#: A status read of the database arrived (:attr:`LiteratureSession.database_status`).
STATUS_READ = "status"
#: A finished run was saved in the search history (:attr:`LiteratureSession.last_recorded`).
RECORDED = "recorded"


class LiteratureSession(Observable):
    """The state and quick operations of one literature search (GUI thread or the CLI's thread).

    Every operation that changes the state announces it (one of the ``*_CHANGED`` kinds above) to
    the listeners :meth:`~kmds_desktop.app.events.Observable.subscribe` registered, so the window
    renders changes as they happen instead of asking after every click what may have changed.
    """

    def __init__(self, settings: QueryGenerationSettings | None = None,
                 literature: LiteratureSettings | None = None, retrieval: RetrievalSettings | None = None,
                 embedding_model: str = "all-MiniLM-L6-v2") -> None:
        self.settings = settings or QueryGenerationSettings()
        self.literature = literature or LiteratureSettings()
        self.retrieval = retrieval or RetrievalSettings()
        self.embedding_model = embedding_model
        #: who embeds semantic rows (None: this process). The window sets its index's ``encode``, so
        #: the index process embeds and torch never loads in the window's process.
        self.encoder: Any = None
        self.question = ""
        #: The question as typed now, before Generate (a hand-written row belongs to it).
        self.draft_question = ""
        self.rows: list[QueryRow] = []
        self.round: GenerationRound | None = None
        #: Every round since the last New search, oldest first (the search log keeps their attempts).
        self.rounds: list[GenerationRound] = []
        self._rounds = 0
        self.last_run: RunRecord | None = None
        self.documents: list[dict[str, Any]] = []  # merged, best rank first, each with "rank"
        self.database_name = ""
        self._checking: set[tuple[int, int]] = set()  # (uid, revision) a check job is answering
        #: (documents, documents a semantic row searches) at the last status read (see database_counted)
        self._database_counts: tuple[int | None, int | None] | None = None
        #: The history window's known papers (kept while the window is closed).
        self.known_papers = KnownPapersInput()
        self._database: Any = None
        self._database_status: DatabaseStatus | None = None
        self._workbench: SearchWorkbench | None = None
        #: (run, its set number in the search history): the source name its screening uses (``#12``).
        self.recorded_run: tuple[RunRecord, int] | None = None
        self._last_recorded: int | None = None

    # --- the database and the search history ---------------------------------------------------
    @property
    def database(self) -> Any:
        """The open literature database (None until whoever opens it attaches it)."""
        return self._database

    @property
    def database_status(self) -> DatabaseStatus | None:
        """The newest status read of the database (None until one arrived): counts, vectors, top-k."""
        return self._database_status

    @property
    def last_recorded(self) -> int | None:
        """The set number the newest finished run was saved as in the search history."""
        return self._last_recorded

    def attach_database(self, database: Any) -> None:
        """The literature database is open: runs, checks and the search history use it from now on."""
        self._database = database
        self.database_name = getattr(database, "display_name", "") or self.database_name
        if self._workbench is not None:
            self._workbench.database = database

    def apply_database_status(self, status: DatabaseStatus) -> None:
        """A status read arrived: keep it (the views and the coverage question read it) and say so."""
        self._database_status = status
        self.announce(STATUS_READ)

    @property
    def documents_in_database(self) -> int | None:
        """The document count of the newest status read (None before the first)."""
        return None if self.database_status is None else self.database_status.documents

    def history(self) -> SearchWorkbench:
        """The search history of the data folder, over the session's database (opened on first use;
        the session keeps its database current as the database is attached)."""
        if self._workbench is None:
            self._workbench = SearchWorkbench(SearchHistory(), self.database)
        return self._workbench

    def close_history(self) -> None:
        """Close the search history file (at the end of the window or the command)."""
        if self._workbench is not None:
            self._workbench.history.close()

    def coverage_warning(self, plan: RunPlan) -> str | None:
        """What to ask before ``plan`` runs semantic rows on a partly embedded database, by the newest
        status read (:func:`~kmds_desktop.app.run_facts.coverage_warning`); None: nothing to ask."""
        status = self.database_status
        coverage = None if status is None else coverage_from_status(
            status.documents, status.vectors, status.database_vectors)
        return coverage_warning(plan.kinds, coverage)

    def recorded(self, run: RunRecord, number: int) -> None:
        """``run`` is being saved in the search history as set ``number`` (its screening source)."""
        self.recorded_run = (run, number)

    def history_saved(self, number: int) -> None:
        """The search history saved the newest run as set ``number``."""
        self._last_recorded = number
        self.announce(RECORDED)

    def recorded_number(self) -> int | None:
        """The set number of the last run when it was recorded (None: not recorded)."""
        recorded = self.recorded_run
        return recorded[1] if recorded is not None and recorded[0] is self.last_run else None

    # --- settings ------------------------------------------------------------------------------
    def configure(self, settings: QueryGenerationSettings,
                  literature: LiteratureSettings | None = None,
                  retrieval: RetrievalSettings | None = None) -> None:
        """Use changed settings from now on (Preferences applies at once)."""
        self.settings = settings
        if literature is not None:
            self.literature = literature
        if retrieval is not None:
            self.retrieval = retrieval
        self.announce(SETTINGS_CHANGED)

    @property
    def selectable(self) -> bool:
        """Whether rows can be unticked (``allow_query_selection``)."""
        return bool(self.settings.allow_query_selection)

    def agent(self, database: Any) -> QueryAgent:
        """A :class:`QueryAgent` with the current settings on ``database``."""
        return QueryAgent(database, self.settings, system_prompt=DEFAULT_SYSTEM_PROMPT,
                          fetch_batch_size=self.literature.fetch_batch_size, retrieval=self.retrieval,
                          embedding_model=self.embedding_model, encoder=self.encoder)

    # --- rows ----------------------------------------------------------------------------------
    def row(self, uid: int) -> QueryRow | None:
        for row in self.rows:
            if row.uid == uid:
                return row
        return None

    def position(self, uid: int) -> int:
        for i, row in enumerate(self.rows):
            if row.uid == uid:
                return i
        return -1

    def included_rows(self) -> list[QueryRow]:
        """Ticked rows with a query, in table order: what Run takes."""
        return [r for r in self.rows if r.included and r.runnable]

    def set_draft_question(self, text: str) -> None:
        """The question as the user types it: rows written by hand from now on belong to it."""
        self.draft_question = text if isinstance(text, str) else ""

    def current_question(self) -> str:
        """The question a row added by hand now is for: the one being typed, else the last round's."""
        return self.draft_question.strip() or self.question

    def add_hand_written(self, text: str = "") -> QueryRow:
        """A query the user writes; an empty one is added unticked, for editing."""
        text = text if isinstance(text, str) else ""
        row = QueryRow(query=text, model=HAND_WRITTEN, included=bool(text.strip()),
                       question=self.current_question())
        return self.append(row)

    def append(self, row: QueryRow) -> QueryRow:
        """Add a row at the end (a new full-text row with text is to be checked)."""
        if row.semantic:
            row.validity = VALID if row.runnable else UNCHECKED  # a sentence needs no tsquery check
        elif row.runnable and row.validity == UNCHECKED:
            row.validity = CHECKING
        self.rows.append(row)
        self.announce(ROWS_CHANGED, [row.uid])
        if row.validity == CHECKING:
            self.announce(CHECKS_WANTED, [row.uid])
        return row

    def add_question_row(self) -> QueryRow:
        """The question as a semantic row, as the ``retrieval`` settings add it (a new round replaces it
        unless it was edited or ran; the Model column says "question")."""
        text = self.question.strip()
        return self.append(QueryRow(query=text, model=HAND_WRITTEN, included=bool(text), kind=ROW_SEMANTIC,
                                    round=self.round.number if self.round else 0, from_settings=True,
                                    question=self.question))

    def add_semantic(self, text: str | None = None) -> QueryRow:
        """A semantic row: ``text`` (default: the question) searched by meaning on the document vectors."""
        question = self.current_question()
        text = (text if isinstance(text, str) and text.strip() else question).strip()
        return self.append(QueryRow(query=text, model=HAND_WRITTEN, included=bool(text), kind=ROW_SEMANTIC,
                                    question=question))

    def add_hypothetical(self, abstract: str, model: str, generation_time: float | None = None) -> QueryRow:
        """A hypothetical-abstract row: what ``model`` wrote for the question, searched by meaning."""
        return self.append(QueryRow(query=abstract.strip(), model=model, attempt=1,
                                    generation_time=generation_time, temperature=self.settings.temperature,
                                    round=self.round.number if self.round else 0, kind=ROW_HYPOTHETICAL,
                                    question=self.question))

    def remove(self, uids: Sequence[int]) -> list[int]:
        """Remove rows; returns the positions they had (highest first)."""
        gone = sorted((self.position(u) for u in uids if self.position(u) >= 0), reverse=True)
        for i in gone:
            del self.rows[i]
        if gone:
            self.announce(ROWS_CHANGED, uids)
        return gone

    def set_included(self, uid: int, included: bool) -> bool:
        row = self.row(uid)
        if row is None or not self.selectable:
            return False
        row.included = bool(included) and row.runnable if included else False
        row.auto_unticked = False  # the user decided: no round changes it back
        self.announce(TICKS_CHANGED, [uid])
        return True

    def set_all_included(self, included: bool) -> None:
        for row in self.rows:
            row.included = included and row.runnable
        self.announce(TICKS_CHANGED, [r.uid for r in self.rows])

    def edit(self, uid: int, text: str) -> bool:
        """Replace a row's text: it is checked again, its old run statistics go, provenance says edited."""
        row = self.row(uid)
        if row is None or text == row.query:
            return False
        if row.model != HAND_WRITTEN:
            if row.original is None:
                row.original = row.query
            elif text == row.original:
                row.original = None  # edited back to what the model wrote
        was_included = row.included
        if row.model == HAND_WRITTEN and not row.query.strip() and text.strip():
            row.included = True  # a new hand-written row is ticked once it has text
        row.query = text
        row.revision += 1
        row.note = None
        row.normalized = None
        row.matches = None
        if row.semantic:
            row.validity = VALID if text.strip() else UNCHECKED
        else:
            row.validity = CHECKING if text.strip() else UNCHECKED
        row.validity_message = ""
        row.returned = row.unique = row.run_time = None
        row.run_error = None
        row.ranked_in_tier = False
        row.ids, row.unique_ids = [], []
        if row.included != was_included:
            self.announce(TICKS_CHANGED, [uid])
        if row.validity == CHECKING:
            self.announce(CHECKS_WANTED, [uid])
        return True

    # --- generation ----------------------------------------------------------------------------
    def start_round(self, question: str, now: str) -> tuple[GenerationRound, list[int]]:
        """Begin a generation round; returns it and the positions of rows it replaced (highest first).

        Raises ``ValueError`` for an empty question.
        """
        question = (question or "").strip()
        if not question:
            raise ValueError("the research question is empty")
        models, per_model = planned_models(self.settings)
        self._rounds += 1
        self.question = question
        key = query_key(question)
        # Nothing the user may still want is dropped: generated rows that never ran stay, ticked or
        # not as the user left them (a repeat proposal does not bring an unticked one back). Only the
        # semantic row of another question, unedited and never run, is replaced by this question's.
        replaced = [r.uid for r in self.rows if r.returned is None
                    and r.from_settings and r.revision == 0 and query_key(r.question) != key]
        positions = self.remove(replaced)
        unticked = 0
        for row in self.rows:
            if not row.question:
                row.question = question  # written before the first question was asked: this one's
            elif query_key(row.question) != key and row.included:
                row.included = False
                row.auto_unticked = True
                unticked += 1
        self.round = GenerationRound(
            number=self._rounds, question=question, models=models, queries_per_model=per_model,
            temperature=self.settings.temperature, system_prompt=DEFAULT_SYSTEM_PROMPT, generated_at=now,
            progress={m: ModelProgress(m, per_model) for m in models}, unticked_previous=unticked,
        )
        self.rounds.append(self.round)
        self.announce(ROUND_CHANGED)
        return self.round, positions

    def rows_to_confirm(self) -> list[QueryRow]:
        """Rows New search would lose that exist nowhere else: edited or hand-written text that has not
        run (a row that ran is kept with its run in the search history)."""
        return [r for r in self.rows if r.runnable and r.returned is None
                and r.origin in (EDITED, HAND_WRITTEN) and not (r.from_settings and r.revision == 0)]

    def new_search(self) -> int:
        """Start over: every row, the question, the round and the last run go (each run stays in the
        search history as its numbered set). Returns how many rows were cleared."""
        n = len(self.rows)
        self.rows = []
        self.question = ""
        self.draft_question = ""
        self.round = None
        self.rounds = []
        self.last_run = None
        self.documents = []
        self.announce(CLEARED)
        return n

    def accept_attempt(self, result: Any) -> QueryRow | None:
        """One item :func:`generate_round` reported (a finished attempt, the retrieval-rows plan or
        the hypothetical abstract); returns the row it added, if any."""
        row = self.consider(result)
        return self.append(row) if row is not None else None

    def consider(self, item: Any) -> QueryRow | None:
        """Record one item of the round; returns the row to add for it (not yet added), if any."""
        if isinstance(item, RetrievalRows):
            return self.consider_retrieval_rows(item)
        if isinstance(item, HypotheticalAttempt):
            return self.consider_hypothetical(item)
        return self.consider_attempt(item)

    def consider_attempt(self, result: QueryGenerationResult) -> QueryRow | None:
        """Record one finished attempt; returns the row to add for it (not yet added), if any.

        For views that announce an insertion before it happens; :meth:`accept_attempt` adds it too.
        """
        rnd = self.round
        if rnd is None or rnd.finished:
            return None
        rnd.attempts.append(result)
        prog = rnd.progress.get(result.model)
        if prog is not None and not result.skipped:
            # A model that failed for good (missing, unreachable, out of time) is done: the status
            # moves on to the next model at once.
            prog.answered = prog.expected if result.error_kind in FATAL_FOR_MODEL else prog.answered + 1
            prog.seconds += result.generation_time or 0.0
            if result.ok:
                prog.queries += 1
            elif prog.error is None:
                prog.error = result.error
        if not result.ok:
            return None
        key = query_key(result.query)
        earlier = [r for r in self.rows if r.runnable and query_key(r.query) == key]
        question_key = query_key(rnd.question)
        if earlier and all(query_key(r.question) != question_key for r in earlier):
            # Proposed before for another question only: the row the app unticked then serves this
            # question (ticked again, with this question); a row the user unticked stays as it is.
            again = next((r for r in earlier if r.auto_unticked and not r.included
                          and r.origin == GENERATED), None)
            if again is not None:
                again.question, again.included, again.auto_unticked = rnd.question, True, False
                rnd.offered.append(again.query)
                rnd.repeats_dropped += 1
                self.announce(TICKS_CHANGED, [again.uid])
                return None
        older = [r for r in earlier if r.round != rnd.number]
        if older or (earlier and not self.settings.show_all_queries_to_user):
            rnd.repeats_dropped += 1
            return None
        repeat = bool(earlier) and self.settings.deduplicate_results
        row = QueryRow(
            query=result.query, model=result.model, attempt=result.attempt_number,
            included=not repeat or not self.selectable, generation_time=result.generation_time,
            temperature=result.temperature,
            round=rnd.number, note=(f"same as the query of {earlier[0].source_label}; it runs once"
                                    if repeat else None), question=rnd.question,
            strategy_note=getattr(result, "note", "") or "",
            server=getattr(result, "server", "") or "",
            reply_format=getattr(result, "reply_format", "") or "",
        )
        rnd.offered.append(row.query)
        return row

    def consider_retrieval_rows(self, plan: RetrievalRows) -> QueryRow | None:
        """The round's semantic row (not yet added; None when not wanted or already shown) and the
        model it will ask for a hypothetical abstract."""
        rnd = self.round
        if rnd is None or rnd.finished:
            return None
        rnd.hypothetical_model = plan.hypothetical_model
        text = (plan.semantic or "").strip()
        if not text or any(r.semantic and query_key(r.query) == query_key(text) for r in self.rows):
            return None
        return QueryRow(query=text, model=HAND_WRITTEN, included=True, kind=ROW_SEMANTIC,
                        round=rnd.number, from_settings=True, question=rnd.question)

    def consider_hypothetical(self, attempt: HypotheticalAttempt) -> QueryRow | None:
        """Record the round's hypothetical abstract; returns its row (not yet added) when it has one."""
        rnd = self.round
        if rnd is None or rnd.finished:
            return None
        rnd.hypothetical = attempt
        if not attempt.ok:
            return None
        key = query_key(attempt.abstract)
        if any(r.kind == ROW_HYPOTHETICAL and query_key(r.query) == key for r in self.rows):
            rnd.repeats_dropped += 1  # the same abstract again: the row is there already
            return None
        return QueryRow(query=attempt.abstract.strip(), model=attempt.model, attempt=1,
                        generation_time=attempt.seconds, temperature=self.settings.temperature,
                        round=rnd.number, kind=ROW_HYPOTHETICAL, question=rnd.question)

    def finish_round(self, cancelled: bool = False) -> GenerationRound | None:
        rnd = self.round
        if rnd is not None:
            rnd.cancelled = cancelled
            rnd.finished = True
            self.announce(ROUND_CHANGED)
        return rnd

    # --- checks --------------------------------------------------------------------------------
    def pending_checks(self) -> list[CheckItem]:
        """The rows (as of now) that wait for a check and that no check job is answering."""
        return [CheckItem(r.uid, r.revision, r.query) for r in self.rows
                if r.validity == CHECKING and (r.uid, r.revision) not in self._checking]

    def take_checks(self) -> list[CheckItem]:
        """:meth:`pending_checks`, now counted as being answered until :meth:`checks_done` (so a
        second pause in typing does not send the same rows again while their check runs)."""
        items = self.pending_checks()
        self._checking |= {(i.uid, i.revision) for i in items}
        return items

    def checks_done(self, items: Sequence[CheckItem]) -> bool:
        """A check job for ``items`` ended (answered, failed or replaced by a newer one). True when
        rows still wait for a check (edited while it ran): check again after :data:`CHECK_DELAY_S`.
        Answers for text edited since are dropped by :meth:`apply_check` (the revision moved on)."""
        self._checking -= {(i.uid, i.revision) for i in items}
        return bool(self.pending_checks())

    def apply_check(self, result: CheckResult) -> bool:
        """Apply a check; False when stale (the row was edited or removed since)."""
        row = self.row(result.uid)
        if row is None or row.revision != result.revision:
            return False
        if result.ok is None:
            row.validity, row.validity_message, row.normalized = FAILED, result.message, None
        elif result.ok:
            row.validity, row.validity_message, row.normalized = VALID, "", result.message
        else:
            row.validity, row.validity_message, row.normalized = INVALID, result.message, None
        row.matches = result.matches if result.ok else None
        row.matches_exact = result.exact
        row.absent_terms = list(result.absent) if result.ok else []
        self.announce(CHECK_APPLIED, [row.uid])
        return True

    def mark_failed_for_recheck(self) -> list[int]:
        """Rows whose check failed (database down) go back to checking; returns their uids."""
        uids = []
        for row in self.rows:
            if row.validity == FAILED:
                row.validity = CHECKING
                uids.append(row.uid)
        if uids:
            self.announce(CHECKS_WANTED, uids)
        return uids

    def database_counted(self, documents: int | None, searchable: int | None, *,
                         exact: bool = True) -> list[int]:
        """The database's status was read: ``documents`` in it, ``searchable`` of them by a semantic
        row (those with a vector; None when not known). Returns the uids whose Matches changed.

        After an import (or an embedding run) the counts the rows show describe the database as it
        was: a full-text row that has a count is checked again (it waits for a check, announced as
        :data:`CHECKS_WANTED`), and a semantic row that has a count gets the new number of documents
        it searches. The first reading only records the counts (nothing was counted before it).
        """
        before = self._database_counts
        self._database_counts = (documents, searchable)
        if before is None or before == (documents, searchable):
            return []
        recheck: list[int] = []
        changed: list[int] = []
        for row in self.rows:
            if row.matches is None:
                continue
            if row.semantic:
                if searchable is not None and (row.matches, row.matches_exact) != (searchable, exact):
                    row.matches, row.matches_exact = searchable, exact
                    changed.append(row.uid)
            elif before[0] != documents and row.validity == VALID:
                row.validity = CHECKING
                recheck.append(row.uid)
                changed.append(row.uid)
        if changed:
            self.announce(ROWS_CHANGED, changed)
        if recheck:
            self.announce(CHECKS_WANTED, recheck)
        return changed

    # --- running -------------------------------------------------------------------------------
    def plan_run(self, now: str = "") -> RunPlan:
        """The ticked rows, as shown, through the agent's review rules. Raises ``QueryAgentError``
        (nothing ticked, all invalid, or a rule broken) with a message for the user."""
        rows = self.included_rows()
        if not rows:
            raise QueryAgentError("tick at least one query to run")
        if all(r.validity == INVALID for r in rows):
            raise QueryAgentError(
                "every ticked query is invalid; fix them in the table (each row shows its error): "
                + "; ".join(f"'{shorten(r.query, QUOTED_QUERY_CHARS)}': {shorten(r.validity_message)}"
                            for r in rows))
        offered = list(self.round.offered) if self.round is not None else []
        text_rows = [r for r in rows if not r.semantic]
        queries: list[str] = []
        row_of_query: list[int] = []
        if text_rows:
            returned = [r.query for r in text_rows]
            queries = self.agent(None).apply_review(offered or returned, returned)
            row_of_query = [next(r.uid for r in text_rows if query_key(r.query) == query_key(q))
                            for q in queries]
        # Sentences are not de-duplicated as queries: each semantic row runs as shown. Everything
        # runs in table order.
        planned = [(self.position(uid), q, ROW_TSQUERY, uid)
                   for q, uid in zip(queries, row_of_query, strict=True)]
        planned += [(self.position(r.uid), r.query.strip(), r.kind, r.uid) for r in rows if r.semantic]
        planned.sort(key=lambda p: p[0])
        return RunPlan([(r.uid, r.revision, r.query) for r in rows], [p[1] for p in planned],
                       [p[3] for p in planned], now, kinds=[p[2] for p in planned], question=self.question)

    def apply_run(self, plan: RunPlan, result: ReviewedSearchResult, finished_at: str) -> RunRecord:
        """Store a finished run: per-row statistics, the merged documents in rank order, the record."""
        provenance, labels = [], []
        for uid, stat in zip(plan.row_of_query, result.queries, strict=False):
            row = self.row(uid)
            provenance.append(row.provenance() if row else {"kind": HAND_WRITTEN})
            labels.append(row.source_label if row else HAND_WRITTEN)
            if row is None:
                continue
            revision = next((rev for u, rev, _t in plan.rows if u == uid), None)
            if row.revision != revision:
                continue  # edited while it ran: the numbers describe the old text
            unique = [i for i in stat.ids if result.found_by.get(i) == [stat.index]]
            row.ids, row.unique_ids = list(stat.ids), unique
            row.returned = None if stat.error else len(stat.ids)
            row.unique = None if stat.error else len(unique)
            row.run_time, row.run_error = stat.time_s, stat.error
            row.ranked_in_tier = bool(stat.ranked_in_tier) and not stat.error
            if stat.matches is not None:
                row.matches, row.matches_exact = stat.matches, True
        names = [self._found_by_name(stat.kind, stat.query, self.row(uid))
                 for uid, stat in zip(plan.row_of_query, result.queries, strict=False)]
        found_by = {doc_id: [names[i] for i in result.found_by.get(doc_id, []) if i < len(names)]
                    for doc_id in result.ids}
        documents = []
        for rank, doc in enumerate(result.documents, start=1):
            item = dict(doc)
            item["rank"] = rank
            doc_id = item.get("id")
            item["found_by"] = found_by.get(doc_id, []) if doc_id is not None else []
            documents.append(item)
        self.documents = documents
        self.last_run = RunRecord(plan, result, provenance, labels, plan.started_at, finished_at,
                                  self.database_name,
                                  retrieval_facts(self.retrieval, self.embedding_model, result))
        self.announce(RUN_APPLIED, plan.row_of_query)
        return self.last_run

    @staticmethod
    def _found_by_name(kind: str, text: str, row: QueryRow | None) -> str:
        """How the documents table and the exports name a row in "found by": a full-text row by its
        query; a semantic row by its type and the start of its sentence; a hypothetical abstract (a
        paragraph) by its type and model. The search log keeps the full texts, by index."""
        if kind == ROW_HYPOTHETICAL:
            model = row.source_label.removeprefix(f"[{ROW_HYPOTHETICAL}] ") if row else "an LLM"
            return f"hypothetical abstract ({model})"
        if kind == ROW_SEMANTIC:
            short = text if len(text) <= FOUND_BY_CHARS else text[: FOUND_BY_CHARS - 1].rstrip() + "…"
            return f"semantic: {short}"
        return text

    def discard_question(self, rows: Sequence[QueryRow] | None = None) -> str:
        """What New search asks before it drops ``rows`` (default: :meth:`rows_to_confirm`)."""
        rows = self.rows_to_confirm() if rows is None else list(rows)
        n = len(rows)
        return (f"Discard {n} edited or hand-written {_plural(n, 'query', 'queries')} that "
                f"{_plural(n, 'has', 'have')} not run?\n\n" + "\n".join(f"• {r.query}" for r in rows[:8])
                + ("\n…" if n > 8 else ""))

    def results_line(self) -> str:
        """The line above the documents after a run: how many, from how many queries, how long, and
        INCOMPLETE when a valid query could not run ("" before the first run)."""
        run = self.last_run
        if run is None:
            return ""
        result = run.result
        incomplete = " (INCOMPLETE: see the failed rows' Error column)" if result.incomplete else ""
        n = len(result.queries)
        return (f"{len(result.documents):,} documents from {len(result.ok_queries)} of {n} "
                f"{_plural(n, 'query', 'queries')} ({result.total_time_s:.2f} s){incomplete}")

    def run_messages(self) -> list[tuple[str, str]]:
        """(level, text) the user must read after the last run: an incomplete run is an error (a
        systematic search is never silently partial); failed rows a warning; a semantic row that
        searched a partly embedded database a warning that says how many documents it could not see."""
        run = self.last_run
        if run is None:
            return []
        result = run.result
        messages: list[tuple[str, str]] = []
        coverage = run_coverage(result.queries)
        if coverage is not None and coverage.partial and not result.failed_queries:
            if coverage.vectors:  # the database's own vectors: its own embedding run adds the others
                messages.append(("warning", f"{self.coverage_sentence()}; the other {coverage.missing:,} "
                                            f"{_plural(coverage.missing, 'has', 'have')} no vector of that "
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
            messages.append(("warning", self.run_summary()))
        return messages

    def coverage_sentence(self) -> str:
        """What the last run's semantic rows searched, as the log and the report say it ("" when no
        semantic row ran)."""
        run = self.last_run
        coverage = run_coverage(run.result.queries) if run is not None else None
        if run is None or coverage is None:
            return ""
        rows = sum(1 for q in run.result.queries if q.kind != ROW_TSQUERY and q.ok)
        sentence = coverage.sentence(rows)
        return sentence[:1].upper() + sentence[1:]

    def run_summary(self) -> str:
        run = self.last_run
        if run is None:
            return ""
        result = run.result
        text = (f"{len(result.documents):,} documents from {len(result.ok_queries)} of "
                f"{len(result.queries)} {_plural(len(result.queries), 'query', 'queries')}")
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

    # --- the log -------------------------------------------------------------------------------
    def search_log(self, app_version: str = "") -> dict[str, Any]:
        """The search log of the last run (see :mod:`kmds_desktop.app.search_log`)."""
        return build_search_log(self, app_version=app_version)


# --- the slow parts: plain functions for a worker or the CLI ---------------------------------------


def plan_retrieval_rows(agent: QueryAgent, question: str, *,
                        cancel: CancelToken | None = None) -> RetrievalRows:
    """Which rows the ``retrieval`` settings add for ``question`` on the agent's database.

    Both need document vectors (a semantic row finds nothing without them, and a search must never
    wait for embedding): with none, neither is added and ``reason`` says why. The hypothetical
    abstract also needs an LLM among the configured models (``builtin:`` generators write none).
    """
    # why: start-up time: it loads psycopg
    from kmds_desktop.literature.store.vectors import VectorsUnavailable, count_with_vectors

    r = agent.retrieval
    question = (question or "").strip()
    if not question or not (r.semantic_row or r.hypothetical_row):
        return RetrievalRows(reason="semantic rows are off in Preferences > Retrieval")
    if agent.database is None:
        return RetrievalRows(reason="the literature database is not open")
    check(cancel)
    try:  # one count (what the semantic row will search), not the status's count of those to embed
        with_vectors = count_with_vectors(agent.database, cancel=cancel)
    except VectorsUnavailable:
        with_vectors = 0
    except Exception as err:  # noqa: BLE001 - no vectors to search; the full-text rows still run
        if cancel is not None and cancel.cancelled:
            raise Cancelled("cancelled by the user") from None
        return RetrievalRows(reason=f"document vectors unavailable: {err}")
    if with_vectors == 0:  # a BMLibrarian database's own vectors serve the row too
        # why: start-up time: it loads psycopg
        from kmds_desktop.literature.retrieval.vector_choice import database_vector_status

        try:
            own = database_vector_status(agent.database, use_database_vectors=r.use_database_vectors,
                                         cancel=cancel)
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


def check_queries(agent: QueryAgent, items: Sequence[CheckItem], *, chunk: Callable[[CheckResult], None],
                  progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> int:
    """Validate and count each query (the agent's check); each answer goes out through ``chunk``.

    A database failure is reported for every remaining row (``ok=None``) and then raised, so rows
    show why they could not be checked.
    """
    for i, item in enumerate(items):
        check(cancel)
        report(progress, i, len(items), "checking queries")
        try:
            stat = agent.check_query(item.text, cancel=cancel)
        except Cancelled:
            raise
        except Exception as err:
            if cancel is not None and cancel.cancelled:
                raise Cancelled("cancelled by the user") from None
            for result in not_checked(items[i:], err):
                chunk(result)
            raise
        if stat.valid:
            chunk(CheckResult(item.uid, item.revision, True, stat.normalized or "", stat.matches,
                              not stat.estimated, list(getattr(stat, "absent_terms", []) or [])))
        else:
            chunk(CheckResult(item.uid, item.revision, False, stat.invalid_reason or ""))
    report(progress, len(items), len(items), "queries checked")
    return len(items)


def not_checked(items: Sequence[CheckItem], err: BaseException) -> list[CheckResult]:
    """The answers for ``items`` when they could not be checked (the database is down or could not
    be opened): each row says why, and is checked again once the database answers."""
    from kmds_desktop.app.messages import describe_error  # why: start-up time: it loads httpx, ollama

    return [CheckResult(i.uid, i.revision, None, f"not checked: {describe_error(err)}") for i in items]


def execute_run(agent: QueryAgent, plan: RunPlan, *, max_rows: int, progress: ProgressFn | None = None,
                cancel: CancelToken | None = None) -> ReviewedSearchResult:
    """Run exactly the plan's queries (ID-only, merged, fetched once). Re-ranking by similarity to the
    question (``retrieval.rerank``) applies when a semantic row runs: only then are vectors at hand."""
    rows = plan.search_rows()
    question = plan.question if any(r.semantic for r in rows) else None
    return agent.run_reviewed_queries(rows, max_rows=max_rows, progress=progress, cancel=cancel,
                                      question=question)


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many
