"""The owlready2 side of a knowledge base: one private ``World`` per file, read and written in bulk.

Why raw quadstore SQL instead of owlready2 entity objects: building a Python object and doing a
property look-up per individual costs milliseconds each, which is seconds for a 10,000-observation
KB. The quadstore is SQLite, so three queries (types, literals, links) return every triple we need
and the records are assembled in plain Python. Writing goes the same way: the managed triples of
the modelled individuals are replaced in bulk, everything else in the file (schema, annotations,
individuals this app does not model) is kept, and owlready2's own serializer writes the file, so
the output has exactly the shape KMDS itself writes.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import sys
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kmds_desktop.kb.model import KnowledgeBaseError, Observation, Workflow
from kmds_desktop.kb.schema import NAMED_INDIVIDUAL, RDF_TYPE, XSD_INTEGER, XSD_STRING, schema_triples
from kmds_desktop.kb.vocabulary import (
    CATEGORY_CLASS,
    CATEGORY_LINK_PROPERTY,
    CATEGORY_TYPE_PROPERTY,
    CLASS_CATEGORY,
    DEPENDS_ON,
    DESCRIPTION,
    FINDING,
    FINDING_SEQUENCE,
    INTENT,
    KMDS_NS,
    KMDS_ONTOLOGY_IRI,
    LINK_PROPERTY_CATEGORY,
    TYPE_PROPERTY_CATEGORY,
    WORKFLOW_KINDS,
    local_name,
)

_CHUNK = 900  # stays under SQLite's bound-variable limit on every build
_WHERE = re.compile(r"line \d+, column \d+")

log = logging.getLogger(__name__)

_DATA_PROPS = (FINDING, FINDING_SEQUENCE, INTENT, DESCRIPTION, *CATEGORY_TYPE_PROPERTY.values())
_LINK_PROPS = (*CATEGORY_LINK_PROPERTY.values(), DEPENDS_ON)
_TYPE_CLASSES = (*CATEGORY_CLASS.values(), *WORKFLOW_KINDS)


@dataclass
class ReadResult:
    """What a file holds, as plain records, plus notes about oddities found while reading."""

    workflows: list[Workflow] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    has_kmds_terms: bool = False


#: The largest integer the store (SQLite) holds: a larger finding number cannot be saved.
MAX_INT = 2**63 - 1


def in_chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    """``items`` in slices small enough for one SQL statement's parameters (SQLite bounds them)."""
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


