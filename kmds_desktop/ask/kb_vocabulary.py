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

    def workflow_in_question(self, text: str) -> str | None:
        """The one workflow of this KB that a question refers to, as its exact name, or None.

        Researchers name a workflow in three ways, tried in this order: its whole name; its place
        in the KB ("workflow 2", "the second workflow", "the last workflow"); or words of its name
        before "workflow"/"analysis"/"pipeline"/"study" ("the body mass workflow", "the
        classification analysis"). Words shared by several workflows ("the penguin workflow" when
        both are penguin workflows) name none of them, so they never narrow the answer to one.
        """
        found = self.find_workflow(text)
        if found or not self.workflows:
            return found
        position = _workflow_position(text)
        if position is not None:
            if position == -1:
                return self.workflows[-1]
            return self.workflows[position - 1] if 1 <= position <= len(self.workflows) else None
        names = {name: normalise_name(name).split() for name in self.workflows}
        for m in _NAME_PHRASE.finditer(text):
            picked: list[str] = []
            hits: list[str] = []
            for word in reversed(normalise_name(m.group(1)).split()):
                if word in _STOP:
                    break
                candidates = [n for n, parts in names.items()
                              if all(any(_same_word(w, p) for p in parts) for w in [*picked, word])]
                if not candidates:
                    break
                picked.append(word)
                hits = candidates
            if len(hits) == 1:
                return hits[0]
        return None

    def workflow_topic(self, text: str) -> str | None:
        """The one workflow whose own name words (those no other workflow's name has; four letters
        or more) a question uses, even without naming the workflow: "which model predicted body
        mass best" is about "penguin body mass regression". Only a preference, never a filter."""
        if len(self.workflows) < 2:
            return None
        words = {w for w in normalise_name(text).split() if len(w) >= 4}
        own: dict[str, set[str]] = {}
        for name in self.workflows:
            others = {p for other in self.workflows if other != name for p in normalise_name(other).split()}
            own[name] = {p for p in normalise_name(name).split() if len(p) >= 4 and p not in others}
        hits = [name for name, parts in own.items()
                if any(_same_word(w, p) for w in words for p in parts)]
        return hits[0] if len(hits) == 1 else None

    def resolve_workflow(self, value: str | None) -> str | None:
        """An LLM's workflow filter as one of the KB's names (case and ``_`` insensitive; "workflow
        2", "the second workflow" or a unique part of a name are read as in a question), else as given."""
        if not value:
            return None
        norm = normalise_name(value)
        for name in self.workflows:
            if normalise_name(name) == norm:
                return name
        if norm.isdigit():
            norm = f"workflow {norm}"
        referred = self.workflow_in_question(norm if "workflow" in norm else f"{norm} workflow")
        if referred:
            return referred
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


_ORDINAL_WORDS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4,
                  "fifth": 5, "5th": 5, "sixth": 6, "6th": 6, "last": -1, "final": -1, "latest": -1}
_COUNT_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_WORKFLOW_NUMBER = re.compile(r"\bworkflow\s*(?:#|no\.?|number|nr\.?)?\s*(\d+|"
                              + "|".join(_COUNT_WORDS) + r")\b(?!\s*(?:%|percent))", re.I)
_WORKFLOW_ORDINAL = re.compile(r"\b(" + "|".join(_ORDINAL_WORDS) + r")\s+workflow\b", re.I)
#: Nouns researchers put after (part of) a workflow's name: "the body mass workflow", and, said
#: loosely, "the species classifier work", "the retail customer project", "the experiment one".
_NAME_PHRASE = re.compile(r"((?:[\w-]+\s+){1,6})"
                          r"(?:workflow|analysis|pipeline|study|work|project|part|one|data)(?:'s|s)?\b", re.I)
#: Words that end a part of a workflow's name read backwards from "workflow".
_STOP = frozenset({"the", "a", "an", "this", "that", "our", "my", "in", "of", "for", "from", "with", "all",
                   "and", "its", "each", "every", "whole", "entire", "any", "to", "on", "at", "by"})


def _workflow_position(text: str) -> int | None:
    """1 for "workflow 1"/"the first workflow", -1 for "the last workflow", None when not said."""
    if m := _WORKFLOW_NUMBER.search(text):
        value = m.group(1).lower()
        return int(value) if value.isdigit() else _COUNT_WORDS[value]
    if m := _WORKFLOW_ORDINAL.search(text):
        return _ORDINAL_WORDS[m.group(1).lower()]
    return None


def _same_word(word: str, name_word: str) -> bool:
    """A question's word for a word of a workflow name: the same, or the same first five letters
    ("classifier" for "classification", "regressor" for "regression")."""
    return word == name_word or (len(word) >= 5 and len(name_word) >= 5 and word[:5] == name_word[:5])
