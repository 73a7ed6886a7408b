"""Multi-model query generation: several local models each propose PostgreSQL full-text queries.

Why strictly serial: local Ollama models share one GPU/CPU, so running two at once only makes each
slower and can evict one model while the other loads; serial calls also give the user a steady row-by-
row progress in the review table. Every attempt is timed, a failing model or attempt is recorded with
its error and the rest continue, and a cancel stops before the next call and aborts the one in flight
(the Ollama backend shuts the request's socket down).

A model that writes its own queries (the verbatim option) is asked once per query, later attempts
varying the temperature *and* the prompt (broader, then more specific, and shown the queries it
already proposed), so its three queries are not the same query three times; a model that names
concepts (the default) is asked once, and the app writes its three queries. Replies are cleaned
(:mod:`kmds_desktop.literature.queries.query_cleaning`) before de-duplication, so ``a & b`` and
``A&b`` count as one query, spelled as it first appeared.

``builtin:keywords`` (:mod:`kmds_desktop.literature.queries.keyword_queries`) is a generator that needs no LLM
and can be listed among the models, so the flow works offline. ``openai:NAME`` is a model on the
OpenAI-compatible server (``openai_base_url``); ``ollama:NAME`` or a bare name one on Ollama.

How an LLM is asked (per model, ``verbatim_models``): by default it names the question's concepts
and their terms as JSON and the app compiles them with the built-in strategy's own machinery
(:mod:`kmds_desktop.literature.queries.concept_json`): one call per model gives all its queries
(precise, medium, broad), no model can over-AND a query, and a term the corpus lacks is dropped with a
note. Measured with Qwen2.5-Coder-1.5B, its own tsqueries found far less than the built-in's and made
the merged search worse (see ``bench/llm_quality.py``). A model listed in ``verbatim_models`` writes
its own tsquery per attempt, as BMLibrarian asks for it (below).

Where the server can constrain decoding, a verbatim model is asked for ``{"queries": ["..."]}`` under a JSON
schema (:data:`QUERY_LIST_SCHEMA`); a server that refuses the schema is asked the plain prompt and its
reply is cleaned as text. Each result says which path it took (``reply_format``), and the search log
keeps it. Either way the query is only a proposal: the review table checks every query in PostgreSQL
before it is offered as runnable.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from kmds_desktop.literature.errors import LiteratureError
from kmds_desktop.literature.queries.abstract_words import ABSTRACT_WORDS
from kmds_desktop.literature.queries.concept_json import (
    CONCEPT_SYSTEM_PROMPT,
    ConceptReplyError,
    compile_concepts,
    concept_request,
    parse_concepts,
)
from kmds_desktop.literature.queries.keyword_queries import (
    BUILTIN_KEYWORDS,
    KeywordQueryBuilder,
    TermStatistics,
    builtin_generator,
    is_builtin,
)
from kmds_desktop.literature.queries.query_cleaning import (
    clean_query_with_reason,
    deduplicate_queries,
    query_key,
)
from kmds_desktop.literature.retrieval.semantic import HYPOTHETICAL_MAX_TOKENS, write_hypothetical_abstract
from kmds_desktop.llm.structured import structured_chat
from kmds_desktop.secrets import redact_url
from kmds_desktop.tasks import Cancelled, CancelToken, ProgressFn, check, report

#: Taught to every model: the tsquery language, concepts as OR groups of synonyms, and "query only".
#: Tuned with Qwen2.5-Coder-1.5B on training questions only (``bench/llm_quality.py --split dev``):
#: with the earlier prompt ("keep the 2-4 key concepts ... join the concepts with &") the model ANDed
#: every word of the question (``0-dimensional & biomaterials & !inductive``) and 93 % of its queries
#: matched nothing. A small model follows worked examples more than rules, so the rules are few, the
#: examples show the shape wanted, and the BROADER attempt ORs the key words (the idf ranking orders
#: its matches), which is where most of the LLM rows' recall comes from (see the bench's figures).
#: No example may come from a judged corpus (the model copies examples: a CF example was written as
#: the query of another CF question), so the examples are on topics neither SciFact nor CF asks about.
DEFAULT_SYSTEM_PROMPT = """\
You write ONE PostgreSQL full-text search query (the text given to to_tsquery('english', ...)) that \
finds the titles and abstracts about a biomedical research question.

