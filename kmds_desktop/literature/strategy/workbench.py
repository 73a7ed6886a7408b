"""The search strategy workbench: record runs in the history, combine sets, re-run, check known papers.

Qt-free, so the CLI (``kmds-desktop literature history/combine/check/report``) and the window's history
panel drive the same code. The history (:mod:`kmds_desktop.literature.strategy.history`) stores; this module
decides what a run, a combination, a re-run and a known-papers check *mean*:

- a run's rows are stored exactly as they ran, with their provenance and counts; its documents are the
  merged union (best rank first) with source and external ids;
- a combination is evaluated over the stored ID sets (no database round trip, so the count is there as
  the user types) and saved as a new set; all its operands must be complete and come from one database;
- a re-run runs the same rows on today's database and reports what was added and removed, compared by
  source and external id (internal ids change when a database is rebuilt);
- the known-papers check separates papers that are not in the database at all (not misses: no strategy
  could find them) from papers in the database that a set misses, and says for each miss which words of
  each row the paper lacks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kmds_desktop.literature.queries.agent import QueryAgent
from kmds_desktop.literature.queries.query_cleaning import query_key
from kmds_desktop.literature.retrieval.semantic import SearchRow
from kmds_desktop.literature.store.identities import (
    DocumentIdentity,
    document_identities,
    explain_misses,
    find_known,
    normalize_title,
)
from kmds_desktop.literature.strategy import set_algebra
from kmds_desktop.literature.strategy.history import HistoryError, Member, RowRecord, SavedSet, SearchHistory
from kmds_desktop.literature.strategy.known_papers import KnownPaper


def search_row(text: str, provenance: dict[str, Any]) -> Any:
    """The row as the agent runs it: full-text, or semantic / hypothetical (``row_type`` in provenance)."""
    return SearchRow(text, provenance.get("row_type") or "tsquery")


def is_semantic(provenance: dict[str, Any]) -> bool:
    return (provenance.get("row_type") or "tsquery") != "tsquery"


def provenance_of_generated(result: Any) -> dict[str, Any]:
    """Provenance of a row taken from a :class:`QueryGenerationResult`."""
    return {"kind": "generated", "model": result.model, "attempt": result.attempt_number,
            "generation_time": round(float(result.generation_time or 0.0), 3)}


def rows_from_generation(generated: Any) -> list[tuple[str, dict[str, Any]]]:
    """(query, provenance) for each unique generated query: the first model and attempt that proposed
    it, and every model that proposed the same query (case/spacing-insensitive)."""
    out = []
    for query in generated.unique_queries:
        key = query_key(query)
        first = next((r for r in generated.successful if query_key(r.query) == key), None)
        provenance: dict[str, Any] = (provenance_of_generated(first) if first is not None
                                      else {"kind": "hand-written"})
        also = [m for m in generated.models_for(query) if m != provenance.get("model")]
        if also:
            provenance["also_proposed_by"] = also
        out.append((query, provenance))
    return out


@dataclass
class CombinationCount:
    """The count of an expression over the stored sets (nothing fetched)."""

    expression: str
    canonical: str
    count: int
    operands: list[str]
    database: str


@dataclass
class RerunResult:
    """A re-run of a search on today's database and what changed (compared by source + external id)."""

    original: SavedSet
    new: SavedSet
    added: list[Member]
    removed: list[Member]


@dataclass
class KnownPaperStatus:
    """One known paper: where it is in the database (if anywhere) and which sets and rows find it."""

    paper: KnownPaper
    document: DocumentIdentity | None
    found_by_sets: list[int] = field(default_factory=list)
    found_by_rows: list[str] = field(default_factory=list)  # "#N.K"

    @property
    def in_database(self) -> bool:
        return self.document is not None

    def to_dict(self) -> dict[str, Any]:
        doc = self.document
        return {
            **self.paper.to_dict(),
            "in_database": self.in_database,
            "doc_id": doc.doc_id if doc else None,
            "source": doc.source if doc else None,
            "external_id": doc.external_id if doc else None,
            "db_title": doc.title if doc else None,
            "found_by_sets": self.found_by_sets,
            "found_by_rows": self.found_by_rows,
        }


@dataclass
class Recall:
    """How many of the known papers in the database a set (or row) finds."""

    label: str
    found: int
    in_database: int
    text: str = ""

    @property
    def recall(self) -> float | None:
        return self.found / self.in_database if self.in_database else None

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "text": self.text, "found": self.found, "in_database": self.in_database,
                "recall": self.recall}


