"""The top-k index: an embedded BM25 index (tantivy) beside the literature database.

Why: PostgreSQL ranks **every** match of a full-text row before it keeps the best 100, so a broad
row's cost grows with its matches (at 520,000 documents 210-690 ms for 28k-248k matches; tens of
seconds at PubMed size). tantivy keeps BM25's term statistics in the index and finds the best k with
block-max WAND, so the cost follows k and the rarest terms, not the number of matches
(``bench/literature_scale.py``). PostgreSQL stays the store and the judge of query syntax: the
index holds PostgreSQL's **own** lexemes at their own positions (read from ``search_vector``), and
a query is run only in the form PostgreSQL printed after stemming (``to_tsquery(...)::text``, see
:mod:`~kmds_desktop.literature.store.tsquery_tree`), so a row matches exactly the documents
``search_vector @@ to_tsquery('english', q)`` matches (``tests/test_topk_index.py`` checks that on
the shared corpora over generated queries).

What the index cannot run exactly it does not run: a phrase whose operand is a prefix, a NOT or a
weight-restricted term, ``<0>``, or a phrase over OR groups that expands to more than
:data:`MAX_PHRASE_ALTERNATIVES` phrases; :meth:`TopKIndex.translate` returns None and the row runs
in PostgreSQL as before.

Layout: ``id`` (the document id, fast field), ``body`` (one token per position: the lexeme there, or
:data:`GAP` where PostgreSQL left a stop word out, so ``<N>`` distances are PostgreSQL's), ``source``
and ``day`` (publication date as days since 1970) for the filters, ``tier1``..``tier4`` (layout 3:
the terms for which the document is in the term's impact tier, see :mod:`.topk_tiers`). Withdrawn
documents are not indexed (every full-text row leaves them out). ``state.json`` beside it says how
far a build got (resumable) and the transaction the build started from (the incremental refresh
reads only rows written after it).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kmds_desktop.literature.store import topk_tiers
from kmds_desktop.literature.store.topk_tiers import FRACTIONS, Tiers, tier_field
from kmds_desktop.literature.store.tsquery_tree import Node, Term, Tree, UnreadableQuery, read_tree

#: The token at a position that holds no lexeme (a stop word PostgreSQL dropped). Never a lexeme: the
#: English parser does not keep control characters, and no query can name it.
GAP = "\x1f"
#: A phrase over OR groups is run as the OR of its phrases up to this many; more runs in PostgreSQL.
MAX_PHRASE_ALTERNATIVES = 64
#: Nesting levels of AND/OR/NOT the index runs (with the title wrapper's two more); a deeper query
#: runs in PostgreSQL. tantivy searches nested boolean queries recursively: at 160 levels it overflowed
#: a 512 KB thread's stack (SIGSEGV, the app gone); 32 is far below that and above any real query.
MAX_QUERY_DEPTH = 32
#: PostgreSQL stores positions up to this value (later words share it); a document longer than that
#: keeps its lexemes, once, at this position (phrases there may differ from PostgreSQL's; abstracts
#: never get close).
MAX_POSITION = 16383
#: 3: the impact tiers' fields (see :mod:`.topk_tiers`). An index of layout 2 is still searched
#: exactly (without tiers) until it is rebuilt.
SCHEMA_VERSION = 3
_READABLE_SCHEMAS = (2, 3)
#: A query term found in the title adds its title BM25 times this to the score (matching is the
#: body's alone). Why: titles say what a paper is about; PostgreSQL's ranking weighs a title word
#: 2.5 times an abstract word (weights A 1.0, B 0.4). Chosen on SciFact *train* claims only.
TITLE_BOOST = 1.5
_EPOCH = dt.date(1970, 1, 1)
_LEXEME = re.compile(r"'((?:[^']|'')*)'(?::([0-9A-D,]+))?")
_REGEX_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$#&~<>\"@-])")


def body_tokens(tsvector_text: str) -> str:
    """The ``body`` text of a document from its ``search_vector::text``: the lexeme at each position,
    :data:`GAP` between, one token per position (a lexeme without positions goes once at the end)."""
    return document_fields(tsvector_text)[0]


def document_fields(tsvector_text: str) -> tuple[str, str]:
    """``(body, title)`` of a document from its ``search_vector::text``: ``body`` as
    :func:`body_tokens`; ``title`` the lexemes with a weight-A position (the title, where the
    vector was built with ``setweight(..., 'A')`` as the app's and BMLibrarian's are), for ranking."""
    by_position: dict[int, str] = {}
    unpositioned: list[str] = []
    title: list[str] = []
    for lexeme, positions in _LEXEME.findall(tsvector_text):
        if "''" in lexeme:
            lexeme = lexeme.replace("''", "'")
        if not positions:
            unpositioned.append(lexeme)
            continue
        in_title = False
        for item in positions.split(","):
            if item[-1] in "ABC":
                in_title = in_title or item[-1] == "A"
                item = item[:-1]
            number = int(item)
            if number not in by_position:
                by_position[number] = lexeme
            else:  # two lexemes at one position (the 16383 cap): keep both, the later one after
                unpositioned.append(lexeme)
        if in_title:
            title.append(lexeme)
    if not by_position:
        return " ".join(unpositioned), " ".join(title)
    get = by_position.get
    tokens = [get(p, GAP) for p in range(1, max(by_position) + 1)]
    if unpositioned:
        tokens.extend(unpositioned)
    return " ".join(tokens), " ".join(title)


def date_day(value: dt.date | None) -> int | None:
    return None if value is None else (value - _EPOCH).days


@dataclass
class BuildState:
    """How far a build got: the last id written and committed, whether it finished, the transaction
    it started from (rows written after it are the next refresh's)."""

    schema: int = SCHEMA_VERSION
    database: str = ""
    last_id: int = 0
    complete: bool = False
    start_xid: int = 0
    documents: int = 0
    #: The table's write counters when the index was last brought in step (see
    #: :func:`~.topk_build.write_mark`): a different value means rows were written since.
    write_mark: int = -1

    @classmethod
    def load(cls, path: Path) -> BuildState | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("schema") not in _READABLE_SCHEMAS:
            return None
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.__dict__), encoding="utf-8")
        os.replace(tmp, path)


