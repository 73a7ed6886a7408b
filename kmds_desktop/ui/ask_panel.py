"""The question/answer panel: ask the open KB, read a cited Markdown answer, inspect and edit the route.

One question is one ``"ask"`` job (a second Ask while one runs is refused with a message). The job
wraps :func:`kmds_desktop.app.ask.answer_question`, the application layer's plain function around
the orchestrator's ``ask_stream``; the rules about the question, its history and what a change of KB
means for the answer on screen are the :class:`~kmds_desktop.app.ask.AskSession`'s. The job first
hands over the retrieved result (route, fallback, records) so the route and the table appear at
once, then streams the answer's text as chunks. ``[n]`` in the answer links to record ``n``;
clicking it selects the observation in the KB browser (:attr:`AskPanel.citation_activated`).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    Qt,
    QTimer,
    QUrl,
    Signal,
)
from PySide6.QtGui import (
    QKeyEvent,
    QKeySequence,
    QShortcut,
    QStandardItem,
    QStandardItemModel,
    QTextCharFormat,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QSplitter,
    QStyle,
    QTableView,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.app.ask import (
    RENDERED,
    RETRIEVED,
    AskInputError,
    AskSession,
    answer_markdown,
    answer_question,
    displayed_answer,
    edited_route,
    one_line,
)
from kmds_desktop.text import plural
from kmds_desktop.ui.kb_tree_model import CATEGORY_LABELS
from kmds_desktop.ui.markdown_render import to_html
from kmds_desktop.ui.workers import Job, JobRunner

INTENT_LABELS = {
    "exploratory_search": "Exploratory observations",
    "data_representation_search": "Data representation observations",
    "modelling_choice_search": "Modelling choice observations",
    "model_selection_search": "Model selection observations",
    "all_observations_search": "All observations",
    "semantic_search": "Semantic search (by meaning)",
}
_CITATION = re.compile(r"\[(\d{1,3})\]")
_ITEM = r"[ \t]*(?:[-*+]|\d+\.)[ \t]"
# A text line is "anything up to its last non-space, then blanks": written as ``.*\S.*``, a long
# line that is not followed by a list item backtracks quadratically (60 ms for a 3 kB answer,
# on the GUI thread); this form is linear and matches the same lines.
_LIST_AFTER_TEXT = re.compile(rf"(?m)^((?!{_ITEM})[^\n]*\S[^\S\n]*)\n({_ITEM})")
_TEXT_AFTER_LIST = re.compile(rf"(?m)^({_ITEM}.*)\n((?!{_ITEM})\S)")


def answer_html(text: str, n_results: int) -> str:
    """Markdown answer -> HTML with each valid ``[n]`` turned into a ``cite:n`` link."""
    # LLMs (and the extractive answer) often start a list right under a line of text; Markdown
    # needs a blank line there, or the items run into the paragraph.
    text = _LIST_AFTER_TEXT.sub(r"\1\n\n\2", text or "")
    text = _TEXT_AFTER_LIST.sub(r"\1\n\n\2", text)
    body = to_html(text)

    def link(match: re.Match[str]) -> str:
        n = int(match.group(1))
        if 1 <= n <= n_results:
            return f'<a href="cite:{n}" title="Show record {n} in the KB browser">[{n}]</a>'
        return match.group(0)

    return _CITATION.sub(link, body)


class ResultsModel(QStandardItemModel):
    """The records behind an answer; row ``n-1`` is citation ``[n]``.

    The cells are stored in Qt's own item model, not answered by a Python ``data()``: painting the
    table asks each visible cell for about ten roles, and each call into Python waits for the GIL
    while a worker runs Python code (a fetch, an index build); a Python model's repaint took
    twice as long, and longer still beside a busy worker.
    """

    COLUMNS = ("#", "Finding", "Type", "Category", "Workflow", "Seq", "Score")
    _FLAGS = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
    _RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter

    def __init__(self, parent: Any = None) -> None:
        super().__init__(0, len(self.COLUMNS), parent)
        self.setHorizontalHeaderLabels(list(self.COLUMNS))
        self._rows: list[dict[str, Any]] = []

    def set_results(self, rows: list[dict[str, Any]]) -> bool:
        """Show ``rows``; returns False (and leaves the view alone) when they are already shown."""
        rows = list(rows or [])
        if rows == self._rows:
            return False
        self.beginResetModel()
        # Filled silently inside one reset: views re-read everything once, at endResetModel.
        blocked = self.blockSignals(True)
        try:
            self._rows = rows
            self.setRowCount(0)
            self.setRowCount(len(rows))
            for r, row in enumerate(rows):
                for c, item in enumerate(self._items(r, row)):
                    self.setItem(r, c, item)
        finally:
            self.blockSignals(blocked)
        self.endResetModel()
        return True

    def _items(self, r: int, row: dict[str, Any]) -> list[QStandardItem]:
        seq = row.get("finding_seq")
        score = row.get("score")
        texts = (
            f"[{r + 1}]",
            one_line(row.get("finding"), 120),
            row.get("obs_type") or "",
            CATEGORY_LABELS.get(row.get("category") or "", row.get("category") or ""),
            row.get("workflow_name") or "(unlinked)",
            "" if seq is None else str(seq),
            "" if score is None else f"{float(score):.3f}",
        )
        items = []
        for c, text in enumerate(texts):
            item = QStandardItem(text)
            item.setFlags(self._FLAGS)
            item.setData(row.get("iri"), Qt.ItemDataRole.UserRole)
            if c == 1:
                item.setToolTip(row.get("finding") or "")
            elif c in (2, 3, 4):
                item.setToolTip(text)  # the column may be capped
            else:
                item.setTextAlignment(self._RIGHT)
            items.append(item)
        return items

    def row_dict(self, row: int) -> dict[str, Any]:
        return self._rows[row]


class QuestionEdit(QPlainTextEdit):
    """Multi-line question box: Ctrl+Enter asks; Up/Down on the first/last line walk the history."""

    submitted = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.history: list[str] = []
        self._pos: int | None = None  # index into history while browsing; None = editing a new one
        self._draft = ""
        self.setPlaceholderText("Ask the knowledge base… (Ctrl+Enter to ask, Up/Down for earlier questions)")
        self.setTabChangesFocus(True)
        self.setMaximumHeight(78)

    def add_to_history(self, question: str, limit: int = 100) -> None:
        question = question.strip()
        if question:
            self.history = [q for q in self.history if q != question] + [question]
            del self.history[:-limit]
        self._pos = None

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt API
        key = event.key()
        mods = event.modifiers()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and mods & Qt.KeyboardModifier.ControlModifier:
            self.submitted.emit()
            return
        cursor = self.textCursor()
        if key == Qt.Key.Key_Up and not mods and cursor.blockNumber() == 0 and self.history:
            if self._pos is None:
                self._draft = self.toPlainText()
                self._pos = len(self.history)
                if self._draft.strip() == self.history[-1]:
                    self._pos -= 1  # the box still shows the last question: Up goes to the one before
            if self._pos > 0:
                self._pos -= 1
                self.setPlainText(self.history[self._pos])
                self.moveCursor(self.textCursor().MoveOperation.End)
            return
        last_block = cursor.blockNumber() == self.document().blockCount() - 1
        if key == Qt.Key.Key_Down and not mods and last_block and self._pos is not None:
            self._pos += 1
            if self._pos >= len(self.history):
                self._pos = None
                self.setPlainText(self._draft)
            else:
                self.setPlainText(self.history[self._pos])
            self.moveCursor(self.textCursor().MoveOperation.End)
            return
        super().keyPressEvent(event)


def _plain(rich: str) -> str:
    """The text of one line of the route summary's HTML (its tooltip is plain text)."""
    return html.unescape(re.sub(r"<[^>]+>", "", rich))


