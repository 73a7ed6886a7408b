"""The words a question about one KB can use to narrow it: the KB's own vocabulary.

Both routers read it — the LLM sees it in its prompt, the offline router matches questions against
it — so that "data quality problems", "the body mass workflow" or "findings 2 to 4" become filters
that name what this KB actually holds (its observation types, workflow names, sequence numbers per
workflow and category, intents), not guesses from a fixed list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kmds_desktop.kb import Observation

#: Types that only restate their category (naming them narrows nothing beyond the template).
GENERIC_TYPES = frozenset({"modelling choice observation", "model selection observation",
                           "experimental observation"})

_TYPE_SUFFIX = re.compile(r"\s+(observation|statement|description|summary)$", re.I)


def normalise_name(text: str) -> str:
    """Lower case, ``_``/``-`` as spaces, single spaces: how names are compared with questions."""
    return " ".join(re.sub(r"[_\-]+", " ", text).lower().split())


def type_stem(obs_type: str) -> str:
    """``"Data Quality Observation"`` -> ``"data quality"`` (the words a question uses for a type)."""
    return normalise_name(_TYPE_SUFFIX.sub("", obs_type.strip()))


@dataclass(frozen=True)
class KBVocabulary:
    """What one KB's records are called, and the sequence numbers they carry."""

    #: category -> observation types of that category present in the KB (sorted).
    types_by_category: dict[str, list[str]]
    #: Workflow names in the KB's order.
    workflows: list[str]
    #: Intent values present (e.g. ``DATA_UNDERSTANDING``), sorted.
    intents: list[str]
    #: (workflow name or "", category) -> sorted distinct finding sequence numbers.
    seqs: dict[tuple[str, str], list[int]] = field(default_factory=dict)

    @classmethod
    def from_observations(cls, observations: Iterable[Observation],
                          workflow_names: Sequence[str] = ()) -> KBVocabulary:
        types: dict[str, set[str]] = {}
        intents: set[str] = set()
        seqs: dict[tuple[str, str], set[int]] = {}
        names: list[str] = list(workflow_names)
        for obs in observations:
            if obs.obs_type:
                types.setdefault(obs.category, set()).add(obs.obs_type)
            if obs.intent:
                intents.add(obs.intent)
            for wf in obs.workflows or [""]:
                if wf and wf not in names:
                    names.append(wf)
                if obs.finding_seq is not None:
                    seqs.setdefault((wf, obs.category), set()).add(obs.finding_seq)
        return cls({c: sorted(t) for c, t in types.items()}, names, sorted(intents),
                   {k: sorted(v) for k, v in seqs.items()})

    @classmethod
    def of(cls, kb: object) -> KBVocabulary:
        """The vocabulary of a :class:`~kmds_desktop.kb.KnowledgeBase`."""
        return cls.from_observations(kb.observations, [w.name for w in kb.workflows])  # type: ignore[attr-defined]

    @property
    def obs_types(self) -> list[str]:
        return sorted({t for types in self.types_by_category.values() for t in types})

    def seqs_in(self, category: str | None = None, workflow: str | None = None) -> list[int]:
        """Distinct sequence numbers of a category (None: all) in a workflow (None: all)."""
        wanted = normalise_name(workflow) if workflow else None
        out: set[int] = set()
        for (wf, cat), values in self.seqs.items():
            if category is not None and cat != category:
                continue
            if wanted is not None and wanted not in normalise_name(wf):
                continue
            out.update(values)
        return sorted(out)

    def find_workflow(self, text: str) -> str | None:
        """The KB's workflow whose name a text mentions (longest name first), or None."""
        lowered = f" {normalise_name(text)} "
        for name in sorted(self.workflows, key=len, reverse=True):
            norm = normalise_name(name)
            if norm and f" {norm} " in lowered:
                return name
        return None

    def resolve_workflow(self, value: str | None) -> str | None:
        """An LLM's workflow filter as one of the KB's names (case and ``_`` insensitive), else as given."""
        if not value:
            return None
        norm = normalise_name(value)
        for name in self.workflows:
            if normalise_name(name) == norm:
                return name
        matches = [n for n in self.workflows if norm in normalise_name(n) or normalise_name(n) in norm]
        return matches[0] if len(matches) == 1 else value

    def resolve_type(self, value: str | None) -> str | None:
        """An LLM's type filter as one of the KB's types when it names one unambiguously."""
        if not value:
            return None
        norm = normalise_name(value)
        for name in self.obs_types:
            if normalise_name(name) == norm:
                return name
        stem = type_stem(value)
        matches = [t for t in self.obs_types if type_stem(t) == stem]
        return matches[0] if len(matches) == 1 else value

    def describe(self) -> list[str]:
        """The vocabulary as prompt lines (types per category, workflows, sequence ranges, intents)."""
        lines = ["Observation types in this knowledge base, by template:"]
        for category, types in self.types_by_category.items():
            lines.append(f"- {category}_search: " + ", ".join(f'"{t}"' for t in types))
        if self.workflows:
            lines.append("Workflows: " + ", ".join(f'"{w}"' for w in self.workflows))
        ranges = []
        for (wf, category), values in self.seqs.items():
            if values:
                ranges.append(f"{wf or '(no workflow)'} / {category}: {values[0]}-{values[-1]}")
        if ranges:
            lines.append("Finding sequence numbers (they restart in each workflow and category): "
                         + "; ".join(ranges))
        if self.intents:
            lines.append("Intents recorded: " + ", ".join(self.intents))
        return lines
