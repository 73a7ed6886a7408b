"""The five template searches of the search orchestrator, as plain functions over a KB.

They mirror KMDS's ``load_*_observations`` loaders plus the orchestrator's post-filters, but work
on the already-loaded records: no re-parse, no owlready2, results in the KB's display order.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator

from kmds_desktop.kb.knowledge_base import KnowledgeBase
from kmds_desktop.kb.model import KnowledgeBaseError, Observation


class SearchFilters(BaseModel):
    """Optional narrowing the router may extract from a question; ``None`` fields are ignored.

    Text filters are case-insensitive substrings; the sequence range is inclusive, and an
    observation with no ``finding_seq`` is outside any range that has a bound. ``workflow`` keeps
    observations of a workflow whose name contains it (case-insensitive, ``_`` read as a space).
    """

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    obs_type_filter: str | None = None
    finding_seq_min: int | None = None
    finding_seq_max: int | None = None
    keyword: str | None = None
    workflow: str | None = None

    @model_validator(mode="after")
    def _blank_is_none(self) -> SearchFilters:
        # An LLM often sends "" for "no filter"; treat it as absent rather than "match everything".
        if self.obs_type_filter == "":
            self.obs_type_filter = None
        if self.keyword == "":
            self.keyword = None
        if self.workflow == "":
            self.workflow = None
        return self

    def matches(self, obs: Observation) -> bool:
        if self.obs_type_filter and self.obs_type_filter.lower() not in obs.obs_type.lower():
            return False
        if self.keyword and self.keyword.lower() not in obs.finding.lower():
            return False
        if self.workflow:
            wanted = _name_key(self.workflow)
            if not any(wanted in _name_key(w) for w in obs.workflows):
                return False
        if self.finding_seq_min is not None or self.finding_seq_max is not None:
            seq = obs.finding_seq
            if seq is None:
                return False
            if self.finding_seq_min is not None and seq < self.finding_seq_min:
                return False
            if self.finding_seq_max is not None and seq > self.finding_seq_max:
                return False
        return True


def _name_key(name: str) -> str:
    return " ".join(name.replace("_", " ").replace("-", " ").lower().split())


def _search(
    kb: KnowledgeBase,
    category: str | None,
    filters: SearchFilters | None,
    workflow: str | None,
) -> list[Observation]:
    wf_name: str | None = None
    if workflow:
        wf = kb.workflow(workflow)
        if wf is None:
            raise KnowledgeBaseError(f"no workflow {workflow!r} in this knowledge base", path=kb.path)
        wf_name = wf.name
    out = []
    for obs in kb.observations:
        if category is not None and obs.category != category:
            continue
        if wf_name is not None and wf_name not in obs.workflows:
            continue
        if filters is not None and not filters.matches(obs):
            continue
        out.append(obs)
    return out


def exploratory_search(
    kb: KnowledgeBase, filters: SearchFilters | None = None, workflow: str | None = None
) -> list[Observation]:
    """Exploratory (EDA) observations: data quality, relevance, first understanding of the data."""
    return _search(kb, "exploratory", filters, workflow)


def data_representation_search(
    kb: KnowledgeBase, filters: SearchFilters | None = None, workflow: str | None = None
) -> list[Observation]:
    """Data representation observations: feature engineering and data transformations."""
    return _search(kb, "data_representation", filters, workflow)


def modelling_choice_search(
    kb: KnowledgeBase, filters: SearchFilters | None = None, workflow: str | None = None
) -> list[Observation]:
    """Modelling choice observations: algorithm choices and modelling assumptions."""
    return _search(kb, "modelling_choice", filters, workflow)


def model_selection_search(
    kb: KnowledgeBase, filters: SearchFilters | None = None, workflow: str | None = None
) -> list[Observation]:
    """Model selection observations: set-ups, comparisons, results and the chosen model."""
    return _search(kb, "model_selection", filters, workflow)


def all_observations_search(
    kb: KnowledgeBase, filters: SearchFilters | None = None, workflow: str | None = None
) -> list[Observation]:
    """Every observation of every category (experimental ones included)."""
    return _search(kb, None, filters, workflow)


#: Template name (as the router names it) -> function.
TEMPLATES = {
    "exploratory_search": exploratory_search,
    "data_representation_search": data_representation_search,
    "modelling_choice_search": modelling_choice_search,
    "model_selection_search": model_selection_search,
    "all_observations_search": all_observations_search,
}
