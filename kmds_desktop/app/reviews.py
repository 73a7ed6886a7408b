"""Reviews as a user drives them: new, open, list, rename, delete, show, export, import, merge, update.

Why one Qt-free session: ``kmds-desktop literature review ...`` and the window must mean the same by a
review, its rounds and its PRISMA flow. :class:`ReviewBook` holds the data folder's
:class:`~kmds_desktop.literature.reviews.store.ReviewStore` (the screening file, the same one the
screening session writes) and announces each change (``"reviews"``: a review was made, renamed, deleted or
imported; ``"updated"``: an update added records); everything is plain Python a worker can run.

A review grows from the named screening review that ``literature screen ... REVIEW`` and the window's
"Screen these results" make: its question becomes the first of its questions, and its strategy is saved,
the first time it is needed, from the search-history sets its records came from (``#N``), so an update
re-runs exactly what was searched even after the history is cleared.

Update (:meth:`ReviewBook.update`): each search of the strategy runs again on the database as it is now
(recorded in the search history as a re-run); records seen in any earlier run are recognised (identity,
DOI, PMID, normalised title) and never added again; only new records join, in the round's number; the
screening session orders them with the model trained on every earlier decision. Records withdrawn since
are flagged. Each update is logged with its date, counts and the strategy's text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kmds_desktop import __version__
from kmds_desktop.app.events import Observable
from kmds_desktop.app.screening import VECTOR_MODEL, records_from_history
from kmds_desktop.literature.queries.agent import QueryAgent
from kmds_desktop.literature.reviews import exchange
from kmds_desktop.literature.reviews.flow import UpdatedFlow, build_updated_flow, updated_flow_svg
from kmds_desktop.literature.reviews.identity import RecordMatcher
from kmds_desktop.literature.reviews.store import ReviewError, ReviewStore, SavedStrategy, clean_name
from kmds_desktop.literature.reviews.strategy import rows_of, searches_of_sets, strategy_text
from kmds_desktop.literature.reviews.update import (
    UpdateOutcome,
    add_round,
    flag_withdrawn,
    log_update,
    next_round,
    unflagged_withdrawn,
)
from kmds_desktop.literature.screening import prisma
from kmds_desktop.literature.screening.decisions import EXCLUDE, INCLUDE, MAYBE
from kmds_desktop.literature.screening.records import ScreeningRecord
from kmds_desktop.literature.store.facade import LiteratureStore
from kmds_desktop.literature.store.identities import document_identities
from kmds_desktop.literature.strategy.history import HistoryError, SearchHistory
from kmds_desktop.literature.strategy.workbench import SearchWorkbench, search_row

__all__ = ["NewRecordsNotice", "ReviewBook", "ReviewError", "ReviewSummary", "UpdateOutcome"]


@dataclass(frozen=True)
class ReviewSummary:
    """One line of the review list."""

    id: str
    name: str
    questions: list[str]
    created_at: str
    records: int
    screened: int
    included: int
    updates: int

    def line(self) -> str:
        rounds = f", {self.updates} update{'s' if self.updates != 1 else ''}" if self.updates else ""
        question = f" — {self.questions[0]}" if self.questions else ""
        return (f"{self.id}: {self.screened:,} of {self.records:,} screened, {self.included:,} included"
                f"{rounds}{question}")

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class NewRecordsNotice:
    """Reviews whose strategy matches records they do not have yet (after an import), and reviews with
    records the database has withdrawn since (not flagged yet: the next update flags them)."""

    new_per_review: dict[str, int] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)  #: review -> why its strategy could not run
    withdrawn_per_review: dict[str, int] = field(default_factory=dict)

    def new_line(self) -> str:
        """"2 reviews have 14 new records (a: 9, b: 5)"; with withdrawals "…; 1 review has 2 records
        withdrawn since (a: 2)" ("" when nothing changed)."""
        parts = []
        for counts, what in ((self.new_per_review, "new record"),
                             (self.withdrawn_per_review, "record withdrawn since")):
            having = {k: v for k, v in counts.items() if v}
            if not having:
                continue
            n, total = len(having), sum(having.values())
            most = sorted(having.items(), key=lambda kv: (-kv[1], kv[0]))
            named = ", ".join(f"{k}: {v:,}" for k, v in most[:5]) + (", …" if len(most) > 5 else "")
            noun = what if total == 1 else what.replace("record", "records", 1)
            parts.append(f"{n} {'review has' if n == 1 else 'reviews have'} {total:,} {noun} ({named})")
        return "; ".join(parts)

    def line(self) -> str:
        """The CLI's line: :meth:`new_line` and what to run (empty when nothing changed)."""
        text = self.new_line()
        return f"{text}; screen them with 'kmds-desktop literature review update NAME'" if text else ""

    def most_changed(self) -> str:
        """The review an "Update" button updates: most new records, then most withdrawn, then by name."""
        changed = {k for k in self.new_per_review if self.new_per_review[k]} | {
            k for k in self.withdrawn_per_review if self.withdrawn_per_review[k]}
        return min(changed, key=lambda k: (-self.new_per_review.get(k, 0),
                                           -self.withdrawn_per_review.get(k, 0), k), default="")


