"""The main window: KB browser (left), question/answer (centre), literature search (right).

The window owns the app's state that spans panels: the open knowledge base, the semantic index, the
settings and the :class:`~kmds_desktop.ui.jobs.runner.JobRunner`. Every blocking step (loading, saving,
indexing, listing models, answering) is a job; the window only wires results into the panels.
Errors are shown in the :class:`~kmds_desktop.ui.shell.message_bar.MessageBar` at the top of the window.

Its parts, one job each: start-up and the first frame (:mod:`~kmds_desktop.ui.shell.startup`), the
recovery bars (:mod:`~kmds_desktop.ui.shell.recovery`), the menus (:mod:`~kmds_desktop.ui.shell.menus`),
the status line and title (:mod:`~kmds_desktop.ui.shell.status`), and the knowledge base with its
index (:mod:`~kmds_desktop.ui.kb.kb_part`). This module lays out the panels and connects them.
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QMainWindow, QSplitter, QVBoxLayout, QWidget

from kmds_desktop.app import workspace
from kmds_desktop.app.llm_status import confirm_server, decline_server
from kmds_desktop.app.preferences import write_settings
from kmds_desktop.app.presentation import Settings
from kmds_desktop.app.workspace import IndexFollower, IndexHolder
from kmds_desktop.ui.shell import file_dialogs
from kmds_desktop.ui.ask.panel import AskPanel
from kmds_desktop.ui.ask.server_question import ServerQuestionBar
from kmds_desktop.ui.evidence.window_dock import install_evidence
from kmds_desktop.ui.kb.browser import KBBrowser
from kmds_desktop.ui.literature.panel import LiteraturePanel
from kmds_desktop.ui.kb.kb_part import KB_FILE_FILTER, WindowKnowledgeBase
from kmds_desktop.ui.shell.menus import SHORTCUTS_HTML, WindowMenus, app_icon
from kmds_desktop.ui.shell.recovery import WindowRecovery
from kmds_desktop.ui.shell.startup import WindowStartup, settle_before_first_frame
from kmds_desktop.ui.shell.status import APP_TITLE, WindowStatus
from kmds_desktop.ui.shell.message_bar import MessageBar, RecoveryBar
from kmds_desktop.ui.reviews import ReviewMenu
from kmds_desktop.ui.jobs.runner import Job, JobRunner

log = logging.getLogger(__name__)


def initial_kb_path(settings: Settings, kb_file: str | None = None) -> tuple[Path, str | None]:
    """Which KB to open at start-up (the application layer's rule: :func:`workspace.startup_kb`)."""
    return workspace.startup_kb(settings, kb_file)


class MainWindow(WindowStartup, WindowRecovery, WindowMenus, WindowStatus, WindowKnowledgeBase, QMainWindow):
    """Three panels, menus, status bar; remembers layout, recent files and the last KB."""

    kb_loaded = Signal(object)  # KnowledgeBase
    kb_saved = Signal(str)
    index_updated = Signal(object)  # BuildReport
    first_frame_shown = Signal()  # once, right after the window's first paint

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        settings_path: Path | None = None,
        jobs: JobRunner | None = None,
        literature_kwargs: dict[str, Any] | None = None,
        auto_index: bool = True,
        probe_llm: bool = True,
        index: Any | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings or Settings()
        self.settings_path = settings_path
        self.jobs = jobs or JobRunner(self)
        self.kb: Any = None
        self.index_holder = IndexHolder(index)  # opened on the first build (or question) when None
        #: when the index is brought up to date with the open KB (the application layer's rule)
        self.index_follower = IndexFollower(self.index_holder, auto=auto_index)
        self.active_dialog: Any = None
        self._force_close = False
        self.first_frame_done = False
        self.startup_jobs: list[Job] = []
        self.installEventFilter(self)  # until the first paint (see eventFilter)
        self.setObjectName("mainWindow")
        self.setWindowIcon(app_icon())
        self.setAcceptDrops(True)

        # every file dialog starts in the folder its kind last used, kept in these settings
        file_dialogs.remember_folders_in(self.settings.ui, self.persist_settings)
        self.messages = MessageBar()
        self.browser = KBBrowser()
        self.ask = AskPanel(self.jobs, self)
        self.ask.set_history(self.settings.ui.question_history)
        self.ask.answer_finished.connect(self._llm_status_after_answer)
        self.literature = self._make_literature_panel(literature_kwargs or {})
        #: File's review entries, and the open review's place kept across restarts
        self.reviews = ReviewMenu(self, self.jobs, self.messages, self.literature)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("mainSplitter")
        self.splitter.addWidget(self.browser)
        self.splitter.addWidget(self.ask)
        self.splitter.addWidget(self.literature)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setSizes([340, 560, 520])
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.messages)
        layout.addWidget(self.reviews.new_records_bar)
        #: One bar per recovery copy found at start-up (see :meth:`offer_recoveries`).
        self.recovery_bars: list[RecoveryBar] = []
        self._recovery_layout = QVBoxLayout()
        self._recovery_layout.setSpacing(0)
        #: "Found llama.cpp at … — use it?": shown when the status probe finds a server not yet answered for.
        self.server_question = ServerQuestionBar(self)
        self.server_question.answered.connect(self._server_answered)
        self._recovery_layout.addWidget(self.server_question)
        layout.addLayout(self._recovery_layout)
        layout.addWidget(self.splitter, 1)
        self.setCentralWidget(central)

        self._build_status_bar()
        self._build_menus()
        self.evidence = install_evidence(self)  # the Evidence dock with File's PDF and Zotero imports
        self._wire()
        self._restore_layout()
        self._update_title()
        if probe_llm:
            QTimer.singleShot(0, self, self.refresh_llm_status)
        QTimer.singleShot(0, self, self.reviews.restore)  # the review the user left, on a worker

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt API
        """Notice the window's first paint (see :class:`~kmds_desktop.ui.shell.startup.WindowStartup`)."""
        if watched is self and event.type() == QEvent.Type.Paint and not self.first_frame_done:
            self._first_paint()
        return False

    def _make_literature_panel(self, kwargs: dict[str, Any]) -> LiteraturePanel:
        panel = LiteraturePanel(self.settings, self.jobs, self, **kwargs)
        # Semantic rows and the embedding after an import embed through the index process, so torch
        # never loads in the window's process (called on workers).
        panel.session.encoder = self._literature_encoder
        panel.status_changed.connect(self._literature_status)
        # One message surface: the panel's messages appear in the window's bar only.
        panel.message_shown.connect(
            lambda level, text: self.messages.show_message(text, level, topic="literature"))
        panel.search_cleared.connect(lambda: self.messages.end_topic("literature"))
        # A banner ends with its event: the next generation or run replaces "Generated: …".
        panel.stage_started.connect(lambda: self.messages.end_topic("literature"))
        panel.wide_toggled.connect(self.set_literature_wide)
        return panel

    def _literature_encoder(self, texts: Any) -> Any:
        """Embed texts in the index process (opened on first use, as for the KB index)."""
        return workspace.encode_texts(self.index_holder, self.settings, texts)

    def set_literature_wide(self, wide: bool) -> None:
        """Give the literature search the window's width (the other panels step aside), or undo it."""
        self.browser.setVisible(not wide)
        self.ask.setVisible(not wide)
        button = self.literature.wide_button
        if button.isChecked() != wide:
            button.blockSignals(True)
            button.setChecked(wide)
            button.blockSignals(False)

    def _wire(self) -> None:
        self.jobs.refused.connect(lambda kind, text: self.messages.show_message(text, "warning", topic=kind))
        self.jobs.job_error.connect(self._job_failed)
        self.jobs.callback_error.connect(lambda exc: self.messages.show_exception(exc, "Unexpected error"))
        self.browser.kb_edited.connect(self._on_kb_edited)
        self.browser.edit_failed.connect(lambda text: self.messages.error(text))
        self.ask.citation_activated.connect(self.reveal_observation)
        self.ask.message.connect(
            lambda level, text, details: self.messages.show_message(text, level, details, topic="ask")
        )
        # A banner about answering ("still running", "could not be answered") ends with the next answer.
        self.ask.answer_finished.connect(lambda _result: self.messages.end_topic("ask"))
        self.ask.context_provider = self.ask_context

    def _job_failed(self, job: Any, exc: BaseException) -> None:
        """A job's failure, as a message about the job's kind (its next success ends it)."""
        message = self.messages.show_exception(exc, job.label)
        message.topic = job.kind

    def _restore_layout(self) -> None:
        ui = self.settings.ui
        restored = False
        if ui.window_geometry:
            try:
                restored = self.restoreGeometry(QByteArray(base64.b64decode(ui.window_geometry)))
            except ValueError:  # not base64: ignore a hand-edited value
                restored = False
        if not restored:
            self.resize(1440, 880)
        if ui.window_state:
            self.restoreState(QByteArray(base64.b64decode(ui.window_state)))
        self._pending_sizes = list(ui.splitter_sizes) if len(ui.splitter_sizes) == 3 else None

    def showEvent(self, event: Any) -> None:  # noqa: N802 - Qt API
        """Apply the remembered panel sizes once the window has its real size (else Qt rescales them)."""
        super().showEvent(event)
        if self._pending_sizes and all(s >= 0 for s in self._pending_sizes):
            self.splitter.setSizes(self._pending_sizes)
        self._pending_sizes = None

    def _remember_layout(self) -> None:
        ui = self.settings.ui
        ui.window_geometry = base64.b64encode(bytes(self.saveGeometry())).decode("ascii")
        ui.window_state = base64.b64encode(bytes(self.saveState())).decode("ascii")
        ui.splitter_sizes = [int(s) for s in self.splitter.sizes()]

    def reset_layout(self) -> None:
        total = max(900, sum(self.splitter.sizes()))
        self.splitter.setSizes([int(total * 0.24), int(total * 0.40), int(total * 0.36)])

    def _server_answered(self, base_url: str, yes: bool) -> None:
        """Remember the answer in the settings file; a yes makes "Automatic" use the server now."""
        remember = confirm_server if yes else decline_server
        self.settings.llm = remember(self.settings.llm, base_url)
        self.persist_settings()
        if yes:
            self.messages.info(f"Automatic uses the server at {base_url} from now on.")
        self.refresh_llm_status()

    def persist_settings(self) -> bool:
        """Write the settings file (:func:`~kmds_desktop.app.preferences.write_settings`); a failure is
        shown, never raised."""
        problem = write_settings(self.settings, self.settings_path)
        if problem:
            self.messages.error(problem)
        return problem is None

    def open_preferences(self) -> None:
        from kmds_desktop.ui.preferences.dialog import PreferencesDialog

        dialog = PreferencesDialog(self.settings, self.jobs, settings_path=self.settings_path, parent=self)
        dialog.settings_saved.connect(self._settings_changed)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        dialog.finished.connect(lambda _r: setattr(self, "active_dialog", None))
        self.active_dialog = dialog
        dialog.open()

    def _settings_changed(self, new: Settings) -> None:
        rebuild = self.index_follower.settings_changed(self.settings.index, new.index)
        for section in ("llm", "query_generation", "literature", "retrieval", "index"):
            setattr(self.settings, section, getattr(new, section))
        self.literature.apply_settings(self.settings)
        self.ask.kb_changed(self.kb)
        self.messages.info("Preferences saved.")
        self.refresh_llm_status()
        if rebuild and self.index_follower.kb_opened(self.kb):  # the new index has not seen the KB yet
            self._update_kb_status()
            self.update_index()

    def ask_context(self) -> dict[str, Any]:
        """What the ask panel needs to answer: the KB, the index (if built) and the settings."""
        index = self.index_holder.get("index")
        return {
            "kb": self.kb,
            "index": index if self.index_follower.is_ready(self.kb) else None,
            "settings": self.settings,
            "index_holder": self.index_holder,
        }

    def reveal_observation(self, iri: str) -> bool:
        """Select ``iri`` in the KB browser (citations in answers call this)."""
        if not self.browser.isVisible():
            self.browser.setVisible(True)
        ok = self.browser.select_observation(iri)
        if not ok:
            self.messages.warning(
                f"The cited record {iri} is not in the open knowledge base (it may have been "
                "deleted since the answer was written)."
            )
        return ok

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt API
        urls = event.mimeData().urls() if event.mimeData().hasUrls() else []
        if any(u.isLocalFile() and workspace.droppable(u.toLocalFile()) for u in urls):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt API
        """A KB file opens; literature files (JSONL, compressed MEDLINE) go to the literature import."""
        files = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        what, chosen = workspace.route_dropped(files)
        if what == "literature":
            event.acceptProposedAction()
            self.literature.import_files(chosen)
        elif what == "kb":
            event.acceptProposedAction()
            self.open_kb(chosen[0])
        else:
            event.ignore()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt API
        if not self._force_close and self._ask_close():
            event.ignore()
            return
        self._remember_layout()
        self.ask.remember_history(self.settings.ui)
        self.persist_settings()
        self.reviews.window_closing()
        self.jobs.shutdown()
        if hasattr(self.literature, "shutdown"):
            self.literature.shutdown()
        self.evidence.shutdown()
        event.accept()


__all__ = ["APP_TITLE", "KB_FILE_FILTER", "SHORTCUTS_HTML", "MainWindow", "app_icon", "initial_kb_path",
           "settle_before_first_frame"]