class _WrappedLabel(QLabel):
    """A word-wrapped label that asks its layout for the height its lines need at its width.

    A wrapped label's minimum height is Qt's guess for some other width; in the Ask panel's
    splitter the Route box got only that, and the summary's last line ("Backend: …") was cut.
    """

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setWordWrap(True)

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._fit_height()

    def setText(self, text: str) -> None:  # noqa: N802 - Qt API
        super().setText(text)
        self._fit_height()

    def _fit_height(self) -> None:
        need = self.heightForWidth(self.width()) if self.width() > 0 else -1
        if need > 0 and need != self.minimumHeight():
            self.setMinimumHeight(need)


class RouteEditor(QGroupBox):
    """Shows the route that ran and lets the user change its template and filters, then re-run."""

    rerun_requested = Signal(object)  # OrchestratorRoute

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Route", parent)
        self.summary = _WrappedLabel("Ask a question to see how it is answered.")
        self.summary.setObjectName("routeSummary")
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.template = QComboBox()
        for key, label in INTENT_LABELS.items():
            self.template.addItem(label, key)
        self.obs_type = QLineEdit()
        self.obs_type.setPlaceholderText("any type")
        self.keyword = QLineEdit()
        self.keyword.setPlaceholderText("any word")
        self.seq_min = self._seq_box()
        self.seq_max = self._seq_box()
        seq_row = QHBoxLayout()
        seq_row.addWidget(self.seq_min)
        seq_row.addWidget(QLabel("to"))
        seq_row.addWidget(self.seq_max)
        self.rerun_button = QPushButton("Re-run on this route")
        self.rerun_button.setObjectName("rerunRoute")
        self.rerun_button.setEnabled(False)
        self.rerun_button.clicked.connect(self._rerun)
        self.error = QLabel()
        self.error.setStyleSheet("color: #b00020;")
        self.error.setVisible(False)
        form = QFormLayout()
        form.addRow("Template", self.template)
        form.addRow("Type contains", self.obs_type)
        form.addRow("Findings", seq_row)
        form.addRow("Keyword", self.keyword)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(self.rerun_button, 0, Qt.AlignmentFlag.AlignRight)

    def clear(self, text: str = "Ask a question to see how it is answered.") -> None:
        """Forget the shown route (its answer is gone): nothing to re-run, and no filters left.

        The template and filters go back to their defaults too: after another KB opened, the
        previous KB's type or keyword filter left in the fields would quietly narrow the next
        re-run, on a KB that may have no such type.
        """
        self.summary.setText(html.escape(text))
        self.summary.setToolTip("")
        self.template.setCurrentIndex(0)
        self.obs_type.clear()
        self.keyword.clear()
        self.seq_min.setValue(-1)
        self.seq_max.setValue(-1)
        self.error.setVisible(False)
        self.rerun_button.setEnabled(False)

    @staticmethod
    def _seq_box() -> QSpinBox:
        box = QSpinBox()
        box.setRange(-1, 1_000_000)
        box.setSpecialValueText("—")  # -1: no bound
        box.setValue(-1)
        return box

    def show_result(self, result: Any) -> None:
        route = result.route
        lines = []
        intent = INTENT_LABELS.get(result.intent_class, result.intent_class)
        lines.append(
            f"<b>Template:</b> {html.escape(intent)} <code>{html.escape(result.intent_class)}</code>"
        )
        filters = route.describe_filters() if route is not None else ""
        lines.append(f"<b>Filters:</b> {html.escape(filters) if filters else 'none'}")
        if result.route_explanation:
            lines.append(f"<b>Why:</b> {html.escape(result.route_explanation)}")
        if result.fallback_reason:
            proposed = result.proposed_route
            was = f" (the router chose {html.escape(proposed.intent_class)})" if proposed is not None else ""
            lines.append(
                f"<span style='color:#9a5b00'><b>Fell back to semantic search</b>{was}: "
                f"{html.escape(result.fallback_reason)}</span>"
            )
        backend = html.escape(str(result.backend))
        synth = html.escape(str(getattr(result, "synthesis", "")))
        lines.append(f"<b>Backend:</b> {backend} · answer: {synth}")
        if getattr(result, "synthesis_error", None):
            lines.append(
                f"<span style='color:#9a5b00'>Synthesis failed: {html.escape(result.synthesis_error)}</span>"
            )
        self.summary.setText("<br/>".join(lines))
        # The whole route in words, also where the splitter leaves the box too little height.
        self.summary.setToolTip("\n".join(_plain(line) for line in lines))
        shown = (
            result.proposed_route if result.fallback_reason and result.proposed_route is not None else route
        )
        if shown is not None:
            self.set_route(shown)
        self.rerun_button.setEnabled(True)

    def set_route(self, route: Any) -> None:
        idx = self.template.findData(route.intent_class)
        self.template.setCurrentIndex(max(0, idx))
        f = route.filters
        self.obs_type.setText(f.obs_type_filter or "")
        self.keyword.setText(f.keyword or "")
        self.seq_min.setValue(-1 if f.finding_seq_min is None else f.finding_seq_min)
        self.seq_max.setValue(-1 if f.finding_seq_max is None else f.finding_seq_max)

    def route(self) -> Any:
        """The edited route (:func:`~kmds_desktop.app.ask.edited_route`; ValueError if invalid);
        a spin box at -1 is no bound."""
        low, high = self.seq_min.value(), self.seq_max.value()
        return edited_route(
            self.template.currentData(),
            obs_type=self.obs_type.text(),
            keyword=self.keyword.text(),
            finding_min=None if low < 0 else low,
            finding_max=None if high < 0 else high,
        )

    def _rerun(self) -> None:
        try:
            route = self.route()
        except ValueError as exc:
            self.error.setText(str(exc))
            self.error.setVisible(True)
            return
        self.error.setVisible(False)
        self.rerun_requested.emit(route)


