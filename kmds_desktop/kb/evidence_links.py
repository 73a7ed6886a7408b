"""Evidence links in a knowledge base: an observation tied to the papers and pages that support or
dispute it, typed with CiTO, the paper a bibo/fabio document with its DOI.

Why this shape, in the file KMDS reads:

- **KMDS's terms are untouched.** Nothing here adds a class or property to the KMDS namespace or
  changes an observation's KMDS triples; every new term lives in the app's own namespace
  (:data:`EVIDENCE_NS`) or in the published vocabularies (CiTO, bibo, fabio, Dublin Core). The
  ``kmds`` package reads observations by its own class and property names, so it reads them exactly
  as before (a test loads a linked file with kmds 0.4.2 and compares).
- **CiTO says what the link means**, in CiTO's own direction (citing entity first):
  ``<paper> cito:supports <observation>`` and ``<paper> cito:disputes <observation>`` (the paper's
  findings support / dispute the observation's), ``<observation> cito:citesAsEvidence <paper>`` (the
  observation rests on the paper). A reader that knows only CiTO sees the relation.
- **The page and the quote sit on a link node** (``ev:EvidenceLink``), because a triple cannot carry
  them: the node names the observation, the paper, the CiTO relation, the page(s), the quote and
  whether the quote was verified on its page. The node's IRI is a hash of what it says, so linking
  the same evidence twice changes nothing.
- **The paper is ``https://doi.org/<doi>``**, typed ``bibo:AcademicArticle`` and ``fabio:ResearchPaper``
  with ``bibo:doi``: the DOI resolver's IRI is the one every other graph uses for it.

The triples go into the KB's own owlready2 world; :func:`~kmds_desktop.kb.save_kb` keeps every
triple it does not manage, so the links survive edits and saves like any other content.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kmds_desktop.kb.model import KnowledgeBaseError
from kmds_desktop.kb.schema import (
    DATATYPE_PROPERTY,
    NAMED_INDIVIDUAL,
    OBJECT_PROPERTY,
    OWL_CLASS,
    RDF_TYPE,
    XSD_INTEGER,
    XSD_STRING,
)
from kmds_desktop.kb.store import KBStore, in_chunks, placeholders

if TYPE_CHECKING:  # pragma: no cover
    from kmds_desktop.kb.knowledge_base import KnowledgeBase

#: The app's own namespace for evidence links (stable: files written today are read by later versions).
EVIDENCE_NS = "https://kmds-desktop.example/evidence#"
CITO_NS = "http://purl.org/spar/cito/"
BIBO_NS = "http://purl.org/ontology/bibo/"
FABIO_NS = "http://purl.org/spar/fabio/"
DCTERMS_NS = "http://purl.org/dc/terms/"
DOI_IRI = "https://doi.org/"

#: The relations a link may have (CiTO property local names).
RELATIONS: tuple[str, ...] = ("supports", "disputes", "citesAsEvidence")
#: Relations whose CiTO triple runs from the paper to the observation (the rest run the other way).
_PAPER_CITES = frozenset({"supports", "disputes"})

LINK_CLASS = EVIDENCE_NS + "EvidenceLink"
P_OBSERVATION = EVIDENCE_NS + "observation"
P_PAPER = EVIDENCE_NS + "paper"
P_RELATION = EVIDENCE_NS + "relation"
P_PAGE = EVIDENCE_NS + "page"
P_QUOTE = EVIDENCE_NS + "quote"
P_QUOTE_STATUS = EVIDENCE_NS + "quoteStatus"
P_CREATED = DCTERMS_NS + "created"
P_TITLE = DCTERMS_NS + "title"
P_DOI = BIBO_NS + "doi"
PAPER_CLASSES = (BIBO_NS + "AcademicArticle", FABIO_NS + "ResearchPaper")

#: ``quoteStatus`` values: checked on the page in the full-text store, or not checkable there.
VERIFIED = "verified"
NOT_CHECKED = "not checked"

_DOI = re.compile(r"^10\.\d{4,9}/\S+$")


@dataclass(frozen=True)
class EvidenceLink:
    """One link as read back from the file."""

    iri: str
    observation: str
    relation: str
    doi: str
    pages: tuple[int, ...]
    quote: str | None
    quote_status: str | None
    title: str | None
    created: str | None

    @property
    def page_text(self) -> str:
        if not self.pages:
            return ""
        return f"p. {self.pages[0]}" if len(self.pages) == 1 else f"pp. {self.pages[0]}-{self.pages[-1]}"

    def describe(self) -> str:
        """One line for the KB browser and the CLI: ``supports: 10.x/y, p. 7 — "quote"``."""
        where = f"{self.doi}, {self.page_text}" if self.pages else self.doi
        quote = f" \u2014 \u201c{self.quote}\u201d" if self.quote else ""
        return f"{self.relation}: {where}{quote}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["pages"] = list(self.pages)
        return data


def normalise_doi(doi: str) -> str:
    """A bare, lower-case DOI from ``10.x/y``, ``doi:10.x/y`` or a doi.org URL; ValueError otherwise."""
    text = (doi or "").strip()
    text = re.sub(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", "", text, flags=re.IGNORECASE)
    if not _DOI.match(text):
        raise ValueError(f"{doi!r} is not a DOI; give it as 10.NNNN/suffix (e.g. 10.1007/s00125-024-06103-w)")
    return text.lower()


def _check_relation(relation: str) -> str:
    if relation not in RELATIONS:
        raise ValueError(f"unknown relation {relation!r}; use one of {', '.join(RELATIONS)}")
    return relation


def _check_pages(pages: Iterable[int]) -> tuple[int, ...]:
    out = tuple(sorted({int(p) for p in pages}))
    if any(p < 1 for p in out):
        raise ValueError("page numbers start at 1")
    return out


def link_iri(observation: str, relation: str, doi: str, pages: Sequence[int], quote: str | None) -> str:
    """The link node's IRI: a hash of what it says, so the same evidence linked twice is one link."""
    key = "\x1f".join([observation, relation, doi, ",".join(map(str, pages)), quote or ""])
    return f"{EVIDENCE_NS}link_{hashlib.sha1(key.encode('utf-8'), usedforsecurity=False).hexdigest()[:16]}"


