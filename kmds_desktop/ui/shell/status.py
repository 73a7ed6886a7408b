"""The main window's status line: the KB, the LLM backend, the literature database and the jobs.

A mixin of :class:`~kmds_desktop.ui.shell.main_window.MainWindow`; the texts come from the application
layer (:func:`kmds_desktop.app.workspace.kb_summary`, :func:`kmds_desktop.app.llm_status.probe_llm`).
When "Automatic" finds a server on a usual port that the user has not answered for, a bar above
the panels asks before anything is sent to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtWidgets import QLabel

from kmds_desktop.app import workspace
from kmds_desktop.app.llm_status import (
    LLMProbe,
    probe_llm,
    status_after_answer,
)
from kmds_desktop.ui.jobs.progress_strip import ProgressStrip
from kmds_desktop.ui.jobs.runner import Job

if TYPE_CHECKING:
    from kmds_desktop.ui.shell.main_window import MainWindow

APP_TITLE = "KMDS Desktop"


class WindowStatus:
    """Status line and title of :class:`MainWindow` (see the module docstring)."""

    def _build_status_bar(self: MainWindow) -> None:
        bar = self.statusBar()
        self.kb_status = QLabel("No knowledge base")
        self.kb_status.setObjectName("kbStatus")
        self.llm_status = QLabel(f"LLM: {self.settings.llm.backend}")
        self.llm_status.setObjectName("llmStatus")
        self.lit_status = QLabel("Literature: …")
        self.lit_status.setObjectName("literatureStatus")
        self.progress_strip = ProgressStrip(self.jobs, self)
        bar.addWidget(self.kb_status)
        bar.addPermanentWidget(self.progress_strip)
        bar.addPermanentWidget(self.llm_status)
        bar.addPermanentWidget(self.lit_status)

    def _literature_status(self: MainWindow, text: str) -> None:
        """Short text in the status bar ("Literature: 6,473 documents"), the full one as tooltip."""
        self.lit_status.setText(text.split(" (", 1)[0])
        self.lit_status.setToolTip(text)

    def _update_kb_status(self: MainWindow) -> None:
        text, tip = workspace.kb_summary(self.kb, self.index_follower.is_ready(self.kb))
        self.kb_status.setText(text)
        self.kb_status.setToolTip(tip)

    def _update_title(self: MainWindow) -> None:
        if self.kb is None:
            self.setWindowTitle(APP_TITLE)
            return
        # Qt draws "[*]" as "*" while the window is modified (the platform's own mark on macOS); a
        # title without it makes setWindowModified warn on every edit.
        self.setWindowTitle(f"{Path(self.kb.path).name}[*] — {APP_TITLE}")
        self.setWindowModified(bool(self.kb.dirty))

    def refresh_llm_status(self: MainWindow) -> Job | None:
        self.llm_status.setText(f"LLM: {self.settings.llm.backend} (checking…)")
        return self.jobs.submit(
            "llm.status",
            probe_llm,
            self.settings.llm.model_copy(),
            openai_servers=getattr(self, "openai_servers", None),  # None: the usual ports
            label="Checking the LLM backend",
            policy="latest",
            busy_cursor=False,
            on_result=self._llm_status_arrived,
            on_error=lambda exc: self.llm_status.setText(f"LLM: {self.settings.llm.backend} (error: {exc})"),
        )

    def _llm_status_after_answer(self: MainWindow, result: object) -> None:
        """Each answer is a probe of its own: the status follows a server that died or came back."""
        status = status_after_answer(result, self.settings.llm)
        if status is not None:
            self._llm_status_arrived(status)

    def _llm_status_arrived(self: MainWindow, status: LLMProbe | tuple[str, str]) -> None:
        text, tip = (status.text, status.tooltip) if isinstance(status, LLMProbe) else status
        self.llm_status.setText(f"LLM: {text}")
        self.llm_status.setToolTip(tip)
        candidate = status.candidate if isinstance(status, LLMProbe) else None
        if candidate is not None and self.settings.llm.backend == "auto":
            models = ", ".join(candidate.models) or "no models listed"
            self.server_question.ask(candidate.question, candidate.base_url, f"It offers: {models}")
