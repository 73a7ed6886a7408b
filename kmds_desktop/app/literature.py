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

Where the parts live (each module one job; this one keeps the session and its events, and names the
others' public names for the window and the CLI): :mod:`~kmds_desktop.app.literature_rows` (a review
row, its provenance and validity), :mod:`~kmds_desktop.app.literature_rounds` (a generation round and
:func:`generate_round`), :mod:`~kmds_desktop.app.literature_checks` (a row's check and
:func:`check_queries`), :mod:`~kmds_desktop.app.literature_plan` (a run's plan, :func:`execute_run` and
the record the session keeps with the sentences about it); opening and reading the database, importing
and embedding are :mod:`~kmds_desktop.app.literature_data`'s, and the run sequence the window and the CLI
share is :mod:`~kmds_desktop.app.literature_run`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kmds_desktop.app.events import Observable
from kmds_desktop.app.literature_checks import (
    CHECK_DELAY_S,
    CheckItem,
    CheckResult,
    check_queries,
    not_checked,
)
from kmds_desktop.app.literature_data import DatabaseStatus
from kmds_desktop.app.literature_plan import RunPlan, RunRecord, execute_run
from kmds_desktop.app.literature_rounds import (
    GenerationRound,
    HypotheticalAttempt,
    ModelProgress,
    RetrievalRows,
    generate_round,
    plan_retrieval_rows,
    planned_models,
    write_hypothetical,
)
from kmds_desktop.app.literature_rows import (
    CHECKING,
    EDITED,
    FAILED,
    GENERATED,
    HAND_WRITTEN,
    INVALID,
    MAX_ROWS_WHERE,
    QUESTION_ROW,
    UNCHECKED,
    VALID,
    QueryRow,
    cap_note,
    noun,
)
from kmds_desktop.app.run_facts import coverage_from_status, coverage_warning, retrieval_facts
from kmds_desktop.app.search_log import build_search_log
from kmds_desktop.config import LiteratureSettings, QueryGenerationSettings, RetrievalSettings
from kmds_desktop.literature.errors import QueryAgentError
from kmds_desktop.literature.queries.agent import QueryAgent
from kmds_desktop.literature.queries.query_cleaning import query_key
from kmds_desktop.literature.queries.query_generation import (
    DEFAULT_SYSTEM_PROMPT,
    FATAL_FOR_MODEL,
    QueryGenerationResult,
)
from kmds_desktop.literature.retrieval.query_run import QUOTED_QUERY_CHARS, ReviewedSearchResult
from kmds_desktop.literature.retrieval.semantic import ROW_HYPOTHETICAL, ROW_SEMANTIC, ROW_TSQUERY
from kmds_desktop.literature.store.topk_tiers import tier_sentence
from kmds_desktop.literature.strategy.history import SearchHistory
from kmds_desktop.literature.strategy.workbench import SearchWorkbench
from kmds_desktop.text import shorten

log = logging.getLogger(__name__)

#: The session and its events are this module's; the other names live in the modules that define
#: them (rows, rounds, checks, the run's plan) and are named here because the window and the CLI
#: import them from the session's module.
__all__ = [
    "CHECKING", "CHECKS_WANTED", "CHECK_APPLIED", "CHECK_DELAY_S", "CLEARED", "EDITED", "FAILED",
    "FOUND_BY_CHARS", "GENERATED", "HAND_WRITTEN", "INVALID", "MAX_ROWS_WHERE", "QUESTION_ROW",
    "RECORDED", "ROUND_CHANGED", "ROWS_CHANGED", "RUN_APPLIED", "SETTINGS_CHANGED", "STATUS_READ",
    "TICKS_CHANGED", "UNCHECKED", "VALID", "CheckItem", "CheckResult", "GenerationRound",
    "HypotheticalAttempt", "KnownPapersInput", "LiteratureSession", "QueryRow", "RetrievalRows",
    "RunPlan", "RunRecord", "cap_note", "check_queries", "execute_run", "generate_round",
    "not_checked", "plan_retrieval_rows", "tier_sentence", "write_hypothetical",
    "QueryGenerationResult",  # what a round's attempts are: the review table shows them
]

#: Longest start of a semantic row's sentence "found by" names (the log has it all): a question is
#: named whole (at 40 the document detail cut it to "…diagnose cy…"); the table elides to its width.
FOUND_BY_CHARS = 160


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
        return (f"Discard {n} edited or hand-written {noun(n, 'query', 'queries')} that "
                f"{noun(n, 'has', 'have')} not run?\n\n" + "\n".join(f"• {r.query}" for r in rows[:8])
                + ("\n…" if n > 8 else ""))

    def results_line(self) -> str:
        """The line above the documents after a run ("" before the first run; see
        :meth:`RunRecord.results_line`)."""
        return self.last_run.results_line() if self.last_run is not None else ""

    def run_messages(self) -> list[tuple[str, str]]:
        """(level, text) the user must read after the last run (:meth:`RunRecord.messages`)."""
        return self.last_run.messages() if self.last_run is not None else []

    def coverage_sentence(self) -> str:
        """What the last run's semantic rows searched ("" when none ran; see
        :meth:`RunRecord.coverage_sentence`)."""
        return self.last_run.coverage_sentence() if self.last_run is not None else ""

    def run_summary(self) -> str:
        """The last run in one line (:meth:`RunRecord.summary`)."""
        return self.last_run.summary() if self.last_run is not None else ""

    # --- the log -------------------------------------------------------------------------------
    def search_log(self, app_version: str = "") -> dict[str, Any]:
        """The search log of the last run (see :mod:`kmds_desktop.app.search_log`)."""
        return build_search_log(self, app_version=app_version)
