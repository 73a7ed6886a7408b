"""Updating a review: the records a re-run of its strategy found, split into known and new, and logged.

Why here and not in the screening session: an update is a round of the review (logged with its date,
counts and the strategy's text), and its rules are the review's: a record seen in any earlier run is
recognised (:class:`~kmds_desktop.literature.reviews.identity.RecordMatcher`) and never added again, so
its decision stands and an earlier record not yet screened stays in the queue where it was; only new
records join, marked with the round they joined in. The screening order is the session's own: its model
trains on every decision the review holds, so the new records are ordered by what earlier rounds taught.

Records of the review that the database has withdrawn since (``document.withdrawn_date``) are flagged
with the date, never removed: the decision made on them stays on record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kmds_desktop.literature.reviews.identity import RecordMatcher
from kmds_desktop.literature.reviews.store import ReviewStore, SavedStrategy
from kmds_desktop.literature.screening.decisions import Key
from kmds_desktop.literature.screening.records import ScreeningRecord, merge_duplicates

_BATCH = 1000


@dataclass
class UpdateOutcome:
    """What one update did (the CLI prints it; ``--json`` gives :meth:`to_dict`)."""

    review: str
    round: int
    at: str = ""
    origins: list[str] = field(default_factory=list)
    found: int = 0  #: records the strategy found today (after merging within the run)
    known: int = 0  #: of them, records the review already had (by identity, DOI, PMID or title)
    new: int = 0  #: records that joined the queue
    new_keys: list[Key] = field(default_factory=list)
    withdrawn: dict[Key, str] = field(default_factory=dict)  #: newly flagged records and their dates
    strategy_version: int | None = None
    strategy_text: str = ""

    def line(self) -> str:
        flagged = (f"; {self.plural(len(self.withdrawn), 'record')} withdrawn since (flagged)"
                   if self.withdrawn else "")
        found = self.plural(self.found, "record")
        return (f"update {self.round} of {self.review}: the strategy found {found}, "
                f"{self.known:,} already in the review, {self.plural(self.new, 'new record')} joined the "
                f"queue{flagged}")

    @staticmethod
    def plural(n: int, word: str) -> str:
        return f"{n:,} {word}{'' if n == 1 else 's'}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "review": self.review, "round": self.round, "at": self.at, "origins": list(self.origins),
            "found": self.found, "known": self.known, "new": self.new,
            "new_records": [list(k) for k in self.new_keys],
            "withdrawn": [{"source": k[0], "external_id": k[1], "date": v}
                          for k, v in self.withdrawn.items()],
            "strategy_version": self.strategy_version, "strategy_text": self.strategy_text,
        }


def next_round(store: ReviewStore, review_id: str) -> int:
    """The number the next update gets (1 for the first)."""
    return 1 + sum(1 for r in store.runs(review_id) if r.kind == "update")


def split_known(store: ReviewStore, review_id: str,
                found: Sequence[ScreeningRecord]) -> tuple[list[ScreeningRecord], list[ScreeningRecord]]:
    """(new, known): ``found`` merged within itself, then each recognised against the review's records
    and every identity an earlier run brought."""
    earlier = {k for keys in store.source_identities(review_id).values() for k in keys}
    matcher = RecordMatcher(store.records(review_id), earlier)
    unique, _ = merge_duplicates(list(found))
    new, known = [], []
    for rec in unique:
        if matcher.match(rec) is None:
            new.append(rec)
            matcher.add(rec)  # a second record of the same paper later in the run is known, not new
        else:
            known.append(rec)
    return new, known


def add_round(store: ReviewStore, review_id: str, found: Sequence[ScreeningRecord], *, origin: str,
              round_number: int, per_row: Mapping[str, int] | None = None,
              identities: Iterable[Key] = ()) -> tuple[list[ScreeningRecord], list[ScreeningRecord]]:
    """Add what one run of the strategy found: only the new records join (marked with the round); the
    run's identities are kept for the PRISMA flow. Returns (new, known)."""
    new, known = split_known(store, review_id, found)
    for rec in new:
        if origin not in rec.origins:
            rec.origins.append(origin)
    store.add_records(review_id, new, origin=origin, identified=len(found), per_row=per_row,
                      identities=list(identities) or [r.key for r in found])
    store.set_rounds(review_id, [r.key for r in new], round_number)
    return new, known


def log_update(store: ReviewStore, review_id: str, outcome: UpdateOutcome,
               strategy: SavedStrategy | None) -> None:
    """Log the update with its counts and the strategy's text (the report's "what was searched when")."""
    store.log_run(review_id, "update", strategy=strategy, origin=", ".join(outcome.origins), counts={
        "round": outcome.round, "found": outcome.found, "known": outcome.known, "new": outcome.new,
        "withdrawn": len(outcome.withdrawn)})
    outcome.at = store.runs(review_id)[-1].at


def withdrawn_dates(db: Any, keys: Iterable[Key]) -> dict[Key, str]:
    """The withdrawal date (``YYYY-MM-DD``) of each of ``keys`` the database marks withdrawn."""
    pairs = sorted({(str(k[0]), str(k[1])) for k in keys})
    out: dict[Key, str] = {}
    for start in range(0, len(pairs), _BATCH):
        chunk = pairs[start:start + _BATCH]
        rows = db.fetch_all(
            "SELECT s.name, d.external_id, d.withdrawn_date::date::text FROM document d JOIN sources s "
            "ON s.id = d.source_id JOIN unnest(%s::text[], %s::text[]) AS k(source, ext) "
            "ON s.name = k.source AND d.external_id = k.ext WHERE d.withdrawn_date IS NOT NULL",
            ([p[0] for p in chunk], [p[1] for p in chunk]))
        for source, ext, date in rows:
            out[(str(source), str(ext))] = str(date)
    return out


def unflagged_withdrawn(store: ReviewStore, review_id: str, db: Any) -> dict[Key, str]:
    """The review's records the database marks withdrawn that are not flagged yet (or flagged with
    another date), with the withdrawal date: what the next update flags, and what the check after an
    import or on start reports."""
    by_alias: dict[Key, Key] = {}
    for rec in store.records(review_id):
        for k in (rec.key, *rec.aliases):
            by_alias[k] = rec.key
    dates = withdrawn_dates(db, by_alias)
    if not dates:
        return {}
    flagged = {by_alias[k]: v for k, v in dates.items() if k in by_alias}
    already = store.flags(review_id)
    return {k: v for k, v in flagged.items() if already.get(k) != v}


def flag_withdrawn(store: ReviewStore, review_id: str, db: Any) -> dict[Key, str]:
    """Flag the review's records withdrawn since they joined; returns the newly flagged ones."""
    fresh = unflagged_withdrawn(store, review_id, db)
    if fresh:
        store.set_flags(review_id, fresh)
    return fresh