@dataclass
class MissedPaper:
    """A known paper in the database that a set misses, and why each row of the set misses it."""

    set_number: int
    status: KnownPaperStatus
    rows: list[dict[str, Any]]  # {"row": "#N.K", "text", "matches_query", "missing_words"}

    def to_dict(self) -> dict[str, Any]:
        doc = self.status.document
        return {"set": self.set_number, "label": self.status.paper.label,
                "title": doc.title if doc else self.status.paper.title,
                "source": doc.source if doc else None, "external_id": doc.external_id if doc else None,
                "rows": self.rows}


@dataclass
class KnownCheck:
    """The outcome of checking known papers against sets of the history."""

    papers: list[KnownPaperStatus]
    sets: list[Recall]
    rows: list[Recall]
    missed: list[MissedPaper]

    @property
    def not_in_database(self) -> list[KnownPaperStatus]:
        return [p for p in self.papers if not p.in_database]

    @property
    def in_database(self) -> list[KnownPaperStatus]:
        return [p for p in self.papers if p.in_database]

    def to_dict(self) -> dict[str, Any]:
        return {
            "known_papers": len(self.papers),
            "in_database": len(self.in_database),
            "not_in_database": [p.to_dict() for p in self.not_in_database],
            "sets": [s.to_dict() for s in self.sets],
            "rows": [r.to_dict() for r in self.rows],
            "papers": [p.to_dict() for p in self.papers],
            "missed": [m.to_dict() for m in self.missed],
        }