@dataclass
class RowPlan:
    """A row as the index runs it: the exact query (filters applied), and for a broad AND of plain
    terms its terms outside any NOT and each AND operand's terms, which the impact tiers may
    restrict it by (see :mod:`.topk_tiers`)."""

    query: Any
    terms: tuple[str, ...] = ()
    operands: tuple[tuple[str, ...], ...] = ()
    #: AND operands that are a prefix (``'incl':*``): tantivy scores a prefix match as a constant, so
    #: they narrow the walk but do not take part in the restriction.
    prefixes: tuple[str, ...] = ()


class TopKIndex:
    """One tantivy index in ``folder`` (created 0700): add documents, run translated tsqueries."""

    def __init__(self, folder: Path) -> None:
        import tantivy  # why: tantivy loads on first use, not at start-up

        self._tantivy = tantivy
        self.folder = Path(folder)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        self.state_path = self.folder / "state.json"
        self.tiers_path = self.folder / "tiers.json"
        state = BuildState.load(self.state_path)
        if (self.folder / "tantivy").exists() and state is None:
            # an index of another layout (or a build that never saved its state): start again
            shutil.rmtree(self.folder / "tantivy", ignore_errors=True)
            self.state_path.unlink(missing_ok=True)
        self.layout = state.schema if state is not None else SCHEMA_VERSION
        self._open()
        self._writer: Any = None
        #: Whether this opening's document count was compared with the database's and agreed (see
        #: :func:`~.topk_build.in_step`).
        self.checked_against_database = False

    def _open(self) -> None:
        tantivy = self._tantivy
        builder = tantivy.SchemaBuilder()
        builder.add_unsigned_field("id", stored=True, indexed=True, fast=True)
        builder.add_text_field("body", stored=False, tokenizer_name="whitespace", index_option="position")
        builder.add_text_field("title", stored=False, tokenizer_name="whitespace", index_option="freq")
        builder.add_unsigned_field("source", indexed=True, fast=True)
        builder.add_integer_field("day", indexed=True, fast=True)
        if self.layout >= 3:
            for j in range(len(FRACTIONS)):
                builder.add_text_field(tier_field(j), stored=False, tokenizer_name="whitespace",
                                       index_option="basic")
        self.schema = builder.build()
        (self.folder / "tantivy").mkdir(mode=0o700, exist_ok=True)
        self.index = tantivy.Index(self.schema, path=str(self.folder / "tantivy"))
        self.tiers = Tiers.load(self.tiers_path) if self.layout >= 3 else None

    def set_tiers(self, tiers: Tiers) -> None:
        """Fix the impact tiers' thresholds (a build from nothing, before its first document)."""
        if self.layout < 3:
            return
        tiers.save(self.tiers_path)
        self.tiers = tiers

    # -- writing ----------------------------------------------------------------------------------

    def _open_writer(self) -> Any:
        if self._writer is None:
            self._writer = self.index.writer(heap_size=128_000_000, num_threads=1)
        return self._writer

    def add(self, rows: Iterable[tuple[int, str, int, dt.date | None]]) -> int:
        """Add ``(id, search_vector::text, source_id, publication_date)`` rows (not yet committed)."""
        tantivy = self._tantivy
        docs = []  # every row read before the writer gets one: a bad row adds nothing of its batch
        for doc_id, vector_text, source_id, published in rows:
            doc = tantivy.Document()
            doc.add_unsigned("id", int(doc_id))
            body, title = document_fields(vector_text)
            doc.add_text("body", body)
            if title:
                doc.add_text("title", title)
            if self.tiers is not None:
                for j, text in enumerate(self.tiers.fields(body, title)):
                    if text:
                        doc.add_text(tier_field(j), text)
            doc.add_unsigned("source", int(source_id))
            day = date_day(published)
            if day is not None:
                doc.add_integer("day", day)
            docs.append(doc)
        writer = self._open_writer()
        for doc in docs:
            writer.add_document(doc)
        return len(docs)

    def delete(self, ids: Iterable[int]) -> None:
        """Delete by id (by query: tantivy's delete-by-term does not match an unsigned field)."""
        wanted = [int(i) for i in ids]
        if not wanted:
            return
        writer = self._open_writer()
        for start in range(0, len(wanted), 10_000):
            chunk = wanted[start:start + 10_000]
            writer.delete_documents_by_query(self._tantivy.Query.term_set_query(self.schema, "id", chunk))

    def delete_ids_between(self, first: int, last: int) -> None:
        """Delete every document with an id from ``first`` to ``last`` (inclusive; not yet committed)."""
        tantivy = self._tantivy
        self._open_writer().delete_documents_by_query(tantivy.Query.range_query(
            self.schema, "id", tantivy.FieldType.Unsigned, int(first), int(last)))

    def commit(self, *, final: bool = True) -> None:
        """Make the added documents durable and searchable; ``final=False`` keeps the writer (and its
        background merges) for the next batch of a build."""
        if self._writer is not None:
            self._writer.commit()
            if final:
                self._writer.wait_merging_threads()
                self._writer = None
        self.index.reload()

    def rollback(self) -> None:
        """Drop what was added or deleted since the last commit (a batch that failed half-way must
        not be committed: its rows would be added again, twice, when the build goes on)."""
        if self._writer is not None:
            self._writer.rollback()
            self._writer.wait_merging_threads()
            self._writer = None

    def clear(self) -> None:
        """Start from nothing, in the current layout (an index of an older one gets the new one)."""
        if self._writer is not None:
            self.rollback()
        if self.layout != SCHEMA_VERSION:
            shutil.rmtree(self.folder / "tantivy", ignore_errors=True)
            self.layout = SCHEMA_VERSION
            self._open()
            self._stamp: int | None = None
        self.tiers_path.unlink(missing_ok=True)
        self.tiers = None
        writer = self._open_writer()
        writer.delete_all_documents()
        self.commit()

    # -- reading ----------------------------------------------------------------------------------

    def state(self) -> BuildState | None:
        """The build state, read again only when ``state.json`` changed (every search asks for it)."""
        try:
            stamp = os.stat(self.state_path).st_mtime_ns
        except OSError:
            return None
        cached = getattr(self, "_state_cache", None)
        if cached is None or cached[0] != stamp:
            cached = (stamp, BuildState.load(self.state_path))
            self._state_cache = cached
        return cached[1]

    def _searcher(self) -> Any:
        """A searcher over the latest commit, also one another process made (a CLI refresh, another
        window's import): the reader reloads when the index's ``meta.json`` changed (one ``stat``)."""
        try:
            stamp = os.stat(self.folder / "tantivy" / "meta.json").st_mtime_ns
        except OSError:
            stamp = 0
        if stamp != getattr(self, "_stamp", None):
            self.index.reload()
            self._stamp = stamp
            # a rebuild elsewhere took new thresholds: restrict by the ones its documents were tiered by
            # (read again only when tiers.json changed, not at every commit of a build or refresh)
            if self.layout >= 3:
                try:
                    tiers_stamp = os.stat(self.tiers_path).st_mtime_ns
                except OSError:
                    tiers_stamp = None
                if tiers_stamp != getattr(self, "_tiers_stamp", None):
                    self.tiers = Tiers.load(self.tiers_path)
                    self._tiers_stamp = tiers_stamp
        return self.index.searcher()

    def translate(self, printed: str) -> Any | None:
        """The tantivy query of a printed tsquery, or None when it cannot be run exactly here.

        ``printed`` is PostgreSQL's ``to_tsquery(...)::text``; the empty string (a query of stop words
        only) translates to a query matching nothing, as in PostgreSQL."""
        plan = self.plan(printed)
        return None if plan is None else plan.query

    def plan(self, printed: str) -> RowPlan | None:
        """:meth:`translate`'s query with what the impact tiers need (a broad AND's terms)."""
        try:
            tree = read_tree(printed)
        except UnreadableQuery:
            return None
        query = self._tantivy.Query
        if tree is None:
            return RowPlan(query.boolean_query([(self._tantivy.Occur.MustNot, query.all_query())]))
        built = self._tree_query(tree)
        if built is None:
            return None
        shape = _and_operands(tree)
        if shape is None:
            return RowPlan(built)
        operands, prefixes = shape
        terms = tuple(dict.fromkeys(t for group in operands for t in group))
        return RowPlan(built, terms, operands, prefixes)

    def _tree_query(self, tree: Tree) -> Any | None:
        """The exact tantivy query of a read tree (title scores beside the body's), or None."""
        query = self._tantivy.Query
        occur = self._tantivy.Occur
        flat = _flat_disjunction(tree)
        if flat is not None:
            # One flat OR of term queries (the title's terms beside the body's, unboosted: a boost
            # would hide them from block-max WAND, which skips the blocks that cannot reach the top k).
            # A title term matches only where the body has it too, so the matches are the body's.
            clauses = [query.term_query(self.schema, "body", t) for t in flat]
            if TITLE_BOOST > 0:
                clauses += [query.term_query(self.schema, "title", t) for t in flat]
            if len(clauses) == 1:
                return clauses[0]
            return query.boolean_query([(occur.Should, c) for c in clauses])
        matching = self._to_query(tree)
        if matching is None:
            return None
        titles = [query.term_query(self.schema, "title", t) for t in _positive_terms(tree)]
        if not titles or TITLE_BOOST <= 0:
            return matching
        in_title = query.boolean_query([(occur.Should, t) for t in titles])
        return query.boolean_query([(occur.Must, matching),
                                    (occur.Should, query.boost_query(in_title, TITLE_BOOST))])

    def _to_query(self, tree: Tree) -> Any | None:
        """Post-order over an explicit stack (no recursion on the query's depth here); None for a
        tree deeper than :data:`MAX_QUERY_DEPTH`, which then runs in PostgreSQL: tantivy searches a
        nested boolean query recursively, and a few hundred levels overflowed the thread's stack and
        killed the process (PostgreSQL prints such a query as it was typed)."""
        tantivy = self._tantivy
        query, occur = tantivy.Query, tantivy.Occur
        done: dict[int, Any] = {}
        stack: list[tuple[Tree, bool, int]] = [(tree, False, 1)]
        while stack:
            item, expanded, depth = stack.pop()
            if depth > MAX_QUERY_DEPTH:
                return None
            if isinstance(item, Term):
                built = self._term_query(item)
                if built is None:
                    return None
                done[id(item)] = built
                continue
            if item.op == "phrase":
                built = self._phrase_query(item)
                if built is None:
                    return None
                done[id(item)] = built
                continue
            if not expanded:
                stack.append((item, True, depth))
                stack.extend((child, False, depth + 1) for child in item.children)
                continue
            parts = [done.pop(id(child)) for child in item.children]
            if item.op == "not":
                done[id(item)] = query.boolean_query([(occur.Must, query.all_query()),
                                                      (occur.MustNot, parts[0])])
            else:
                kind = occur.Must if item.op == "and" else occur.Should
                done[id(item)] = query.boolean_query([(kind, p) for p in parts])
        return done[id(tree)]

    def _term_query(self, term: Term) -> Any | None:
        if term.weights:
            return None
        query = self._tantivy.Query
        if term.prefix:
            return query.regex_query(self.schema, "body", _REGEX_SPECIAL.sub(r"\\\1", term.lexeme) + ".*")
        return query.term_query(self.schema, "body", term.lexeme)

    def _phrase_query(self, node: Node) -> Any | None:
        alternatives = _phrase_alternatives(node)
        if not alternatives:
            return None
        query, occur = self._tantivy.Query, self._tantivy.Occur
        phrases = [query.phrase_query(self.schema, "body", list(words)) if len(words) > 1
                   else query.term_query(self.schema, "body", words[0][1]) for words in alternatives]
        if len(phrases) == 1:
            return phrases[0]
        return query.boolean_query([(occur.Should, p) for p in phrases])

    def filtered(self, base: Any, sources: Sequence[int] | None, from_date: dt.date | None,
                 to_date: dt.date | None) -> Any:
        """``base`` limited to the sources and the publication-date range (as the SQL row is); a
        :class:`RowPlan` stays one."""
        if isinstance(base, RowPlan):
            return RowPlan(self.filtered(base.query, sources, from_date, to_date), base.terms,
                           base.operands, base.prefixes)
        tantivy = self._tantivy
        query, occur = tantivy.Query, tantivy.Occur
        clauses = [(occur.Must, base)]
        if sources is not None:
            wanted = [int(s) for s in sources]
            clauses.append((occur.Must, query.term_set_query(self.schema, "source", wanted)))
        if from_date is not None or to_date is not None:
            clauses.append((occur.Must, query.range_query(
                self.schema, "day", tantivy.FieldType.Integer, date_day(from_date), date_day(to_date))))
        return clauses[0][1] if len(clauses) == 1 else query.boolean_query(clauses)

    def top(self, query: Any, k: int, offset: int = 0) -> list[tuple[int, float]]:
        """``(id, BM25 score)`` of the best ``k`` after ``offset``, best first, ties by id."""
        return self.top_ranked(query, k, offset)[0]

    def top_ranked(self, query: Any, k: int, offset: int = 0, *,
                   budget: int | None = None) -> tuple[list[tuple[int, float]], int | None]:
        """:meth:`top`, and the impact tier it was restricted to (None: ranked exactly).

        A :class:`RowPlan` of a broad AND whose walk would read more postings than ``budget``
        (:data:`.topk_tiers.ROW_BUDGET`, read at each search) runs within the least restrictive tier
        that fits it; one with fewer matches there than asked for runs in the next wider tier, and
        exactly at last
        (see :mod:`.topk_tiers`). The budget does not depend on the page: pages of one row come from
        one ranking while its tier has matches enough."""
        if k <= 0:
            return [], None
        if not isinstance(query, RowPlan):
            return self._top_exact(query, k, offset), None
        searcher = self._searcher()
        for tier in self._tiers_for(searcher, query, topk_tiers.ROW_BUDGET if budget is None else budget):
            hits = self._top_exact(self._restricted(query, tier), k, offset)
            if len(hits) >= k:  # the tier has the page's every row
                return hits, tier
        return self._top_exact(query.query, k, offset), None

    def _tiers_for(self, searcher: Any, plan: RowPlan, limit: int) -> list[int]:
        """The tiers to try for ``plan``, least restrictive first: none when the exact walk fits
        ``limit`` postings (an AND walks as many as its smallest operand has) or the index has no
        tiers; else the first whose postings fit, then the wider ones (a tier with too few matches
        gives way to the next wider one)."""
        if self.tiers is None or not plan.operands or not self.tiers.thresholds:
            return []
        frequency = searcher.doc_freq
        walk = min(sum(frequency("body", t) for t in group) for group in plan.operands)
        if walk <= limit:
            return []
        for prefix in plan.prefixes:  # a prefix's expansions are read only when the terms are all broad
            walk = min(walk, sum(n for _, n in searcher.terms_with_prefix("body", prefix)))
            if walk <= limit:
                return []
        fitting = len(FRACTIONS) - 1
        # a restricted row costs more per document than a walk (a seek into each long list instead of
        # reading them in order): its tier is chosen for the same time, not the same postings
        within = limit // topk_tiers.SEEK_COST
        for j in range(len(FRACTIONS)):
            size = sum(frequency(tier_field(j), t) if t in self.tiers.thresholds else frequency("body", t)
                       for t in plan.terms)
            if size <= within:
                fitting = j
                break
        return list(range(fitting, -1, -1))

    def _restricted(self, plan: RowPlan, tier: int) -> Any:
        """``plan``'s query limited to the documents where one of its terms is in ``tier`` (scoring
        nothing: the scores stay the exact BM25 ones)."""
        tantivy = self._tantivy
        query, occur = tantivy.Query, tantivy.Occur
        known = self.tiers.thresholds if self.tiers is not None else {}
        clauses = [(occur.Should, query.term_query(
            self.schema, tier_field(tier) if t in known else "body", t)) for t in plan.terms]
        restriction = query.const_score_query(query.boolean_query(clauses), 0.0)
        return query.boolean_query([(occur.Must, plan.query), (occur.Must, restriction)])

    def _top_exact(self, query: Any, k: int, offset: int) -> list[tuple[int, float]]:
        searcher = self._searcher()
        wanted = k + offset
        # A few more than the page's end: a tie across the end is common (39 % of rows of 100 on the
        # shared corpora; BM25 scores repeat with tantivy's quantised lengths), one this long is rare
        # (none of 230 rows past 32), so the search runs once, not again with a larger limit.
        limit = wanted + max(32, wanted // 8)
        while True:
            # tantivy cuts a tie at the limit in segment order, which differs between runs: while the
            # last hit ties the one the page ends on, more are read (up to 8 times as many), so that
            # "ties by id" holds and pages neither skip nor repeat documents.
            result = searcher.search(query, limit, count=False)
            scored = result.hits
            if (len(scored) < limit or float(scored[-1][0]) < float(scored[wanted - 1][0])
                    or limit >= 8 * (wanted + 32)):
                break
            limit *= 2
        if len(scored) > wanted:  # only those tied with the page's end are needed past it
            end = float(scored[wanted - 1][0])
            scored = [hit for i, hit in enumerate(scored) if i < wanted or float(hit[0]) >= end]
        hits = [(int(searcher.doc(address)["id"][0]), float(score)) for score, address in scored]
        hits.sort(key=lambda hit: (-hit[1], hit[0]))
        return hits[offset:offset + k]

    def count(self, query: Any) -> int:
        """The exact number of matches (tantivy counts without scoring or collecting them)."""
        if isinstance(query, RowPlan):
            query = query.query
        return int(self._searcher().search(query, 1, count=True).count)

    def documents(self) -> int:
        return int(self._searcher().num_docs)

    def document_frequency(self, lexeme: str) -> int:
        """Documents holding ``lexeme`` (kept in the index: no recount; deletions not yet merged away
        may still count)."""
        return int(self._searcher().doc_freq("body", lexeme))

    def ids_between(self, first: int, last: int) -> list[int]:
        """The indexed ids from ``first`` to ``last`` (inclusive), sorted: the refresh compares the ids
        with the database's a range at a time, so its memory stays bounded at any size."""
        tantivy = self._tantivy
        searcher = self._searcher()
        query = tantivy.Query.range_query(self.schema, "id", tantivy.FieldType.Unsigned, int(first),
                                          int(last))
        total = int(searcher.search(query, 1, count=True).count)
        if total == 0:
            return []
        result = searcher.search(query, total, count=False, order_by_field="id")
        return sorted(int(key) for key, _ in result.hits)  # ordered by the id field: its value

    def max_id(self) -> int:
        """The highest indexed id (0 when empty): one hit, ordered by the id field."""
        tantivy = self._tantivy
        result = self._searcher().search(tantivy.Query.all_query(), 1, count=False, order_by_field="id",
                                         order=tantivy.Order.Desc)
        return int(result.hits[0][0]) if result.hits else 0

    def all_ids(self) -> list[int]:
        """Every indexed id (tests; the refresh reads them by range, :meth:`ids_between`)."""
        return self.ids_between(0, 2**63 - 1)


def _flat_disjunction(tree: Tree) -> list[str] | None:
    """The lexemes of a query that is one term or an OR of plain terms (the broad row's shape), else
    None."""
    if isinstance(tree, Term):
        return None if tree.prefix or tree.weights else [tree.lexeme]
    if tree.op != "or" or not all(isinstance(c, Term) and not c.prefix and not c.weights
                                  for c in tree.children):
        return None
    return list(dict.fromkeys(c.lexeme for c in tree.children))  # type: ignore[union-attr]


def _and_operands(tree: Tree) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...]] | None:
    """The plain terms of each positive operand of an AND of plain terms, of ORs of plain terms,
    and of NOTs (``(a | b) & c & !d`` gives ``(("a", "b"), ("c",))``), and the AND's prefix operands
    (``'incl':*``, a constant score in tantivy): the shape the impact tiers restrict; None for any
    other query (a phrase scores otherwise: run exactly)."""
    if isinstance(tree, Term) or tree.op != "and":
        return None
    operands: list[tuple[str, ...]] = []
    prefixes = []
    for child in tree.children:
        if isinstance(child, Term):
            if child.weights:
                return None
            if child.prefix:
                prefixes.append(child.lexeme)
            else:
                operands.append((child.lexeme,))
        elif child.op == "not":
            continue
        elif child.op == "or" and all(isinstance(c, Term) and not c.prefix and not c.weights
                                      for c in child.children):
            operands.append(tuple(c.lexeme for c in child.children))  # type: ignore[union-attr]
        else:
            return None
    return (tuple(operands), tuple(prefixes)) if operands else None