class KBStore:
    """An owlready2 World holding exactly one KB file (worlds never share triples)."""

    def __init__(self) -> None:
        from owlready2 import World  # why: owlready2 loads on first use, not at start-up

        self.world = World()
        self.onto = self.world.get_ontology(KMDS_ONTOLOGY_IRI)
        self._graph = self.world.graph
        self._db = self._graph.db
        self._c = self.onto.graph.c

    # -- creation -----------------------------------------------------------------------------
    @classmethod
    def from_bytes(cls, data: bytes, path: Path) -> KBStore:
        """Parse RDF/XML that already passed :func:`~kmds_desktop.kb.safety.prescan_rdfxml`."""
        # why: owlready2 loads on first use, not at start-up
        from owlready2 import OwlReadyOntologyParsingError

        store = cls()
        fileobj = io.BytesIO(data)
        # owlready2 names the file in its messages, and forks a parser process when ``name`` is an
        # existing file of 8 MB or more. Forking a process that runs Qt, torch and worker threads can
        # deadlock, so the name is deliberately not a path on disk: the parse stays in this thread.
        fileobj.name = f"{path.name} (read in memory)"
        store._graph.acquire_write_lock()
        try:
            with _parser_errors_captured() as swallowed:
                store.onto.graph.parse(fileobj, format="rdfxml", default_base=KMDS_ONTOLOGY_IRI)
        except OwlReadyOntologyParsingError as exc:
            store.close()
            raise KnowledgeBaseError(_parse_problem(exc, swallowed), path=path) from None
        except Exception as exc:  # noqa: BLE001 - parser internals raise many types
            store.close()
            raise KnowledgeBaseError(f"the RDF/XML could not be parsed ({exc})", path=path) from None
        finally:
            store._graph.release_write_lock()
        return store

    @classmethod
    def empty(cls) -> KBStore:
        """A new, empty KB holding only the KMDS schema."""
        store = cls()
        store._add_objs([(KMDS_ONTOLOGY_IRI, RDF_TYPE, "http://www.w3.org/2002/07/owl#Ontology")])
        store.ensure_schema()
        return store

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing a half-built world must not mask the real error
            self.world.close()

    # -- low level ----------------------------------------------------------------------------
    def _id(self, iri: str) -> int:
        return self._graph._abbreviate(iri)  # noqa: SLF001 - owlready2 has no public IRI-to-id look-up

    def _add_objs(self, triples: Iterable[tuple[str, str, str]]) -> None:
        rows = [(self._c, self._id(s), self._id(p), self._id(o)) for s, p, o in triples]
        self._db.executemany("INSERT OR IGNORE INTO objs VALUES (?, ?, ?, ?)", rows)

    def ensure_schema(self) -> None:
        """Add any KMDS declaration the file lacks, so KMDS can read what we write."""
        self._add_objs(schema_triples())

    # -- reading ------------------------------------------------------------------------------
    def read(self) -> ReadResult:
        """Assemble workflows and observations from three bulk queries over the quadstore."""
        db, c = self._db, self._c
        iri_of: dict[int, str] = dict(db.execute("SELECT storid, iri FROM resources"))
        kmds_ids = {storid for storid, iri in iri_of.items() if iri.startswith(KMDS_NS)}
        result = ReadResult()
        if not kmds_ids:
            return result

        local = {storid: iri[len(KMDS_NS) :] for storid, iri in iri_of.items() if storid in kmds_ids}
        by_name = {name: storid for storid, name in local.items()}
        rdf_type = self._graph._abbreviate(RDF_TYPE, False)  # noqa: SLF001 - as above

        obs_class = {by_name[cls]: CLASS_CATEGORY[cls] for cls in CATEGORY_CLASS.values() if cls in by_name}
        wf_class = {by_name[k]: k for k in WORKFLOW_KINDS if k in by_name}
        obs_kind: dict[int, str] = {}
        # subject -> fields with a second, different value (the IRI is defined twice in the file)
        conflicting: dict[int, set[str]] = defaultdict(set)
        obs_order: dict[int, int] = {}
        wf_kind: dict[int, str] = {}
        wf_first_row: dict[int, int] = {}
        if (obs_class or wf_class) and rdf_type is not None:
            for rowid, s, o in db.execute(
                "SELECT rowid, s, o FROM objs WHERE c=? AND p=? ORDER BY rowid", (c, rdf_type)
            ):
                if o in obs_class and s in obs_kind and obs_class[o] != obs_kind[s]:
                    conflicting[s].add("category")  # a second definition says another category
                elif o in obs_class and s not in obs_kind and s > 0:
                    obs_kind[s] = obs_class[o]
                    obs_order[s] = len(obs_order)
                elif o in wf_class and s > 0:
                    wf_first_row.setdefault(s, rowid)
                    # a subclass kind wins over the generic "Workflow"
                    if s not in wf_kind or wf_kind[s] == "Workflow":
                        wf_kind[s] = wf_class[o]

        data_props = {by_name[p]: p for p in _DATA_PROPS if p in by_name}
        values: dict[int, dict[str, Any]] = defaultdict(dict)
        if data_props:
            marks = ",".join("?" * len(data_props))
            for s, p, o in db.execute(
                f"SELECT s, p, o FROM datas WHERE c=? AND p IN ({marks}) ORDER BY rowid",
                (c, *data_props),
            ):
                have = values[s]
                prop = data_props[p]
                if prop not in have:
                    have[prop] = o  # functional: first value wins
                elif have[prop] != o:
                    conflicting[s].add(prop)  # a save writes only the first: said in a note

        link_props = {by_name[p]: p for p in _LINK_PROPS if p in by_name}
        links: list[tuple[int, str, int]] = []
        if link_props:
            marks = ",".join("?" * len(link_props))
            links = [
                (s, link_props[p], o)
                for s, p, o in db.execute(
                    f"SELECT s, p, o FROM objs WHERE c=? AND p IN ({marks}) ORDER BY rowid",
                    (c, *link_props),
                )
            ]

        wf_ids = sorted(wf_kind, key=wf_first_row.__getitem__)  # file order
        wf_name = {s: local_name(iri_of[s]) for s in wf_ids}
        wf_index = {s: i for i, s in enumerate(wf_ids)}

        depends: dict[int, list[str]] = defaultdict(list)
        members: dict[int, list[int]] = defaultdict(list)
        link_category: dict[int, str] = {}
        dangling = 0
        for s, prop, o in links:
            if prop == DEPENDS_ON:
                if o in iri_of:
                    depends[s].append(local_name(iri_of[o]))
                continue
            if s not in wf_kind:
                continue
            if o not in obs_kind:
                dangling += 1
                continue
            if s not in members[o]:
                members[o].append(s)
            link_category.setdefault(o, LINK_PROPERTY_CATEGORY[prop])

        for s in wf_ids:
            vals = values.get(s, {})
            desc = vals.get(DESCRIPTION)
            result.workflows.append(
                Workflow(
                    iri=iri_of[s],
                    name=wf_name[s],
                    kind=wf_kind[s],
                    description=str(desc) if desc is not None else None,
                    depends_on=depends.get(s, []),
                )
            )

        recategorised = 0
        for s, order in obs_order.items():
            vals = values.get(s, {})
            category = obs_kind[s]
            type_props = [p for p in CATEGORY_TYPE_PROPERTY.values() if p in vals]
            own = CATEGORY_TYPE_PROPERTY[category]
            if own in vals:
                obs_type = str(vals[own])
            elif type_props:
                # Older KMDS wrote e.g. ModellingChoiceObservation individuals carrying a
                # model_selection_observation_type and linked them as model selections: the
                # type label (and the link) say what the observation is.
                category = TYPE_PROPERTY_CATEGORY[type_props[0]]
                obs_type = str(vals[type_props[0]])
                recategorised += 1
            else:
                obs_type = ""
            owners = sorted(members.get(s, []), key=wf_index.__getitem__)
            result.observations.append(
                Observation(
                    iri=iri_of[s],
                    name=local_name(iri_of[s]),
                    category=category,
                    obs_type=obs_type,
                    finding=str(vals.get(FINDING, "") or ""),
                    finding_seq=_as_int(vals.get(FINDING_SEQUENCE)),
                    intent=_as_text(vals.get(INTENT)),
                    workflows=[wf_name[w] for w in owners],
                    file_order=order,
                )
            )

        # KMDS content = a KMDS term is used as a class, property or type somewhere in the file.
        result.has_kmds_terms = bool(obs_kind or wf_kind) or _uses_any(db, c, kmds_ids)
        unlinked = sum(1 for o in result.observations if o.unlinked)
        if unlinked:
            result.notes.append(
                f"{unlinked} observation(s) are not linked to any workflow (kept, marked unlinked)"
            )
        if recategorised:
            result.notes.append(
                f"{recategorised} observation(s) carry the type field of another category "
                "(older KMDS writer); they are listed under the category of their type"
            )
        if dangling:
            result.notes.append(f"{dangling} workflow link(s) point to observations missing from the file")
        result.notes.extend(_unkept_notes(conflicting, values, obs_kind, iri_of))
        return result

    # -- writing ------------------------------------------------------------------------------
    def sync(
        self, workflows: Sequence[Workflow], observations: Sequence[Observation], removed: Iterable[str]
    ) -> None:
        """Make the quadstore hold exactly these records (managed triples only; the rest is kept)."""
        db, c = self._db, self._c
        self.ensure_schema()
        rdf_type = self._id(RDF_TYPE)
        named = self._id(NAMED_INDIVIDUAL)
        xsd_string, xsd_integer = self._id(XSD_STRING), self._id(XSD_INTEGER)
        prop_id = {name: self._id(KMDS_NS + name) for name in (*_DATA_PROPS, *_LINK_PROPS)}
        class_id = {name: self._id(KMDS_NS + name) for name in _TYPE_CLASSES}

        removed_ids = [sid for iri in removed if (sid := self._graph._abbreviate(iri, False)) is not None]  # noqa: SLF001 - as above
        for chunk in in_chunks(removed_ids):
            marks = ",".join("?" * len(chunk))
            db.execute(
                f"DELETE FROM objs WHERE c=? AND (s IN ({marks}) OR o IN ({marks}))", (c, *chunk, *chunk)
            )
            db.execute(f"DELETE FROM datas WHERE c=? AND s IN ({marks})", (c, *chunk))

        wf_ids = {w.name: self._id(w.iri) for w in workflows}
        subjects = [*wf_ids.values(), *(self._id(o.iri) for o in observations)]
        managed_types = [named, *class_id.values()]
        link_ids = [prop_id[p] for p in _LINK_PROPS]
        data_ids = [prop_id[p] for p in _DATA_PROPS]
        for chunk in in_chunks(subjects):
            marks = ",".join("?" * len(chunk))
            db.execute(
                f"DELETE FROM objs WHERE c=? AND s IN ({marks}) AND (p IN ({placeholders(link_ids)}) "
                f"OR (p=? AND o IN ({placeholders(managed_types)})))",
                (c, *chunk, *link_ids, rdf_type, *managed_types),
            )
            db.execute(
                f"DELETE FROM datas WHERE c=? AND s IN ({marks}) AND p IN ({placeholders(data_ids)})",
                (c, *chunk, *data_ids),
            )

        objs: list[tuple[int, int, int, int]] = []
        datas: list[tuple[int, int, int, Any, int]] = []
        for wf in workflows:
            s = wf_ids[wf.name]
            objs.append((c, s, rdf_type, named))
            objs.append((c, s, rdf_type, class_id[wf.kind]))
            for dep in wf.depends_on:
                if dep in wf_ids:
                    objs.append((c, s, prop_id[DEPENDS_ON], wf_ids[dep]))
            if wf.description is not None:
                datas.append((c, s, prop_id[DESCRIPTION], wf.description, xsd_string))
        for obs in observations:
            s = self._id(obs.iri)
            objs.append((c, s, rdf_type, named))
            objs.append((c, s, rdf_type, class_id[CATEGORY_CLASS[obs.category]]))
            link = prop_id[CATEGORY_LINK_PROPERTY[obs.category]]
            for wf_name in obs.workflows:
                if wf_name in wf_ids:
                    objs.append((c, wf_ids[wf_name], link, s))
            datas.append((c, s, prop_id[FINDING], obs.finding, xsd_string))
            if obs.finding_seq is not None:
                datas.append((c, s, prop_id[FINDING_SEQUENCE], int(obs.finding_seq), xsd_integer))
            datas.append((c, s, prop_id[CATEGORY_TYPE_PROPERTY[obs.category]], obs.obs_type, xsd_string))
            if obs.intent is not None:
                datas.append((c, s, prop_id[INTENT], obs.intent, xsd_string))
        db.executemany("INSERT OR IGNORE INTO objs VALUES (?, ?, ?, ?)", objs)
        db.executemany("INSERT OR IGNORE INTO datas VALUES (?, ?, ?, ?, ?)", datas)

    def write(self, fileobj: IO[bytes]) -> None:
        """Serialise with owlready2's RDF/XML writer (the writer KMDS itself uses)."""
        self.onto.graph.save(fileobj, format="rdfxml")


