"""The evidence session: full texts in, a question's passages out, answers with verified quotes.

Qt-free, so the CLI drives it now and the window's views later call the very same methods (one path
per job). The session owns the full-text store (``<data>/fulltext/fulltext.sqlite``) and announces
``"papers"`` after an import changed what is stored and ``"answer"`` after an answer was made, for
views that show them. Long calls take the project's ``progress`` and ``cancel`` arguments and are run
off the GUI thread by the window's workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kmds_desktop.app.events import Observable
from kmds_desktop.literature.evidence.answer import Answer, extractive_answer
from kmds_desktop.literature.evidence.search import (
    EvidenceHit,
    choice_query,
    default_query_embed,
    search_passages,
)
from kmds_desktop.literature.fulltext.importer import ImportReport, default_embed, import_folder
from kmds_desktop.literature.fulltext.records import (
    MatchReport,
    RecordMatch,
    match_records,
    set_record_by_hand,
)
from kmds_desktop.literature.fulltext.store import FulltextStore, PaperRow
from kmds_desktop.literature.fulltext.zotero import import_zotero
from kmds_desktop.literature.reviews.store import ReviewStore
from kmds_desktop.literature.screening.decisions import INCLUDE
from kmds_desktop.tasks import CancelToken, ProgressFn

#: Passages an evidence search shows by default.
DEFAULT_TOP = 10


@dataclass(frozen=True)
class ReviewScope:
    """The papers an evidence search is restricted to: those whose record the review included."""

    review: str
    included: int
    paper_ids: tuple[int, ...]

    def line(self) -> str:
        return (f"{len(self.paper_ids)} of the {self.included} records included in {self.review!r} have "
                "an imported PDF")


def review_names(reviews: ReviewStore | None = None) -> list[str]:
    """The data folder's reviews, by name (an evidence search may read one's included records)."""
    owned = reviews is None
    book = reviews if reviews is not None else ReviewStore()
    try:
        return [r.name for r in book.reviews()]
    finally:
        if owned:
            book.close()


def review_scope(store: FulltextStore, review: str, reviews: ReviewStore | None = None) -> ReviewScope:
    """The imported papers whose literature record ``review`` included (matched by the record's source
    and id, as screening keys its decisions). Raises ValueError when the review has no included
    records or none of them has a PDF, saying what to do."""
    owned = reviews is None
    book = reviews if reviews is not None else ReviewStore()
    try:
        found = book.find(review)
        included = {(source.lower(), external) for (source, external), decision
                    in book.decisions(found.id).items() if decision.decision == INCLUDE}
    finally:
        if owned:
            book.close()
    if not included:
        raise ValueError(f"the review {review!r} has no included records yet; screen it first")
    ids = tuple(p.id for p in store.papers() if p.status == "ok" and p.record_key is not None
                and (p.record_key[0].lower(), p.record_key[1]) in included)
    if not ids:
        raise ValueError(f"none of the {len(included)} records included in {review!r} has an imported PDF "
                         "matched to it; import their PDFs and match them (literature fulltext match)")
    return ReviewScope(found.name, len(included), ids)


class EvidenceSession(Observable):
    """Full texts and evidence over one store (the data folder's, unless a path is given)."""

    def __init__(self, store_path: Path | None = None) -> None:
        self.store = FulltextStore(store_path)
        #: ``encoder(texts) -> unit vectors``; the window sets its index process's, so torch never
        #: loads in the window's process. None: the shipped model in this process (the CLI).
        self.encoder: Callable[[Sequence[str]], Any] | None = None

    def _embed_options(self) -> dict[str, Any]:
        encoder = self.encoder
        if encoder is None:
            return {}
        return {"embed": encoder, "embed_query": lambda text: encoder([text])[0]}

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> EvidenceSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def import_folder(
        self, folder: Path, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
        db: Any | None = None,
    ) -> ImportReport:
        """Import a folder of PDFs (recursive, incremental by file content); with the literature
        database ``db``, then match the papers to its records (:meth:`match_records`)."""
        result = import_folder(self.store, Path(folder), progress=progress, cancel=cancel,
                               embed=self.encoder or default_embed)
        return self._matched(result, db, progress, cancel)

    def import_zotero(
        self, folder: Path, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
        db: Any | None = None,
    ) -> ImportReport:
        """Import a Zotero library's PDF attachments, read-only (a copy of its database is read); with
        ``db``, then match the papers to its records."""
        result = import_zotero(self.store, Path(folder), progress=progress, cancel=cancel,
                               embed=self.encoder or default_embed)
        return self._matched(result, db, progress, cancel)

    def _matched(self, result: ImportReport, db: Any | None, progress: ProgressFn | None,
                 cancel: CancelToken | None) -> ImportReport:
        """The import's report with its papers matched to ``db``'s records (records made from the PDFs
        no record matches, in the app's own database); as it was where ``db`` is None."""
        if db is not None:
            result.records = match_records(self.store, db, progress=progress, cancel=cancel)
        self.announce("papers")
        return result

    def status(self) -> dict[str, Any]:
        """Counts and every paper the store knows, failures with their reasons."""
        counts = self.store.counts()
        return {
            "store": str(self.store.path),
            "paper_count": counts["papers"],
            "failed": counts["failed"],
            "pages": counts["pages"],
            "passages": counts["passages"],
            "papers": [_paper_dict(p) for p in self.store.papers()],
        }

    def papers(self) -> list[PaperRow]:
        return self.store.papers()

    def find_paper(self, ref: str) -> PaperRow:
        """The paper a user names: its id in the store, its DOI, its file's path or its file name."""
        ref = ref.strip()
        papers = self.store.papers()
        if ref.isdigit():
            chosen = [p for p in papers if p.id == int(ref)]
        else:
            lowered = ref.lower().removeprefix("https://doi.org/").removeprefix("doi:")
            chosen = [p for p in papers if (p.doi or "").lower() == lowered or p.path == ref]
            chosen = chosen or [p for p in papers if Path(p.path).name == Path(ref).name]
        if len(chosen) != 1:
            raise ValueError(f"{ref!r} names {'no' if not chosen else len(chosen)} imported papers; give "
                             "the paper's id, DOI or file (see 'literature fulltext status')")
        return chosen[0]

    def review_scope(self, review: str) -> ReviewScope:
        """The papers of ``review``'s included records (see :func:`review_scope`)."""
        return review_scope(self.store, review)

    def match_records(self, db: Any, progress: ProgressFn | None = None,
                      cancel: CancelToken | None = None, *, create: bool = True) -> MatchReport:
        """Match the imported PDFs to the literature database's records (DOI, then title; else, with
        ``create``, a record made from the PDF in the app's own database); the papers matched by hand
        keep their record."""
        result = match_records(self.store, db, create=create, progress=progress, cancel=cancel)
        self.announce("papers")
        return result

    def set_record(self, paper_id: int, record_id: int | None, db: Any | None = None) -> RecordMatch:
        """The user's correction "this PDF is record X" (None: none of them), kept across re-imports;
        with ``db`` the record must exist there."""
        result = set_record_by_hand(self.store, db, paper_id, record_id)
        self.announce("papers")
        return result

    def clear_record(self, paper_id: int) -> PaperRow:
        """Forget the correction: the next match run matches the paper automatically again."""
        paper = self.store.unpin_record(paper_id)
        self.announce("papers")
        return paper

    def evidence(
        self, question: str, top: int = DEFAULT_TOP, paper_ids: Sequence[int] | None = None,
        options: Sequence[str] = (),
    ) -> list[EvidenceHit]:
        """The question's best passages (hybrid search), only of ``paper_ids`` when given; a
        multiple-choice question's ``options`` are searched with it (:func:`choice_query`)."""
        if options and question.strip():
            question = choice_query(question, options)
        embed = self._embed_options()
        return search_passages(self.store, question, top, paper_ids=paper_ids,
                               embed_query=embed.get("embed_query", default_query_embed))

    def answer(self, question: str, paper_ids: Sequence[int] | None = None) -> Answer:
        """The offline answer: cited sentences whose every quote is on its page, or "do not answer"."""
        hits = self.evidence(question, DEFAULT_TOP, paper_ids=paper_ids)
        options = self._embed_options()
        result = (extractive_answer(self.store, question, hits, embed=options["embed"]) if options
                  else extractive_answer(self.store, question, hits))
        self.announce("answer")
        return result


def _paper_dict(paper: PaperRow) -> dict[str, Any]:
    return {
        "id": paper.id, "file": paper.path, "doi": paper.doi, "title": paper.title,
        "pages": paper.page_count, "status": paper.status, "reason": paper.reason,
        "record_id": paper.record_id, "record_match": paper.record_match,
    }
