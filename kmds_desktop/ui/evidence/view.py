"""The Evidence view: a question box (with the questions asked), the ranked passages, the offline
answer and the cited page, composed side by side; each part emits signals and this view wires them.

Every slow step runs on the window's :class:`~kmds_desktop.ui.jobs.runner.JobRunner`: the search and the
answer (embedding, SQLite), the page render (pdfium), and the imports (a folder of PDFs, a Zotero
library), which show progress with Cancel in the status bar. The view talks to the application layer
only: :class:`~kmds_desktop.app.evidence.EvidenceSession` for the store, search, answers and imports,
:mod:`~kmds_desktop.app.evidence_pages` for a page's pixels and highlight and the question history.
The session is made on first use (a window that never shows evidence opens no store).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QSplitter, QVBoxLayout, QWidget

from kmds_desktop.app import last_folders
from kmds_desktop.app.evidence import EvidenceSession
from kmds_desktop.app.evidence_pages import QuestionHistory, render_paper_page
from kmds_desktop.ui.shell import file_dialogs
from kmds_desktop.ui.evidence.answer_pane import AnswerPane
from kmds_desktop.ui.evidence.page_view import PageView
from kmds_desktop.ui.evidence.passage_list import PassageList
from kmds_desktop.ui.evidence.question_box import QuestionBox

#: Job kinds of the view, with their policy: a newer search or page replaces a waiting one.
KINDS = {"search": "evidence.search", "answer": "evidence.answer", "page": "evidence.page",
         "import": "evidence.import"}
POLICIES = {KINDS["search"]: "latest", KINDS["answer"]: "refuse", KINDS["page"]: "latest",
            KINDS["import"]: "refuse"}


class EvidenceView(QWidget):
    """See the module docstring. ``message(level, text)`` goes to the window's message bar;
    ``page_shown(page)`` after a page is drawn; ``papers_changed(report)`` after an import."""

    message = Signal(str, str)
    page_shown = Signal(object)
    papers_changed = Signal(object)

    def __init__(self, jobs: Any, session: EvidenceSession | None = None, *,
                 session_factory: Callable[[], EvidenceSession] = EvidenceSession,
                 encoder: Callable[[Any], Any] | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("evidenceView")
        self.jobs = jobs
        for kind, policy in POLICIES.items():
            self.jobs.policies.setdefault(kind, policy)
        self._session = session
        self._session_factory = session_factory
        self._encoder = encoder
        self._history: QuestionHistory | None = None
        self.questions = QuestionBox()
        self.passages = PassageList()
        self.answer = AnswerPane()
        self.page = PageView()
        self.status = QLabel("")
        self.status.setObjectName("evidenceStatus")
        self.status.setWordWrap(True)

        left = QSplitter(Qt.Orientation.Vertical)
        passages_box = QWidget()
        passages_layout = QVBoxLayout(passages_box)
        passages_layout.setContentsMargins(0, 0, 0, 0)
        passages_layout.addWidget(QLabel("Passages, best first"))
        passages_layout.addWidget(self.passages, 1)
        left.addWidget(passages_box)
        left.addWidget(self.answer)
        left.setSizes([380, 260])
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("evidenceSplitter")
        self.splitter.addWidget(left)
        self.splitter.addWidget(self.page)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setSizes([420, 480])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.questions)
        layout.addWidget(self.splitter, 1)
        layout.addWidget(self.status)

        self.questions.search_requested.connect(self.search)
        self.questions.answer_requested.connect(self.ask)
        self.passages.passage_opened.connect(self.open_passage)
        self.answer.citation_opened.connect(self.open_citation)
        self.answer.export_requested.connect(self.export_answer_dialog)
        self.page.page_requested.connect(lambda paper_id, page_no: self.show_page(paper_id, page_no, ""))

    # -- the session and the history, made on first use --------------------------------------------
    @property
    def session(self) -> EvidenceSession:
        if self._session is None:
            self._session = self._session_factory()
            if self._encoder is not None:
                self._session.encoder = self._encoder
        return self._session

    @property
    def history(self) -> QuestionHistory:
        if self._history is None:
            self._history = QuestionHistory(self.session.store.path.parent)
            self.questions.set_history(self._history.questions())
        return self._history

    def showEvent(self, event: Any) -> None:  # noqa: N802 - Qt API
        super().showEvent(event)
        _ = self.history  # the questions asked before, in the list

    def shutdown(self) -> None:
        if self._session is not None:
            self._session.close()

    # -- search and answer -------------------------------------------------------------------------
    def _question_ok(self, question: str) -> bool:
        if not question:
            self.message.emit("warning", "Type a question first: what do you want the papers to answer?")
            return False
        return True

    def search(self, question: str) -> None:
        """The question's ranked passages, on a worker; the question goes into the history."""
        if not self._question_ok(question):
            return
        session, history = self.session, self.history

        def work() -> tuple[list[Any], list[str]]:
            return session.evidence(question), history.add(question)

        self.status.setText(f"Searching the full texts for: {question}")
        self.jobs.submit(KINDS["search"], work, label="Finding passages", pass_progress=False,
                         on_result=self._show_hits, on_error=self._failed)

    def _show_hits(self, result: tuple[list[Any], list[str]]) -> None:
        hits, asked = result
        self.questions.set_history(asked)
        self.passages.set_hits(hits)
        if hits:
            self.status.setText(f"{len(hits)} passages; click one to see it on its page.")
        else:
            self.status.setText("No passages: import PDFs first (File \u2192 Import PDFs\u2026).")

    def ask(self, question: str) -> None:
        """The offline answer, on a worker; its passages are listed too."""
        if not self._question_ok(question):
            return
        session, history = self.session, self.history

        def work() -> tuple[Any, list[str]]:
            return session.answer(question), history.add(question)

        self.questions.set_busy(True)
        self.status.setText(f"Answering from the full texts: {question}")
        self.jobs.submit(KINDS["answer"], work, label="Answering from the papers", pass_progress=False,
                         on_result=self._show_answer, on_error=self._failed,
                         on_finished=lambda: self.questions.set_busy(False))

    def _show_answer(self, result: tuple[Any, list[str]]) -> None:
        answer, asked = result
        self.questions.set_history(asked)
        self.passages.set_hits(list(answer.passages))
        self.answer.show_answer(answer)
        sources = len(answer.sources)
        self.status.setText(f"Answered from {sources} source{'s' if sources != 1 else ''}; click [n] to "
                            "see the page." if answer.answered else answer.text)

    # -- pages -------------------------------------------------------------------------------------
    def open_passage(self, hit: Any) -> None:
        """The passage's first page, the passage marked."""
        self.show_page(hit.paper_id, hit.start_page, hit.text)

    def open_citation(self, number: int) -> None:
        """Citation ``[number]`` of the shown answer: its page, its first quote marked."""
        answer = self.answer.answer
        source = next((s for s in answer.sources if s.number == number), None) if answer else None
        paper_id = next((h.paper_id for h in answer.passages if source and h.file == source.file), None) \
            if answer else None
        if source is None or paper_id is None:
            self.message.emit("warning", f"Citation [{number}] is not in the shown answer; ask again.")
            return
        quote = next((q.text for q in answer.quotes if q.source == number), "")
        self.show_page(paper_id, source.pages[0], quote)

    def show_page(self, paper_id: int, page_no: int, highlight: str) -> None:
        session = self.session
        self.jobs.submit(KINDS["page"], render_paper_page, session, paper_id, page_no, highlight,
                         label="Drawing the page", pass_progress=False, busy_cursor=False,
                         on_result=self._page_ready, on_error=self._failed)

    def _page_ready(self, page: Any) -> None:
        self.page.show_page(page)
        self.page_shown.emit(page)

    # -- imports and export ------------------------------------------------------------------------
    def import_pdfs_dialog(self) -> None:
        folder = file_dialogs.folder(self, last_folders.LITERATURE, "Import the PDFs under a folder")
        if folder:
            self.import_pdfs(Path(folder))

    def import_zotero_dialog(self) -> None:
        folder = file_dialogs.folder(self, last_folders.LITERATURE,
                                     "Zotero's data folder (the one holding zotero.sqlite)")
        if folder:
            self.import_zotero(Path(folder))

    def import_pdfs(self, folder: Path) -> Any:
        return self._import(self.session.import_folder, folder, f"Importing the PDFs in {folder.name}")

    def import_zotero(self, folder: Path) -> Any:
        return self._import(self.session.import_zotero, folder, "Importing the Zotero library's PDFs")

    def _import(self, fn: Callable[..., Any], folder: Path, label: str) -> Any:
        self.status.setText(f"{label}\u2026")
        return self.jobs.submit(KINDS["import"], fn, folder, label=label, on_result=self._imported,
                                on_error=self._failed,
                                on_cancelled=lambda: self.status.setText(
                                    "Import cancelled; the files done are kept."))

    def _imported(self, report: Any) -> None:
        failures = report.failures
        text = f"{Path(report.folder).name}: {report.summary()}."
        if failures:
            first = failures[0]
            text += f" {Path(first.path).name}: {first.reason}"
        self.status.setText(text)
        self.message.emit("warning" if failures else "info", text)
        self.papers_changed.emit(report)

    def export_answer_dialog(self) -> None:
        answer = self.answer.answer
        if answer is None:
            return
        target = file_dialogs.save_file(self, last_folders.EXPORT, "Export the answer as Markdown",
                                        "answer.md", "Markdown (*.md);;All files (*)")
        if target:
            self.export_answer(Path(target))

    def export_answer(self, target: Path) -> bool:
        """Write the shown answer as Markdown (citations, quotes, sources) to ``target``."""
        try:
            target.write_text(self.answer.answer.markdown(), encoding="utf-8")
        except OSError as err:
            self.message.emit("error", f"Cannot write {target} ({err.strerror or err}); choose another file.")
            return False
        self.status.setText(f"Answer written to {target}.")
        return True

    def _failed(self, exc: BaseException) -> None:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        self.status.setText(text)
        self.message.emit("error", text)
