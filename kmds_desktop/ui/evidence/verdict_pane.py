"""The verdict pane of the Evidence view: the question box's text judged as a claim against the papers
(supported / contradicted / mixed / cannot tell, each paper's stance with its verified quote and page),
and the verdict filed under the KB observation selected in the KB browser as CiTO links.

Why under the selected observation: the KB browser is where a finding is chosen; the pane names the
observation it will file under before the click, so nothing lands under the wrong finding unseen.
"""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QTextBrowser, QVBoxLayout, QWidget

from kmds_desktop.ui.evidence.filing import file_controls

#: Stances that become a link (the others are shown, not filed).
FILED_STANCES = ("supports", "contradicts")


def verdict_html(result: Any) -> str:
    """The verdict's balance, then each paper's stance with its quote and page(s)."""
    parts = [f"<p><b>{html.escape(result.verdict.capitalize())}</b> \u2014 {html.escape(result.summary)}</p>"]
    rows = []
    for document in result.documents:
        pages = ", ".join(map(str, document.pages))
        quote = f"<br>\u201c{html.escape(document.quote)}\u201d (p. {pages})" if document.quote else ""
        rows.append(f"<li><b>{html.escape(document.stance)}</b>: {html.escape(document.label)}{quote}</li>")
    if rows:
        parts.append(f"<ul>{''.join(rows)}</ul>")
    if result.notes:
        parts.append("<p style='color:#666'>" + "<br>".join(html.escape(n) for n in result.notes) + "</p>")
    return "".join(parts)


class VerdictPane(QWidget):
    """Emits ``judge_requested`` (Judge the claim) and ``file_requested`` (File under the observation)."""

    judge_requested = Signal()
    file_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.verdict: Any = None
        self.judge_button = QPushButton("Judge as a claim")
        self.judge_button.setObjectName("evidenceJudge")
        self.judge_button.setToolTip("Does each paper support, contradict or not address the question "
                                     "box's statement? Every quote is checked on its page.")
        self.judge_button.clicked.connect(self.judge_requested)
        self.file_button, self.target = file_controls(
            "evidenceFileVerdict", "evidenceFileTarget",
            "Link the KB browser's selected observation to each supporting (cito:supports) or "
            "contradicting (cito:disputes) paper and page", self.file_requested)
        self.browser = QTextBrowser()
        self.browser.setObjectName("evidenceVerdictText")
        self.browser.setPlaceholderText("Type a statement above and click Judge as a claim: each paper's "
                                        "stance shows here with its quote.")
        header = QHBoxLayout()
        header.setContentsMargins(0, 0, 0, 0)
        header.addWidget(QLabel("Verdict"), 1)
        header.addWidget(self.judge_button)
        header.addWidget(self.file_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(header)
        layout.addWidget(self.browser, 1)
        layout.addWidget(self.target)

    def fileable(self) -> bool:
        return self.verdict is not None and any(d.stance in FILED_STANCES for d in self.verdict.documents)

    def show_verdict(self, result: Any) -> None:
        self.verdict = result
        self.browser.setHtml(verdict_html(result))
        self.file_button.setEnabled(self.fileable())

    def set_busy(self, busy: bool) -> None:
        self.judge_button.setEnabled(not busy)
        self.file_button.setEnabled(not busy and self.fileable())
