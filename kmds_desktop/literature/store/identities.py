"""Look-ups the search workbench needs from the literature database, by identity rather than by text.

Why a module of its own: the history keeps documents by internal id *and* by source + external id
(PMID, SciFact or CF id), the known-papers check finds papers by PMID, DOI, source id or title, and
explaining a miss needs the lexemes PostgreSQL indexed for a document. All statements are constant
text with bound values; they run through the database's own locked, cancellable runner (``fetch_all``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

_BATCH = 1000
_WORD = re.compile(r"[^\W_][\w'-]*", re.UNICODE)
_OPERATOR_WORDS = {"and", "or", "not"}
_PREFIX = re.compile(r"([^\W_][\w'-]*):\*", re.UNICODE)


@dataclass(frozen=True)
class DocumentIdentity:
    """Who a document is: internal id, source name, external id, DOI and title."""

    doc_id: int
    source: str
    external_id: str
    doi: str | None
    title: str

    @property
    def pmid(self) -> str | None:
        return self.external_id if self.source.strip().lower() == "pubmed" else None

    def label(self) -> str:
        """A reviewer-facing id: ``PMID 123``, ``doi:10...`` or ``SciFact scifact:42``."""
        if self.pmid:
            return f"PMID {self.pmid}"
        return f"{self.source} {self.external_id}"


def _rows(db: Any, sql: str, params: Sequence[Any] | dict[str, Any]) -> list[tuple[Any, ...]]:
    return db.fetch_all(sql, params)


_IDENTITY_SQL = ("SELECT d.id, s.name, d.external_id, d.doi, coalesce(d.title, '') FROM document d "
                 "JOIN sources s ON s.id = d.source_id ")


def document_identities(db: Any, doc_ids: Iterable[int]) -> dict[int, DocumentIdentity]:
    """Identity of each existing document in ``doc_ids`` (batched; unknown ids are left out)."""
    ids = sorted({int(i) for i in doc_ids})
    out: dict[int, DocumentIdentity] = {}
    for start in range(0, len(ids), _BATCH):
        chunk = ids[start:start + _BATCH]
        for r in _rows(db, _IDENTITY_SQL + "WHERE d.id = ANY(%s)", (chunk,)):
            out[int(r[0])] = DocumentIdentity(int(r[0]), str(r[1]), str(r[2]), r[3], str(r[4]))
    return out


def documents_by_key(db: Any, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """Internal id of each (source name, external id) present today."""
    pairs = sorted(set(keys))
    out: dict[tuple[str, str], int] = {}
    for start in range(0, len(pairs), _BATCH):
        chunk = pairs[start:start + _BATCH]
        rows = _rows(db, "SELECT d.id, s.name, d.external_id FROM document d JOIN sources s "
                         "ON s.id = d.source_id JOIN unnest(%s::text[], %s::text[]) AS k(source, ext) "
                         "ON s.name = k.source AND d.external_id = k.ext",
                     ([p[0] for p in chunk], [p[1] for p in chunk]))
        for doc_id, source, ext in rows:
            out[(str(source), str(ext))] = int(doc_id)
    return out


def normalize_title(title: str) -> str:
    """Lower-case letters and digits only: how a title from a reference manager is compared."""
    return re.sub(r"[\W_]+", "", title.lower())


def find_known(db: Any, *, pmids: Sequence[str] = (), dois: Sequence[str] = (),
               external_ids: Sequence[str] = (), titles: Sequence[str] = ()) -> list[DocumentIdentity]:
    """Documents matching any PMID, DOI (case-insensitive), external id (any source) or normalized title."""
    found: dict[int, DocumentIdentity] = {}

    def add(rows: list[tuple[Any, ...]]) -> None:
        for r in rows:
            found[int(r[0])] = DocumentIdentity(int(r[0]), str(r[1]), str(r[2]), r[3], str(r[4]))

    if pmids:
        add(_rows(db, _IDENTITY_SQL + "WHERE lower(s.name) = 'pubmed' AND d.external_id = ANY(%s)",
                  (list(pmids),)))
    if external_ids:
        add(_rows(db, _IDENTITY_SQL + "WHERE d.external_id = ANY(%s)", (list(external_ids),)))
    if dois:
        add(_rows(db, _IDENTITY_SQL + "WHERE lower(d.doi) = ANY(%s)", ([d.lower() for d in dois],)))
    if titles:
        add(_rows(db, _IDENTITY_SQL + "WHERE lower(regexp_replace(coalesce(d.title, ''), '[^[:alnum:]]+', "
                  "'', 'g')) = ANY(%s)", ([normalize_title(t) for t in titles],)))
    return list(found.values())


def query_words(text: str) -> list[str]:
    """The words of a query as typed (operators, quotes and prefix marks dropped), in order, once each."""
    seen: list[str] = []
    for word in _WORD.findall(text or ""):
        word = word.strip("'-")
        if word and word.lower() not in _OPERATOR_WORDS and word.lower() not in (w.lower() for w in seen):
            seen.append(word)
    return seen


@dataclass
class RowMissReason:
    """Why one row did not find one document."""

    position: int
    text: str
    matches_query: bool  # the document matches the row's query but ranked below the row's cut-off
    missing_words: list[str]  # words of the row the document does not contain (stemmed comparison)


def explain_misses(db: Any, doc_id: int, rows: Sequence[tuple[int, str]]) -> list[RowMissReason]:
    """For each (position, query text) row: does the document match it, and which of its words it lacks.

    Words are compared as PostgreSQL's English configuration stems them (``mucus`` and ``mucous`` may
    differ, ``fibrosis`` and ``fibroses`` do not); stop words are never "missing".
    """
    lexemes_row = _rows(db, "SELECT array(SELECT lexeme FROM unnest(search_vector)) FROM document "
                            "WHERE id = %s", (int(doc_id),))
    doc_lexemes = set(lexemes_row[0][0] or []) if lexemes_row else set()
    reasons: list[RowMissReason] = []
    for position, text in rows:
        words = query_words(text)
        matches = False
        try:
            found = _rows(db, "SELECT search_vector @@ to_tsquery('english', %s) FROM document WHERE id = %s",
                          (text, int(doc_id)))
            matches = bool(found and found[0][0])
        except Exception:  # noqa: BLE001 - an invalid row matches nothing; the words still explain it
            matches = False
        prefixes = {w.lower() for w in _PREFIX.findall(text or "")}
        missing: list[str] = []
        if words:
            stems = _rows(db, "SELECT w, array(SELECT lexeme FROM unnest(to_tsvector('english', w))) "
                              "FROM unnest(%s::text[]) AS w", (words,))
            for word, lexemes in stems:
                lexemes = list(lexemes or [])
                prefix = str(word).lower() in prefixes
                if lexemes and not all(_has_lexeme(doc_lexemes, lex, prefix) for lex in lexemes):
                    missing.append(str(word))
        reasons.append(RowMissReason(position, text, matches, missing))
    return reasons


def _has_lexeme(doc_lexemes: set[str], lexeme: str, prefix: bool) -> bool:
    if lexeme in doc_lexemes:
        return True
    # A prefix query ('immun:*') matches any lexeme starting with the stem.
    return prefix and any(d.startswith(lexeme) for d in doc_lexemes)
