"""The window's status line: the KB, the LLM backend, the literature database and the jobs.

A :class:`StatusLine` fills the status bar it is given; the texts come from the application layer
(:meth:`~kmds_desktop.app.workspace_session.WorkspaceSession.summary`,
:func:`kmds_desktop.app.preferences.probe_llm_backend`). When "Automatic" finds a server on a usual port that
the user has not answered for, it emits :attr:`StatusLine.server_found`; the window shows the bar
that asks before anything is sent to it.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QLabel, QStatusBar

from kmds_desktop.app.llm_status import LLMProbe, status_after_answer
from kmds_desktop.app.preferences import probe_llm_backend
from kmds_desktop.app.presentation import Settings
from kmds_desktop.app.workspace_session import WorkspaceSession
from kmds_desktop.ui.jobs.job import Job
from kmds_desktop.ui.jobs.progress_strip import ProgressStrip
from kmds_desktop.ui.jobs.runner import JobRunner

APP_TITLE = "KMDS Desktop"
#: How often (ms) the LLM server's model list is read again, on a worker: a model loaded or a server
#: started meanwhile shows in the status line, and a server whose models changed has what it accepts
#: found out again (:mod:`kmds_desktop.llm.server_memory`). The model list only: nothing is sent.
RELIST_MS = 60_000


def window_title(file_name: str | None) -> str:
    """The window's title for the open KB's ``file_name``. Qt draws "[*]" as "*" while the window is
    modified (the platform's own mark on macOS); a title without it makes setWindowModified warn on
    every edit."""
    return f"{file_name}[*] — {APP_TITLE}" if file_name else APP_TITLE


class StatusLine(QObject):
    """The KB, LLM and literature labels and the jobs' progress strip, in ``bar``."""

    server_found = Signal(str, str, str)  # question, base URL, what it offers
    #: The status probe found the model server ready (True) or not (False): the window has the model read
    #: the route prompt ahead of the first question when it is.
    llm_ready = Signal(bool)

    def __init__(self, bar: QStatusBar, session: WorkspaceSession, settings: Settings,
                 jobs: JobRunner) -> None:
        super().__init__(bar)
        self.bar = bar
        self.session = session
        self.settings = settings
        self.jobs = jobs
        self.kb_status = QLabel("No knowledge base")
        self.kb_status.setObjectName("kbStatus")
        self.llm_status = QLabel(f"LLM: {settings.llm.backend}")
        self.llm_status.setObjectName("llmStatus")
        self.lit_status = QLabel("Literature: …")
        self.lit_status.setObjectName("literatureStatus")
        self.progress_strip = ProgressStrip(jobs, bar)
        bar.addWidget(self.kb_status)
        bar.addPermanentWidget(self.progress_strip)
        bar.addPermanentWidget(self.llm_status)
        bar.addPermanentWidget(self.lit_status)
        # every change of the open KB or of its index (opened, edited, saved, indexed) shows here
        unsubscribe = session.subscribe(lambda _change: self.show_kb())
        self.destroyed.connect(lambda _obj=None: unsubscribe())  # a session outliving the line forgets it
        self.show_kb()
        # started by the first probe (a window told not to probe never lists models)
        self.relist_timer = QTimer(self)
        self.relist_timer.setInterval(RELIST_MS)
        self.relist_timer.timeout.connect(self._relist)
        self._servers: Any = None

    def show_literature(self, text: str) -> None:
        """Short text in the status bar ("Literature: 6,473 documents"), the full one as tooltip."""
        self.lit_status.setText(text.split(" (", 1)[0])
        self.lit_status.setToolTip(text)

    def show_kb(self) -> None:
        """The open KB as the session describes it (name, counts, whether it is indexed)."""
        text, tip = self.session.summary()
        self.kb_status.setText(text)
        self.kb_status.setToolTip(tip)

    def show_opening(self, file_name: str) -> None:
        self.kb_status.setText(f"Opening {file_name}…")

    def _relist(self) -> None:
        """The periodic probe: quiet (the status keeps its text until the answer), never two at once."""
        if self.settings.llm.backend != "offline" and not self.jobs.is_busy("llm.status"):
            self.refresh_llm(self._servers, quiet=True)

    def refresh_llm(self, openai_servers: Any = None, quiet: bool = False) -> Job | None:
        """Probe the LLM backend on a worker (``openai_servers`` None: the usual ports); ``quiet``:
        the status line does not say "checking" meanwhile."""
        if not quiet:
            self.llm_status.setText(f"LLM: {self.settings.llm.backend} (checking…)")
        self._servers = openai_servers
        if not self.relist_timer.isActive():
            self.relist_timer.start()
        return self.jobs.submit(
            "llm.status",
            probe_llm_backend,
            self.settings.llm.model_copy(),
            openai_servers=openai_servers,
            label="Checking the LLM backend",
            policy="latest",
            busy_cursor=False,
            on_result=self.llm_status_arrived,
            on_error=lambda exc: self.llm_status.setText(f"LLM: {self.settings.llm.backend} (error: {exc})"),
        )

    def llm_after_answer(self, result: object) -> None:
        """Each answer is a probe of its own: the status follows a server that died or came back."""
        status = status_after_answer(result, self.settings.llm)
        if status is not None:
            self.llm_status_arrived(status)

    def llm_status_arrived(self, status: LLMProbe) -> None:
        self.llm_status.setText(f"LLM: {status.text}")
        self.llm_ready.emit(status.ready)
        self.llm_status.setToolTip(status.tooltip)
        candidate = status.candidate
        if candidate is not None and self.settings.llm.backend == "auto":
            models = ", ".join(candidate.models) or "no models listed"
            self.server_found.emit(candidate.question, candidate.base_url, f"It offers: {models}")