The query language:
- | means OR, & means AND, ! means NOT, parentheses group: (a | b) & (c | d)
- word:* matches every ending: vaccin:* matches vaccine, vaccines, vaccination
- a <-> b is the two-word phrase "a b": heart <-> failure
- only single words between operators; no numbers on their own, no quotes

How to write a query that finds the relevant papers:
- pick the 2 or 3 main concepts: diseases, organisms, drugs, genes, proteins, cells, outcomes
- leave out everything else: effect, role, lack, show, have, patients, study, increase, risk, level
- write each concept as an OR group of its synonyms, abbreviations and word forms
- join the groups with &; never join single words one after another with &

Answer with the query only, on one line: no explanation, no code fences, no SQL.

Examples
Question: Does aspirin reduce the risk of heart attack in diabetic patients?
Query: aspirin & (myocardial <-> infarction | heart <-> attack | mi) & diabet:*
Question: Does acupuncture relieve chronic low back pain better than sham treatment?
Query: (acupunctur:* | electroacupunctur:*) & (back <-> pain | lumbago | backache)
Question: Quitting smoking lowers the incidence of lung cancer.
Query: (smok:* | tobacco | cigarette:*) & (lung | pulmonary) & (cancer:* | carcinoma:* | tumor:* | tumour:*)
"""

_ATTEMPT_HINTS = {
    2: "Write a BROADER variant: every key word of the question and its synonyms joined with | only "
       "(no &), with prefix forms (word:*).",
    3: "Write a more SPECIFIC variant: the two most distinctive concepts, each an OR group of "
       "synonyms, joined with &.",
}
TEMPERATURE_STEP = 0.2
#: Characters of a model's raw reply kept on its result (a query reply is far shorter).
RAW_REPLY_KEPT = 4000
MAX_TEMPERATURE = 1.0

#: The reply a schema-capable server is held to: one to three query strings (only the first usable
#: one is this attempt's query; a model asked for one sometimes writes its variants too).
QUERY_LIST_SCHEMA: dict[str, Any] = {
    "title": "queries",
    "type": "object",
    "properties": {"queries": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3}},
    "required": ["queries"],
    "additionalProperties": False,
}
#: Added to the prompt when the reply is constrained to :data:`QUERY_LIST_SCHEMA`.
JSON_REPLY_HINT = 'Reply with JSON only: {"queries": ["<the query>"]}'
#: A structured reply longer than this is not decoded as JSON (it is cleaned as text instead).
MAX_JSON_REPLY_CHARS = 64 * 1024
#: Tokens a model may write for one query (a query is a few dozen): under a schema a weak model can
#: fill a string until its context is full, and an unconstrained one can ramble; this bounds the time.
QUERY_MAX_TOKENS = 256
#: Tokens for a concept list (three or four concepts of a few terms each are about 100-150).
CONCEPT_MAX_TOKENS = 300
#: ``query_mode`` of a result: compiled from the model's concepts, or the model's own tsquery.
MODE_CONCEPTS = "concepts"
MODE_VERBATIM = "verbatim"


@dataclass
class QueryGenerationResult:
    """One attempt of one model: the cleaned query (``""`` on failure) and how it went."""

    model: str
    query: str
    generation_time: float
    temperature: float
    attempt_number: int
    error: str | None = None
    raw_reply: str = ""
    #: The kind of failure (the exception's class name, e.g. ``LLMTimeout``) for programs; ``error``
    #: is the message for people and never starts with a class name.
    error_kind: str | None = None
    #: Not asked: an earlier attempt of the same model failed in a way the next one would too.
    skipped: bool = False
    #: How the model was asked: "schema" (reply constrained to ``{"queries": [...]}``), "text" (free
    #: text, cleaned), "" (a built-in generator, or not asked).
    reply_format: str = ""
    #: Where the model ran, e.g. "ollama http://127.0.0.1:11434" ("" for a built-in generator).
    server: str = ""
    #: Why the query looks as it does, for the review table (the built-in generator's concepts,
    #: variants and reasons; for a model's concepts also the terms added and dropped; "" for a
    #: verbatim LLM query).
    note: str = ""
    #: How an LLM's query was made: "concepts" (compiled from its concept list), "verbatim" (its own
    #: tsquery), "" (a built-in generator).
    query_mode: str = ""
    #: Compiled from a model's concepts: its terms the queries use, and those left out with why.
    terms_added: list[str] = field(default_factory=list)
    terms_dropped: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.query)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MultiModelQueryResult:
    """Everything one generation round produced, in call order (model, then attempt).

    ``unique_queries`` are the successful queries, de-duplicated case-insensitively (first spelling
    kept) unless de-duplication was switched off, in which case it holds every successful query.
    ``total_queries`` counts attempts made, including failed ones.
    """

    all_queries: list[QueryGenerationResult]
    unique_queries: list[str]
    model_count: int
    total_queries: int
    total_generation_time: float
    question: str
    deduplicated: bool = True

    @property
    def successful(self) -> list[QueryGenerationResult]:
        return [r for r in self.all_queries if r.ok]

    @property
    def failed(self) -> list[QueryGenerationResult]:
        return [r for r in self.all_queries if not r.ok]

    def models_for(self, query: str) -> list[str]:
        """Models that proposed ``query`` (case/spacing-insensitive), in call order, without repeats."""
        key = query_key(query)
        out: list[str] = []
        for result in self.successful:
            if query_key(result.query) == key and result.model not in out:
                out.append(result.model)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "model_count": self.model_count,
            "total_queries": self.total_queries,
            "total_generation_time": self.total_generation_time,
            "deduplicated": self.deduplicated,
            "unique_queries": list(self.unique_queries),
            "all_queries": [r.to_dict() for r in self.all_queries],
        }


class ChatBackend(Protocol):
    """The part of :class:`kmds_desktop.llm.ollama_backend.OllamaBackend` the generator uses."""

    def chat(self, prompt: str, system: str | None = None, *, temperature: float | None = None,
             cancel: CancelToken | None = None, model: str | None = None) -> str: ...


def attempt_temperature(base: float, attempt: int) -> float:
    """Temperature of attempt ``attempt``: the base first, then a little warmer each time."""
    return round(min(MAX_TEMPERATURE, max(base, 0.0) + TEMPERATURE_STEP * (attempt - 1)), 3)


def build_prompt(question: str, attempt: int, previous: Sequence[str] = ()) -> str:
    """The user message of one attempt; later attempts ask for a different variant."""
    lines = [f"Question: {question.strip()}"]
    hint = _ATTEMPT_HINTS.get(attempt)  # attempts are 1-3 (checked by the caller)
    if hint:
        lines.append(hint)
    if previous:
        lines.append("Already written (write a different one):")
        lines.extend(f"- {q}" for q in previous)
    lines.append("Query:")
    return "\n".join(lines)


class MultiModelQueryGenerator:
    """Ask each model for ``queries_per_model`` queries, strictly one call at a time.

    ``backend`` answers every non-builtin model (one backend serves all of them through its per-call
    ``model=`` override); when None, a :class:`~kmds_desktop.llm.factory.ModelDispatch` (each model to the
    Ollama server on ``ollama_host`` or to the OpenAI-compatible server its name points at) is made
    on first use. As in BMLibrarian, ``backend`` may also be the Ollama host itself
    (``MultiModelQueryGenerator("http://localhost:11434")``): the client is then made for that host.
    ``database`` (optional) lets ``builtin:keywords`` stem words and rank them by rarity.
    """

    def __init__(self, backend: ChatBackend | str | None = None, *, ollama_host: str | None = None,
                 timeout: float = 120.0, database: TermStatistics | None = None,
                 deduplicate: bool = True, openai_base_url: str | None = None,
                 encoder: Callable[[list[str]], Any] | None = None,
                 verbatim_models: Collection[str] = (),
                 concept_system_prompt: str | None = None) -> None:
        if isinstance(backend, str):
            host = backend.strip()
            if not host:
                raise ValueError("the Ollama host is empty: give e.g. 'http://localhost:11434'")
            if ollama_host is not None and ollama_host.strip() != host:
                raise ValueError(f"two Ollama hosts given: {redact_url(host)!r} and "
                                 f"ollama_host={redact_url(ollama_host)!r}")
            backend, ollama_host = None, host
        elif backend is not None and not callable(getattr(backend, "chat", None)):
            raise TypeError(
                f"backend must be an Ollama host URL or an object with a chat() method, not "
                f"{type(backend).__name__}")
        self._backend = backend
        self.ollama_host = ollama_host
        self.openai_base_url = openai_base_url
        self.timeout = timeout
        self.database = database
        self.deduplicate = deduplicate
        #: The embedding model for ``builtin:keywords``'s neighbour variants (None: none).
        self.encoder = encoder
        # Built-in generators keep their per-word database look-ups (stems, counts) between calls.
        self._builtins: dict[str, Callable[[str, int], str]] = {}
        #: Models (as the settings write them, any case) asked for their own tsquery; every other LLM
        #: names concepts that the app compiles.
        self.verbatim_models = {m.strip().lower() for m in verbatim_models if m and m.strip()}
        self.concept_system_prompt = concept_system_prompt or CONCEPT_SYSTEM_PROMPT
        #: The hypothetical abstract each model wrote per question, ``(model, question) -> text``: its
        #: words widen the model's broad row, and the hypothetical-abstract row reuses it (one call).
        self.abstracts: dict[tuple[str, str], str] = {}

    def query_mode(self, model: str) -> str:
        """``"concepts"`` or ``"verbatim"`` for an LLM, ``""`` for a built-in generator."""
        if is_builtin(model):
            return ""
        return MODE_VERBATIM if model.strip().lower() in self.verbatim_models else MODE_CONCEPTS

    @property
    def backend(self) -> ChatBackend:
        """Who answers the LLM models: the given backend, else a
        :class:`~kmds_desktop.llm.factory.ModelDispatch` (``openai:NAME`` to the OpenAI-compatible
        server, other names to Ollama), made on first use."""
        if self._backend is None:
            from kmds_desktop.llm.factory import ModelDispatch  # why: start-up time: it loads httpx, ollama

            self._backend = ModelDispatch(self.ollama_host, self.openai_base_url, self.timeout)
        return self._backend

    def _target(self, model: str) -> tuple[ChatBackend, str, str]:
        """``(backend, name to send, server description)`` for a model as the settings write it."""
        # (the app's own backends also take Ollama's ``options``: see :func:`_options`)
        backend = self.backend
        describe = getattr(backend, "describe", None)
        if callable(describe):
            where = describe(model)
            return backend, model, f"{where['backend']} {where['host']}".strip()
        name = model[len("ollama:"):] if model.lower().startswith("ollama:") else model
        label = str(getattr(backend, "name", "") or type(backend).__name__)
        return backend, name, f"{label} {getattr(backend, 'host', '')}".strip()

    def generate_queries(self, question: str, system_prompt: str | None, models: Sequence[str],
                         queries_per_model: int, temperature: float = 0.1,
                         progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                         on_result: Callable[[QueryGenerationResult], None] | None = None,
                         ) -> MultiModelQueryResult:
        """Run every model's attempts in order (model, then attempt) and collect the results.

        Raises :class:`Cancelled` when ``cancel`` fires (results reported so far were already passed
        to ``on_result``). Errors of single attempts never raise: they are recorded on the result.
        """
        question = (question or "").strip()
        if not question:
            raise ValueError("the research question is empty")
        models = [m.strip() for m in models if m and m.strip()]
        if not models:
            raise ValueError("no model to generate queries with (query_generation.models is empty)")
        if not 1 <= int(queries_per_model) <= 3:
            raise ValueError(f"queries_per_model must be 1-3, got {queries_per_model}")
        system = system_prompt or DEFAULT_SYSTEM_PROMPT
        total = len(models) * queries_per_model
        results: list[QueryGenerationResult] = []
        started = time.perf_counter()
        done = 0
        for model in models:
            previous: list[str] = []
            if self.query_mode(model) == MODE_CONCEPTS:
                check(cancel)
                report(progress, done, total,
                       f"{model}: naming the question's concepts and writing an abstract")
                for result in self._concept_round(model, question, queries_per_model, temperature, cancel):
                    results.append(result)
                    done += 1
                    if on_result is not None:
                        on_result(result)
                continue
            for attempt in range(1, queries_per_model + 1):
                check(cancel)
                report(progress, done, total, f"{model}: query {attempt} of {queries_per_model}")
                result = self._attempt(model, question, system, attempt, temperature, previous, cancel)
                results.append(result)
                if result.query:
                    previous.append(result.query)
                done += 1
                if on_result is not None:
                    on_result(result)
                if result.error_kind in FATAL_FOR_MODEL:
                    # A missing model will not appear on the next attempt, and a model that let its
                    # time run out would hold every later attempt as long: record the remaining
                    # attempts as skipped and go on with the next model.
                    for skipped in range(attempt + 1, queries_per_model + 1):
                        results.append(QueryGenerationResult(
                            model, "", 0.0, attempt_temperature(temperature, skipped), skipped,
                            error=f"not asked: {result.error}", error_kind=result.error_kind,
                            skipped=True))
                        done += 1
                        if on_result is not None:
                            on_result(results[-1])
                    break
        report(progress, total, total, "query generation finished")
        cleaned = [r.query for r in results if r.ok]
        unique = deduplicate_queries(cleaned) if self.deduplicate else [q for q in cleaned if q.strip()]
        return MultiModelQueryResult(
            all_queries=results,
            unique_queries=unique,
            model_count=len(models),
            total_queries=len(results),
            total_generation_time=time.perf_counter() - started,
            question=question,
            deduplicated=self.deduplicate,
        )

    def _deduplicate_queries(self, queries: Sequence[str]) -> list[str]:
        """BMLibrarian's name: case/spacing-insensitive de-duplication, first spelling kept."""
        return deduplicate_queries([q for q in queries if q and q.strip()])

    def _attempt(self, model: str, question: str, system: str, attempt: int, base_temperature: float,
                 previous: list[str], cancel: CancelToken | None) -> QueryGenerationResult:
        temp = attempt_temperature(base_temperature, attempt)
        start = time.perf_counter()
        raw = ""
        reply_format = server = note = ""
        try:
            if is_builtin(model):
                key = model.strip().lower()
                if key not in self._builtins:
                    self._builtins[key] = builtin_generator(model, self.database, self.encoder)
                raw = self._builtins[key](question, attempt)
                explain = getattr(self._builtins[key], "explain", None)
                note = explain(question, attempt) if callable(explain) else ""
            else:
                backend, name, server = self._target(model)
                prompt = build_prompt(question, attempt, previous)
                raw, reply_format = structured_chat(
                    backend, f"{prompt}\n{JSON_REPLY_HINT}", QUERY_LIST_SCHEMA, system=system,
                    text_prompt=prompt, temperature=temp, cancel=cancel, model=name,
                    options=_options(backend))
        except Cancelled:
            raise
        except Exception as err:  # noqa: BLE001 - one model's failure must not stop the others
            if cancel is not None and cancel.cancelled:
                raise Cancelled("cancelled by the user") from None
            unknown_builtin = isinstance(err, ValueError) and is_builtin(model)
            kind = "UnknownBuiltin" if unknown_builtin else type(err).__name__
            message = " ".join(str(err).split()) or "the model gave no reply"
            if kind == "LLMTimeout":
                # The limit that applied is this generator's (one attempt), not the LLM tab's timeout
                # the backend's own message would send the user to.
                message = (f"'{model}' did not finish one attempt within {self.timeout:g} s. Try a smaller "
                           "model, or raise Preferences → Query generation → Time limit per attempt.")
            return QueryGenerationResult(model, "", time.perf_counter() - start, temp, attempt,
                                         error=message, raw_reply=_kept_reply(raw), error_kind=kind,
                                         server=server)
        elapsed = time.perf_counter() - start
        query, limit_reason = _query_from_reply(raw, reply_format)
        if query:
            error = None
        elif limit_reason:
            error = f"the reply held no usable query: {limit_reason}"
        elif is_builtin(model):
            error = "the question has no usable content words (only common words); rephrase it"
        else:
            error = "the reply held no usable query"
        return QueryGenerationResult(model, query, elapsed, temp, attempt, error=error,
                                     raw_reply=_kept_reply(raw), reply_format=reply_format, server=server,
                                     note=note, query_mode=self.query_mode(model))

    def keyword_builder(self) -> KeywordQueryBuilder:
        """The ``builtin:keywords`` builder (shared with that generator, so a question's plan and its
        counts are made once whether or not the built-in is among the models)."""
        if BUILTIN_KEYWORDS not in self._builtins:
            self._builtins[BUILTIN_KEYWORDS] = builtin_generator(BUILTIN_KEYWORDS, self.database,
                                                                 self.encoder)
        builder = self._builtins[BUILTIN_KEYWORDS]
        assert isinstance(builder, KeywordQueryBuilder)  # noqa: S101 - narrows: the key's builder
        return builder

    def hypothetical_abstract(self, model: str, question: str, *, temperature: float,
                              cancel: CancelToken | None = None) -> str:
        """The abstract ``model`` writes to answer ``question``, written once per question and model:
        its words widen the model's broad row and the hypothetical-abstract row searches it by meaning.
        Raises :class:`LiteratureError` with the reason when the model writes nothing usable."""
        key = (model.strip().lower(), " ".join(question.split()))
        if key not in self.abstracts:
            backend, name, _server = self._target(model)
            self.abstracts[key] = write_hypothetical_abstract(
                backend, name, question, temperature=temperature, cancel=cancel,
                options=_options(backend, HYPOTHETICAL_MAX_TOKENS))
        return self.abstracts[key]

    def _abstract(self, model: str, question: str, temperature: float,
                  cancel: CancelToken | None) -> tuple[str, str]:
        """``(abstract, note)`` for the concept round: the abstract, or ``""`` and why not; its failure
        costs only the abstract's words."""
        if ABSTRACT_WORDS <= 0 or self.database is None:
            return "", ""
        try:
            return self.hypothetical_abstract(model, question, temperature=temperature, cancel=cancel), ""
        except LiteratureError as err:
            if cancel is not None and cancel.cancelled:
                raise Cancelled("cancelled by the user") from None
            return "", f"no words from an abstract: {' '.join(str(err).split())}"

    def _concept_round(self, model: str, question: str, queries_per_model: int, base_temperature: float,
                       cancel: CancelToken | None) -> list[QueryGenerationResult]:
        """One call asks ``model`` for the question's concepts; the app writes its
        ``queries_per_model`` queries from them (see :mod:`.concept_json`). A reply without concepts is
        one failed result saying why, the other attempts marked as not written; the other models run."""
        temp = attempt_temperature(base_temperature, 1)
        start = time.perf_counter()
        raw = reply_format = server = ""

        def failed(message: str, kind: str) -> list[QueryGenerationResult]:
            first = QueryGenerationResult(model, "", time.perf_counter() - start, temp, 1, error=message,
                                          raw_reply=_kept_reply(raw), error_kind=kind, server=server,
                                          reply_format=reply_format, query_mode=MODE_CONCEPTS)
            rest = [QueryGenerationResult(model, "", 0.0, temp, attempt, error=f"not written: {message}",
                                          error_kind=kind, skipped=True, server=server,
                                          query_mode=MODE_CONCEPTS)
                    for attempt in range(2, queries_per_model + 1)]
            return [first, *rest]

        try:
            backend, name, server = self._target(model)
            system, prompt, schema = concept_request(question, self.keyword_builder(),
                                                     self.concept_system_prompt)
            raw, reply_format = structured_chat(
                backend, prompt, schema, system=system, text_prompt=prompt,
                temperature=temp, cancel=cancel, model=name, options=_options(backend, CONCEPT_MAX_TOKENS))
        except Cancelled:
            raise
        except Exception as err:  # noqa: BLE001 - one model's failure must not stop the others
            if cancel is not None and cancel.cancelled:
                raise Cancelled("cancelled by the user") from None
            message = " ".join(str(err).split()) or "the model gave no reply"
            if type(err).__name__ == "LLMTimeout":
                message = (f"'{model}' did not name the concepts within {self.timeout:g} s. Try a smaller "
                           "model, or raise Preferences → Query generation → Time limit per attempt.")
            return failed(message, type(err).__name__)
        elapsed = time.perf_counter() - start
        try:
            concepts = parse_concepts(raw)
        except ConceptReplyError as err:
            return failed(f"the reply held no concepts as JSON: {err}; the other models' rows still run",
                          "ConceptReply")
        abstract, abstract_note = self._abstract(model, question, base_temperature, cancel)
        elapsed = time.perf_counter() - start  # the model's whole part: its concepts and its abstract
        try:
            compiled = compile_concepts(question, concepts, self.keyword_builder(), abstract)
        except Exception as err:  # noqa: BLE001 - a failing corpus look-up costs this model's rows only
            return failed(f"its concepts could not be compiled: {' '.join(str(err).split())}",
                          type(err).__name__)
        if not compiled.queries:
            return failed("the question has no usable content words (only common words); rephrase it",
                          "ConceptReply")
        if abstract_note:  # said where the words would have gone: the broad row
            compiled.notes[-1] += f" · {abstract_note}"
        out: list[QueryGenerationResult] = []
        for attempt in range(1, queries_per_model + 1):
            index = (attempt - 1) % len(compiled.queries)
            query, reason = clean_query_with_reason(compiled.queries[index])
            out.append(QueryGenerationResult(
                model, query, elapsed if attempt == 1 else 0.0, temp, attempt,
                error=None if query else f"the compiled query is not usable: {reason or 'empty'}",
                raw_reply=_kept_reply(raw), reply_format=reply_format, server=server,
                note=compiled.notes[index], query_mode=MODE_CONCEPTS, terms_added=list(compiled.added),
                terms_dropped=list(compiled.dropped)))
        return out