# -- owlready2's parser errors -------------------------------------------------------------------
# On a parse error owlready2 first calls ``sys.excepthook`` with the underlying exception (which
# prints a traceback, or in the app shows an "unexpected error" next to the real message) and then
# raises a vague OwlReadyOntologyParsingError. While a KB is parsed, this thread's call is captured
# instead, and its text goes into the one KnowledgeBaseError the user sees.
_hook_lock = threading.Lock()
_hook_users = 0
_saved_hook: Any = None
_local = threading.local()


def _capturing_hook(etype: type[BaseException], value: BaseException, tb: Any) -> None:
    captured = getattr(_local, "captured", None)
    if captured is not None:
        captured.append(value)
        log.debug("owlready2 parser error: %s: %s", etype.__name__, value)
        return
    (_saved_hook or sys.__excepthook__)(etype, value, tb)


@contextlib.contextmanager
def _parser_errors_captured() -> Iterator[list[BaseException]]:
    """Collect what the parser hands to ``sys.excepthook`` in this thread (other threads unaffected)."""
    global _hook_users, _saved_hook
    captured: list[BaseException] = []
    with _hook_lock:
        if _hook_users == 0:
            _saved_hook = sys.excepthook
            sys.excepthook = _capturing_hook
        _hook_users += 1
    _local.captured = captured
    try:
        yield captured
    finally:
        _local.captured = None
        with _hook_lock:
            _hook_users -= 1
            if _hook_users == 0:
                if sys.excepthook is _capturing_hook:  # never undo a hook someone set meanwhile
                    sys.excepthook = _saved_hook
                _saved_hook = None