class ReviewBook(Observable):
    """The reviews of one data folder (see the module docstring). ``store``: a path or an open store."""

    def __init__(self, store: ReviewStore | str | Path | None = None) -> None:
        self.store = store if isinstance(store, ReviewStore) else ReviewStore(store)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> ReviewBook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the list ------------------------------------------------------------------------------------
    def summaries(self) -> list[ReviewSummary]:
        out = []
        for review in self.store.reviews():
            decisions = self.store.decisions(review.id)
            out.append(ReviewSummary(
                id=review.id, name=review.name, questions=self.store.questions(review.id),
                created_at=review.created_at, records=len(self.store.records(review.id)),
                screened=len(decisions), included=sum(d.decision == INCLUDE for d in decisions.values()),
                updates=sum(r.kind == "update" for r in self.store.runs(review.id))))
        return out

    # -- new, rename, delete ---------------------------------------------------------------------------
    def new(self, name: str, questions: Sequence[str] = (), *, history: SearchHistory | None = None,
            database: Any = None, from_sets: Sequence[int] = ()) -> str:
        """Make a review (a name in use is refused); with ``from_sets``, their searches become its
        strategy and their documents its first records (as ``literature screen add --set`` adds them)."""
        review_id = clean_name(name)
        if any(r.id == review_id or r.name == review_id for r in self.store.reviews()):
            raise ReviewError(f"a review called {review_id!r} exists already: open it, or choose another "
                              "name")
        self.store.create_review(review_id, name=review_id)
        self.store.set_questions(review_id, questions)
        if from_sets:
            if history is None:
                raise ReviewError("a review made from history sets needs the search history")
            self.set_strategy(review_id, history, from_sets, note="the review's first strategy")
            if database is not None:
                for number in from_sets:
                    recs, per_row = records_from_history(history, database, number)
                    add_round(self.store, review_id, recs, origin=f"#{number}", round_number=0,
                              per_row=per_row)
                _copy_vectors(self.store, review_id, database)
        self.announce("reviews")
        return review_id

    def rename(self, name: str, new_name: str) -> str:
        review = self.store.rename_review(self.store.find(name).id, new_name)
        self.announce("reviews")
        return review.id

    def delete(self, name: str) -> int:
        decided = self.store.delete_review(self.store.find(name).id)
        self.announce("reviews")
        return decided

    def set_questions(self, name: str, questions: Sequence[str]) -> list[str]:
        return self.store.set_questions(self.store.find(name).id, questions)

    # -- strategy --------------------------------------------------------------------------------------
    def set_strategy(self, name: str, history: SearchHistory, numbers: Sequence[int],
                     note: str = "") -> SavedStrategy:
        """Save the searches of history sets ``numbers`` as the review's strategy (a new version when it
        differs: the edit is logged with its time and ``note``)."""
        review = self.store.find(name)
        searches = searches_of_sets(history, numbers)
        return self.store.save_strategy(review.id, searches, strategy_text(searches), note or "edited")

    def strategy(self, name: str, history: SearchHistory | None = None) -> SavedStrategy | None:
        """The strategy in force; when none was saved, the one the review's search-history sets ran
        (saved now, so it outlives the history), or None when the review came from files only."""
        review = self.store.find(name)
        saved = self.store.strategy(review.id)
        if saved is not None or history is None:
            return saved
        numbers = []
        for source in self.store.sources(review.id):
            head = source.origin.split()[0] if source.origin.startswith("#") else ""
            if head[1:].isdigit():
                numbers.append(int(head[1:]))
        if not numbers:
            return None
        try:
            searches = searches_of_sets(history, numbers)
        except HistoryError:
            return None
        return self.store.save_strategy(review.id, searches, strategy_text(searches),
                                        "saved from the search history sets the review's records came from")

    # -- show ------------------------------------------------------------------------------------------
    def flow(self, name: str) -> UpdatedFlow:
        review = self.store.find(name)
        return build_updated_flow(
            record_keys=[r.key for r in self.store.records(review.id)], rounds=self.store.rounds(review.id),
            decisions=self.store.decisions(review.id), runs=self.store.runs(review.id),
            withdrawn=self.store.flags(review.id), created_at=review.created_at)

    def flow_svg(self, name: str) -> str:
        """The PRISMA 2020 diagram for an updated review: previous studies, the latest update, the total."""
        review = self.store.find(name)
        title = f"{review.name}: {review.question}" if review.question else review.name
        return updated_flow_svg(self.flow(name), title)

    def report(self, name: str, history: SearchHistory | None = None) -> dict[str, Any]:
        """Everything ``review show`` prints: questions, strategy versions, the log of rounds, progress,
        the PRISMA flow (per round, and the plain one), flagged records, other reviewers."""
        review = self.store.find(name)
        strategy = self.strategy(review.id, history)
        records = self.store.records(review.id)
        decisions = self.store.decisions(review.id)
        keys = {r.key for r in records}
        flat = prisma.build_flow(
            sources=self.store.sources(review.id), unique_records=len(records),
            decisions={k: d for k, d in decisions.items() if k in keys},
            identities=self.store.source_identities(review.id), reasons=review.reasons,
            entered=self.store.flow_numbers(review.id))
        withdrawn = self.store.flags(review.id)
        return {
            "id": review.id,
            "name": review.name,
            "created_at": review.created_at,
            "questions": self.store.questions(review.id),
            "strategy": strategy.to_dict() if strategy else None,
            "strategy_versions": [s.to_dict() for s in self.store.strategies(review.id)],
            "sources": [{"origin": s.origin, "label": prisma.source_label(s), "identified": s.identified,
                         "added_at": s.added_at} for s in self.store.sources(review.id)],
            "runs": [r.to_dict() for r in self.store.runs(review.id)],
            "records": len(records),
            "screened": len(decisions),
            "included": sum(d.decision == INCLUDE for d in decisions.values()),
            "excluded": sum(d.decision == EXCLUDE for d in decisions.values()),
            "maybe": sum(d.decision == MAYBE for d in decisions.values()),
            "flow": flat.to_dict(),
            "updated_flow": self.flow(review.id).to_dict(),
            "withdrawn": [{"source": k[0], "external_id": k[1], "date": v} for k, v in withdrawn.items()],
            "other_reviewers": self.store.other_reviewers(review.id),
        }

    def report_lines(self, name: str, history: SearchHistory | None = None) -> list[str]:
        data = self.report(name, history)
        out = [f"review {data['id']} (since {data['created_at']})"]
        out += [f"  question {n}: {q}" for n, q in enumerate(data["questions"], start=1)]
        out.append(f"  {data['screened']:,} of {data['records']:,} records screened, {data['included']:,} "
                   f"included, {data['excluded']:,} excluded"
                   + (f", {data['maybe']:,} maybe" if data["maybe"] else ""))
        if data["strategy"]:
            s = data["strategy"]
            out.append(f"strategy (version {s['version']}, saved {s['saved_at']}"
                       + (f": {s['note']}" if s["note"] else "") + ")")
            out += [f"  {line}" for line in s["text"].splitlines()]
        else:
            out.append("no saved strategy (records came from files): an update has nothing to re-run")
        out.append("log:")
        for src in data["sources"]:
            updates = [r for r in data["runs"] if r["kind"] == "update"]
            if not any(src["origin"] in r["origin"].split(", ") for r in updates):
                out.append(f"  {src['label']}: {src['identified']:,} records identified (first review)")
        for version in data["strategy_versions"][1:]:
            out.append(f"  {version['saved_at']}: strategy edited (version {version['version']})"
                       + (f": {version['note']}" if version["note"] else ""))
        for run in data["runs"]:
            c = run["counts"]
            out.append(f"  {run['at']}: update {c.get('round')} ({run['origin']}, strategy version "
                       f"{run['strategy_version']}): {c.get('found', 0):,} found, "
                       f"{c.get('known', 0):,} already in the review, {c.get('new', 0):,} new, "
                       f"{c.get('withdrawn', 0):,} withdrawn")
        out.append("PRISMA 2020 flow:")
        out += [f"  {line}" for line in self.flow(data["id"]).lines()]
        for w in data["withdrawn"]:
            out.append(f"  withdrawn: {w['source']}:{w['external_id']} on {w['date']}")
        return out

    # -- update ----------------------------------------------------------------------------------------
    def update(self, name: str, *, history: SearchHistory, database: Any, agent: Any = None) -> UpdateOutcome:
        """Re-run the review's strategy on the database as it is now and add only new records (see the
        module docstring)."""
        review = self.store.find(name)
        strategy = self.strategy(review.id, history)
        if strategy is None:
            raise ReviewError(f"review {review.id!r} has no saved strategy to re-run: save one with "
                              f"'kmds-desktop literature review strategy {review.id} --from-set N'")
        number = next_round(self.store, review.id)
        outcome = UpdateOutcome(review=review.id, round=number, strategy_version=strategy.version,
                                strategy_text=strategy.text)
        workbench = SearchWorkbench(history, database)
        for search in strategy.searches:
            saved = workbench.run(str(search.get("question") or ""), rows_of(search),
                                  max_rows=int(search.get("max_rows") or 100),
                                  details={"review": review.id, "review_update": number}, agent=agent,
                                  kind="rerun")
            recs, per_row = records_from_history(history, database, saved.number)
            origin = f"#{saved.number}"
            new, known = add_round(self.store, review.id, recs, origin=origin, round_number=number,
                                   per_row=per_row)
            outcome.origins.append(origin)
            outcome.found += len(recs)
            outcome.known += len(known)
            outcome.new += len(new)
            outcome.new_keys += [r.key for r in new]
        outcome.withdrawn = flag_withdrawn(self.store, review.id, database)
        log_update(self.store, review.id, outcome, strategy)
        _copy_vectors(self.store, review.id, database)
        self.announce("updated")
        return outcome

    def new_records(self, database: Any, *, history: SearchHistory | None = None, agent: Any = None,
                    names: Iterable[str] | None = None) -> NewRecordsNotice:
        """How many records each review's strategy finds today that the review does not have (nothing
        is recorded or added: an import's report, and the start-up check when the database changed)."""
        notice = NewRecordsNotice()
        agent = agent or QueryAgent(database)
        wanted = set(names) if names is not None else None
        for review in self.store.reviews():
            if wanted is not None and review.id not in wanted:
                continue
            strategy = self.strategy(review.id, history)
            if strategy is None:
                continue
            earlier = {k for keys in self.store.source_identities(review.id).values() for k in keys}
            matcher = RecordMatcher(self.store.records(review.id), earlier)
            count = 0
            try:
                for search in strategy.searches:
                    rows = [search_row(t, p) for t, p in rows_of(search)]
                    result = agent.run_reviewed_queries(rows, max_rows=int(search.get("max_rows") or 100),
                                                        fetch=False)
                    for ident in document_identities(database, result.ids).values():
                        rec = ScreeningRecord(ident.source, ident.external_id, title=ident.title,
                                              doi=ident.doi or "", pmid=ident.pmid or "")
                        if matcher.match(rec) is None:
                            count += 1
                            matcher.add(rec)
            except Exception as err:  # noqa: BLE001 - one review's failure must not hide the others'
                notice.problems[review.id] = str(err)
                continue
            notice.new_per_review[review.id] = count
            notice.withdrawn_per_review[review.id] = len(unflagged_withdrawn(self.store, review.id, database))
        return notice

    # -- the review file --------------------------------------------------------------------------------
    def export(self, name: str, path: str | Path, *, reviewer: str = "") -> Path:
        return exchange.write_review_file(self.store, self.store.find(name).id, path, reviewer=reviewer,
                                          app_version=__version__)

    def import_file(self, path: str | Path, *, name: str | None = None) -> exchange.ImportedReview:
        imported = exchange.import_review_file(self.store, path, name=name)
        self.announce("reviews")
        return imported

    def merge(self, name: str, path: str | Path, *, reviewer: str | None = None) -> exchange.MergeReport:
        return exchange.merge_returned(self.store, self.store.find(name).id, path, reviewer)


def _copy_vectors(store: ReviewStore, review_id: str, database: Any) -> int:
    """The database's vectors of the review's records that have none yet join the review's (the order's
    features), as opening a search for screening copies them; without vectors the order uses TF-IDF
    alone. Why every record lacking one, not only an update's new ones: the model of an update trains on
    the earlier rounds' decisions, and a record without its vector (a review made before the database was
    embedded) is a row of zeros in those columns, so the earlier decisions would teach the vector part
    nothing and the new records would be ordered by a model that never saw a vector."""
    have = store.vectors(review_id, VECTOR_MODEL)
    ids = {r.doc_id: r.key for r in store.records(review_id) if r.doc_id is not None and r.key not in have}
    if not ids:
        return 0
    try:
        found = LiteratureStore(database).vectors_for(ids)
    except Exception:  # noqa: BLE001 - vectors improve the order, they are never required
        return 0
    return store.set_vectors(review_id, VECTOR_MODEL, {ids[i]: v for i, v in found.items() if i in ids})
