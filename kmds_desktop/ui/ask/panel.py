"""The question/answer panel: ask the open KB, read a cited Markdown answer, inspect and edit the route.

One question is one ``"ask"`` job (a second Ask while one runs is refused with a message). The job
wraps :func:`kmds_desktop.app.ask.answer_question`, the application layer's plain function around
the orchestrator's ``ask_stream``; the rules about the question, its history and what a change of KB
means for the answer on screen are the :class:`~kmds_desktop.app.ask.AskSession`'s. The job first
hands over the retrieved result (route, fallback, records) so the route and the table appear at
once, then streams the answer's text as chunks. ``[n]`` in the answer links to record ``n``;
clicking it selects the observation in the KB browser (:attr:`AskPanel.citation_activated`).

Its parts: the question box (:mod:`~kmds_desktop.ui.ask.question`), the Route box
(:mod:`~kmds_desktop.ui.ask.route`) and the records table (:mod:`~kmds_desktop.ui.ask.results`).
The answer's Markdown repair, its citation links, the question history and the line that says who
answered are :mod:`kmds_desktop.app.ask`'s.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QModelIndex, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QKeySequence, QShortcut, QTextCharFormat
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.app import ask as app_ask
from kmds_desktop.app import last_folders
from kmds_desktop.app.ask import (
    RENDERED,
    RETRIEVED,
    STALE_NOTE,
    AskInputError,
    AskSession,
    answer_markdown,
    answer_question,
    answered_line,
    citation_number,
    displayed_answer,
    warm_route_prompt,
)
from kmds_desktop.app.events import Change
from kmds_desktop.app.workspace_session import KB_EDITED, KB_OPENED, WorkspaceSession
from kmds_desktop.ui.ask.markdown_render import to_html
from kmds_desktop.ui.ask.question import QuestionEdit
from kmds_desktop.ui.ask.results import RecordsTable, ResultsModel
from kmds_desktop.ui.ask.route import (
    ANSWER_CANCELLED,
    ANSWER_FAILED,
    ANSWER_WRITING,
    CANCELLED_BEFORE_ROUTE,
    INTENT_LABELS,
    RouteEditor,
)
from kmds_desktop.ui.jobs.runner import Job, JobRunner, format_exception
from kmds_desktop.ui.shell import file_dialogs

__all__ = ["INTENT_LABELS", "AskPanel", "QuestionEdit", "ResultsModel", "RouteEditor", "answer_html"]


def answer_html(text: str, n_results: int) -> str:
    """Markdown answer -> HTML with each valid ``[n]`` turned into a ``cite:n`` link (the app's rule,
    :func:`kmds_desktop.app.ask.answer_html`, with this view's Markdown converter)."""
    return app_ask.answer_html(text, n_results, to_html)


log = logging.getLogger(__name__)


class AskPanel(QWidget):
    """Centre panel: question box, streamed Markdown answer with citations, route, results table."""

    citation_activated = Signal(str)  # IRI
    message = Signal(str, str, str)  # level, text, details
    answer_finished = Signal(object)  # OrchestratorResult

    def __init__(self, jobs: JobRunner, parent: QWidget | None = None, *,
                 workspace: WorkspaceSession | None = None) -> None:
        super().__init__(parent)
        self.jobs = jobs
        #: what answering needs, read at each question: ``() -> {"kb", "settings", "index_holder", "index"}``
        #: (the workspace session's :meth:`~kmds_desktop.app.workspace_session.WorkspaceSession.ask_context`)
        self.context_provider: Callable[[], dict[str, Any]] | None = None
        if workspace is not None:
            self.context_provider = workspace.ask_context
            # another KB opened clears the answer; an edit marks it stale (kb_changed)
            unsubscribe = workspace.subscribe(lambda change: self._workspace_changed(workspace, change))
            self.destroyed.connect(lambda _obj=None: unsubscribe())
        #: the question, its answer (and the records retrieved for it), the history, the KB open now
        self.session = AskSession()
        self.job: Job | None = None
        self._streamed: list[str] = []
        #: ``(answer text, HTML)`` of the answer being received, rendered by the worker.
        self._rendered: tuple[str, str] | None = None
        #: While the state line says an answer was cleared: the KB that answer was about (None otherwise).
        #: Another KB opened after that rewrites the line, which must name the KB open *now*.
        self._cleared_about: str | None = None

        self.question = QuestionEdit()
        self.question.show_history(self.session.history)
        self.question.setObjectName("questionBox")
        self.question.submitted.connect(self.ask)
        self.ask_button = QPushButton("Ask")
        self.ask_button.setObjectName("askButton")
        self.ask_button.setToolTip("Ask (Ctrl+Enter)")
        self.ask_button.clicked.connect(lambda: self.ask())
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("cancelAsk")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        QShortcut(
            QKeySequence("Escape"), self, self.cancel, context=Qt.ShortcutContext.WidgetWithChildrenShortcut
        )
        self.state = QLabel("")
        self.state.setObjectName("askState")
        # Wrapped: a long progress line ("preparing the index: index up to date: 402 entries: …")
        # unwrapped made it the panel's minimum width, and the whole window grew by ~100 px (and
        # was repainted in full) when it appeared.
        self.state.setWordWrap(True)
        top = QHBoxLayout()
        top.addWidget(self.question, 1)
        buttons = QVBoxLayout()
        buttons.addWidget(self.ask_button)
        buttons.addWidget(self.cancel_button)
        top.addLayout(buttons)

        self.answer = QTextBrowser()
        self.answer.setObjectName("answerView")
        self.answer.setOpenLinks(False)
        self.answer.anchorClicked.connect(self._anchor_clicked)
        self.answer.setPlaceholderText(
            # One short line: Qt does not wrap a placeholder, and a long one was cut off mid-sentence.
            "Answers appear here. Click a citation like [1] to see its record."
        )
        self.route_editor = RouteEditor()
        self.route_editor.rerun_requested.connect(lambda route: self.ask(route=route))
        self.results = ResultsModel(self)
        self.table = RecordsTable(self.results)
        self.table.activated.connect(self._row_activated)
        self.table.doubleClicked.connect(self._row_activated)

        lower = QSplitter(Qt.Orientation.Vertical)
        lower.setObjectName("askSplit")
        lower.addWidget(self.answer)
        lower.addWidget(self.route_editor)
        lower.addWidget(self.table)
        lower.setStretchFactor(0, 3)
        lower.setStretchFactor(1, 1)
        lower.setStretchFactor(2, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.state)
        layout.addWidget(lower, 1)

    # -- public --
    @property
    def result(self) -> Any:
        """The answer shown (the session's), None before the first or after the KB was replaced."""
        return self.session.result

    def focus_question(self) -> None:
        self.question.setFocus()

    def set_history(self, history: list[str]) -> None:
        self.session.history = list(history)
        self.question.show_history(self.session.history)

    def remember_history(self, ui_settings: Any) -> None:
        ui_settings.question_history = list(self.session.history)

    def warm_route(self) -> Job | None:
        """The local model reads the route prompt for the open KB ahead of the first question, on a
        worker (:func:`~kmds_desktop.app.ask.warm_route_prompt`; once per server, model and KB)."""
        ctx = self.context_provider() if self.context_provider else {}
        if ctx.get("kb") is None:
            return None
        return self.jobs.submit(
            "ask.warm", warm_route_prompt, ctx["kb"], ctx["settings"],
            label="The model is reading the search instructions", policy="latest", busy_cursor=False,
            on_error=lambda exc: log.info("the route prompt was not read ahead: %s", exc),
        )

    def kb_changed(self, kb: Any, *, edited: bool = False) -> None:
        """The KB was replaced or ``edited``; what that means for the answer shown is the session's rule
        (:meth:`~kmds_desktop.app.ask.AskSession.kb_changed`).

        Replaced by another KB: the answer, its records and its route were about the previous one
        (its citations name records the open KB does not have), so they are cleared and an answer
        still being written for it is cancelled and dropped. An edit of the same KB keeps them,
        marked as possibly out of date.
        """
        # Ask comes back when the running answer ends (_on_finished), not when the KB or settings change
        self.ask_button.setEnabled(kb is not None and not (self.job is not None and self.job.running))
        replaced = kb is not self.session.kb
        previous = self.session.kb_name() or "the previous knowledge base"
        outcome = self.session.kb_changed(kb, edited=edited)
        if replaced:
            self.route_editor.set_workflows(app_ask.workflow_choices(kb))
        if outcome != "cleared" and self._cleared_about is not None and kb is not None:
            # Nothing asked since the last switch: the note stays, naming the KB open now.
            self.state.setText(self._cleared_note(self._cleared_about))
        if outcome == "stale":
            # an answer still being written gets the note when it is complete (_on_result)
            if self.result is not None and STALE_NOTE not in self.state.text():
                self.state.setText(self.state.text() + STALE_NOTE)
            return
        if outcome != "cleared":
            return
        if self.job is not None and self.job.running:
            self.job.cancel()
        self._streamed = []
        self._rendered = None
        self.results.set_results([])
        self.answer.clear()
        self.route_editor.clear()
        self._cleared_about = previous
        self.state.setText(self._cleared_note(previous))

    def _workspace_changed(self, workspace: WorkspaceSession, change: Change) -> None:
        if change.kind == KB_OPENED:
            self.kb_changed(workspace.kb)
        elif change.kind == KB_EDITED:
            self.kb_changed(workspace.kb, edited=True)

    def _cleared_note(self, about: str) -> str:
        """The state line after an answer about ``about`` was cleared: it names the KB open now."""
        name = self.session.kb_name() or "the new knowledge base"
        return f"The last answer was about {about}; {name} is open now: ask again to answer from it."

    def ask(self, question: str | None = None, *, route: Any = None) -> Job | None:
        """Answer ``question`` (default: the question box); ``route`` skips the router (re-run)."""
        text = (question if question is not None else self.question.toPlainText()).strip()
        if route is not None and not text:
            text = self.session.question
        ctx = self.context_provider() if self.context_provider else {}
        kb = ctx.get("kb")
        try:
            text = self.session.check(text, kb)
        except AskInputError as err:
            self.message.emit("warning", str(err), "")
            return None
        settings = ctx["settings"]
        if kb is not self.session.kb:
            self.kb_changed(kb)
        job = self.jobs.submit(
            "ask",
            answer_question,
            kb,
            settings,
            ctx["index_holder"],
            text,
            route,
            render=answer_html,
            label="Answering",
            on_chunk=self._on_chunk,
            on_result=self._on_result,
            on_error=self._on_error,
            on_cancelled=self._on_cancelled,
            on_finished=self._on_finished,
            on_progress=self._on_progress,
        )
        if job is None:
            return None
        self.job = job
        self.session.started(text, kb)  # the question joins the session's history, which the box walks
        self.question.show_history(self.session.history)
        if question is None and route is None:
            # The question stays readable next to its answer; selected, so typing replaces it.
            self.question.selectAll()
        self._streamed = []
        self._rendered = None
        # The previous question's records and route go at once: shown beside the new question
        # (during the answer, or after Cancel) they would read as its answer.
        self.results.set_results([])
        self.route_editor.clear("Running the route chosen…" if route is not None
                                else "Choosing how to search for this question…")
        self.answer.setHtml(f"<p style='color:#666'><i>{html.escape(text)}</i></p>")
        self.ask_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self._cleared_about = None
        self.state.setText("Thinking…")
        return job

    def cancel(self) -> None:
        if self.job is not None and self.job.running:
            self.state.setText("Cancelling…")
            self.job.cancel()

    def export_answer_dialog(self) -> None:
        if self.result is None:
            self.message.emit("warning", "There is no answer to export yet.", "")
            return
        name = file_dialogs.save_file(self, last_folders.EXPORT, "Export answer", "answer.md",
                                      "Markdown (*.md)")
        if name:
            self.export_answer(name)

    def export_answer(self, path: str | Path) -> Job | None:
        text = self.answer_markdown()
        return self.jobs.submit(
            "export.answer",
            _write_text,
            str(path),
            text,
            label="Exporting the answer",
            on_result=lambda p: self.message.emit("info", f"Answer saved to {p}", ""),
            on_error=lambda exc: self.message.emit("error", f"Could not write {path}: {exc}", ""),
        )

    def answer_markdown(self) -> str:
        """The answer shown, as :func:`kmds_desktop.app.ask.answer_markdown` writes it."""
        return "" if self.result is None else answer_markdown(self.result)

    # -- job callbacks --
    def _for_previous_kb(self) -> bool:
        """Whether the running answer was asked of a KB that is no longer open (it is dropped)."""
        return not self.session.for_open_kb()

    def _on_progress(self, _done: int, _total: int | None, message: str) -> None:
        if not self._for_previous_kb():  # the note about the KB opened since stays
            self.state.setText(message)

    def _on_chunk(self, piece: Any) -> None:
        if self._for_previous_kb():
            return
        if isinstance(piece, tuple) and piece and piece[0] == RETRIEVED:
            self._show_retrieved(piece[1])
            return
        if isinstance(piece, tuple) and piece and piece[0] == RENDERED:
            self._rendered = piece[1]
            return
        # While streaming, text is appended as it comes (constant cost per chunk); the Markdown
        # rendering with citation links happens once, when the answer is complete. Re-rendering the
        # whole answer on every chunk made the GUI thread's work grow with the answer's length.
        if not self._streamed:
            self.answer.clear()
        self._streamed.append(str(piece))
        cursor = self.answer.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        cursor.insertText(str(piece), QTextCharFormat())
        self.answer.setTextCursor(cursor)
        self.answer.ensureCursorVisible()

    def _show_retrieved(self, result: Any) -> None:
        self.session.found(result)
        self.results.set_results(result.results)
        self._fit_columns()
        self.route_editor.show_result(result, answer=ANSWER_WRITING)

    def _fit_columns(self, cap: int = 140) -> None:
        """Fit the records' columns to their texts (:meth:`RecordsTable.fit_columns`)."""
        self.table.fit_columns(cap)

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt API
        """Re-fit the records' columns when the panel is resized (splitter moved, window resized)."""
        super().resizeEvent(event)
        QTimer.singleShot(0, self, self._fit_columns)  # after the layout has resized the table

    def _on_result(self, result: Any) -> None:
        if self._for_previous_kb():
            return
        self.session.finished(result)
        if self.results.set_results(result.results):  # usually shown already, when retrieved
            self._fit_columns()
        self.route_editor.show_result(result)  # the finished result may add a fallback or backend note
        rendered, self._rendered = self._rendered, None
        shown = displayed_answer(result)
        if rendered is None or rendered[0] != shown:
            rendered = (shown, answer_html(shown, len(result.results)))
        self.answer.setHtml(rendered[1])
        self.state.setText(answered_line(result) + (STALE_NOTE if self.session.stale else ""))
        self.answer_finished.emit(result)

    def _on_error(self, exc: BaseException) -> None:
        if self._for_previous_kb():
            return
        summary, details = format_exception(exc)
        self.state.setText("The question could not be answered." + self._speed_note())
        if self.session.retrieved is not None:
            self.route_editor.show_result(self.session.retrieved, answer=ANSWER_FAILED)
        else:
            self.route_editor.clear("No route was chosen: the question could not be answered.")
        self.answer.setHtml(f"<p style='color:#b00020'>{html.escape(summary)}</p>")
        self.message.emit("error", f"The question could not be answered: {summary}", details)

    def _on_cancelled(self) -> None:
        if self._for_previous_kb():
            return  # cancelled because another KB was opened; the state line says so
        self.state.setText("Cancelled." + self._speed_note())
        # The Route box names the route that had been chosen, and that no answer came of it.
        if self.session.retrieved is not None:
            self.route_editor.show_result(self.session.retrieved, answer=ANSWER_CANCELLED)
        else:
            self.route_editor.clear(CANCELLED_BEFORE_ROUTE)
        if self._streamed:
            self.answer.append("\n\n(cancelled)")

    def _speed_note(self) -> str:
        """The slow-route note of the records found, where no answer line will say it (it is said once
        per server: lost here, it would never be said)."""
        note = getattr(self.session.retrieved, "speed_note", "") if self.session.retrieved is not None else ""
        return f" {note}" if note else ""

    def _on_finished(self) -> None:
        self.ask_button.setEnabled(True)
        self.cancel_button.setEnabled(False)

    # -- citations --
    def _anchor_clicked(self, url: QUrl) -> None:
        n = citation_number(url.toString())
        if n is not None:
            self.activate_citation(n)

    def activate_citation(self, n: int) -> None:
        """Select record ``n``'s row and reveal its observation in the KB browser."""
        if not (1 <= n <= self.results.rowCount()):
            return
        self.table.selectRow(n - 1)
        iri = self.results.row_dict(n - 1).get("iri")
        if iri:
            self.citation_activated.emit(str(iri))

    def _row_activated(self, index: QModelIndex) -> None:
        if index.isValid():
            self.activate_citation(index.row() + 1)


def _write_text(path: str, text: str, *, progress: Any = None, cancel: Any = None) -> str:
    Path(path).write_text(text, encoding="utf-8")
    return path