def _options(backend: Any, tokens: int = QUERY_MAX_TOKENS) -> dict[str, Any] | None:
    """The token limit for the app's own backends (a caller's ``chat`` may not take ``options``)."""
    # why: start-up time: it loads httpx, ollama
    from kmds_desktop.llm import ModelDispatch, OllamaBackend, OpenAIBackend

    if isinstance(backend, ModelDispatch | OllamaBackend | OpenAIBackend):
        return {"num_predict": tokens}
    return None


def queries_from_json(reply: str) -> list[str] | None:
    """The strings of a ``{"queries": [...]}`` reply (a bare list or ``{"query": "..."}`` too), or
    None when the reply is not such JSON. Bounded: a reply over :data:`MAX_JSON_REPLY_CHARS` is not
    decoded, and nesting the decoder refuses is a None, never a crash."""
    text = (reply or "").strip()
    if not text or len(text) > MAX_JSON_REPLY_CHARS or text[0] not in "[{":
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(data, dict):
        data = data.get("queries", data.get("query"))
    if isinstance(data, str):
        data = [data]
    if not isinstance(data, list):
        return None
    return [q for q in data if isinstance(q, str) and q.strip()]


def _query_from_reply(raw: str, reply_format: str) -> tuple[str, str | None]:
    """The attempt's query: from a structured reply, the first listed query that cleans to a usable
    one; from any other reply (or a structured one that is not the JSON asked for), the cleaned text."""
    listed = queries_from_json(raw)  # a text reply may be JSON too (the model copied the format)
    if listed is not None or reply_format == "schema":
        for candidate in listed or []:
            query, reason = clean_query_with_reason(candidate)
            if query:
                return query, reason
        if listed is not None:
            return "", None
    return clean_query_with_reason(raw)


def _kept_reply(raw: str) -> str:
    """The reply as kept on the result (shown in the review table, written to the search log):
    the first :data:`RAW_REPLY_KEPT` characters, so a runaway reply does not bloat either."""
    if len(raw) <= RAW_REPLY_KEPT:
        return raw
    return raw[:RAW_REPLY_KEPT] + f"… [{len(raw) - RAW_REPLY_KEPT:,} more characters not kept]"


#: Failures after which the model's remaining attempts are not asked (by exception class name).
FATAL_FOR_MODEL = frozenset({"LLMModelNotFound", "LLMUnreachable", "LLMTimeout", "UnknownBuiltin"})