def _parse_problem(exc: BaseException, swallowed: Sequence[BaseException]) -> str:
    """``not valid RDF/XML (line 3, column 12: <what the parser found>)``."""
    where = _WHERE.search(str(exc))
    root: BaseException | None = swallowed[0] if swallowed else None
    while root is not None and (root.__cause__ or root.__context__) is not None:
        root = root.__cause__ or root.__context__
    cause = str(root) if root is not None and not _WHERE.search(str(root)) else ""
    detail = ": ".join(part for part in (where.group() if where else "", cause) if part)
    return f"not valid RDF/XML ({detail or 'the parser gave no detail'})"


def placeholders(items: Sequence[Any]) -> str:
    """``?,?,…`` for an ``IN (…)`` of ``items``."""
    return ",".join("?" * len(items))


def _uses_any(db: Any, c: int, kmds_ids: set[int]) -> bool:
    """True if any triple of the file has a KMDS term as subject, predicate or object."""
    ids = list(kmds_ids)
    for chunk in in_chunks(ids):
        marks = ",".join("?" * len(chunk))
        row = db.execute(
            f"SELECT 1 FROM objs WHERE c=? AND (s IN ({marks}) OR p IN ({marks}) OR o IN ({marks})) LIMIT 1",
            (c, *chunk, *chunk, *chunk),
        ).fetchone()
        if row:
            return True
        row = db.execute(
            f"SELECT 1 FROM datas WHERE c=? AND (s IN ({marks}) OR p IN ({marks})) LIMIT 1",
            (c, *chunk, *chunk),
        ).fetchone()
        if row:
            return True
    return False


