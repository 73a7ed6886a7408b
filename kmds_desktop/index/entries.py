"""What goes into the index: one entry per observation finding and per workflow description.

Entry ids come from the KB's identity and the observation's IRI, never from row positions, so
several KBs share one store and an edited KB updates in place (KMDS itself keyed entries by row
number and overwrote them). Each entry carries two hashes: ``content_hash`` (the embedded text and
the model) decides whether to embed again, ``meta_hash`` whether only the metadata needs updating.

What is stored with a vector is kept to few metadata keys, because ChromaDB writes each key as a
row of its SQLite store and that, not the vector, is most of a build's storage cost: the keys the
search filters on (``category``, ``obs_type``, one ``in_workflow:<name>`` flag per workflow), both
hashes in one key (:data:`HASH_KEY`) and everything a result shows, the text included, as one JSON
string (:data:`RECORD_KEY`). The text is not given to ChromaDB as a *document*: documents go into a
trigram full-text index that nothing here searches, which cost about a quarter of the store's
time (index format 3; :func:`result_fields` and :func:`stored_hashes` still read format-2 entries,
which a build then re-embeds).

The source is our :class:`~kmds_desktop.kb.KnowledgeBase` (read duck-typed: ``kb_id``,
``observations``, ``workflows``) or an owlready2 ontology of a KMDS file, read directly.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Metadata value of ``category`` for workflow-description entries.
WORKFLOW_CATEGORY = "workflow"
#: ``finding_seq`` of workflow-description entries (observations have their own sequence numbers).
WORKFLOW_SEQ = -1
#: Prefix of the boolean metadata keys that mark each workflow an observation belongs to.
WORKFLOW_FLAG_PREFIX = "in_workflow:"
#: Metadata key holding ``content_hash`` followed by ``meta_hash`` (40 hex digits each).
HASH_KEY = "hash"
#: Metadata key holding the text and the fields a result shows, as JSON (see :func:`result_fields`).
RECORD_KEY = "record"
_HASH_LEN = 40

_CLASS_TO_CATEGORY = {
    "ExploratoryObservation": "exploratory",
    "DataRepresentationObservation": "data_representation",
    "ModellingChoiceObservation": "modelling_choice",
    "ModelSelectionObservation": "model_selection",
    "ExperimentalObservation": "experimental",
}
_WORKFLOW_LINKS = (
    "has_exploratory_observations",
    "has_data_representation_observations",
    "has_modeling_choice_observations",
    "has_model_selection_observations",
    "has_experimental_observations",
)


@dataclass(frozen=True)
class Entry:
    """One vector of the index: its stable id, the text embedded and the metadata stored with it."""

    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def content_hash(self) -> str:
        return stored_hashes(self.metadata)[0]

    @property
    def meta_hash(self) -> str:
        return stored_hashes(self.metadata)[1]


@dataclass(frozen=True)
class SourceObservation:
    """The fields the index needs from an observation (our dataclass or an owlready2 individual)."""

    iri: str
    name: str
    category: str
    obs_type: str
    finding: str
    finding_seq: int | None
    intent: str | None
    workflows: tuple[str, ...]
    file_order: int


@dataclass(frozen=True)
class SourceWorkflow:
    iri: str
    name: str
    kind: str
    description: str | None


@dataclass(frozen=True)
class SourceKB:
    kb_id: str
    observations: tuple[SourceObservation, ...]
    workflows: tuple[SourceWorkflow, ...]


def entry_id(kb_id: str, kind: str, iri: str) -> str:
    """``<kb_id>:<obs|wf>:<IRI>`` — stable across builds and unique across KBs in one store."""
    return f"{kb_id}:{kind}:{iri}"


def clean_intent(value: Any) -> str | None:
    """The intent as text, or None for missing values (None, "", NaN, the string "nan")."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    text = str(value).strip()
    if not text or text.lower() in {"nan", "none", "null"}:
        return None
    return text