def _declarations() -> list[tuple[str, str, str]]:
    """The terms the links use, declared so OWL readers (owlready2, KMDS) see properties, not guesses."""
    out = [(LINK_CLASS, RDF_TYPE, OWL_CLASS), *((c, RDF_TYPE, OWL_CLASS) for c in PAPER_CLASSES)]
    out += [(p, RDF_TYPE, OBJECT_PROPERTY) for p in (P_OBSERVATION, P_PAPER, P_RELATION)]
    out += [(CITO_NS + r, RDF_TYPE, OBJECT_PROPERTY) for r in RELATIONS]
    out += [(p, RDF_TYPE, DATATYPE_PROPERTY)
            for p in (P_PAGE, P_QUOTE, P_QUOTE_STATUS, P_CREATED, P_TITLE, P_DOI)]
    return out


def add_evidence_link(
    kb: KnowledgeBase,
    observation: str,
    doi: str,
    relation: str,
    pages: Iterable[int] = (),
    quote: str | None = None,
    *,
    quote_status: str | None = None,
    title: str | None = None,
) -> EvidenceLink:
    """Link ``observation`` (IRI or name) to the paper ``doi`` with a CiTO ``relation``, the page(s)
    and the quote; marks the KB changed (saved by :func:`~kmds_desktop.kb.save_kb`)."""
    obs = kb.observation(observation)
    if obs is None:
        raise KnowledgeBaseError(f"no observation {observation!r}; `kmds-desktop kb show FILE` lists them",
                                 path=kb.path)
    relation = _check_relation(relation)
    doi = normalise_doi(doi)
    page_list = _check_pages(pages)
    quote = " ".join(quote.split()) if quote and quote.strip() else None
    iri = link_iri(obs.iri, relation, doi, page_list, quote)
    paper = DOI_IRI + doi
    created = datetime.now(UTC).replace(microsecond=0).isoformat()
    with kb._lock:  # noqa: SLF001 - the KB's own lock and world: this module extends the KB's store
        if kb._store is None:  # noqa: SLF001
            kb._store = KBStore.empty()  # noqa: SLF001
        store = kb._store  # noqa: SLF001
        db, c, ids = store._db, store._c, store._id  # noqa: SLF001
        existing = {link.iri for link in _read(store)}
        store._add_objs(_declarations())  # noqa: SLF001
        triples = [(paper, RDF_TYPE, NAMED_INDIVIDUAL), *((paper, RDF_TYPE, cls) for cls in PAPER_CLASSES),
                   (paper, CITO_NS + relation, obs.iri) if relation in _PAPER_CITES
                   else (obs.iri, CITO_NS + relation, paper)]
        datas: list[tuple[str, str, Any, str]] = [(paper, P_DOI, doi, XSD_STRING)]
        if title:
            datas.append((paper, P_TITLE, " ".join(title.split()), XSD_STRING))
        if iri not in existing:
            triples += [(iri, RDF_TYPE, NAMED_INDIVIDUAL), (iri, RDF_TYPE, LINK_CLASS),
                        (iri, P_OBSERVATION, obs.iri), (iri, P_PAPER, paper),
                        (iri, P_RELATION, CITO_NS + relation)]
            datas += [(iri, P_PAGE, page, XSD_INTEGER) for page in page_list]
            datas.append((iri, P_CREATED, created, XSD_STRING))
            if quote:
                datas.append((iri, P_QUOTE, quote, XSD_STRING))
                datas.append((iri, P_QUOTE_STATUS, quote_status or NOT_CHECKED, XSD_STRING))
        store._add_objs(triples)  # noqa: SLF001
        existing_titles = {s for s, in db.execute(
            "SELECT s FROM datas WHERE c=? AND p=?", (c, ids(P_TITLE)))}
        rows = [(c, ids(s), ids(p), o, ids(d)) for s, p, o, d in datas
                if not (p == P_TITLE and ids(s) in existing_titles)]
        db.executemany("INSERT OR IGNORE INTO datas VALUES (?, ?, ?, ?, ?)", rows)
        if iri not in existing:
            kb._changed()  # noqa: SLF001
    return next(link for link in _read(store) if link.iri == iri)