def _unkept_notes(conflicting: dict[int, set[str]], values: dict[int, dict[str, Any]],
                  obs_kind: dict[int, str], iri_of: dict[int, str]) -> list[str]:
    """Notes for what a save would not keep as the file has it, so nothing is lost unannounced.

    A save writes one value per field, from the records; the file can hold more (an IRI defined
    twice with different values) or other shapes (a finding sequence written as text). Why notes at
    load rather than at save: the user sees them before editing, in ``kb show`` and in the window.
    """
    notes: list[str] = []
    if conflicting:
        names = [local_name(iri_of[s]) for s in conflicting if s in iri_of]
        fields = sorted({f for found in conflicting.values() for f in found})
        notes.append(
            f"{len(conflicting)} individual(s) are defined more than once with different values "
            f"({_few(names)}; fields: {', '.join(fields)}): the first value of each field is shown, "
            "and saving keeps only that one"
        )
    as_text = [s for s in obs_kind if isinstance(values.get(s, {}).get(FINDING_SEQUENCE), str)]
    numeric = [s for s in as_text if _as_int(values[s][FINDING_SEQUENCE]) is not None]
    words = [s for s in as_text if s not in numeric]
    if numeric:
        notes.append(
            f"{len(numeric)} finding sequence(s) are written as text, not as integers "
            f"({_few([local_name(iri_of[s]) for s in numeric])}): read as numbers, and saving writes "
            "them as integers"
        )
    if words:
        shown = _few([f"{local_name(iri_of[s])}: {values[s][FINDING_SEQUENCE]!r}" for s in words])
        notes.append(
            f"{len(words)} finding sequence(s) are not numbers ({shown}): shown without a sequence "
            "number, and saving drops them unless a number is entered"
        )
    return notes


def _few(items: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(str(i)[:80] for i in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _as_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        try:
            number = int(float(value))
        except (TypeError, ValueError, OverflowError):  # "1e400", INF, 5,000 digits
            return None
    return number if -MAX_INT <= number <= MAX_INT else None


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value)
    return text if text.strip() else None