def _positive_terms(tree: Tree) -> list[str]:
    """The distinct plain lexemes of a query outside any NOT (the ones a title match should reward)."""
    seen: dict[str, None] = {}
    stack: list[Tree] = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, Term):
            if not item.prefix and not item.weights:
                seen.setdefault(item.lexeme, None)
        elif item.op != "not":
            stack.extend(reversed(item.children))
    return list(seen)


def _phrase_alternatives(node: Node) -> list[tuple[tuple[int, str], ...]] | None:
    """Every ``(offset, lexeme)`` word list a phrase tree stands for (OR groups expanded), or None
    when a part cannot be a tantivy phrase. Iterative: leaves left to right, offsets as PostgreSQL
    counts them (``X <N> Y`` puts Y's first word N positions after X's last)."""
    # Each entry of the work stack is (tree, then-continuation marker); results are lists of
    # (words, width) where width is the offset of the last word.
    results: dict[int, list[tuple[tuple[tuple[int, str], ...], int]]] = {}
    stack: list[tuple[Tree, bool]] = [(node, False)]
    while stack:
        item, expanded = stack.pop()
        if isinstance(item, Term):
            if item.prefix or item.weights:
                return None
            results[id(item)] = [(((0, item.lexeme),), 0)]
            continue
        if item.op == "not" or (item.op == "phrase" and item.distance < 1):
            return None
        if item.op == "and":
            return None
        if not expanded:
            stack.append((item, True))
            stack.extend((child, False) for child in item.children)
            continue
        parts = [results.pop(id(child)) for child in item.children]
        if item.op == "or":
            merged = [alt for part in parts for alt in part]
        else:
            left, right = parts
            merged = []
            for words_l, width_l in left:
                for words_r, width_r in right:
                    shift = width_l + item.distance
                    merged.append((words_l + tuple((o + shift, w) for o, w in words_r), shift + width_r))
        if len(merged) > MAX_PHRASE_ALTERNATIVES:
            return None
        results[id(item)] = merged
    return [words for words, _ in results[id(node)]]