class AskPanel(QWidget):
    """Centre panel: question box, streamed Markdown answer with citations, route, results table."""

    citation_activated = Signal(str)  # IRI
    message = Signal(str, str, str)  # level, text, details
    answer_finished = Signal(object)  # OrchestratorResult

    def __init__(self, jobs: JobRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.jobs = jobs
        self.context_provider: Any = None  # set by the window: () -> {"kb", "settings", "index_holder"}
        self.session = AskSession()
        self.result: Any = None
        self.job: Job | None = None
        self._streamed: list[str] = []
        #: ``(answer text, HTML)`` of the answer being received, rendered by the worker.
        self._rendered: tuple[str, str] | None = None
        self._question = ""
        #: Which KB is open (its name is shown when an answer is cleared; see kb_changed).
        self._kb: Any = None
        self._kb_name = ""

        self.question = QuestionEdit()
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
        self.table = QTableView()
        self.table.setObjectName("resultsTable")
        self.table.setModel(self.results)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        # Every column but the finding is fitted once per answer (_fit_columns). ResizeToContents
        # would have Qt ask the model for every cell again at each layout change.
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().setDefaultSectionSize(22)
        # PySide's first viewport() call costs ~20 ms (its wrapper type is set up lazily): pay it
        # while the window is built, not when the first answer arrives.
        self._results_viewport = self.table.viewport()
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
    def focus_question(self) -> None:
        self.question.setFocus()

    def set_history(self, history: list[str]) -> None:
        self.session.history = list(history)
        self.question.history = list(self.session.history)

    def remember_history(self, ui_settings: Any) -> None:
        ui_settings.question_history = list(self.session.history)

    def kb_changed(self, kb: Any, *, edited: bool = False) -> None:
        """The KB was replaced or ``edited``; what that means for the answer shown is the session's rule
        (:meth:`~kmds_desktop.app.ask.AskSession.kb_changed`).

        Replaced by another KB: the answer, its records and its route were about the previous one
        (its citations name records the open KB does not have), so they are cleared and an answer
        still being written for it is cancelled and dropped. An edit of the same KB keeps them,
        marked as possibly out of date.
        """
        self.ask_button.setEnabled(kb is not None)
        outcome = self.session.kb_changed(kb, edited=edited)
        previous = self._kb_name or "the previous knowledge base"
        if kb is not self._kb:
            self._kb = kb
            self._kb_name = Path(str(getattr(kb, "path", "") or "")).name or "the new knowledge base"
        if outcome == "stale":
            note = " The knowledge base was edited since: a cited record may have changed."
            if self.result is not None and note not in self.state.text():
                self.state.setText(self.state.text() + note)
            return
        if outcome != "cleared":
            return
        if self.job is not None and self.job.running:
            self.job.cancel()
        self.result = None
        self._streamed = []
        self._rendered = None
        self.results.set_results([])
        self.answer.clear()
        self.route_editor.clear()
        self.state.setText(
            f"The last answer was about {previous}; {self._kb_name} is open now: ask again to answer from it."
        )

    def ask(self, question: str | None = None, *, route: Any = None) -> Job | None:
        """Answer ``question`` (default: the question box); ``route`` skips the router (re-run)."""
        text = (question if question is not None else self.question.toPlainText()).strip()
        if route is not None and not text:
            text = self._question
        ctx = self.context_provider() if self.context_provider else {}
        kb = ctx.get("kb")
        try:
            text = self.session.check(text, kb)
        except AskInputError as err:
            self.message.emit("warning", str(err), "")
            return None
        settings = ctx["settings"]
        if kb is not self._kb:
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
            on_progress=lambda _d, _t, msg: self.state.setText(msg),
        )
        if job is None:
            return None
        self.job = job
        self._question = text
        self.session.started(text, kb)
        self.question.history = list(self.session.history)
        self.question.add_to_history(text)
        if question is None and route is None:
            # The question stays readable next to its answer; selected, so typing replaces it.
            self.question.selectAll()
        self._streamed = []
        self._rendered = None
        self.result = None
        self.answer.setHtml(f"<p style='color:#666'><i>{html.escape(text)}</i></p>")
        self.ask_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
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
        name, _ = QFileDialog.getSaveFileName(self, "Export answer", "answer.md", "Markdown (*.md)")
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
        self.results.set_results(result.results)
        self._fit_columns()
        self.route_editor.show_result(result)

    def _fit_columns(self, cap: int = 140) -> None:
        """Size every column but the finding to its text: type and category whole, workflow capped.

        Type and category are short words the user reads to tell records apart: capped, they
        showed "Data Q…" and "Explor…". They get their whole text on one line while the finding
        (the column the user reads) keeps a third of the free width; in a narrower panel their cells
        wrap onto two lines and the columns are as wide as the wider line (capped like the workflow
        only where even that would squeeze the finding). Long workflow names stay capped at ``cap``
        pixels (the full text is in each tooltip).
        Widths come from the font's metrics of the few strings shown: ``resizeColumnToContents``
        asks the model and the style for every cell and role and took 8-25 ms of the GUI thread.
        """
        rows = self.results.rowCount()
        table = self.table
        header = table.horizontalHeader()
        if rows == 0:
            # No records yet: every column as wide as its title, so the finding gets the rest (at
            # Qt's default width each, the finding's column was squeezed to a few letters).
            for col in (0, 2, 3, 4, 5, 6):
                table.setColumnWidth(col, header.sectionSizeHint(col))
            self._wrap_rows(False)
            return
        metrics = table.fontMetrics()
        # The item delegate's text margin: the focus frame's margin plus one pixel on each side.
        pad = 2 * (table.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, table) + 1) + 2

        def texts(col: int) -> list[str]:
            return [str(self.results.data(self.results.index(r, col)) or "") for r in range(rows)]

        def width(col: int) -> int:
            widest = max((metrics.horizontalAdvance(t) for t in texts(col)), default=0)
            return max(widest + pad, header.sectionSizeHint(col))

        def two_lines(col: int) -> int:
            """The width that holds each of the column's texts on at most two lines."""
            widest = 0
            for text in texts(col):
                words = text.split()
                splits = [max(metrics.horizontalAdvance(" ".join(words[:i])),
                              metrics.horizontalAdvance(" ".join(words[i:]))) for i in range(1, len(words))]
                widest = max(widest, min(splits, default=metrics.horizontalAdvance(text)))
            return max(widest + pad, header.sectionSizeHint(col))

        for col in (0, 5, 6):
            table.setColumnWidth(col, width(col))
        free = self._results_viewport.width() - sum(table.columnWidth(c) for c in (0, 5, 6))
        workflow = min(width(4), max(32, min(cap, free // 6)))  # a narrow panel: the finding keeps its share
        widths = {col: width(col) for col in (2, 3)}
        wrap = free - workflow - sum(widths.values()) < free // 3
        if wrap:
            widths = {col: two_lines(col) for col in (2, 3)}
            if free - workflow - sum(widths.values()) < free // 3:  # very narrow: capped, as the workflow
                widths = {col: min(w, max(32, min(cap, free // 6))) for col, w in widths.items()}
        for col, w in widths.items():
            table.setColumnWidth(col, w)
        table.setColumnWidth(4, workflow)
        self._wrap_rows(wrap)

    def _wrap_rows(self, wrap: bool) -> None:
        """Rows one line tall, or two when the type and category columns wrap their words."""
        table = self.table
        table.setWordWrap(wrap)
        one_line_height = 22
        height = one_line_height + table.fontMetrics().lineSpacing() if wrap else one_line_height
        if table.verticalHeader().defaultSectionSize() != height:
            table.verticalHeader().setDefaultSectionSize(height)

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt API
        """Re-fit the records' columns when the panel is resized (splitter moved, window resized)."""
        super().resizeEvent(event)
        QTimer.singleShot(0, self, self._fit_columns)  # after the layout has resized the table

    def _on_result(self, result: Any) -> None:
        if self._for_previous_kb():
            return
        self.result = result
        self.session.finished(result)
        if self.results.set_results(result.results):  # usually shown already, when retrieved
            self._fit_columns()
        self.route_editor.show_result(result)  # the finished result may add a fallback or backend note
        rendered, self._rendered = self._rendered, None
        shown = displayed_answer(result)
        if rendered is None or rendered[0] != shown:
            rendered = (shown, answer_html(shown, len(result.results)))
        self.answer.setHtml(rendered[1])
        timing = result.timings.get("total") if getattr(result, "timings", None) else None
        took = f" in {timing:.1f} s" if timing else ""
        self.state.setText(f"Answered by {result.backend}{took}; {plural(len(result.results), 'record')}.")
        if result.fallback_reason:
            self.state.setText(self.state.text() + " Fell back to semantic search (see Route).")
        self.answer_finished.emit(result)

    def _on_error(self, exc: BaseException) -> None:
        if self._for_previous_kb():
            return
        from kmds_desktop.ui.workers import format_exception

        summary, details = format_exception(exc)
        self.state.setText("The question could not be answered.")
        self.answer.setHtml(f"<p style='color:#b00020'>{html.escape(summary)}</p>")
        self.message.emit("error", f"The question could not be answered: {summary}", details)

    def _on_cancelled(self) -> None:
        if self._for_previous_kb():
            return  # cancelled because another KB was opened; the state line says so
        self.state.setText("Cancelled.")
        if self._streamed:
            self.answer.append("\n\n(cancelled)")

    def _on_finished(self) -> None:
        self.ask_button.setEnabled(True)
        self.cancel_button.setEnabled(False)

    # -- citations --
    def _anchor_clicked(self, url: QUrl) -> None:
        if url.scheme() == "cite":
            self.activate_citation(int(url.path() or url.toString().split(":", 1)[1]))

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
