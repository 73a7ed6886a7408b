"""Which literature record each imported PDF is: by DOI, else by title, else none; and the user's
correction, which no later match overrides.

Why the DOI first and the title second: a DOI names one work (compared case-insensitively, as DOIs
are), while a title can be shared (an erratum, a preprint and its article); a title therefore counts
only when it names exactly one record. A PDF is rarely printed with its PMID, so a PMID match comes
through the record's DOI. Why the correction is the user's word: the DOI found on a PDF's first pages
can be a cited paper's, and a preprint's title can be its article's; the person who knows says "this
PDF is record X" (or "none of them") once, and :class:`~.store.FulltextStore` keeps that by the
file's content, across re-imports, moves and a rebuilt store.

The literature database is any object with the store's ``fetch_all(sql, params)`` (the app's
embedded PostgreSQL or a user's BMLibrarian database): it is only read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kmds_desktop.literature.fulltext.store import FulltextStore, PaperRow
from kmds_desktop.literature.store.identities import DocumentIdentity, document_identities, find_known
from kmds_desktop.tasks import CancelToken, ProgressFn, check, report


@dataclass(frozen=True)
class RecordMatch:
    """One paper's match: the record (None: none found), how (``doi``, ``title``, ``manual``) and why
    a paper was left unmatched (several records share its title, say)."""

    paper_id: int
    file: str
    record_id: int | None
    how: str | None
    record_label: str | None = None
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"paper_id": self.paper_id, "file": self.file, "record_id": self.record_id,
                "match": self.how, "record": self.record_label, "note": self.note}


@dataclass
class MatchReport:
    matches: list[RecordMatch] = field(default_factory=list)

    def count(self, how: str | None) -> int:
        return sum(1 for m in self.matches if m.how == how)

    def summary(self) -> str:
        """One line: how many papers matched by DOI, by title, by hand, and how many are unmatched."""
        unmatched = sum(1 for m in self.matches if m.record_id is None)
        return (f"{self.count('doi')} by DOI, {self.count('title')} by title, {self.count('manual')} set by "
                f"hand, {unmatched} without a record")

    def as_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "papers": [m.as_dict() for m in self.matches]}


def _unique(found: Sequence[DocumentIdentity]) -> DocumentIdentity | None:
    return found[0] if len(found) == 1 else None


def match_paper(db: Any, paper: PaperRow) -> tuple[DocumentIdentity | None, str | None, str]:
    """``(record, how, note)`` for one paper: its DOI's record, else its title's when only one record
    has that title."""
    if paper.doi:
        found = find_known(db, dois=[paper.doi])
        if found:
            # Several records with one DOI (a source imported twice): the oldest, the same every time.
            return min(found, key=lambda d: d.doc_id), "doi", ""
    if paper.title and len(paper.title.split()) >= 4:  # a 'title' of one or two words names nothing
        found = find_known(db, titles=[paper.title])
        record = _unique(found)
        if record is not None:
            return record, "title", ""
        if found:
            return None, None, f"{len(found)} records have this title; set the right one by hand"
    return None, None, "no record with this DOI or title"


def match_records(store: FulltextStore, db: Any, *, progress: ProgressFn | None = None,
                  cancel: CancelToken | None = None) -> MatchReport:
    """Match every imported paper to a record of ``db``; a paper the user matched by hand keeps
    the user's record (reported, not looked up)."""
    papers = [p for p in store.papers() if p.status == "ok"]
    result = MatchReport()
    pinned = [p.record_id for p in papers if p.record_match == "manual" and p.record_id is not None]
    labels = {i: d.label() for i, d in document_identities(db, pinned).items()}
    for done, paper in enumerate(papers):
        check(cancel)
        report(progress, done, len(papers), f"matching {paper.label}")
        if paper.record_match == "manual":
            note = "" if paper.record_id is None or paper.record_id in labels else \
                "the record set by hand is not in this database"
            result.matches.append(RecordMatch(paper.id, paper.path, paper.record_id, "manual",
                                              labels.get(paper.record_id or -1), note))
            continue
        record, how, note = match_paper(db, paper)
        store.set_record(paper.id, record.doc_id if record else None, how,
                         (record.source, record.external_id) if record else None)
        result.matches.append(RecordMatch(paper.id, paper.path, record.doc_id if record else None, how,
                                          record.label() if record else None, note))
    report(progress, len(papers), len(papers), result.summary())
    return result


def set_record_by_hand(store: FulltextStore, db: Any | None, paper_id: int,
                       record_id: int | None) -> RecordMatch:
    """The user's correction: paper ``paper_id`` is record ``record_id`` (None: none of them).

    With ``db``, the record must exist there (a typo in an id is refused, nothing changed)."""
    label = None
    key = None
    if record_id is not None and db is not None:
        known = document_identities(db, [record_id])
        if record_id not in known:
            raise ValueError(f"no literature record with id {record_id}; find its id with "
                             "'literature search' or in the documents table")
        label = known[record_id].label()
        key = (known[record_id].source, known[record_id].external_id)
    paper = store.pin_record(paper_id, record_id, key)
    return RecordMatch(paper.id, paper.path, paper.record_id, "manual", label)