# One encoder each, made once: ``json.dumps`` with options builds a new encoder per call, which was
# a third of an update's bookkeeping on 10,000 observations. The output is the same text.
_HASH_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str)
_RECORD_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _hash(*parts: Any) -> str:
    raw = _HASH_JSON.encode(parts)
    return hashlib.sha1(raw.encode("utf-8"), usedforsecurity=False).hexdigest()


def make_entries(source: SourceKB, model_name: str) -> list[Entry]:
    """All entries of a KB, in file order (workflow descriptions first). Empty texts are skipped."""
    entries: list[Entry] = []
    for wf in source.workflows:
        text = (wf.description or "").strip()
        if not text:
            continue
        filters: dict[str, Any] = {
            "category": WORKFLOW_CATEGORY,
            "obs_type": wf.kind or "Workflow",
            WORKFLOW_FLAG_PREFIX + wf.name: True,
        }
        record = {"kb_id": source.kb_id, "iri": wf.iri, "workflow_name": wf.name,
                  "finding_seq": WORKFLOW_SEQ}
        entries.append(_finish(entry_id(source.kb_id, "wf", wf.iri), text, filters, record, model_name))
    for obs in source.observations:
        text = (obs.finding or "").strip()
        if not text:
            continue
        filters = {"category": obs.category, "obs_type": obs.obs_type or ""}
        for name in obs.workflows:
            filters[WORKFLOW_FLAG_PREFIX + name] = True
        record = {"kb_id": source.kb_id, "iri": obs.iri,
                  "workflow_name": obs.workflows[0] if obs.workflows else ""}
        if obs.finding_seq is not None:
            record["finding_seq"] = int(obs.finding_seq)
        intent = clean_intent(obs.intent)
        if intent is not None:
            record["intent"] = intent
        entries.append(_finish(entry_id(source.kb_id, "obs", obs.iri), text, filters, record, model_name))
    return entries


def _finish(eid: str, text: str, filters: dict[str, Any], record: dict[str, Any], model_name: str) -> Entry:
    record["text"] = text
    meta = {**filters, RECORD_KEY: _RECORD_JSON.encode(record)}
    meta[HASH_KEY] = _hash(model_name, text) + _hash(sorted(meta.items()))
    return Entry(eid, text, meta)


def stored_hashes(meta: Mapping[str, Any]) -> tuple[str, str]:
    """``(content_hash, meta_hash)`` of a stored entry's metadata (format 3, or 2: two keys)."""
    both = meta.get(HASH_KEY)
    if isinstance(both, str) and len(both) == 2 * _HASH_LEN:
        return both[:_HASH_LEN], both[_HASH_LEN:]
    return str(meta.get("content_hash", "")), str(meta.get("meta_hash", ""))


def result_fields(meta: Mapping[str, Any], document: str | None = None) -> dict[str, Any]:
    """The fields of a search result from a stored entry: ``finding`` (its text), ``obs_type``,
    ``workflow_name``, ``finding_seq``, ``iri``, ``category``, ``kb_id`` and ``intent`` (None when
    the observation has none). Format-2 entries kept these as metadata keys and the text as the
    ChromaDB document."""
    fields: Mapping[str, Any] = meta
    raw = meta.get(RECORD_KEY)
    if isinstance(raw, str):
        try:
            record = json.loads(raw)
        except ValueError:
            record = None
        if isinstance(record, dict):
            fields = record
            document = record.get("text")
    seq = fields.get("finding_seq")
    return {
        "finding": str(document or ""),
        "obs_type": str(meta.get("obs_type", "")),
        "workflow_name": str(fields.get("workflow_name") or ""),
        "finding_seq": int(seq) if isinstance(seq, (int, float)) and not isinstance(seq, bool) else None,
        "iri": str(fields.get("iri") or ""),
        "category": str(meta.get("category", "")),
        "kb_id": str(fields.get("kb_id") or ""),
        "intent": clean_intent(fields.get("intent")),
    }


# --------------------------------------------------------------------------------------------
# Sources


