"""The Evidence view: a question box (with the questions asked), the ranked passages, the offline
answer, a claim's verdict, a choice between options and the cited page, composed side by side; each
part emits signals and this view wires them.

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
from kmds_desktop.app.evidence import EvidenceSession, review_names
from kmds_desktop.app.evidence_links import link_choice, link_verdict
from kmds_desktop.app.evidence_pages import QuestionHistory, render_paper_page
from kmds_desktop.app.verdicts import choose, pick_judge, quoted_paper, verdict
from kmds_desktop.ui.evidence.answer_pane import AnswerPane
from kmds_desktop.ui.evidence.choice_pane import ChoicePane
from kmds_desktop.ui.evidence.page_view import PageView
from kmds_desktop.ui.evidence.passage_list import PassageList
from kmds_desktop.ui.evidence.question_box import QuestionBox
from kmds_desktop.ui.evidence.scope_bar import RecordBar, ScopeBar
from kmds_desktop.ui.evidence.verdict_pane import VerdictPane
from kmds_desktop.ui.shell import file_dialogs

#: Job kinds of the view, with their policy: a newer search or page replaces a waiting one.
KINDS = {"search": "evidence.search", "answer": "evidence.answer", "page": "evidence.page",
         "import": "evidence.import", "verdict": "evidence.verdict", "record": "evidence.record",
         "reviews": "evidence.reviews", "choice": "evidence.choice"}
POLICIES = {KINDS["search"]: "latest", KINDS["answer"]: "refuse", KINDS["page"]: "latest",
            KINDS["import"]: "refuse", KINDS["verdict"]: "refuse", KINDS["record"]: "refuse",
            KINDS["reviews"]: "latest", KINDS["choice"]: "refuse"}
#: ``() -> (the open KB or None, the selected observation or None)``.
KbTarget = Callable[[], tuple[Any, Any]]
#: ``(then, failed)``: the window's literature database handed to ``then`` once open.
WithDatabase = Callable[[Callable[[Any], Any], Callable[[BaseException], Any]], None]


class EvidenceView(QWidget):
    """See the module docstring. ``message(level, text)`` goes to the window's message bar;
    ``page_shown(page)`` after a page is drawn; ``papers_changed(report)`` after an import."""

    message = Signal(str, str)
    page_shown = Signal(object)
    papers_changed = Signal(object)
    #: ``(observation IRI)`` after a verdict was filed under it (the KB is then unsaved).
    evidence_filed = Signal(str)

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
        self.scope = ScopeBar()
        self.verdict = VerdictPane()
        self.choice = ChoicePane()
        self.record = RecordBar()
        #: Where a verdict is filed; None: the window's open KB and its KB browser's selection.
        self.kb_target: KbTarget | None = None
        #: Who judges a claim: the settings' model, else offline (as ``literature verdict`` picks).
        self.judge_factory: Callable[[], Any] = pick_judge
        #: ``(then, failed)``: ``then(db)`` once the window's literature database is open (opened on a
        #: worker if needed), ``failed(exc)`` if it cannot be. An import then matches its PDFs to the
        #: database's records and makes records for the unmatched ones; None: it matches nothing.
        self.with_database: WithDatabase | None = None
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
        left.addWidget(self.verdict)
        left.addWidget(self.choice)
        left.setSizes([280, 170, 120, 200])
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(self.page, 1)
        right_layout.addWidget(self.record)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("evidenceSplitter")
        self.splitter.addWidget(left)
        self.splitter.addWidget(right)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setSizes([420, 480])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.questions)
        layout.addWidget(self.scope)
        layout.addWidget(self.splitter, 1)
        layout.addWidget(self.status)

        self.questions.search_requested.connect(self.search)
        self.questions.answer_requested.connect(self.ask)
        self.passages.passage_opened.connect(self.open_passage)
        self.answer.citation_opened.connect(self.open_citation)
        self.answer.export_requested.connect(self.export_answer_dialog)
        self.page.page_requested.connect(lambda paper_id, page_no: self.show_page(paper_id, page_no, ""))
        self.verdict.judge_requested.connect(lambda: self.judge(self.questions.line.text().strip()))
        self.verdict.file_requested.connect(self.file_verdict)
        self.choice.choose_requested.connect(lambda options: self.choose(self.questions.question(), options))
        self.choice.file_requested.connect(self.file_choice)
        self.choice.citation_opened.connect(self.show_page)
        self.choice.message.connect(self.message)
        self.record.record_set.connect(self.set_record)
        self.record.record_cleared.connect(self.clear_record)

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
        self.refresh_reviews()

    def refresh_reviews(self) -> Any:
        """The reviews listed in the papers' scope (read on a worker)."""
        return self.jobs.submit(KINDS["reviews"], review_names, label="Listing the reviews",
                                pass_progress=False, busy_cursor=False,
                                on_result=self.scope.set_reviews, on_error=self._failed)

    def _scope(self) -> Callable[[], tuple[int, ...] | None]:
        """The papers the scope reads (None: all), as a call for the worker: the review is read from
        the combo here, on the GUI thread, and its papers looked up on the worker."""
        session, review = self.session, self.scope.review()
        return lambda: session.review_scope(review).paper_ids if review else None

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
        session, history, scope = self.session, self.history, self._scope()

        def work() -> tuple[list[Any], list[str]]:
            return session.evidence(question, paper_ids=scope()), history.add(question)

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
        session, history, scope = self.session, self.history, self._scope()

        def work() -> tuple[Any, list[str]]:
            return session.answer(question, paper_ids=scope()), history.add(question)

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

    # -- verdicts into the KB -----------------------------------------------------------------------
    def judge(self, claim: str) -> Any:
        """The question box's text judged as a claim (the configured model, else offline), on a worker."""
        if not claim:
            self.message.emit("warning", "Type the statement to check first, then click Judge as a claim.")
            return None
        session, scope, judge_factory = self.session, self._scope(), self.judge_factory

        def work() -> Any:
            return verdict(session.store, claim, judge_factory(), paper_ids=scope(), encoder=session.encoder)

        self.verdict.set_busy(True)
        self.status.setText(f"Judging against the papers: {claim}")
        return self.jobs.submit(KINDS["verdict"], work, label="Judging the claim", pass_progress=False,
                                on_result=self._show_verdict, on_error=self._failed,
                                on_finished=lambda: self.verdict.set_busy(False))

    def _show_verdict(self, result: Any) -> None:
        self.verdict.show_verdict(result)
        self.refresh_targets()
        self.status.setText(result.summary)

    def choose(self, question: str, options: list[str]) -> Any:
        """The option the papers bear out for the question box's question, judged as ``judge`` is."""
        if not question:
            self.message.emit("warning", "Type the question the options answer first, then click Choose.")
            return None
        session, scope, judge_factory = self.session, self._scope(), self.judge_factory

        def work() -> tuple[Any, int | None]:
            ids = scope()
            result = choose(session.store, question, options, judge_factory(), paper_ids=ids,
                            encoder=session.encoder)
            return result, quoted_paper(session.store, result, ids)

        self.choice.set_busy(True)
        self.status.setText(f"Choosing between {len(options)} options from the papers: {question}")
        return self.jobs.submit(KINDS["choice"], work, label="Choosing from the papers", pass_progress=False,
                                on_result=lambda r: self._show_choice(*r), on_error=self._failed,
                                on_finished=lambda: self.choice.set_busy(False))

    def _show_choice(self, result: Any, paper_id: int | None) -> None:
        self.choice.show_choice(result, paper_id)
        self.refresh_targets()
        self.status.setText(f"Chose \u201c{result.answer}\u201d; click its paper and page to see the quote."
                            if result.quote else "No option chosen: the papers do not decide it.")

    def _kb_target(self) -> tuple[Any, Any]:
        if self.kb_target is not None:
            return self.kb_target()
        window = self.window()
        browser = getattr(window, "browser", None)
        observation = browser.current_observation() if hasattr(browser, "current_observation") else None
        return getattr(window, "kb", None), observation

    def refresh_targets(self) -> None:
        """Say under each shown result where File would put it, now: called when a result is shown and
        when the KB browser's selection changes, so the line never names a finding no longer selected."""
        kb, observation = self._kb_target()
        line = (f"Files under: {observation.name}" if kb is not None and observation is not None else
                "To file it, open a KB and select an observation in the KB browser.")
        self.verdict.target.setText(line if self.verdict.verdict is not None else "")
        self.choice.target.setText(line if self.choice.fileable() else "")

    def _filing_target(self) -> tuple[Any, Any] | None:
        kb, observation = self._kb_target()
        if kb is None or observation is None:
            self.message.emit("warning", "Select the observation to file under in the KB browser first "
                                         "(open a KB if none is open).")
            return None
        return kb, observation

    def _filed(self, observation: Any, links: int, notes: list[str]) -> None:
        text = (f"Filed {links} link{'s' if links != 1 else ''} under {observation.name}; "
                "save the KB to keep them.")
        if notes:
            text += " " + notes[0]
        self.status.setText(text)
        self.message.emit("info", text)
        self.evidence_filed.emit(str(observation.iri))

    def file_verdict(self) -> bool:
        """File the shown verdict under the selected observation (in the open KB; Save keeps it).

        On the GUI thread: the open KB is the window's, edited where the KB browser edits it, and a
        few links with quotes already verified take milliseconds."""
        result = self.verdict.verdict
        target = self._filing_target() if result is not None else None
        if target is None:
            return False
        kb, observation = target
        try:
            outcomes, notes = link_verdict(kb, observation.iri, result, store=self.session.store, save=False)
        except ValueError as err:
            self.message.emit("error", str(err).splitlines()[0])
            return False
        self._filed(observation, len(outcomes), notes)
        return True

    def file_choice(self) -> bool:
        """File the chosen option's paper, page and quote under the selected observation, as
        :meth:`file_verdict` files a verdict (one link, its quote checked again on its page)."""
        result, paper_id = self.choice.choice, self.choice.paper_id
        target = self._filing_target() if result is not None else None
        if target is None:
            return False
        kb, observation = target
        try:
            outcome = link_choice(kb, observation.iri, result, paper_id, store=self.session.store, save=False)
        except ValueError as err:
            self.message.emit("error", str(err).splitlines()[0])
            return False
        self._filed(observation, 1, outcome.notes)
        return True

    # -- the shown paper's record ------------------------------------------------------------------
    def set_record(self, paper_id: int, record_id: int | None) -> Any:
        session = self.session
        return self.jobs.submit(KINDS["record"], lambda: session.set_record(paper_id, record_id),
                                label="Setting the record", pass_progress=False, busy_cursor=False,
                                on_result=lambda _m: self._record_changed(paper_id), on_error=self._failed)

    def clear_record(self, paper_id: int) -> Any:
        session = self.session
        return self.jobs.submit(KINDS["record"], lambda: session.clear_record(paper_id),
                                label="Forgetting the record", pass_progress=False, busy_cursor=False,
                                on_result=lambda _p: self._record_changed(paper_id), on_error=self._failed)

    def _record_changed(self, paper_id: int) -> None:
        paper = self.session.store.paper(paper_id)
        self.record.show_paper(paper)
        self.status.setText(f"{self.record.label.text()}: kept across re-imports.")

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
        self.record.show_paper(self.session.store.paper(page.paper_id))
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
        """Import on a worker; with :attr:`with_database`, once the literature database is open, so the
        same job matches the PDFs to records (a database that cannot be opened: imported unmatched)."""
        self.status.setText(f"{label}\u2026")
        submitted: list[Any] = []

        def submit(db: Any = None, note: str = "") -> None:
            def work(folder: Path, progress: Any = None, cancel: Any = None) -> Any:
                result = fn(folder, progress=progress, cancel=cancel, db=db)
                result.records_note = note
                return result

            submitted.append(self.jobs.submit(
                KINDS["import"], work, folder, label=label, on_result=self._imported, on_error=self._failed,
                on_cancelled=lambda: self.status.setText("Import cancelled; the files done are kept.")))

        if self.with_database is None:
            submit()
        else:
            self.with_database(submit, lambda exc: submit(note=str(exc).splitlines()[0] if str(exc) else
                                                          "the literature database is not available"))
        return submitted[0] if submitted else None  # None: waiting for the database to open

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
