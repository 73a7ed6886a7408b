"""The data the orchestrator passes around: the validated route and the result of one question.

``OrchestratorRoute`` is pydantic so that whatever an LLM sends is validated before anything runs
(an unknown intent or a filter of the wrong type is rejected, not guessed at). ``OrchestratorResult``
is a plain dataclass with the KMDS search module's four fields first (``answer``, ``intent_class``,
``route_explanation``, ``results``) and then what the app needs to explain itself: which route ran,
which backend answered, whether and why it fell back, and how long each step took.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from kmds_desktop.kb import SearchFilters

IntentClass = Literal[
    "exploratory_search",
    "data_representation_search",
    "modelling_choice_search",
    "model_selection_search",
    "all_observations_search",
    "semantic_search",
]
INTENT_CLASSES: tuple[str, ...] = get_args(IntentClass)



def describe_filters(filters: SearchFilters | None) -> str:
    """See :meth:`OrchestratorRoute.describe_filters`."""
    if filters is None:
        return ""
    parts = []
    if filters.obs_type_filter:
        parts.append(f"type contains {filters.obs_type_filter!r}")
    if filters.finding_seq_min is not None or filters.finding_seq_max is not None:
        low = filters.finding_seq_min if filters.finding_seq_min is not None else "…"
        high = filters.finding_seq_max if filters.finding_seq_max is not None else "…"
        parts.append(f"findings {low} to {high}")
    if filters.keyword:
        parts.append(f"keyword {filters.keyword!r}")
    if getattr(filters, "workflow", None):
        parts.append(f"workflow {filters.workflow!r}")
    return ", ".join(parts)


class OrchestratorRoute(BaseModel):
    """Which template to run and with which filters; what the router (LLM or offline) decides."""

    model_config = ConfigDict(extra="ignore")

    intent_class: IntentClass
    filters: SearchFilters = Field(default_factory=SearchFilters)
    explanation: str = ""
    #: True: the question asks for a listing (every matching record, in workflow and sequence
    #: order); False: an open question (the relevant records, best first); None: decide from the
    #: question's wording and the filters (see :func:`kmds_desktop.ask.relevance.is_listing`).
    listing: bool | None = None
    # set only by the offline router (never read from a reply, an edit or a dump): see
    # :attr:`from_offline_router`
    _from_offline_router: bool = PrivateAttr(default=False)

    @property
    def from_offline_router(self) -> bool:
        """Whether this is the offline router's own route, as it chose it. The orchestrator runs such
        a route as the offline router means it (a category guessed from the question's meaning is
        preferred, not a fence) wherever it comes from: the guard keeping it over a model's, the
        window's "Use the other route", or Re-run without an edit. Run as a fence instead, it found
        other records than the first run on 3 of the 106 dev and hard questions. An edited route is
        a new route (:meth:`with_filters`), the user's, and runs as they set it."""
        return self._from_offline_router

    def as_offline_router_route(self) -> OrchestratorRoute:
        """A copy marked as the offline router's own (:attr:`from_offline_router`)."""
        marked = self.model_copy()
        marked._from_offline_router = True  # noqa: SLF001 - its own class marks its copy
        return marked

    def describe_filters(self) -> str:
        """The filters in words (``"type contains 'EDA', findings 2 to 3"``; ``""`` for none): one
        wording for the fallback reasons the orchestrator writes and the route the window shows."""
        return describe_filters(self.filters)

    def with_filters(self, **changes: Any) -> OrchestratorRoute:
        """A copy with some filter fields replaced (the GUI's "edit filters and re-run")."""
        data = self.filters.model_dump()
        data.update(changes)
        return OrchestratorRoute(intent_class=self.intent_class, filters=SearchFilters(**data),
                                 explanation=self.explanation, listing=self.listing)