class SearchWorkbench:
    """History + database: the operations of the strategy workbench. ``database`` may be None for the
    operations that only read the history (list, count, combine, rename, delete)."""

    def __init__(self, history: SearchHistory, database: Any | None = None) -> None:
        self.history = history
        self.database = database

    # -- recording runs -------------------------------------------------------------------------------
    @property
    def database_name(self) -> str:
        return str(getattr(self.database, "display_name", "") or "")

    def begin(self, question: str, details: dict[str, Any] | None = None) -> int:
        """Number the run before it starts (so a crash leaves it *incomplete*, never half-written)."""
        return self.history.begin_search(question, self.database_name, details)

    def complete(self, number: int, rows: Sequence[tuple[str, dict[str, Any]]], result: Any,
                 details: dict[str, Any] | None = None) -> SavedSet:
        """Store a :class:`ReviewedSearchResult` as set ``number``: ``rows`` are (text, provenance) in the
        order the result's queries ran."""
        records = []
        for (text, provenance), stat in zip(rows, result.queries, strict=True):
            matches = stat.matches
            records.append(RowRecord(
                text=text, provenance=dict(provenance), normalized=stat.normalized,
                matches=int(matches) if matches is not None else None,
                matches_estimated=bool(getattr(matches, "estimated", False)),
                ids_returned=stat.ids_returned, unique_ids=stat.unique_ids, time_s=round(stat.time_s, 4),
                error=_recorded_error(stat), ids=list(stat.ids),
            ))
        members = self._members_for(list(result.ids))
        all_details = dict(self.history.get(number).details)
        all_details.update(details or {})
        hits = sum(r.ids_returned for r in records)
        all_details["deduplication"] = {
            "row_hits": hits, "documents": len(members),
            "found_by_several_rows": sum(1 for rows_ in result.found_by.values() if len(rows_) > 1),
        }
        return self.history.complete_search(number, records, members, all_details)

    def _members_for(self, ranked_ids: list[int]) -> list[Member]:
        identities = document_identities(self._db(), ranked_ids) if ranked_ids else {}
        members = []
        for rank, doc_id in enumerate(ranked_ids, start=1):
            ident = identities.get(doc_id)
            members.append(Member(doc_id, rank, ident.source if ident else None,
                                  ident.external_id if ident else None))
        return members

    def run(self, question: str, rows: Sequence[tuple[str, dict[str, Any]]], *, max_rows: int = 100,
            details: dict[str, Any] | None = None, agent: Any | None = None,
            on_query: Callable[[Any], None] | None = None, cancel: Any = None, kind: str = "search",
            ) -> SavedSet:
        """Run ``rows`` (text, provenance) through the query agent and record the run as a new set."""
        agent = agent or QueryAgent(self._db())
        info = {"max_rows": max_rows, **(details or {})}
        info.setdefault("database_documents", self._document_count())
        number = self.history.begin_search(question, self.database_name, info, kind=kind)
        try:
            # No question: no re-ranking by similarity, which only reorders the union (and would load
            # the embedding model); the set is the rows' documents either way.
            result = agent.run_reviewed_queries([search_row(t, p) for t, p in rows], max_rows=max_rows,
                                                fetch=False, on_query=on_query, cancel=cancel)
        except BaseException:
            self.history.discard(number)  # a clean failure records nothing; only a crash leaves it incomplete
            raise
        return self.complete(number, rows, result)

    def _document_count(self) -> int | None:
        try:
            return int(self._db().status()["documents"])
        except Exception:  # noqa: BLE001 - the count is informative only
            return None

    def _db(self) -> Any:
        if self.database is None:
            raise HistoryError("no literature database is open: open one first")
        return self.database

    # -- set algebra ----------------------------------------------------------------------------------
    def _resolve(self, rpn: list[set_algebra.Token]) -> tuple[dict[tuple[int, int], SavedSet], str]:
        """Check every operand exists, is complete and comes from one database; returns them."""
        sets: dict[int, SavedSet] = {}
        by_key: dict[tuple[int, int], SavedSet] = {}
        for tok in set_algebra.references(rpn):
            saved = sets.get(tok.set_number)
            if saved is None:
                try:
                    saved = self.history.get(tok.set_number)
                except HistoryError:
                    raise set_algebra.ExpressionError(f"there is no set {tok.label.split('.')[0]} in the "
                                                      "history", tok.position) from None
                if not saved.complete:
                    raise set_algebra.ExpressionError(f"set #{saved.number} is {saved.state} and has no "
                                                      "documents", tok.position)
                sets[tok.set_number] = saved
            if tok.row and tok.row > len(saved.rows):
                raise set_algebra.ExpressionError(f"search #{saved.number} has no row {tok.row} (it has "
                                                  f"{len(saved.rows)})", tok.position)
            by_key[(tok.set_number, tok.row)] = saved
        databases = {s.database for s in sets.values()}
        if len(databases) > 1:
            numbers = ", ".join(f"#{n}" for n in sorted(sets))
            raise set_algebra.ExpressionError(f"sets {numbers} come from different databases; internal ids "
                                              "cannot be combined across databases")
        return by_key, next(iter(databases), "")

    def _ids(self, tok: set_algebra.Token) -> set[int]:
        if tok.row:
            return set(self.history.row_ids(tok.set_number, tok.row))
        return self.history.member_ids(tok.set_number)

    def _evaluate(self, rpn: list[set_algebra.Token], count_only: bool) -> set[int] | int:
        """The expression's ids (or count), computed by the history database in one SQL statement
        (faster than Python sets: ``bench/set_algebra.py``); in Python when nested too deep for SQLite."""
        sql, params = set_algebra.to_sql(rpn)
        value = self.history.expression_ids(sql, params, count_only=count_only)
        if value is None:
            ids = set_algebra.evaluate(rpn, self._ids)
            return len(ids) if count_only else ids
        return value

    def count(self, expression: str) -> CombinationCount:
        """The number of documents ``expression`` gives, computed over the stored ID sets (nothing is
        fetched from the literature database, so it can follow the user's typing)."""
        rpn = set_algebra.parse(expression)
        _, database = self._resolve(rpn)
        count = self._evaluate(rpn, count_only=True)
        return CombinationCount(expression.strip(), set_algebra.canonical(rpn), int(count),  # type: ignore[arg-type]
                                sorted({t.label for t in set_algebra.references(rpn)}), database)

    def combine(self, expression: str, name: str = "") -> SavedSet:
        """Evaluate ``expression`` and save the result as a new set, best rank of its operands first."""
        rpn = set_algebra.parse(expression)
        by_key, database = self._resolve(rpn)
        ids = self._evaluate(rpn, count_only=False)
        assert isinstance(ids, set)  # noqa: S101 - narrows: count_only=False gives the set
        best: dict[int, tuple[int, int]] = {}  # doc -> (rank, order of the operand)
        identity: dict[int, tuple[str | None, str | None]] = {}
        for order, (number, row) in enumerate(by_key):
            if row:
                ranked = [(doc, rank) for rank, doc in enumerate(self.history.row_ids(number, row), start=1)]
            else:
                members = self.history.members(number)
                ranked = [(m.doc_id, m.rank) for m in members]
                for m in members:
                    identity.setdefault(m.doc_id, (m.source, m.external_id))
            for doc, rank in ranked:
                if doc in ids and (doc not in best or (rank, order) < best[doc]):
                    best[doc] = (rank, order)
        missing = [d for d in ids if d not in identity]
        if missing:
            identity.update(self.history.identities(missing))
        ordered = sorted(ids, key=lambda d: (*best.get(d, (10**9, 0)), d))
        members = [Member(d, rank, *identity.get(d, (None, None))) for rank, d in enumerate(ordered, start=1)]
        canonical = set_algebra.canonical(rpn)
        operands = sorted({t.set_number for t in set_algebra.references(rpn)})
        references = sorted({t.label for t in set_algebra.references(rpn)})
        details = {"canonical": canonical, "operands": operands, "references": references}
        question = " / ".join(dict.fromkeys(self.history.get(n).title for n in operands))
        return self.history.save_set(kind="combination", question=question, database=database,
                                     members=members, expression=expression.strip(), details=details,
                                     name=name)

    # -- re-run ---------------------------------------------------------------------------------------
    def rerun(self, number: int, *, agent: Any | None = None,
              on_query: Callable[[Any], None] | None = None, cancel: Any = None) -> RerunResult:
        """Run search ``number``'s rows again on today's database as a new set; say what changed."""
        original = self.history.complete_set(number)
        if original.kind == "combination":
            raise HistoryError(f"set #{number} is a combination: re-run the searches it combines "
                               f"({', '.join('#' + str(n) for n in original.details.get('operands', []))}) "
                               "and combine them again")
        rows = [(r.text, r.provenance) for r in original.rows]
        details = {k: v for k, v in original.details.items()
                   if k not in ("deduplication", "database_documents")}
        details["rerun_of"] = number
        new = self.run(original.question, rows, max_rows=int(original.details.get("max_rows", 100)),
                       details=details, agent=agent, on_query=on_query, cancel=cancel, kind="rerun")
        old_members = self.history.members(number)
        new_members = self.history.members(new.number)
        old_keys = {m.key or ("", str(m.doc_id)) for m in old_members}
        new_keys = {m.key or ("", str(m.doc_id)) for m in new_members}
        added = [m for m in new_members if (m.key or ("", str(m.doc_id))) not in old_keys]
        removed = [m for m in old_members if (m.key or ("", str(m.doc_id))) not in new_keys]
        return RerunResult(original, new, added, removed)

    # -- documents ------------------------------------------------------------------------------------
    def documents(self, number: int, *, limit: int | None = None, cancel: Any = None) -> list[dict[str, Any]]:
        """The documents of set ``number`` fetched from the database, best rank first."""
        self.history.complete_set(number)
        ids = [m.doc_id for m in self.history.members(number)]
        if limit is not None:
            ids = ids[:limit]
        return self._db().fetch_documents_by_ids(ids, order="given", cancel=cancel)

    # -- known papers -----------------------------------------------------------------------------------
    def locate(self, papers: Sequence[KnownPaper]) -> list[KnownPaperStatus]:
        """Find each known paper in the database (PMID, then DOI, then source id, then title)."""
        db = self._db()
        pmids = sorted({p.pmid for p in papers if p.pmid})
        dois = sorted({p.doi for p in papers if p.doi})
        externals = sorted({p.external_id for p in papers if p.external_id})
        titles = sorted({p.title for p in papers if p.title and not (p.pmid or p.doi or p.external_id)})
        docs = find_known(db, pmids=pmids, dois=dois, external_ids=externals, titles=titles)
        by_pmid = {d.pmid: d for d in docs if d.pmid}
        by_doi = {(d.doi or "").lower(): d for d in docs if d.doi}
        by_ext = {d.external_id: d for d in docs}
        by_title = {normalize_title(d.title): d for d in docs if d.title}
        out = []
        for paper in papers:
            doc = ((by_pmid.get(paper.pmid) if paper.pmid else None)
                   or (by_doi.get(paper.doi) if paper.doi else None)
                   or (by_ext.get(paper.external_id) if paper.external_id else None)
                   or (by_title.get(normalize_title(paper.title)) if paper.title and not (
                       paper.pmid or paper.doi or paper.external_id) else None))
            out.append(KnownPaperStatus(paper, doc))
        return out

    def check_known(self, papers: Sequence[KnownPaper], set_numbers: Iterable[int] | None = None, *,
                    explain: bool = True) -> KnownCheck:
        """Which known papers are in the database, which sets and rows find them, recall, and why misses
        are missed (for the last set checked: the strategy being validated)."""
        numbers = list(set_numbers) if set_numbers is not None else []
        if not numbers:
            latest = self.history.latest()
            if latest is None:
                raise HistoryError("the history has no complete set to check: run a search first")
            numbers = [latest.number]
        sets = [self.history.complete_set(n) for n in numbers]
        statuses = self.locate(papers)
        in_db = [s for s in statuses if s.in_database]
        # Count each document once (two identifiers of one paper are one paper).
        known_docs: dict[int, KnownPaperStatus] = {}
        for s in in_db:
            known_docs.setdefault(s.document.doc_id, s)  # type: ignore[union-attr]
        set_recalls: list[Recall] = []
        row_recalls: list[Recall] = []
        missed: list[MissedPaper] = []
        seen_rows: set[str] = set()
        for saved in sets:
            ids = self.history.member_ids(saved.number)
            found = [d for d in known_docs if d in ids]
            for s in in_db:
                if s.document.doc_id in ids:  # type: ignore[union-attr]
                    s.found_by_sets.append(saved.number)
            set_recalls.append(Recall(saved.label, len(found), len(known_docs), saved.title))
            # The rows behind the set: its own, or those of the searches a combination was made from.
            for _, text, (label, _cutoff, _semantic) in self._rows_behind(saved):
                if label in seen_rows:
                    continue
                seen_rows.add(label)
                number, _, position = label.lstrip("#").partition(".")
                rids = set(self.history.row_ids(int(number), int(position)))
                for s in in_db:
                    if s.document.doc_id in rids:  # type: ignore[union-attr]
                        s.found_by_rows.append(label)
                row_recalls.append(Recall(label, sum(1 for d in known_docs if d in rids), len(known_docs),
                                          text))
        strategy = sets[-1]
        strategy_ids = self.history.member_ids(strategy.number)
        rows = self._rows_behind(strategy)
        for doc_id, status in known_docs.items():
            if doc_id in strategy_ids:
                continue
            reasons: list[dict[str, Any]] = []
            if explain and rows:
                full_text = [(p, t) for p, t, (_l, _c, semantic) in rows if not semantic]
                explained = {r.position: r for r in explain_misses(self._db(), doc_id, full_text)}
                for key, text, (label, cutoff, semantic) in rows:
                    reason = explained.get(key)
                    reasons.append({"row": label, "text": text, "semantic": semantic,
                                    "matches_query": reason.matches_query if reason else False,
                                    "missing_words": reason.missing_words if reason else [],
                                    "written_otherwise": reason.written_otherwise if reason else [],
                                    "max_rows": cutoff})
            missed.append(MissedPaper(strategy.number, status, reasons))
        return KnownCheck(statuses, set_recalls, row_recalls, missed)

    def _rows_behind(self, saved: SavedSet) -> list[tuple[int, str, tuple[str, int | None, bool]]]:
        """(key, text, (label "#N.K", the row's max_rows, semantic?)) of the rows of a search, or of the
        searches a combination was made from (followed iteratively, each set once)."""
        out: list[tuple[int, str, tuple[str, int | None, bool]]] = []
        todo: list[tuple[int, int]] = [(saved.number, 0)]  # (set, row or 0 for all its rows)
        seen: set[tuple[int, int]] = set()
        while todo:
            number, only_row = todo.pop(0)
            if (number, only_row) in seen or (number, 0) in seen:
                continue
            seen.add((number, only_row))
            try:
                current = saved if number == saved.number else self.history.get(number)
            except HistoryError:
                continue  # an operand deleted since the combination was made
            if current.kind == "combination":
                refs = current.details.get("references")
                if refs is None:  # sets combined before references were recorded
                    refs = [f"#{n}" for n in current.details.get("operands", [])]
                for ref in refs:
                    set_part, _, row_part = str(ref).lstrip("#").partition(".")
                    todo.append((int(set_part), int(row_part or 0)))
                continue
            cutoff = current.details.get("max_rows")
            for row in current.rows:
                if row.ok and only_row in (0, row.position):
                    out.append((len(out), row.text, (f"#{current.number}.{row.position}", cutoff,
                                                     is_semantic(row.provenance))))
        return out


def _recorded_error(stat: Any) -> str | None:
    """A row's error as the history keeps it: a row that never ran because it was invalid (its text
    rejected, or a semantic row with nothing to search) starts with "invalid", which is how the
    history and the search report tell it from a valid row that failed (:attr:`RowRecord.invalid`)."""
    error = stat.error
    invalid = getattr(stat, "error_kind", None) == "invalid"
    if error and invalid and not str(error).lower().startswith("invalid"):
        return f"invalid: {error}"
    return error
