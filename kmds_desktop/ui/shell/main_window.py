"""The main window: KB browser (left), question/answer (centre), literature search (right).

The window composes its parts and wires them; it holds no domain state of its own. The open
knowledge base and its semantic index belong to the Qt-free workspace session
(:class:`~kmds_desktop.app.workspace_session.WorkspaceSession`), which announces each change; the
window subscribes and tells the parts that show it. Every blocking step is a job on the one
:class:`~kmds_desktop.ui.jobs.runner.JobRunner`.

Its parts, one job each, none of which knows the window:

- :class:`~kmds_desktop.ui.kb.kb_part.KnowledgeBasePart` -- open, save, the unsaved-changes question,
  the index;
- :class:`~kmds_desktop.ui.shell.menus.WindowMenus` -- the menu bar (the entries call the
  :class:`~kmds_desktop.ui.shell.menus.MenuCommands` built here);
- :class:`~kmds_desktop.ui.shell.status.StatusLine` -- the KB, LLM and literature labels, the jobs' strip;
- :class:`~kmds_desktop.ui.shell.recovery.RecoveryBars` -- unsaved edits an earlier session left;
- :class:`~kmds_desktop.ui.shell.startup.FirstFrame` -- start-up work waits for the first frame;
- the panels (:class:`~kmds_desktop.ui.kb.browser.KBBrowser`, :class:`~kmds_desktop.ui.ask.panel.AskPanel`,
  :class:`~kmds_desktop.ui.literature.panel.LiteraturePanel`), the review menu and the Evidence dock.

Errors are shown in the :class:`~kmds_desktop.ui.shell.message_bar.MessageBar` at the top.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QLabel, QMainWindow, QMenu, QSplitter, QVBoxLayout, QWidget

from kmds_desktop.app import workspace
from kmds_desktop.app.ask import ANSWERED
from kmds_desktop.app.events import Change
from kmds_desktop.app.llm_status import confirm_server, decline_server
from kmds_desktop.app.preferences import write_settings
from kmds_desktop.app.presentation import Settings
from kmds_desktop.app.workspace_session import KB_EDITED, KB_OPENED, KB_SAVED, WorkspaceSession
from kmds_desktop.ui.ask.panel import AskPanel
from kmds_desktop.ui.ask.server_question import ServerQuestionBar
from kmds_desktop.ui.evidence.window_dock import install_evidence
from kmds_desktop.ui.jobs.job import Job
from kmds_desktop.ui.jobs.progress_strip import ProgressStrip
from kmds_desktop.ui.jobs.runner import JobRunner
from kmds_desktop.ui.kb.browser import KBBrowser
from kmds_desktop.ui.kb.kb_part import KnowledgeBasePart
from kmds_desktop.ui.literature.panel import LiteraturePanel
from kmds_desktop.ui.reviews import ReviewMenu
from kmds_desktop.ui.shell import file_dialogs
from kmds_desktop.ui.shell.help import HelpDialogs
from kmds_desktop.ui.shell.layout import SavedLayout
from kmds_desktop.ui.shell.menus import MenuCommands, WindowMenus, app_icon
from kmds_desktop.ui.shell.message_bar import MessageBar, RecoveryBar
from kmds_desktop.ui.shell.recovery import RecoveryBars, write_recovery_copy_if_unsaved
from kmds_desktop.ui.shell.startup import FirstFrame, open_then_warm_up, start_warm_up
from kmds_desktop.ui.shell.status import StatusLine, window_title

log = logging.getLogger(__name__)


def initial_kb_path(settings: Settings, kb_file: str | None = None) -> tuple[Path, str | None]:
    """Which KB to open at start-up (the application layer's rule: :func:`workspace.startup_kb`)."""
    return workspace.startup_kb(settings, kb_file)


class MainWindow(QMainWindow):
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
        #: the open KB and its index (the index opens on the first build or question when None)
        self.session = WorkspaceSession(self.settings, index=index, auto_index=auto_index)
        self.active_dialog: Any = None
        #: the LLM servers the status probe tries ((name, port) pairs); None: the usual ports
        self.openai_servers: Any = None
        self._llm_ready = False  # the last status probe found the model server ready
        self._force_close = False
        self.startup_jobs: list[Job] = []
        self.first_frame = FirstFrame(self)
        self.first_frame.shown.connect(self.first_frame_shown)
        self.setObjectName("mainWindow")
        self.setWindowIcon(app_icon())
        self.setAcceptDrops(True)

        # every file dialog starts in the folder its kind last used, kept in these settings
        file_dialogs.remember_folders_in(self.settings.ui, self.persist_settings)
        self.messages = MessageBar()
        self.kb_part = KnowledgeBasePart(self.session, self.jobs, self.messages, self, self.persist_settings)
        self.browser = KBBrowser(session=self.session)
        self.ask = AskPanel(self.jobs, self, workspace=self.session)
        self.ask.set_history(self.settings.ui.question_history)
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
        recovery_layout = QVBoxLayout()
        recovery_layout.setSpacing(0)
        #: "Found llama.cpp at … — use it?": shown when the status probe finds a server not yet answered for.
        self.server_question = ServerQuestionBar(self)
        recovery_layout.addWidget(self.server_question)
        #: One bar per recovery copy found at start-up (see :meth:`offer_recoveries`).
        self.recovery = RecoveryBars(recovery_layout, self.jobs, self.messages, self.kb_part.ask_save_then,
                                     self)
        layout.addLayout(recovery_layout)
        layout.addWidget(self.splitter, 1)
        self.setCentralWidget(central)

        self.help = HelpDialogs(self, self.jobs, self.messages)
        self.status = StatusLine(self.statusBar(), self.session, self.settings, self.jobs)
        self.menus = WindowMenus(self.menuBar(), self.settings, self._menu_commands(), (
            ("KB browser", self.browser), ("Question and answer", self.ask), ("Literature", self.literature)))
        # the Evidence dock, with File's PDF and Zotero imports after the literature imports
        self.evidence, self.evidence_dock = install_evidence(
            self, self.jobs, self.messages, self.session.encode, self.menus.import_folder_action)
        self._wire()
        self.layout_saved = SavedLayout(self, self.splitter, self.settings)
        self.layout_saved.restore()
        self._show_kb()
        if probe_llm:
            QTimer.singleShot(0, self, self.refresh_llm_status)
        QTimer.singleShot(0, self, self.reviews.restore)  # the review the user left, on a worker

    # -- what tests, scripts and the entry point reach through the window (each the part's own) --
    @property
    def kb(self) -> Any:
        """The open KB (the workspace session's)."""
        return self.session.kb

    @property
    def index_holder(self) -> workspace.IndexHolder:
        return self.session.index_holder

    @property
    def index_follower(self) -> workspace.IndexFollower:
        return self.session.index_follower

    @property
    def first_frame_done(self) -> bool:
        return self.first_frame.done

    @property
    def recovery_bars(self) -> list[RecoveryBar]:
        return self.recovery.bars

    # the status line's labels and strip, and the menus' entries, under the names they had
    @property
    def kb_status(self) -> QLabel:
        return self.status.kb_status

    @property
    def llm_status(self) -> QLabel:
        return self.status.llm_status

    @property
    def lit_status(self) -> QLabel:
        return self.status.lit_status

    @property
    def progress_strip(self) -> ProgressStrip:
        return self.status.progress_strip

    @property
    def open_action(self) -> QAction:
        return self.menus.open_action

    @property
    def recent_menu(self) -> QMenu:
        return self.menus.recent_menu

    @property
    def export_menu(self) -> QMenu:
        return self.menus.export_menu

    def open_kb(self, path: str | Path, *, note: str | None = None) -> Job | None:
        return self.kb_part.open_kb(path, note=note)

    def open_kb_dialog(self) -> None:
        self.kb_part.open_kb_dialog()

    def save_kb(self, path: str | Path | None = None) -> Job | None:
        return self.kb_part.save_kb(path)

    def update_index(self) -> Job | None:
        return self.kb_part.update_index()

    def offer_recoveries(self) -> list[RecoveryBar]:
        return self.recovery.offer()

    def after_first_frame(self, action: Any, *, fallback_ms: int = 1000) -> None:
        self.first_frame.after(action, fallback_ms=fallback_ms)

    def warm_up(self) -> Job | None:
        return start_warm_up(self.jobs, self.session, self.messages)

    def start_up(self, kb_path: str | Path, *, note: str | None = None) -> None:
        """What follows ``show()`` at start-up (``run_app`` and the stall benchmark): once the first frame
        is on screen, open ``kb_path``, then start the warm-up (both jobs in :attr:`startup_jobs`);
        recovery copies an earlier session left are offered at once."""
        open_then_warm_up(self.first_frame, lambda: self.open_kb(kb_path, note=note), lambda: self.warm_up(),
                          self.startup_jobs)
        self.offer_recoveries()

    def refresh_llm_status(self) -> Job | None:
        return self.status.refresh_llm(self.openai_servers)

    # -- composition --
    def _make_literature_panel(self, kwargs: dict[str, Any]) -> LiteraturePanel:
        panel = LiteraturePanel(self.settings, self.jobs, self, **kwargs)
        # Semantic rows and the embedding after an import embed through the index process, so torch
        # never loads in the window's process (called on workers).
        panel.session.encoder = self.session.encode
        # One message surface: the panel's messages appear in the window's bar only.
        panel.message_shown.connect(
            lambda level, text: self.messages.show_message(text, level, topic="literature"))
        panel.search_cleared.connect(lambda: self.messages.end_topic("literature"))
        # A banner ends with its event: the next generation or run replaces "Generated: …".
        panel.stage_started.connect(lambda: self.messages.end_topic("literature"))
        panel.wide_toggled.connect(self.set_literature_wide)
        return panel

    def _menu_commands(self) -> MenuCommands:
        kb, lit, browser = self.kb_part, self.literature, self.browser
        return MenuCommands(
            open_kb_dialog=kb.open_kb_dialog, open_kb=lambda path: self.open_kb(path), save_kb=kb.save_kb,
            save_kb_as=kb.save_kb_as, import_literature=lit.import_files_dialog,
            import_literature_folder=lit.import_folder_dialog, build_fast_index=lit.build_fast_index,
            fill_review_entries=self.reviews.fill_menu, export_documents=lit.export_documents,
            export_search_log=lit.export_log, export_answer=self.ask.export_answer_dialog, quit=self.close,
            add_observation=browser.add_observation, edit_selected=browser.edit_selected,
            delete_observation=browser.delete_observation, add_workflow=browser.add_workflow,
            preferences=self.open_preferences, focus_kb_filter=self._focus_filter,
            focus_question=self.ask.focus_question, reset_layout=self.reset_layout,
            rebuild_index=kb.rebuild_index, shortcuts=self.help.show_shortcuts,
            diagnose=self.help.diagnose_data_folder, about=self.help.show_about,
            clear_recent=self._clear_recent,
        )

    def _wire(self) -> None:
        self.session.subscribe(self._session_changed)
        self.jobs.refused.connect(lambda kind, text: self.messages.show_message(text, "warning", topic=kind))
        self.jobs.job_error.connect(self._job_failed)
        self.jobs.callback_error.connect(lambda exc: self.messages.show_exception(exc, "Unexpected error"))
        self.kb_part.kb_loaded.connect(self.kb_loaded)
        self.kb_part.kb_saved.connect(self.kb_saved)
        self.kb_part.index_updated.connect(self.index_updated)
        self.kb_part.opening.connect(self.status.show_opening)
        self.kb_part.load_ended.connect(self.status.show_kb)
        self.kb_part.status_message.connect(lambda text: self.statusBar().showMessage(text, 5000))
        self.kb_part.dialog_opened.connect(self._dialog_opened)
        self.help.dialog_opened.connect(self._dialog_opened)
        self.recovery.restored.connect(self.kb_part.kb_opened)
        self.status.server_found.connect(self.server_question.ask)
        self.status.llm_ready.connect(self._llm_ready_changed)
        self.server_question.answered.connect(self._server_answered)
        self.literature.status_changed.connect(self.status.show_literature)
        self.browser.kb_edited.connect(self.kb_part.kb_edited)
        self.browser.edit_failed.connect(lambda text: self.messages.error(text))
        self.ask.citation_activated.connect(self.reveal_observation)
        self.ask.message.connect(
            lambda level, text, details: self.messages.show_message(text, level, details, topic="ask")
        )
        self.ask.session.subscribe(self._answered)

    def _llm_ready_changed(self, ready: bool) -> None:
        """A model server now ready: it reads the route prompt of the open KB ahead of the first question
        (the periodic probe says "ready" again every minute: only a change asks)."""
        became_ready = ready and not self._llm_ready
        self._llm_ready = ready
        if became_ready:
            self.ask.warm_route()

    def _session_changed(self, change: Change) -> None:
        """The workspace session changed: the parts that show it follow."""
        if change.kind == KB_OPENED and self._llm_ready:
            self.ask.warm_route()  # another KB, another vocabulary in the route prompt
        if change.kind in (KB_OPENED, KB_SAVED):
            self.menus.update_recent()
        if change.kind in (KB_OPENED, KB_EDITED, KB_SAVED):
            self._show_kb()

    def _answered(self, change: Change) -> None:
        """An answer arrived: it is a probe of the LLM too (the status follows a server that died or came
        back), and a banner about answering ("still running", "could not be answered") ends with it."""
        if change.kind == ANSWERED:
            self.status.llm_after_answer(self.ask.session.result)
            self.messages.end_topic("ask")

    def _show_kb(self) -> None:
        """The title names the open KB, with the platform's mark while it has unsaved changes."""
        self.setWindowTitle(window_title(self.session.file_name()))
        self.setWindowModified(bool(self.kb is not None and self.kb.dirty))

    def _dialog_opened(self, dialog: Any) -> None:
        self.active_dialog = dialog

    def _job_failed(self, job: Any, exc: BaseException) -> None:
        """A job's failure, as a message about the job's kind (its next success ends it)."""
        message = self.messages.show_exception(exc, job.label)
        message.topic = job.kind

    # -- the window's own: layout, settings, dialogs, drops, closing --
    def set_literature_wide(self, wide: bool) -> None:
        """Give the literature search the window's width (the other panels step aside), or undo it."""
        self.browser.setVisible(not wide)
        self.ask.setVisible(not wide)
        button = self.literature.wide_button
        if button.isChecked() != wide:
            button.blockSignals(True)
            button.setChecked(wide)
            button.blockSignals(False)

    def showEvent(self, event: Any) -> None:  # noqa: N802 - Qt API
        super().showEvent(event)
        self.layout_saved.window_shown()

    def reset_layout(self) -> None:
        self.layout_saved.reset()

    def _focus_filter(self) -> None:
        self.browser.filter_edit.setFocus()
        self.browser.filter_edit.selectAll()

    def _clear_recent(self) -> None:
        self.session.clear_recent()
        self.persist_settings()

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

    def _open_dialog(self, dialog: Any) -> None:
        self.active_dialog = dialog
        dialog.open()

    def open_preferences(self) -> None:
        # why: start-up time: the Preferences dialog and its pages load when first opened
        from kmds_desktop.ui.preferences.dialog import PreferencesDialog

        dialog = PreferencesDialog(self.settings, self.jobs, settings_path=self.settings_path, parent=self)
        dialog.settings_saved.connect(self._settings_changed)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        dialog.finished.connect(lambda _r: setattr(self, "active_dialog", None))
        self._open_dialog(dialog)

    def _settings_changed(self, new: Settings) -> None:
        rebuild = self.session.index_settings_changed(new.index)
        for section in ("llm", "query_generation", "literature", "retrieval"):
            setattr(self.settings, section, getattr(new, section))
        self.literature.apply_settings(self.settings)
        self.ask.kb_changed(self.kb)
        self.messages.info("Preferences saved.")
        self.refresh_llm_status()
        if rebuild:  # the new index has not seen the KB yet
            self.update_index()

    def show_about(self) -> None:
        self.help.show_about()

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

    def close_for_signal(self) -> None:
        """Close without asking (the session is ending); unsaved KB edits go to a recovery copy first."""
        write_recovery_copy_if_unsaved(self.kb)
        self._force_close = True
        self.close()

    def _ask_close(self) -> bool:
        """Closing with unsaved changes: Save (then close once saved), Discard, or Cancel; False when
        there is nothing to ask."""

        def close_now() -> None:
            self._force_close = True
            self.close()

        return self.kb_part.ask_save_then(close_now, "close")

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt API
        if not self._force_close and self._ask_close():
            event.ignore()
            return
        self.layout_saved.remember()
        self.ask.remember_history(self.settings.ui)
        self.persist_settings()
        self.reviews.window_closing()
        self.jobs.shutdown()
        if hasattr(self.literature, "shutdown"):
            self.literature.shutdown()
        self.evidence.shutdown()
        event.accept()


__all__ = ["MainWindow", "initial_kb_path"]