@dataclass
class OrchestratorResult:
    """Everything one question produced; ``results[n-1]`` is the record cited as ``[n]`` in ``answer``."""

    answer: str
    intent_class: str
    route_explanation: str
    results: list[dict[str, Any]]
    #: The route that ran (after validation); on fallback, the offline router's or the semantic route
    #: that replaced it.
    route: OrchestratorRoute | None = None
    #: The route chosen to run, when it was valid: the user's, the guarded model's (filters the
    #: question does not support dropped) or the offline router's; the model's own is ``model_route``.
    proposed_route: OrchestratorRoute | None = None
    #: "ollama", "openai", "google", "callable" or "offline".
    backend: str = "offline"
    #: The model the backend asked ("" offline): "auto" may use another than the settings name (a
    #: confirmed server's only model), and the status line names the one that answered.
    model: str = ""
    #: Why "auto" chose this backend (e.g. "Ollama not reachable at ...; no Google API key"); "" otherwise.
    backend_note: str = ""
    #: Human-readable reason why the route chosen did not run (the offline router's route or semantic
    #: search ran instead, see ``route``); None when no fallback happened.
    fallback_reason: str | None = None
    #: Its code: "invalid_route", "unknown_intent", "llm_error", "empty_template" or "empty_filtered".
    fallback_code: str | None = None
    #: How the answer was written: "llm", "extractive" (synthesis failed) or "offline" (no LLM).
    synthesis: str = "offline"
    #: Why synthesis failed, when it did.
    synthesis_error: str | None = None
    question: str = ""
    #: Seconds per step ("embed", "route", "search", "synthesis", "total").
    timings: dict[str, float] = field(default_factory=dict)
    #: True when the records are a listing (every match, workflow and sequence order); False when
    #: they are the records relevant to an open question (best first, grouped by workflow).
    listing: bool = False
    #: The most records an answer shows (the orchestrator's ``n_results``; CLI ``--limit``).
    limit: int = 0
    #: How many records matched before the limit (after merging duplicates).
    total_matches: int = 0
    #: How the LLM router was asked: "schema" (decoding constrained to the route's JSON schema),
    #: "text" (free text parsed tolerantly: the backend cannot enforce a schema or refused it), or
    #: "" (no LLM router ran).
    route_format: str = ""
    #: Under an LLM's answer: the records it drew on, or that it cited none / left claims uncited.
    citation_note: str = ""
    #: Why the model's route was slow and the server setting that fixes it ("" when it was not; said
    #: once per server: :func:`~kmds_desktop.llm.prompt_cache.slow_route_note`).
    speed_note: str = ""
    #: Statements of an LLM's answer that cite no record (0 for extractive and offline answers).
    uncited_claims: int = 0
    #: The record numbers (1-based) the LLM's answer prompt carried: the most relevant few
    #: (:func:`~kmds_desktop.ask.answers.prompt_records`); empty when no LLM wrote the answer.
    given_records: list[int] = field(default_factory=list)
    #: What the guard did to the model's route, one sentence each: a filter dropped because the
    #: question does not support it, or the template overruled (see :mod:`kmds_desktop.ask.guard`).
    #: Shown in the window's Route box, the CLI and exports.
    route_notes: list[str] = field(default_factory=list)
    #: The other router's route when the two disagreed (the window offers it one click away).
    alternative_route: OrchestratorRoute | None = None
    #: The model's route as it came (after validation), before the guard; None without a model router.
    model_route: OrchestratorRoute | None = None
    #: Why the records found answer the question only weakly ("" when they do not): the best one's
    #: similarity to the question is low. Shown under the answer, in the window, the CLI and exports.
    weak_match: str = ""

    @property
    def truncated(self) -> bool:
        """Whether the limit left matching records out (raise ``limit`` to see them)."""
        return self.total_matches > len(self.results)

    @property
    def citations(self) -> dict[int, str]:
        """``{n: iri}`` for each ``[n]`` the answer may cite."""
        return {i + 1: str(r.get("iri", "")) for i, r in enumerate(self.results)}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the CLI's ``--json`` output)."""
        data = asdict(self)
        data["route"] = self.route.model_dump() if self.route is not None else None
        data["proposed_route"] = self.proposed_route.model_dump() if self.proposed_route is not None else None
        for key in ("alternative_route", "model_route"):
            route = getattr(self, key)
            data[key] = route.model_dump() if route is not None else None
        data["truncated"] = self.truncated
        return data
