"""Look-ups the search workbench needs from the literature database, by identity rather than by text.

Why a module of its own: the history keeps documents by internal id *and* by source + external id
(PMID, SciFact or CF id), the known-papers check finds papers by PMID, DOI, source id or title, and
explaining a miss needs the lexemes PostgreSQL indexed for a document. All statements are constant
text with bound values; they run through the database's own locked, cancellable runner (``fetch_all``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
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
    #: words of the row the document writes in another form ('CF as "cystic fibrosis"'): not missing,
    #: yet a row with one form only does not find it
    written_otherwise: list[str] = field(default_factory=list)


def explain_misses(db: Any, doc_id: int, rows: Sequence[tuple[int, str]]) -> list[RowMissReason]:
    """For each (position, query text) row: does the document match it, and which of its words it lacks.

    Words are compared as PostgreSQL's English configuration stems them (``mucus`` and ``mucous`` may
    differ, ``fibrosis`` and ``fibroses`` do not); stop words are never "missing". The query's structure
    counts (:func:`missing_words`): a word is missing only when no alternative OR'd with it is in the
    document, and an abbreviation is not missing from a paper that spells it out ("CF" and "cystic
    fibrosis"), nor the spelled-out words from one that uses the abbreviation.
    """
    lexemes_row = _rows(db, "SELECT array(SELECT lexeme FROM unnest(search_vector)) FROM document "
                            "WHERE id = %s", (int(doc_id),))
    doc_lexemes = set(lexemes_row[0][0] or []) if lexemes_row else set()
    text_row = _rows(db, "SELECT coalesce(title, '') || ' ' || coalesce(abstract, '') FROM document "
                         "WHERE id = %s", (int(doc_id),))
    doc_words = _TEXT_WORD.findall(str(text_row[0][0] or "")) if text_row else []
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
        present: dict[str, bool] = {}
        if words:
            stems = _rows(db, "SELECT w, array(SELECT lexeme FROM unnest(to_tsvector('english', w))) "
                              "FROM unnest(%s::text[]) AS w", (words,))
            for word, lexemes in stems:
                lexemes = list(lexemes or [])
                prefix = str(word).lower() in prefixes
                present[str(word).lower()] = not lexemes or all(
                    _has_lexeme(doc_lexemes, lex, prefix) for lex in lexemes)
        otherwise: list[str] = []
        missing = missing_words(text, words, present, doc_lexemes, doc_words, otherwise)
        reasons.append(RowMissReason(position, text, matches, missing, otherwise))
    return reasons


#: A word of a document's text, for spelling out abbreviations ("non-small cell" is three words).
_TEXT_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
#: An abbreviation as a query writes it: capitals (digits after the first letter allowed), 2 to 8.
_ABBREVIATION = re.compile(r"^[A-Z][A-Z0-9]{1,7}$")
#: Words an abbreviation's long form may have that its letters skip ("quality of life" is also QL).
_SKIPPED_IN_LONG_FORMS = frozenset({"of", "and", "the", "in", "for", "to", "with", "on", "by", "a", "an"})
_TOKEN = re.compile(r"\s*(<->|<\d+>|[&|!()]|[^\s&|!()<>]+)")


def missing_words(text: str, words: Sequence[str], present: dict[str, bool], doc_lexemes: set[str],
                  doc_words: Sequence[str], written_otherwise: list[str] | None = None) -> list[str]:
    """The words of query ``text`` whose absence kept the document out, in query order.

    ``present`` says for each word (lower case) whether the document has it. The query's operators
    count: an OR group is missing only when none of its alternatives is present (a paper with "cystic
    fibrosis" does not lack "CF" in ``(cystic <-> fibrosis | CF)``); what a NOT excludes is never
    missing. An abbreviation ("CF") is present when the document spells it out (consecutive words with
    its letters: "cystic fibrosis"), and consecutive words of a phrase or an AND ("cystic <-> fibrosis")
    are present when the document uses their abbreviation ("CF"); each such form is added to
    ``written_otherwise`` ('CF as "cystic fibrosis"'). A query that cannot be parsed is read as its
    words alone.
    """
    otherwise = written_otherwise if written_otherwise is not None else []

    def has(word: str) -> bool:
        if present.get(word.lower(), True):
            return True
        long_form = _spelled_out(word, doc_words) if _ABBREVIATION.match(word) else ""
        if long_form:
            otherwise.append(f'{word} as "{long_form}"')
        return bool(long_form)

    tree = _parse_query(text)
    if tree is None:
        found = [w for w in words if not has(w)]
    else:
        _ok, found = _missing_in(tree, has, doc_lexemes, otherwise)
    otherwise[:] = list(dict.fromkeys(otherwise))
    out: list[str] = []
    for word in found:
        if word.lower() not in (w.lower() for w in out):
            out.append(word)
    return out


def _spelled_out(abbreviation: str, doc_words: Sequence[str]) -> str:
    """The document's words that spell ``abbreviation`` out ("" when none): its letters begin
    consecutive words ("CF": "cystic fibrosis"), function words between them allowed ("QL": "quality
    of life")."""
    letters = [c for c in abbreviation.lower() if c.isalpha()]
    if len(letters) < 2:
        return ""
    lowered = [w.lower() for w in doc_words]
    content = [w for w in lowered if w not in _SKIPPED_IN_LONG_FORMS]
    for seq in (lowered, content):
        for i in range(len(seq) - len(letters) + 1):
            if all(seq[i + k][0] == letters[k] for k in range(len(letters))):
                return " ".join(seq[i:i + len(letters)])
    return ""


# A parsed query: ("word", text) | ("not", node) | ("and" | "or" | "phrase", [nodes]).
_Node = tuple[str, Any]


def _parse_query(text: str) -> _Node | None:
    """``text`` as a tsquery tree (``!`` binds tightest, then ``<->``, ``&``, ``|``), or None when it is
    not one (an invalid row is then explained by its words alone)."""
    tokens: list[str] = []
    pos = 0
    text = text or ""
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos:].strip():
                return None
            break
        tokens.append(m.group(1))
        pos = m.end()
    tokens = [t for t in tokens if t.strip()]
    at = 0

    def peek() -> str | None:
        return tokens[at] if at < len(tokens) else None

    def take() -> str:
        nonlocal at
        at += 1
        return tokens[at - 1]

    def parse_or() -> _Node:
        items = [parse_and()]
        while peek() == "|":
            take()
            items.append(parse_and())
        return items[0] if len(items) == 1 else ("or", items)

    def parse_and() -> _Node:
        items = [parse_phrase()]
        while peek() == "&":
            take()
            items.append(parse_phrase())
        return items[0] if len(items) == 1 else ("and", items)

    def parse_phrase() -> _Node:
        items = [parse_not()]
        while (tok := peek()) is not None and tok.startswith("<") and tok.endswith(">"):
            take()
            items.append(parse_not())
        return items[0] if len(items) == 1 else ("phrase", items)

    def parse_not() -> _Node:
        if peek() == "!":
            take()
            return ("not", parse_not())
        return primary()

    def primary() -> _Node:
        tok = peek()
        if tok is None or tok in {"|", "&", ")"} or tok.startswith("<"):
            raise ValueError("an operand is missing")
        take()
        if tok == "(":
            node = parse_or()
            if peek() != ")":
                raise ValueError("a parenthesis is not closed")
            take()
            return node
        word = _WORD.search(tok)
        if word is None:
            raise ValueError(f"not a word: {tok}")
        return ("word", word.group(0).strip("'-"))

    try:
        tree = parse_or()
    except ValueError:
        return None
    return tree if at == len(tokens) else None


def _missing_in(node: _Node, has: Any, doc_lexemes: set[str], otherwise: list[str]) -> tuple[bool, list[str]]:
    """``(present, missing words)`` of one node of a query tree (see :func:`missing_words`)."""
    kind, value = node
    if kind == "word":
        if value.lower() in _OPERATOR_WORDS or has(value):
            return True, []
        return False, [value]
    if kind == "not":
        return True, []  # what a NOT excludes is never what a paper lacks
    results = [_missing_in(child, has, doc_lexemes, otherwise) for child in value]
    if kind == "or":
        if any(ok for ok, _ in results):
            return True, []
        return False, [w for _, missing in results for w in missing]
    # "and" / "phrase": every part; a run of words the document abbreviates counts as present
    unmet = {i for i, (ok, _) in enumerate(results) if not ok}
    covered = _abbreviated_runs(value, doc_lexemes, otherwise, unmet) if unmet else set()
    missing = [w for i, (ok, ws) in enumerate(results) if not ok and i not in covered for w in ws]
    return not missing, missing


def _abbreviated_runs(children: Sequence[_Node], doc_lexemes: set[str], otherwise: list[str],
                      unmet: set[int]) -> set[int]:
    """Positions of consecutive word children (two or more, one of them ``unmet``) whose initials the
    document has as a word: "cystic <-> fibrosis" in a paper that writes "CF"."""
    covered: set[int] = set()
    n = len(children)
    for i in range(n):
        for j in range(i + 2, min(n, i + 8) + 1):
            run = children[i:j]
            if not all(kind == "word" for kind, _ in run):
                break
            initials = "".join(str(word)[0].lower() for _, word in run)
            if initials in doc_lexemes and unmet & set(range(i, j)):
                covered.update(range(i, j))
                otherwise.append(f'"{" ".join(str(word) for _, word in run)}" as "{initials.upper()}"')
    return covered


def _has_lexeme(doc_lexemes: set[str], lexeme: str, prefix: bool) -> bool:
    if lexeme in doc_lexemes:
        return True
    # A prefix query ('immun:*') matches any lexeme starting with the stem.
    return prefix and any(d.startswith(lexeme) for d in doc_lexemes)
