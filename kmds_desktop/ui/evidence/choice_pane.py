"""The choice pane of the Evidence view: the question box's question answered by choosing between the
options typed here, one a line, from the papers: the option they bear out (or "insufficient"), the
sentence it rests on as a link to its paper's page, who judged it (offline or the model), and the
notes (where the app overruled the model, why nothing was chosen); a chosen option is filed under the
KB browser's selected observation as the paper and page it rests on (``cito:citesAsEvidence``).

Why the options are checked here, before any job: a list of one option, or a pasted page, would
search and perhaps reach a model for nothing; the pane says what to fix and runs nothing.
"""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import QUrl, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.app.verdicts import MAX_OPTIONS, options_from_lines
from kmds_desktop.ui.evidence.answer_pane import CITE_SCHEME, notes_html
from kmds_desktop.ui.evidence.filing import file_controls

#: What the pane says when the papers do not single out one option.
UNDECIDED = "insufficient: the papers do not decide"


def pages_text(pages: tuple[int, ...]) -> str:
    return f"page {pages[0]}" if len(pages) == 1 else f"pages {pages[0]}-{pages[-1]}"


def choice_html(result: Any, paper_id: int | None) -> str:
    """The chosen option and its judge, then "paper, page N" (a link when the paper is known) before
    the quote, so the way to the page is seen without scrolling, then the notes."""
    answer = result.options[result.choice] if result.choice is not None else UNDECIDED
    parts = [f"<p><b>{html.escape(answer)}</b> <span style='color:#666'>(judge: "
             f"{html.escape(result.method)})</span></p>"]
    if result.quote:
        where = f"{html.escape(result.label or '')}, {pages_text(result.pages)}"
        cited = f"<a href='{CITE_SCHEME}:{paper_id}'>{where}</a>" if paper_id is not None else where
        parts.append(f"<p>{cited}: \u201c{html.escape(result.quote)}\u201d</p>")
    parts.append(notes_html(result.notes))
    return "".join(parts)


class ChoicePane(QWidget):
    """Emits ``choose_requested(options)`` for Choose (the options already checked),
    ``file_requested`` for File under the selected observation,
    ``citation_opened(paper_id, page, quote)`` when the quote's paper and page is clicked, and
    ``message(level, text)`` when the options are refused."""

    choose_requested = Signal(list)
    file_requested = Signal()
    citation_opened = Signal(int, int, str)
    message = Signal(str, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("evidenceChoicePane")
        self.choice: Any = None
        self.paper_id: int | None = None
        self.options = QPlainTextEdit()
        self.options.setObjectName("evidenceChoiceOptions")
        self.options.setAccessibleName("Options, one a line")
        self.options.setPlaceholderText(f"Options, one a line (2 to {MAX_OPTIONS}), e.g.\n14\n15\n34")
        self.options.setToolTip("The answers to choose between, one a line; the question is the "
                                "question box's")
        self.choose_button = QPushButton("Choose")
        self.choose_button.setObjectName("evidenceChoose")
        self.choose_button.setAccessibleName("Choose between the options")
        self.choose_button.setToolTip("Which option do the papers bear out? The question box's question, "
                                      "these options; the quote is checked on its page.")
        self.choose_button.clicked.connect(self._choose)
        self.file_button, self.target = file_controls(
            "evidenceFileChoice", "evidenceChoiceTarget",
            "Cite the chosen option's paper and page as evidence (cito:citesAsEvidence) under the KB "
            "browser's selected observation", self.file_requested)
        self.browser = QTextBrowser()
        self.browser.setObjectName("evidenceChoiceText")
        self.browser.setAccessibleName("The option chosen, its quote and notes")
        self.browser.setOpenLinks(False)
        self.browser.setPlaceholderText("Type a question above and options at the left, then click "
                                        "Choose: the option the papers bear out shows here with its quote.")
        self.browser.anchorClicked.connect(self._clicked)
        title = QLabel("Multiple choice")
        title.setObjectName("evidenceChoiceLabel")
        header = QHBoxLayout()
        header.setContentsMargins(0, 0, 0, 0)
        header.addWidget(title, 1)
        header.addWidget(self.choose_button)
        header.addWidget(self.file_button)
        body = QHBoxLayout()
        body.setContentsMargins(0, 0, 0, 0)
        body.addWidget(self.options, 1)
        body.addWidget(self.browser, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(header)
        layout.addLayout(body, 1)
        layout.addWidget(self.target)

    def fileable(self) -> bool:
        """A chosen option whose quote's paper is known (an undecided choice has nothing to file)."""
        return self.choice is not None and self.choice.choice is not None and self.paper_id is not None

    def show_choice(self, result: Any, paper_id: int | None) -> None:
        self.choice, self.paper_id = result, paper_id
        self.browser.setHtml(choice_html(result, paper_id))
        self.file_button.setEnabled(self.fileable())

    def set_busy(self, busy: bool) -> None:
        self.choose_button.setEnabled(not busy)
        self.file_button.setEnabled(not busy and self.fileable())

    def _choose(self) -> None:
        try:
            options = options_from_lines(self.options.toPlainText())
        except ValueError as err:
            self.message.emit("warning", f"Multiple choice: {err}.")
            return
        self.choose_requested.emit(options)

    def _clicked(self, url: QUrl) -> None:
        result = self.choice
        if url.scheme() == CITE_SCHEME and result is not None and self.paper_id is not None:
            self.citation_opened.emit(self.paper_id, result.pages[0], result.quote or "")
