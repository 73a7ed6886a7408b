"""Which literature record each imported PDF is: by DOI, else by title, else one made from the PDF
(:mod:`.pdf_records`), else none; and the user's correction, which no later match overrides.

Why the DOI first and the title second: a DOI names one work (compared case-insensitively, as DOIs
are), while a title can be shared (an erratum, a preprint and its article); a title therefore counts
only when it names exactly one record. A PDF is rarely printed with its PMID, so a PMID match comes
through the record's DOI. Why the correction is the user's word: the DOI found on a PDF's first pages
can be a cited paper's, and a preprint's title can be its article's; the person who knows says "this
PDF is record X" (or "none of them") once, and :class:`~.store.FulltextStore` keeps that by the
file's content, across re-imports, moves and a rebuilt store.

The literature database is any object with the store's ``fetch_all(sql, params)`` (the app's
embedded PostgreSQL or a user's BMLibrarian database). It is only read, except that a PDF no record
matches gets one made in the app's own database (``create``; a BMLibrarian database is never written:
the paper stays without a record and says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kmds_desktop.literature.fulltext.pdf_records import (
    NOT_OWN_DATABASE,
    create_record,
    is_made_from,
    may_create,
    record_of_file,
)
from kmds_desktop.literature.fulltext.store import FulltextStore, PaperRow
from kmds_desktop.literature.store.identities import DocumentIdentity, document_identities, find_known
from kmds_desktop.tasks import CancelToken, ProgressFn, check, report


@dataclass(frozen=True)
class RecordMatch:
    """One paper's match: the record (None: none found), how (``doi``, ``title``, ``created``: the
    record made from the PDF, ``manual``), whether this run made that record (``new``) and why a paper
    was left unmatched (several records share its title, say)."""

    paper_id: int
    file: str
    record_id: int | None
    how: str | None
    record_label: str | None = None
    note: str = ""
    new: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"paper_id": self.paper_id, "file": self.file, "record_id": self.record_id,
                "match": self.how, "record": self.record_label, "note": self.note, "new_record": self.new}


@dataclass
class MatchReport:
    matches: list[RecordMatch] = field(default_factory=list)

    def count(self, how: str | None) -> int:
        return sum(1 for m in self.matches if m.how == how)

    @property
    def new_records(self) -> int:
        """Records this run made from PDFs (a later run finds them and makes none)."""
        return sum(1 for m in self.matches if m.new)

    def summary(self) -> str:
        """One line: how many papers matched by DOI, by title, by hand, how many records were made from
        PDFs, and how many papers are without a record (with the reason when one explains them all)."""
        unmatched = [m for m in self.matches if m.record_id is None]
        made_before = self.count("created") - self.new_records
        before = f" ({made_before} made before)" if made_before else ""
        why = (" (the literature database is not the app's own: nothing written there)"
               if unmatched and all(m.note == NOT_OWN_DATABASE for m in unmatched) else "")
        return (f"{self.count('doi')} by DOI, {self.count('title')} by title, {self.count('manual')} set by "
                f"hand, {self.new_records} new record{'' if self.new_records == 1 else 's'} made from PDFs"
                f"{before}, {len(unmatched)} without a record{why}")

    def as_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "new_records": self.new_records,
                "papers": [m.as_dict() for m in self.matches]}


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


def _made_or_found(db: Any, store: FulltextStore, paper: PaperRow,
                   note: str) -> tuple[DocumentIdentity | None, str | None, str, bool]:
    """For a paper no DOI or title matched: the record made from its file before, else a new one;
    ``(None, None, why, False)`` where none can be made (the database is not the app's own, the PDF
    names nothing, several records share its title)."""
    if note.endswith("set the right one by hand"):  # a title several records have: not a new paper
        return None, None, note, False
    if not may_create(db):
        return None, None, NOT_OWN_DATABASE, False
    found = record_of_file(db, paper)
    if found is not None:
        return found, "created", "", False
    try:
        record, made = create_record(db, store, paper)
    except ValueError as err:
        return None, None, str(err), False
    return record, "created", "", made


def match_records(store: FulltextStore, db: Any, *, create: bool = True, progress: ProgressFn | None = None,
                  cancel: CancelToken | None = None) -> MatchReport:
    """Match every imported paper to a record of ``db``; a paper the user matched by hand keeps
    the user's record (reported, not looked up). With ``create``, a paper no record matches gets one
    made from what the PDF says, in the app's own database only (:mod:`.pdf_records`)."""
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
        new = False
        if record is None and create:
            record, how, note, new = _made_or_found(db, store, paper, note)
        elif record is not None and is_made_from(record, paper):
            how = "created"  # found again by its DOI or title: still the record made from this file
        store.set_record(paper.id, record.doc_id if record else None, how,
                         (record.source, record.external_id) if record else None)
        result.matches.append(RecordMatch(paper.id, paper.path, record.doc_id if record else None, how,
                                          record.label() if record else None, note, new))
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
