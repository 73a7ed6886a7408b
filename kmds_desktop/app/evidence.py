"""The evidence session: full texts in, a question's passages out, answers with verified quotes.

Qt-free, so the CLI drives it now and the window's views later call the very same methods (one path
per job). The session owns the full-text store (``<data>/fulltext/fulltext.sqlite``) and announces
``"papers"`` after an import changed what is stored and ``"answer"`` after an answer was made, for
views that show them. Long calls take the project's ``progress`` and ``cancel`` arguments and are run
off the GUI thread by the window's workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kmds_desktop.app.events import Observable
from kmds_desktop.literature.evidence.answer import Answer, extractive_answer
from kmds_desktop.literature.evidence.search import EvidenceHit, default_query_embed, search_passages
from kmds_desktop.literature.fulltext.importer import ImportReport, default_embed, import_folder
from kmds_desktop.literature.fulltext.store import FulltextStore, PaperRow
from kmds_desktop.literature.fulltext.zotero import import_zotero
from kmds_desktop.tasks import CancelToken, ProgressFn

#: Passages an evidence search shows by default.
DEFAULT_TOP = 10


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
        self, folder: Path, progress: ProgressFn | None = None, cancel: CancelToken | None = None
    ) -> ImportReport:
        """Import a folder of PDFs (recursive, incremental by file content)."""
        result = import_folder(self.store, Path(folder), progress=progress, cancel=cancel,
                               embed=self.encoder or default_embed)
        self.announce("papers")
        return result

    def import_zotero(
        self, folder: Path, progress: ProgressFn | None = None, cancel: CancelToken | None = None
    ) -> ImportReport:
        """Import a Zotero library's PDF attachments, read-only (a copy of its database is read)."""
        result = import_zotero(self.store, Path(folder), progress=progress, cancel=cancel,
                               embed=self.encoder or default_embed)
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

    def evidence(
        self, question: str, top: int = DEFAULT_TOP, paper_ids: Sequence[int] | None = None
    ) -> list[EvidenceHit]:
        """The question's best passages (hybrid search), only of ``paper_ids`` when given."""
        options = self._embed_options()
        return search_passages(self.store, question, top, paper_ids=paper_ids,
                               embed_query=options.get("embed_query", default_query_embed))

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
        "record_id": paper.record_id,
    }