def from_knowledge_base(kb: Any) -> SourceKB:
    """Read our ``KnowledgeBase`` (duck-typed on the documented attributes)."""
    observations = tuple(
        SourceObservation(
            iri=str(o.iri),
            name=str(getattr(o, "name", "") or ""),
            category=str(getattr(o, "category", "") or ""),
            obs_type=str(getattr(o, "obs_type", "") or ""),
            finding=str(getattr(o, "finding", "") or ""),
            finding_seq=_int_or_none(getattr(o, "finding_seq", None)),
            intent=clean_intent(getattr(o, "intent", None)),
            workflows=tuple(str(w) for w in (getattr(o, "workflows", None) or ())),
            file_order=int(getattr(o, "file_order", i) if getattr(o, "file_order", None) is not None else i),
        )
        for i, o in enumerate(kb.observations)
    )
    workflows = tuple(
        SourceWorkflow(
            iri=str(w.iri),
            name=str(getattr(w, "name", "") or ""),
            kind=str(getattr(w, "kind", "") or ""),
            description=getattr(w, "description", None),
        )
        for w in kb.workflows
    )
    return SourceKB(str(kb.kb_id), observations, workflows)


def is_owlready_ontology(obj: Any) -> bool:
    return type(obj).__module__.startswith("owlready2") and hasattr(obj, "individuals")


def ontology_kb_id(onto: Any) -> str:
    """Identity of an ontology given without a file: a short hash of its base IRI."""
    return "onto-" + hashlib.sha1(str(onto.base_iri).encode("utf-8"), usedforsecurity=False).hexdigest()[:12]


def from_ontology(onto: Any, kb_id: str | None = None) -> SourceKB:
    """Read observations and workflows straight from an owlready2 ontology of a KMDS file.

    Observations are collected by class name (not through ``KMObservation``: two observation
    classes are not under it) and linked to workflows through the ``has_*_observations`` properties.
    """
    individuals = list(onto.individuals())
    obs_workflows: dict[str, list[str]] = {}
    workflows: list[SourceWorkflow] = []
    for ind in individuals:
        classes = _class_names(ind)
        if not any(c == "Workflow" or c.endswith("Workflow") for c in classes):
            continue
        name = str(ind.name)
        workflows.append(
            SourceWorkflow(
                iri=str(ind.iri),
                name=name,
                kind=next((c for c in classes if c.endswith("Workflow")), "Workflow"),
                description=_text(_first(_prop(ind, "description"))),
            )
        )
        for link in _WORKFLOW_LINKS:
            for target in _values(_prop(ind, link)):
                obs_workflows.setdefault(str(target.iri), []).append(name)
    observations: list[SourceObservation] = []
    for ind in individuals:
        category = next((_CLASS_TO_CATEGORY[c] for c in _class_names(ind) if c in _CLASS_TO_CATEGORY), None)
        if category is None:
            continue
        obs_type = ""
        for prop in ind.get_properties():
            if prop.name.endswith("_observation_type"):
                obs_type = _text(_first(prop[ind])) or ""
                break
        observations.append(
            SourceObservation(
                iri=str(ind.iri),
                name=str(ind.name),
                category=category,
                obs_type=obs_type,
                finding=_text(_first(_prop(ind, "finding"))) or "",
                finding_seq=_int_or_none(_first(_prop(ind, "finding_sequence"))),
                intent=clean_intent(_first(_prop(ind, "intent"))),
                workflows=tuple(obs_workflows.get(str(ind.iri), ())),
                file_order=len(observations),
            )
        )
    return SourceKB(kb_id or ontology_kb_id(onto), tuple(observations), tuple(workflows))


def _class_names(ind: Any) -> list[str]:
    return [getattr(c, "name", str(c)) for c in getattr(ind, "is_a", [])]


def _prop(ind: Any, name: str) -> Any:
    try:
        return getattr(ind, name)
    except AttributeError:
        return None


def _values(value: Any) -> Iterable[Any]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple, set)) or type(value).__name__ == "IndividualValueList":
        return list(value)
    return (value,)


def _first(value: Any) -> Any:
    values = list(_values(value))
    return values[0] if values else None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _int_or_none(value: Any) -> int | None:
    if value is None:
        return None
    try:
        if isinstance(value, float) and math.isnan(value):
            return None
        return int(value)
    except (TypeError, ValueError):
        return None