def remove_evidence_link(kb: KnowledgeBase, iri: str) -> bool:
    """Remove one link node, and its CiTO triple when no other link states the same relation."""
    store = kb._store  # noqa: SLF001
    if store is None:
        return False
    with kb._lock:  # noqa: SLF001
        links = _read(store)
        gone = next((link for link in links if link.iri == iri), None)
        if gone is None:
            return False
        db, c = store._db, store._c  # noqa: SLF001
        sid = store._id(iri)  # noqa: SLF001
        db.execute("DELETE FROM objs WHERE c=? AND s=?", (c, sid))
        db.execute("DELETE FROM datas WHERE c=? AND s=?", (c, sid))
        if not any(link.iri != iri and (link.observation, link.doi, link.relation)
                   == (gone.observation, gone.doi, gone.relation) for link in links):
            paper = DOI_IRI + gone.doi
            s, o = (paper, gone.observation) if gone.relation in _PAPER_CITES else (gone.observation, paper)
            db.execute("DELETE FROM objs WHERE c=? AND s=? AND p=? AND o=?",
                       (c, store._id(s), store._id(CITO_NS + gone.relation), store._id(o)))  # noqa: SLF001
        kb._changed()  # noqa: SLF001
    return True


def evidence_links(kb: KnowledgeBase, observation: str | None = None) -> list[EvidenceLink]:
    """Every link in the KB (of one observation, IRI or name, when given), oldest first."""
    store = kb._store  # noqa: SLF001
    if store is None:
        return []
    with kb._lock:  # noqa: SLF001
        links = _read(store)
    if observation is not None:
        obs = kb.observation(observation)
        wanted = obs.iri if obs is not None else observation
        links = [link for link in links if link.observation == wanted]
    return links


def _read(store: Any) -> list[EvidenceLink]:
    """The link nodes in the store's world, assembled from two bulk queries."""
    graph, db, c = store._graph, store._db, store._c  # noqa: SLF001
    type_id = graph._abbreviate(RDF_TYPE, False)  # noqa: SLF001
    class_id = graph._abbreviate(LINK_CLASS, False)  # noqa: SLF001
    if type_id is None or class_id is None:
        return []
    nodes = [s for s, in db.execute("SELECT s FROM objs WHERE c=? AND p=? AND o=? ORDER BY rowid",
                                    (c, type_id, class_id))]
    if not nodes:
        return []
    iri_of: dict[int, str] = {}

    def iri(storid: int) -> str:
        if storid not in iri_of:
            row = db.execute("SELECT iri FROM resources WHERE storid=?", (storid,)).fetchone()
            iri_of[storid] = row[0] if row else ""
        return iri_of[storid]

    objs: dict[int, dict[str, str]] = defaultdict(dict)
    datas: dict[int, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for chunk in in_chunks(nodes):  # SQLite takes a bounded number of parameters per statement
        marks = placeholders(chunk)
        for s, p, o in db.execute(f"SELECT s, p, o FROM objs WHERE c=? AND s IN ({marks})", (c, *chunk)):
            objs[s][iri(p)] = iri(o)
        for s, p, o in db.execute(f"SELECT s, p, o FROM datas WHERE c=? AND s IN ({marks}) ORDER BY rowid",
                                  (c, *chunk)):
            datas[s][iri(p)].append(o)
    papers = {objs[n].get(P_PAPER, "") for n in nodes}
    paper_data: dict[str, dict[str, Any]] = defaultdict(dict)
    for paper in papers:
        pid = graph._abbreviate(paper, False) if paper else None  # noqa: SLF001
        if pid is None:
            continue
        for p, o in db.execute("SELECT p, o FROM datas WHERE c=? AND s=?", (c, pid)):
            paper_data[paper].setdefault(iri(p), o)
    out = []
    for node in nodes:
        fields, values = objs[node], datas[node]
        observation, paper = fields.get(P_OBSERVATION), fields.get(P_PAPER, "")
        relation = fields.get(P_RELATION, "")
        if not observation or not relation.startswith(CITO_NS):
            continue  # the observation was deleted, or the node is not one of ours: not shown
        info = paper_data.get(paper, {})
        doi = str(info.get(P_DOI) or paper.removeprefix(DOI_IRI))
        out.append(EvidenceLink(
            iri=iri(node), observation=observation, relation=relation[len(CITO_NS):], doi=doi,
            pages=tuple(sorted(page for p in values.get(P_PAGE, []) if (page := _page(p)) is not None)),
            quote=_first(values.get(P_QUOTE)), quote_status=_first(values.get(P_QUOTE_STATUS)),
            title=str(info[P_TITLE]) if info.get(P_TITLE) else None, created=_first(values.get(P_CREATED))))
    return out


def _page(value: Any) -> int | None:
    """A page number as a file holds it, or None for one that is not (a word, 1e400, a huge number)."""
    try:
        page = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return page if 0 < page < 1_000_000 else None


def _first(values: list[Any] | None) -> str | None:
    return str(values[0]) if values else None
