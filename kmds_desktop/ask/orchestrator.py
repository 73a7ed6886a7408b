"""The search orchestrator: route a question, run a template or semantic search, write the answer.

Steps of :meth:`SearchOrchestrator.ask`:

1. route — the LLM gets a prompt listing every template and the KB's own vocabulary (types,
   workflows, sequence numbers, intents) and replies with JSON, parsed tolerantly and validated by
   pydantic; without an LLM the offline router decides from embeddings, cues and that vocabulary;
2. search — the chosen template runs with the route's filters. A listing ("show", "list",
   "first 3", "findings 2 to 4", a named type or workflow) keeps every match in workflow and
   sequence order; an open question keeps the records relevant to it, best first, and stops where
   relevance drops (:mod:`~kmds_desktop.ask.relevance`). Identical findings are merged (both
   citations kept), records are grouped by workflow, and at most ``n_results`` are shown (the
   visible limit; ``total_matches`` says how many matched);
3. fallback — an invalid or unknown route, a failing LLM, or a template that finds nothing leads
   to the offline router's route (a model's route failed: the offline router is its floor) or, where
   that finds nothing too or the route was the user's, to a semantic search of this KB's index; and
   ``fallback_reason`` says which;
4. synthesis — the LLM writes a concise answer citing records as ``[n]`` (``results[n-1]``);
   without an LLM, or when synthesis fails, the answer is extractive and says so.

The index used is always this KB's own (entries filtered by ``kb_id``) and is brought up to date
on first use, so a KB never seen before works at once and another KB's entries never leak in.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kmds_desktop.ask.answer_check import with_records_if_uncited, without_unheld_figures
from kmds_desktop.ask.answers import (
    PROMPT_RECORDS,
    extractive_answer,
    fallback_heading,
    offline_heading,
    prompt_records,
    prompt_records_said,
    repair_citations,
    strip_reasoning,
    synthesis_prompt,
)
from kmds_desktop.ask.catalog import ROUTE_BY_INTENT
from kmds_desktop.ask.guard import guard_route
from kmds_desktop.ask.kb_vocabulary import KBVocabulary
from kmds_desktop.ask.models import OrchestratorResult, OrchestratorRoute
from kmds_desktop.ask.offline_router import OfflineDecision, category_named, route_offline
from kmds_desktop.ask.question_words import (
    asks_for_results,
    asks_what_was_chosen,
    choice_bonus,
    figures_bonus,
    question_topic,
)
from kmds_desktop.ask.relevance import (
    DEFAULT_LIMIT,
    distinctive_word_share,
    group_by_workflow,
    is_listing,
    merge_duplicates,
    relevant,
)
from kmds_desktop.ask.routing import (
    ROUTE_MAX_TOKENS,
    RouteError,
    parse_route,
    route_json_schema,
    routing_prompt,
)
from kmds_desktop.config import Settings, SettingsError, load_settings
from kmds_desktop.index.embeddings import DEFAULT_MODEL
from kmds_desktop.kb import TEMPLATES, KnowledgeBase, Observation, SearchFilters, load_kb
from kmds_desktop.llm import (
    FunctionBackend,
    GoogleBackend,
    LLMAuthError,
    LLMError,
    LLMFn,
    LLMModelNotFound,
    LLMTimeout,
    LLMUnreachable,
    OllamaBackend,
    OpenAIBackend,
    choose_backend,
    structured_chat,
)
from kmds_desktop.llm.prompt_cache import slow_route_note
from kmds_desktop.llm.server_memory import remembers_per_server
from kmds_desktop.llm.structured import schema_key
from kmds_desktop.tasks import Cancelled, CancelToken, ProgressFn, check, report

log = logging.getLogger(__name__)

BACKEND_CHOICES = ("auto", "ollama", "google", "openai", "offline")
#: LLM failures that will repeat on the next call, so synthesis is not attempted after routing hit one.
_PERSISTENT_LLM_ERRORS = (LLMUnreachable, LLMModelNotFound, LLMAuthError, LLMTimeout)
_STEPS = 4
#: The templates a question about what was chosen and why is answered from, together.
_CHOICE_INTENTS = ("model_selection_search", "modelling_choice_search")
#: How much closer to the question (the relevance score of the closest record: its similarity to the
#: question with the ranking's bonuses) the free-text search's records must be than those of the
#: model's template, run where the offline router found no close template, for the free-text search
#: to run instead (:meth:`SearchOrchestrator._weigh_free_text`).
#: Measured with the 1.5B model on the 14 questions of the dev and hard sets that the offline router
#: finds no close template for: the two where the model's template missed the right record were 0.40
#: and 0.56 farther; the hard set's three, where the model's template is the right one, 0.00, 0.19 and
#: 0.22.
FAR_FROM_QUESTION = 0.3
#: Closer than the model's template's records by at least this, within :data:`FAR_FROM_QUESTION`, the
#: free-text search's closest record joins them (dev: a record 0.01 closer, about date formats, was not
#: about "how many tickets take longer than 1000 hours?"; hard: the record that answers "why is OLS our
#: main model for predicting weight?", routed by the model to model selection, came 0.22 closer).
CLOSER_BY = 0.05
#: Templates with more records than this are ranked by a filtered index query, not one by one.
RANK_EXACTLY_MAX = 500
#: Similarity added to records of the category the router guessed (but the question did not name).
PREFERRED_BONUS = 0.05
#: The relevance cut for a question about results, over model selection records scored with their
#: figures: looser than an open question's, since the records that state the winner's error and its
#: rivals' are often worded far from the question (tuned on the dev question set only).
RESULTS_RELATIVE_FLOOR = 0.7
RESULTS_GAP = 0.2


class SearchOrchestrator:
    """Answers questions about one knowledge base; see the module docstring for the steps.

    ``kb_path`` is a KB file or an already-loaded :class:`~kmds_desktop.kb.KnowledgeBase` (the GUI
    passes the one it shows, edits included). ``persist_dir`` is the index folder; None (the
    default, as in KMDS) keeps the index in memory for this orchestrator's lifetime, unless
    ``index`` shares an open ``SemanticIndex`` (the app and the CLI pass the data folder's).

    ``llm_fn`` is any ``prompt -> str`` callable (an :class:`~kmds_desktop.llm.OllamaBackend`
    keeps its cancel support). Without it ``backend`` decides, and its default is KMDS's documented
    one: Google GenAI ("google"), which needs ``GOOGLE_API_KEY`` (or the keyring). Without a key
    nothing is sent anywhere: every result says so in ``backend_note`` and ``fallback_reason``
    (the records are still found, by semantic search, and quoted extractively). The app passes
    "auto" (Ollama if it answers, else a confirmed OpenAI-compatible server, else Google if a key is
    set, else offline); "ollama", "openai" and "offline" are the other choices. ``model`` overrides
    the configured model of the chosen backend; ``ollama_host`` the configured host. ``n_results``
    is the visible limit on the records an answer shows (default
    :data:`~kmds_desktop.ask.relevance.DEFAULT_LIMIT`); a listing shows every match up to it, an
    open question the relevant records up to it.
    """

    def __init__(
        self,
        kb_path: str | Path | KnowledgeBase,
        *,
        persist_dir: str | Path | None = None,
        llm_fn: LLMFn | None = None,
        model: str | None = None,
        embedding_model: str = DEFAULT_MODEL,
        n_results: int | None = None,
        backend: str = "google",
        settings: Settings | None = None,
        ollama_host: str | None = None,
        index: Any | None = None,
    ) -> None:
        if backend not in BACKEND_CHOICES:
            raise ValueError(f"unknown backend {backend!r}: choose one of {', '.join(BACKEND_CHOICES)}")
        if n_results is None:
            n_results = DEFAULT_LIMIT
        if isinstance(n_results, bool) or not isinstance(n_results, int) or n_results < 1:
            raise ValueError(f"n_results must be a whole number of at least 1, not {n_results!r}")
        self.kb: KnowledgeBase = kb_path if isinstance(kb_path, KnowledgeBase) else load_kb(kb_path)
        self.persist_dir = persist_dir
        self.embedding_model = embedding_model
        self.n_results = n_results
        self.requested_backend = backend
        self.settings = settings if settings is not None else _settings_or_default()
        llm_settings = self.settings.llm.model_copy()
        if ollama_host:
            llm_settings.ollama_host = ollama_host
        if model:
            llm_settings.ollama_model = model
            llm_settings.google_model = model
            llm_settings.openai_model = model
        self.llm_settings = llm_settings
        self._llm_fn = llm_fn
        self._llm: LLMFn | None = None
        self._llm_error: LLMError | None = None
        self.backend_name: str | None = None
        self.backend_note = ""
        self._index = index
        self._index_ready = False
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ set-up (lazy)

    @property
    def kb_id(self) -> str:
        return self.kb.kb_id

    def resolve_backend(self) -> str:
        """Pick the LLM backend now (probing Ollama for "auto"); returns its name. Done once."""
        with self._lock:
            if self.backend_name is not None:
                return self.backend_name
            if self.requested_backend == "offline":
                self._llm, self.backend_name = None, "offline"
            elif self._llm_fn is not None:
                fn = self._llm_fn
                # the app's backends keep cancel and streaming; anything else is a plain callable
                # whose failures (of any type) must become LLMError so that ask() falls back
                self._llm = fn if isinstance(fn, OllamaBackend | OpenAIBackend | GoogleBackend
                                             | FunctionBackend) else FunctionBackend(fn)
                self.backend_name = str(getattr(fn, "name", "callable"))
            else:
                try:
                    choice = choose_backend(self.llm_settings, self.requested_backend)
                    self._llm, self.backend_name, self.backend_note = choice.llm, choice.name, choice.note
                except LLMError as err:  # "google" without a key: every LLM step will fall back
                    self._llm, self._llm_error, self.backend_name = None, err, self.requested_backend
                    self.backend_note = (
                        f"{self.requested_backend} could not be used: {err} Nothing was sent to an LLM; "
                        "pass backend='auto' or 'offline' (or llm_fn=...) to choose another way")
            log.info("ask backend: %s %s", self.backend_name, self.backend_note)
            return self.backend_name

    @property
    def index(self) -> Any:
        """This orchestrator's ``SemanticIndex`` (opened on first use)."""
        with self._lock:
            if self._index is None:
                # why: start-up time: kmds_desktop.index loads its parts on first use
                from kmds_desktop.index import SemanticIndex

                # None: in memory, as documented (the app and the CLI pass their own index)
                self._index = SemanticIndex(self.persist_dir, self.embedding_model)
            return self._index

    def refresh_index(self, progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> Any:
        """Bring this KB's index entries up to date (only new or changed findings are embedded)."""
        with self._lock:
            signature = _kb_signature(self.kb)
            built = self.index.build_from_onto(self.kb, progress=progress, cancel=cancel)
            _remember_fresh(self.index, self.kb_id, signature)
            self._index_ready = True
            return built

    def _ensure_index(self, progress: ProgressFn | None, cancel: CancelToken | None) -> None:
        """Refresh once per orchestrator, and not at all when this process already indexed this
        exact KB content into this index (the GUI makes one orchestrator per question)."""
        if self._index_ready:
            return
        if _is_fresh(self.index, self.kb_id, _kb_signature(self.kb)):
            self._index_ready = True
            return
        self.refresh_index(progress=progress, cancel=cancel)

    # ------------------------------------------------------------------ public API

    def ask(self, query: str, progress: ProgressFn | None = None,
            cancel: CancelToken | None = None) -> OrchestratorResult:
        """Route, search, synthesise; never raises for LLM trouble (it falls back and says why)."""
        result = self.retrieve(query, progress=progress, cancel=cancel)
        return self.synthesize(result, progress=progress, cancel=cancel)

    def ask_with_route(self, query: str, route: OrchestratorRoute | dict[str, Any],
                       progress: ProgressFn | None = None,
                       cancel: CancelToken | None = None) -> OrchestratorResult:
        """Re-run ``query`` on a given (e.g. user-edited) route, skipping the router."""
        result = self.retrieve(query, route=route, progress=progress, cancel=cancel)
        return self.synthesize(result, progress=progress, cancel=cancel)

    def ask_stream(self, query: str, route: OrchestratorRoute | dict[str, Any] | None = None,
                   progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> AnswerStream:
        """Retrieve now, then stream the answer: iterate the returned object for text chunks; its
        ``.result`` holds the complete :class:`OrchestratorResult` once iteration ends."""
        result = self.retrieve(query, route=route, progress=progress, cancel=cancel)
        return AnswerStream(self, result, cancel)

    def retrieve(self, query: str, route: OrchestratorRoute | dict[str, Any] | None = None,
                 progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> OrchestratorResult:
        """Steps 1-3 (route, search, fallback): a result with ``results`` filled and no answer yet."""
        question = _check_question(query)
        started = time.perf_counter()
        timings: dict[str, float] = {}
        check(cancel)
        backend = self.resolve_backend()
        self._llm_failure = None
        report(progress, 0, _STEPS, "preparing the index")

        def index_progress(done: int, total: int | None, message: str) -> None:
            report(progress, 0, _STEPS, f"preparing the index: {message}")

        self._ensure_index(index_progress if progress is not None else None, cancel)
        result = OrchestratorResult(answer="", intent_class="", route_explanation="", results=[],
                                    backend=backend, model=str(getattr(self._llm, "model", "") or ""),
                                    backend_note=self.backend_note, question=question,
                                    timings=timings)

        # 1. route
        asks_llm = route is None and self._llm is not None
        report(progress, 1, _STEPS, f"{self.llm_label()} is choosing how to search" if asks_llm
               else "choosing how to search")
        t = time.perf_counter()
        if route is not None:
            choice = _given_route(route)
        elif self._llm is not None or self._llm_error is not None:
            choice = self._model_route(question, result, cancel)
        else:
            vector = self._embed_timed(question, result)
            decision = route_offline(question, vector, self.embedding_model, self.vocabulary(),
                                     encode=self._encode)
            choice = _RouteChoice(proposed=decision.route, question_vector=vector, offline_route=True)
        timings["route"] = time.perf_counter() - t
        result.proposed_route = choice.proposed
        check(cancel)

        # 2. search
        report(progress, 2, _STEPS, "searching the knowledge base")
        t = time.perf_counter()
        ran, results, listing = self._records(question, choice, result, given=route is not None)
        timings["search"] = time.perf_counter() - t
        result.route = ran
        result.intent_class = ran.intent_class
        result.route_explanation = _explanation(choice.proposed, ran, choice.fallback)
        result.listing = listing
        result.limit = self.n_results
        result.total_matches = len(results)
        result.results = results[: self.n_results]
        for r in result.results:
            r.setdefault("kb_id", self.kb_id)
        result.weak_match = weak_match_note(result.results, listing)
        if listing and self._llm is not None and len(result.results) > PROMPT_RECORDS:
            self._mark_relevance(question, choice.question_vector, result.results)
        timings["total"] = time.perf_counter() - started
        return result

    def _model_route(self, question: str, result: OrchestratorResult, cancel: CancelToken | None,
                     ) -> _RouteChoice:
        """Step 1 with a model: its route, kept only where the question supports it. The offline
        router is the model's floor (:mod:`~kmds_desktop.ask.guard`): the guard keeps the model's
        route, drops its ungrounded filters, or keeps the offline router's route, and ``result``
        gets the model's own route, the guard's notes and the route not taken. A failing model or
        an unusable reply leaves a ``fallback`` for step 2."""
        choice = _RouteChoice()
        try:
            if self._llm_error is not None:
                raise self._llm_error
            vocabulary = self.vocabulary()
            asked = time.perf_counter()
            reply, result.route_format = self._route_reply(routing_prompt(question, vocabulary), cancel)
            _route_prompt_read(self._llm, vocabulary)
            result.speed_note = slow_route_note(self._llm, time.perf_counter() - asked)
            result.model_route = _in_kb_terms(parse_route(reply), vocabulary)
            if not result.model_route.explanation.strip():  # a short route names no reason
                result.model_route = result.model_route.model_copy(
                    update={"explanation": f"Chosen by {self.llm_label()}."})
            choice.question_vector = self._embed_timed(question, result)
            decision = choice.offline_decision = route_offline(
                question, choice.question_vector, self.embedding_model, vocabulary, encode=self._encode)
            guarded = guard_route(question, result.model_route, decision, vocabulary)
            choice.proposed = guarded.route
            choice.offline_route = guarded.offline_route_runs
            if choice.offline_route and not choice.proposed.from_offline_router:
                # the model chose the offline router's own route: marked as such, so the route given
                # back (Re-run without an edit) runs as this one did and finds the same records
                choice.proposed = choice.proposed.as_offline_router_route()
            if guarded.chosen_by == "model" and decision.basis == "none":
                choice.free_text = decision  # the model's template ran where the offline router had none
            result.route_notes, result.alternative_route = guarded.notes, guarded.alternative
            for note in guarded.notes:
                log.info("route guard: %s", note)
        except Cancelled:
            raise
        except RouteError as err:
            choice.fallback = (err.code, str(err))
        except LLMError as err:
            choice.fallback = ("llm_error", f"the LLM failed: {err}")
            if isinstance(err, _PERSISTENT_LLM_ERRORS):
                self._llm_failure = err
        return choice

    def _records(self, question: str, choice: _RouteChoice, result: OrchestratorResult, *, given: bool,
                 ) -> tuple[OrchestratorRoute, list[dict[str, Any]], bool]:
        """Steps 2 and 3: the route that ran, its records, and whether they are a listing.

        The chosen route runs; where the model's template ran because the offline router had none,
        the free-text search's closer records may join or replace them
        (:meth:`_weigh_free_text`). Where it failed (no reply, no usable route, no records) the
        offline router's route runs as with no model; a route the user gave (``given``), or the
        offline router's own finding nothing, falls back to the free-text search. ``choice.fallback``
        ends up saying why, if anything fell back."""
        proposed = choice.proposed
        results: list[dict[str, Any]] = []
        ran = proposed
        listing = False
        if proposed is not None and choice.fallback is None:
            results, listing, empty_reason = self._run_route(question, choice.question_vector, proposed,
                                                             guessed=choice.offline_route)
            if not results:
                choice.fallback = empty_reason
            elif choice.free_text is not None and not listing:
                weighed = self._weigh_free_text(question, choice.question_vector, proposed, choice.free_text,
                                                results)
                if weighed is not None:
                    results, note, replaced = weighed
                    if replaced:
                        ran = choice.free_text.route
                        result.alternative_route = proposed
                    result.route_notes = [*result.route_notes, note]
                    log.info("route guard: %s", note)
        if choice.fallback is None:
            assert ran is not None  # noqa: S101 - narrows: no fallback means a route ran
            return ran, results, listing
        code, reason = choice.fallback
        # a failing LLM's message is said once (fallback_reason); the route only names the cause
        why = "the LLM did not answer" if code == "llm_error" else reason.rstrip(".")
        if choice.question_vector is None:
            choice.question_vector = self._embed_timed(question, result)
        floor = (None if given or choice.offline_route
                 else self._offline_floor(question, choice.question_vector, choice.offline_decision))
        if floor is not None:
            ran, results, listing = floor
            ran = ran.model_copy(update={"explanation": f"Fell back to the offline router: {why}. "
                                                        f"{ran.explanation}"})
        else:
            ran = OrchestratorRoute(intent_class="semantic_search", filters=SearchFilters(),
                                    explanation=f"Fell back to semantic search: {why}.")
            results = self._semantic(question, choice.question_vector)
            listing = False
        result.fallback_code, result.fallback_reason = code, reason
        return ran, results, listing

    def _embed_timed(self, question: str, result: OrchestratorResult) -> Any:
        """The question's vector, its seconds in ``result.timings["embed"]``."""
        started = time.perf_counter()
        vector = self._embed(question)
        result.timings["embed"] = time.perf_counter() - started
        return vector

    def warm_route(self, cancel: CancelToken | None = None) -> bool:
        """Have a local server read the route prompt's instructions for this KB before the first
        question, so that question's route is as quick as a later one's (the instructions come first
        and the question last: a server that keeps what it read reads only the question). One reply
        token is asked for and dropped. Only for an Ollama or OpenAI-compatible backend that the
        settings chose (or the user confirmed): nothing is sent elsewhere. Once per server, model and
        KB vocabulary in this process; True when the request was sent.

        Measured over ``python -m llama_cpp.server --cache true`` with the 1.5B model on 2 cores: the
        first question's route 16.0 s without this, a later one 1.5–2.4 s."""
        self.resolve_backend()
        llm = self._llm
        if not isinstance(llm, OllamaBackend | OpenAIBackend):
            return False
        key = _warm_key(llm, self.vocabulary())
        with _WARM_LOCK:
            if key in _WARMED:
                return False
            _WARMED.add(key)
        try:
            structured_chat(llm, key[1], route_json_schema(), cancel=cancel, options={"num_predict": 1})
        except LLMError as err:  # the first question says why, as it would have without this
            log.info("the route prompt was not read ahead: %s", err)
            with _WARM_LOCK:
                _WARMED.discard(key)
            return False
        return True

    def synthesize(self, result: OrchestratorResult, progress: ProgressFn | None = None,
                   cancel: CancelToken | None = None) -> OrchestratorResult:
        """Step 4: fill ``result.answer`` (LLM, else extractive); returns the same object."""
        report(progress, 3, _STEPS, self.writing_stage())
        t = time.perf_counter()
        for _ in self._synthesis_chunks(result, cancel, stream=False):
            pass
        result.timings["synthesis"] = time.perf_counter() - t
        result.timings["total"] = result.timings.get("total", 0.0) + result.timings["synthesis"]
        report(progress, 4, _STEPS, "done")
        return result

    # ------------------------------------------------------------------ steps

    _llm_failure: LLMError | None = None

    def _run_route(self, question: str, qvec: Any, route: OrchestratorRoute, guessed: bool = False,
                   ) -> tuple[list[dict[str, Any]], bool, tuple[str, str]]:
        """Every record of ``route`` (merged, grouped; the caller applies the limit), whether they
        are a listing, and the fallback code and reason for when there are none.

        ``guessed``: the offline router chose the template from the question's meaning alone; an
        open question that does not name the category then ranks the whole KB, preferring it.
        """
        filters = route.filters
        described = route.describe_filters()
        listing = is_listing(question, filters, route.listing)
        if route.intent_class == "semantic_search":
            if not described and not listing:
                return (self._semantic(question, qvec), False,
                        ("empty_template", "the semantic search found nothing"))
            candidates = TEMPLATES["all_observations_search"](self.kb, filters)
            empty = ("empty_filtered", f"no observation matches the filters ({described})")
            category = None
        else:
            candidates = TEMPLATES[route.intent_class](self.kb, filters)
            where = f" with the filters ({described})" if described else ""
            empty = ("empty_template", f"the template {route.intent_class} found no observations{where}")
            category = ROUTE_BY_INTENT[route.intent_class].category
        if listing:
            records = [_observation_result(o, None, "template") for o in candidates]
            return group_by_workflow(merge_duplicates(records)), True, empty
        if (route.intent_class in _CHOICE_INTENTS and not filters.obs_type_filter
                and asks_what_was_chosen(question, self.vocabulary())):
            # "which model was chosen and why": what was selected and why that kind of model was
            # wanted are two categories; each keeps its own relevant records
            both = [o for intent in _CHOICE_INTENTS for o in TEMPLATES[intent](self.kb, filters)]
            return self._relevant(question, qvec, both, None, filters, per_category=True), False, empty
        prefer = None
        if (guessed and candidates and category is not None and not described
                and not category_named(question, route.intent_class, self.vocabulary())):
            # the router only guessed the category from the question's meaning: relevant records
            # of other categories still count, the guessed one is preferred
            candidates, prefer, category = list(self.kb.observations), category, None
        return self._relevant(question, qvec, candidates, category, filters, prefer), False, empty

    def _offline_floor(self, question: str, qvec: Any, decision: OfflineDecision | None = None,
                       ) -> tuple[OrchestratorRoute, list[dict[str, Any]], bool] | None:
        """The offline router's route for ``question`` and its records (and whether they are a
        listing), run as with no model; None when it finds nothing. ``decision``: the offline
        router's, when the guard already asked for it (else it is asked here)."""
        if decision is None:
            decision = route_offline(question, qvec, self.embedding_model, self.vocabulary(),
                                     encode=self._encode)
        results, listing, _ = self._run_route(question, qvec, decision.route, guessed=True)
        return (decision.route, results, listing) if results else None

    def _weigh_free_text(self, question: str, qvec: Any, model_route: OrchestratorRoute,
                         free_text: OfflineDecision, results: list[dict[str, Any]],
                         ) -> tuple[list[dict[str, Any]], str, bool] | None:
        """The model's template ran because the offline router found no close template: the records
        to show instead, the note that says why, and whether the free-text search replaced the
        template's records; None when the template's records are the closest.

        - Far (the template's closest :data:`FAR_FROM_QUESTION` or more below the free-text search's):
          the free-text records replace them ("why was island left out of the features?", routed by
          the model to modelling choices, found an assumption about years at similarity 0.07; the
          free-text search found the feature-engineering record that answers it at 0.63).
        - Closer by :data:`CLOSER_BY` or more, within the margin: the free-text search's closest record
          joins the template's, first, so the model reads it too and the view shows it; the template's
          records stay (on the hard question set the free-text search came 0.00 to 0.22 closer, and
          its closest record answered "why is OLS our main model for predicting weight?")."""
        def score(row: dict[str, Any]) -> float | None:
            value = row.get("score")
            return float(value) if isinstance(value, int | float) else None

        def closest(rows: list[dict[str, Any]]) -> float | None:
            scores = [v for v in map(score, rows) if v is not None]
            return max(scores) if scores else None

        model_best = closest(results)
        if model_best is None:
            return None
        other, other_listing, _ = self._run_route(question, qvec, free_text.route, guessed=True)
        other_best = closest(other)
        if other_listing or other_best is None or other_best - model_best < CLOSER_BY:
            return None
        intent = model_route.intent_class.replace("_search", "").replace("_", " ")
        if other_best - model_best >= FAR_FROM_QUESTION:
            return other, (f"Ran the free-text search over the model's template {intent}: its records are "
                           f"far from the question (closest {model_best:.2f}, against {other_best:.2f}); "
                           "the model's route is one click away."), True
        shown = {r["iri"] for r in results}
        best = max((r for r in other if r["iri"] not in shown), key=lambda r: score(r) or 0.0, default=None)
        if best is None:
            return None
        kind = str(best.get("obs_type") or best.get("category") or "record")
        best = {**best, "rank": 0}  # before the template's ranked records: the answer prompt reads it first
        return group_by_workflow([best, *results]), (
            f"Added the free-text search's closest record ({kind}, {other_best:.2f}) to those of the "
            f"model's template {intent} (closest {model_best:.2f}): it is nearer the question, and the "
            "model reads it too."), False

    def _relevant(self, question: str, qvec: Any, observations: list[Observation], category: str | None,
                  filters: SearchFilters, prefer: str | None = None,
                  per_category: bool = False) -> list[dict[str, Any]]:
        """The template's records relevant to the question: ranked by similarity (stored index
        vectors), cut where relevance drops, duplicates merged, grouped by workflow.

        A large template whose filters the index can apply too (category, type, workflow) is
        ranked by one filtered index query for the best ``n_results`` and one more per workflow (cheap
        at any KB size);
        otherwise every record is ranked exactly from its stored vector. For a question about
        results ("which model was best, by how much"), model selection records that state figures
        (numbers, metric names, a comparison) gain :func:`~kmds_desktop.ask.question_words.figures_bonus`,
        and those of the workflow whose own name words the question uses ("body mass") gain
        :data:`PREFERRED_BONUS`, so the record giving the winner's error comes before one describing
        the set-up or another workflow's results.
        """
        by_iri = {o.iri: o for o in observations if o.finding.strip()}
        if not by_iri:
            return []
        ranked: list[tuple[str, float]] | None = None
        index_sees_all = (filters.finding_seq_min is None and filters.finding_seq_max is None
                          and not filters.keyword and not filters.workflow)
        if len(by_iri) > RANK_EXACTLY_MAX and index_sees_all:
            hits = self._search(question, qvec, self.n_results + len(self.kb.workflows),
                                category=category, obs_type=filters.obs_type_filter)
            ranked = [(str(h["iri"]), float(h["distance"])) for h in hits if h.get("iri") in by_iri]
        if not ranked:
            texts = {iri: o.finding for iri, o in by_iri.items()}
            kwargs: dict[str, Any] = {"kb_id": self.kb_id, "texts": texts}
            if qvec is not None:
                kwargs["query_vector"] = qvec
            ranked = self.index.rank(question, list(by_iri), **kwargs)
        vocabulary = self.vocabulary()
        figures = category == "model_selection" and asks_for_results(question, vocabulary)
        topic = question_topic(question, vocabulary) \
            if (figures or per_category) and not filters.workflow else None

        def bonus(obs: Observation) -> float:
            preferred = PREFERRED_BONUS if topic in obs.workflows else 0.0
            if per_category:  # the statement of what was selected first, in the workflow the words name
                return preferred + choice_bonus(obs.finding) + (
                    figures_bonus(obs.finding, question) if obs.category == "model_selection" else 0.0)
            if not figures:
                return 0.0
            return figures_bonus(obs.finding, question) + (PREFERRED_BONUS if topic in obs.workflows else 0.0)

        scored = [(by_iri[iri], 1.0 - dist + (PREFERRED_BONUS if by_iri[iri].category == prefer else 0.0)
                   + bonus(by_iri[iri]))
                  for iri, dist in ranked if iri in by_iri]
        scored.sort(key=lambda pair: -pair[1])
        if per_category and topic and any(topic in o.workflows for o, _ in scored):
            # "which model did we choose for species?": the choice made in the workflow its words name
            # (a model of the other workflow that uses species as a feature is not that choice)
            scored = [pair for pair in scored if topic in pair[0].workflows]
        if per_category:  # each category's relevant records, then all of them best first
            kept = [pair for cat in dict.fromkeys(o.category for o, _ in scored)
                    for pair in relevant([p for p in scored if p[0].category == cat])]
            kept.sort(key=lambda pair: -pair[1])
        elif figures:
            kept = relevant(scored, relative_floor=RESULTS_RELATIVE_FLOOR, gap=RESULTS_GAP)
        else:
            kept = relevant(scored)
        if per_category:  # the answer prompt reads a few: the best of each category before the rest
            firsts = list({o.category: (o, value) for o, value in reversed(kept)}.values())
            firsts.sort(key=lambda pair: -pair[1])
            kept = firsts + [pair for pair in kept if pair not in firsts]
        distance = {iri: dist for iri, dist in ranked}
        records = [_observation_result(obs, distance[obs.iri], "template") for obs, _ in kept]
        for rank, record in enumerate(records, start=1):
            record["rank"] = rank  # the order this ranking chose, bonuses included (the score is not)
        return group_by_workflow(merge_duplicates(records))

    def _mark_relevance(self, question: str, qvec: Any, results: list[dict[str, Any]]) -> None:
        """Each listed record's similarity to the question as ``relevance`` and its share of the
        question's distinctive words as ``word_share``
        (:func:`~kmds_desktop.ask.relevance.distinctive_word_share`): the view keeps the listing's
        order, and the answer prompt, which carries a few records, takes the most relevant and the one
        with most of the question's words (:func:`~kmds_desktop.ask.answers.prompt_records`). Stored
        vectors are reused: one question embedding at most."""
        texts = {str(r["iri"]): str(r.get("finding", "")) for r in results}
        kwargs: dict[str, Any] = {"kb_id": self.kb_id, "texts": texts}
        if qvec is not None:
            kwargs["query_vector"] = qvec
        similarity = {iri: 1.0 - dist for iri, dist in self.index.rank(question, list(texts), **kwargs)}
        shares = dict(zip(texts, distinctive_word_share(question, list(texts.values())), strict=True))
        for r in results:
            if r["iri"] in similarity:
                r["relevance"] = round(similarity[r["iri"]], 4)
                r["word_share"] = round(shares[str(r["iri"])], 4)

    def _search(self, question: str, qvec: Any, n: int, **filters: Any) -> list[dict[str, Any]]:
        """``index.search`` on this KB only, with the question's vector when it was embedded already."""
        kwargs: dict[str, Any] = {"kb_id": self.kb_id, **{k: v for k, v in filters.items() if v}}
        if qvec is not None:
            kwargs["query_vector"] = qvec
        return self.index.search(question, n_results=max(1, n), **kwargs)

    def _semantic(self, question: str, qvec: Any) -> list[dict[str, Any]]:
        """Semantic search of this KB's index entries: the observations relevant to the question
        (cut where relevance drops), enriched from the KB, merged and grouped by workflow."""
        n = self.n_results + len(self.kb.workflows)
        hits = self._search(question, qvec, n)
        if not hits and self.kb.observations:  # the index was cleared behind our back: rebuild once
            self.refresh_index()
            hits = self._search(question, qvec, n)
        scored = []
        for hit in hits:
            obs = self.kb.observation(str(hit.get("iri", "")))
            if obs is None:  # a workflow description, or an entry of an observation deleted since
                continue
            scored.append(((obs, str(hit.get("kb_id") or self.kb_id)), 1.0 - float(hit.get("distance", 1.0))))
        out = []
        for (obs, kb_id), sim in relevant(scored):
            found = _observation_result(obs, 1.0 - sim, "semantic")
            found["kb_id"] = kb_id
            out.append(found)
        return group_by_workflow(merge_duplicates(out))

    def _synthesis_chunks(self, result: OrchestratorResult, cancel: CancelToken | None,
                          stream: bool) -> Iterator[str]:
        """Yield the answer (one chunk, or the LLM's stream); set ``result.answer``/``synthesis``."""
        n = len(result.results)
        llm_down = self._llm_error or self._llm_failure
        if self._llm is None and self._llm_error is None:
            result.synthesis = "offline"
            result.answer = extractive_answer(result.results,
                                              offline_heading(n, result.listing, result.total_matches))
            yield result.answer
            return
        if not result.results:
            result.synthesis = "llm" if llm_down is None else "extractive"
            result.answer = "No matching observations were found in this knowledge base."
            yield result.answer
            return
        if llm_down is not None:
            yield from self._extractive_after_failure(result, llm_down, partial="")
            return
        given = prompt_records(result.results)
        result.given_records = given
        prompt = synthesis_prompt(result.question, result.results, given)
        parts: list[str] = []
        try:
            if stream:
                streamer: Callable[..., Iterator[str]] | None = getattr(self._llm, "stream", None)
                chunks = (streamer(prompt, cancel=cancel) if streamer
                          else iter([self._call_llm(prompt, cancel)]))
                for chunk in chunks:
                    check(cancel)
                    parts.append(chunk)
                    yield chunk
            else:
                parts.append(self._call_llm(prompt, cancel))
            text = "".join(parts)
            if not text.strip():
                raise LLMError("the LLM returned an empty answer")
        except Cancelled:
            raise
        except LLMError as err:
            yield from self._extractive_after_failure(result, err, partial="".join(parts))
            return
        result.synthesis = "llm"
        sources = [str(r.get("finding", "")) for r in result.results[:n]]
        text, figures_note = without_unheld_figures(strip_reasoning(text), result.question, result.results,
                                                    given)
        answer, note, uncited = repair_citations(text, n, sources, given)
        answer, records_note = with_records_if_uncited(answer, result.results, given)
        if records_note:  # the added records are cited: the note says what was added, not "cited none"
            note = records_note
        if figures_note:
            note = f"{figures_note} {note}"
        picked = prompt_records_said(result.results, given)
        if picked:
            note += f" The model read only {_marks(given)}, {picked}."
        result.answer = answer
        result.citation_note, result.uncited_claims = note, uncited
        if not stream:
            yield result.answer

    def _extractive_after_failure(self, result: OrchestratorResult, err: Exception,
                                  partial: str) -> Iterator[str]:
        result.synthesis = "extractive"
        result.synthesis_error = str(err)
        # the reason is said once, by the line under the answer (CLI: the Fallback/Backend line)
        heading = fallback_heading(len(result.results), result.listing, result.total_matches)
        extract = extractive_answer(result.results, heading)
        text = f"\n\n{extract}" if partial else extract
        result.answer = (partial + text).strip()
        yield text

    # ------------------------------------------------------------------ helpers

    def _call_llm(self, prompt: str, cancel: CancelToken | None) -> str:
        llm = self._llm
        assert llm is not None  # noqa: S101 - narrows: called only with a model
        check(cancel)
        chat = getattr(llm, "chat", None)
        reply = chat(prompt, cancel=cancel) if chat is not None else llm(prompt)
        check(cancel)
        return reply

    def llm_label(self) -> str:
        """The LLM as the stage line names it ("ollama · qwen2.5-coder:1.5b"; "the LLM" when unknown)."""
        model = str(getattr(self._llm, "model", "") or "")
        name = self.backend_name or "the LLM"
        return f"{name} · {model}" if model and name != "callable" else name

    def writing_stage(self) -> str:
        """What step 4 is doing, naming who writes: the model (while it streams, the window shows
        that it is the model's work, not the index's) or the extractive quotes."""
        if self._llm is None or self._llm_error is not None or self._llm_failure is not None:
            return "quoting the records"
        return f"{self.llm_label()} is writing the answer"

    def _route_reply(self, prompt: str, cancel: CancelToken | None) -> tuple[str, str]:
        """The router's reply and how it was asked ("schema" where the backend can constrain the
        reply to the route's JSON schema, else "text"); the log says which."""
        llm = self._llm
        assert llm is not None  # noqa: S101 - narrows: called only with a model
        check(cancel)
        bounded = isinstance(llm, OllamaBackend | OpenAIBackend)  # they take Ollama's options
        options = {"num_predict": ROUTE_MAX_TOKENS} if bounded else None
        reply, how = structured_chat(llm, prompt, route_json_schema(), cancel=cancel, options=options)
        check(cancel)
        log.info("route asked as %s (%s)", how, self.backend_name)
        return reply, how

    def _encode(self, texts: list[str], model_name: str) -> Any:
        """Embed where this orchestrator's index embeds: the app's index embeds in its own process,
        so the window's process never imports torch."""
        return self.index.encode(texts, model_name)

    def _embed(self, question: str) -> Any:
        return self._encode([question], self.embedding_model)[0]

    def vocabulary(self) -> KBVocabulary:
        """This KB's own vocabulary (types, workflows, sequence numbers, intents) for the routers."""
        return KBVocabulary.of(self.kb)


class AnswerStream:
    """Iterate for answer chunks; ``result`` is complete (answer, synthesis, timings) afterwards."""

    def __init__(self, orchestrator: SearchOrchestrator, result: OrchestratorResult,
                 cancel: CancelToken | None) -> None:
        self.result = result
        self._orchestrator = orchestrator
        self._cancel = cancel

    def __iter__(self) -> Iterator[str]:
        t = time.perf_counter()
        yield from self._orchestrator._synthesis_chunks(self.result, self._cancel, stream=True)  # noqa: SLF001
        self.result.timings["synthesis"] = time.perf_counter() - t
        timings = self.result.timings
        timings["total"] = timings.get("total", 0.0) + timings["synthesis"]


_WARM_LOCK = threading.Lock()
#: (server key, route prompt) read ahead by :meth:`SearchOrchestrator.warm_route` in this process.
_WARMED: set[tuple[Any, str]] = set()


@dataclass
class _RouteChoice:
    """Step 1's outcome, read by step 2 (:meth:`SearchOrchestrator._records`)."""

    #: The route to run: the user's, the guarded model's, or the offline router's (None: none usable).
    proposed: OrchestratorRoute | None = None
    #: The question's embedding, once computed (reused by the search and the prompt's ranking).
    question_vector: Any = None
    #: The offline router's route, whoever chose it (the guard may keep it over the model's, or the
    #: model may choose the same), runs as the offline router means it: a guessed category is
    #: preferred, not a fence.
    offline_route: bool = False
    #: The offline router's decision where the model's template ran and the offline router found no
    #: close template: its free-text search is weighed against the template's records.
    free_text: OfflineDecision | None = None
    #: The offline router's decision, once the guard asked for it (the fallback reuses it).
    offline_decision: OfflineDecision | None = None
    #: ``(code, reason)`` when step 1 or 2 failed and the fallback runs.
    fallback: tuple[str, str] | None = None


def _given_route(route: OrchestratorRoute | dict[str, Any]) -> _RouteChoice:
    """Step 1 for a route the user gave (an edited route, Use the other route, Re-run without an
    edit): validated; an invalid one falls back like a bad model route. The offline router's route
    given back finds what it found when the offline router chose it."""
    try:
        proposed = route if isinstance(route, OrchestratorRoute) else OrchestratorRoute.model_validate(route)
    except Exception as err:  # noqa: BLE001 - a bad edited route falls back like a bad LLM route
        return _RouteChoice(fallback=("invalid_route", f"the given route is not valid: {err}"))
    if not proposed.explanation:
        proposed = proposed.model_copy(update={"explanation": "Route given by the user."})
    return _RouteChoice(proposed=proposed, offline_route=proposed.from_offline_router)


def _warm_key(llm: Any, vocabulary: KBVocabulary) -> tuple[Any, str]:
    """What a server has read once it read the route prompt for this KB: the server and model, and the
    prompt's instructions (the prompt without a question)."""
    return schema_key(llm), routing_prompt("", vocabulary)


def _route_prompt_read(llm: Any, vocabulary: KBVocabulary) -> None:
    """A question's route had the server read the route prompt's instructions, as
    :meth:`SearchOrchestrator.warm_route` would: reading them ahead afterwards (the status line
    turns "ready" after the first answer) would only cost the server a request."""
    if isinstance(llm, OllamaBackend | OpenAIBackend):
        with _WARM_LOCK:
            _WARMED.add(_warm_key(llm, vocabulary))


@remembers_per_server
def _forget_warmed(host: str) -> None:
    """A server whose models changed has read nothing of ours."""
    with _WARM_LOCK:
        _WARMED.difference_update({k for k in _WARMED if k[0] is not None and k[0][1] == host})


#: index object -> {kb_id: signature of the KB content last indexed into it by this process}.
_FRESH: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()
_FRESH_LOCK = threading.Lock()


def _kb_signature(kb: KnowledgeBase) -> int:
    """A cheap fingerprint of everything the index stores for a KB (texts and metadata)."""
    return hash((
        tuple((o.iri, o.name, o.finding, o.obs_type, o.category, o.finding_seq, o.intent, tuple(o.workflows),
               o.file_order) for o in kb.observations),
        tuple((w.iri, w.name, w.kind, w.description) for w in kb.workflows),
    ))


def _is_fresh(index: Any, kb_id: str, signature: int) -> bool:
    with _FRESH_LOCK:
        try:
            return _FRESH.get(index, {}).get(kb_id) == signature
        except TypeError:  # an index object that cannot be weakly referenced
            return False


def _remember_fresh(index: Any, kb_id: str, signature: int) -> None:
    # an index that takes no weak reference is not remembered
    with _FRESH_LOCK, contextlib.suppress(TypeError):
        _FRESH.setdefault(index, {})[kb_id] = signature


def _marks(numbers: list[int]) -> str:
    """``[1], [3] and [4]``: record numbers as the answer cites them."""
    marks = [f"[{n}]" for n in numbers]
    return marks[0] if len(marks) == 1 else f"{', '.join(marks[:-1])} and {marks[-1]}"


def _explanation(proposed: OrchestratorRoute | None, ran: OrchestratorRoute,
                 fallback: tuple[str, str] | None) -> str:
    """Why this route: the router's own explanation, kept beside the fallback's reason when the
    route it chose could not run (KMDS's ``route_explanation`` is the router's explanation)."""
    if fallback is None or proposed is None or not proposed.explanation.strip():
        return ran.explanation
    return f"{proposed.explanation.strip()} {ran.explanation}"


def _in_kb_terms(route: OrchestratorRoute, vocabulary: KBVocabulary) -> OrchestratorRoute:
    """The LLM's type and workflow filters spelled as the KB spells them (case, ``_``, a type's
    distinctive words), so that "data quality" filters on "Data Quality Observation"."""
    filters = route.filters
    obs_type = vocabulary.resolve_type(filters.obs_type_filter)
    workflow = vocabulary.resolve_workflow(filters.workflow)
    if obs_type == filters.obs_type_filter and workflow == filters.workflow:
        return route
    return route.with_filters(obs_type_filter=obs_type, workflow=workflow)


#: A ranked answer whose best record is less similar to the question than this (cosine, the shipped
#: model) is flagged as a weak match: on the shared KBs a record that answers the question scores
#: 0.3-0.7, while "Which time period does the analysis cover?" was answered from one at 0.07.
WEAK_MATCH_SCORE = 0.2


def weak_match_note(results: list[dict[str, Any]], listing: bool) -> str:
    """The note for records that answer the question only weakly ("" otherwise). A listing is every
    record of a template and filters, not a ranking: it has no weak match."""
    scores = [r["score"] for r in results if isinstance(r.get("score"), int | float)]
    if listing or not scores or max(scores) >= WEAK_MATCH_SCORE:
        return ""
    return (f"Weak match: the best record's similarity to the question is {max(scores):.2f} "
            "(records that answer a question score about 0.3 or more); this knowledge base may not "
            "answer it.")


def _observation_result(obs: Observation, distance: float | None, source: str) -> dict[str, Any]:
    return {
        "iri": obs.iri,
        "name": obs.name,
        "finding": obs.finding,
        "obs_type": obs.obs_type,
        "category": obs.category,
        "workflow_name": obs.workflows[0] if obs.workflows else "",
        "workflows": list(obs.workflows),
        "finding_seq": obs.finding_seq,
        "intent": obs.intent,
        "distance": None if distance is None else float(distance),
        "score": None if distance is None else round(1.0 - float(distance), 4),
        "source": source,
    }


def _check_question(query: Any) -> str:
    if not isinstance(query, str) or not query.strip():
        raise ValueError("the question is empty: type a question about the knowledge base")
    return query.strip()


def _settings_or_default() -> Settings:
    try:
        return load_settings()
    except SettingsError as err:
        log.warning("using default settings: %s", err)
        return Settings()
