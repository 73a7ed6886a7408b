"""The main window: KB browser (left), question/answer (centre), literature search (right).

The window owns the app's state that spans panels: the open knowledge base, the semantic index, the
settings and the :class:`~kmds_desktop.ui.workers.JobRunner`. Every blocking step (loading, saving,
indexing, listing models, answering) is a job; the window only wires results into the panels.
Errors are shown in the :class:`~kmds_desktop.ui.messages.MessageBar` at the top of the window.
"""

from __future__ import annotations

import base64
import gc
import logging
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QIcon, QKeySequence
from PySide6.QtWidgets import (
    QFileDialog,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop import __version__, paths
from kmds_desktop.app import workspace
from kmds_desktop.app.workspace import IndexFollower, IndexHolder
from kmds_desktop.config import Settings, SettingsError, save_settings
from kmds_desktop.ui.ask_panel import AskPanel
from kmds_desktop.ui.kb_browser import KBBrowser
from kmds_desktop.ui.literature_panel import LiteraturePanel
from kmds_desktop.ui.messages import MessageBar, RecoveryBar
from kmds_desktop.ui.progress import ProgressStrip
from kmds_desktop.ui.workers import Job, JobRunner

log = logging.getLogger(__name__)

APP_TITLE = "KMDS Desktop"
KB_FILE_FILTER = "KMDS knowledge bases (*.xml *.owl *.rdf);;All files (*)"

SHORTCUTS_HTML = """
<table cellpadding="3">
<tr><td><b>Ctrl+O</b></td><td>Open a knowledge base</td></tr>
<tr><td><b>Ctrl+S</b></td><td>Save the knowledge base</td></tr>
<tr><td><b>Ctrl+N</b></td><td>Add an observation</td></tr>
<tr><td><b>Ctrl+F</b></td><td>Filter the KB browser</td></tr>
<tr><td><b>Ctrl+L</b></td><td>Go to the question box</td></tr>
<tr><td><b>Ctrl+Enter</b></td><td>Ask the question</td></tr>
<tr><td><b>Up / Down</b></td><td>Previous / next question (in the question box)</td></tr>
<tr><td><b>Esc</b></td><td>Cancel the running answer</td></tr>
<tr><td><b>Ctrl+,</b></td><td>Preferences</td></tr>
<tr><td><b>Ctrl+Q</b></td><td>Quit</td></tr>
</table>
"""


def app_icon() -> QIcon:
    for name in ("kmds-desktop.svg", "kmds-desktop.png"):
        path = paths.resources_dir() / "icons" / name
        if path.exists():
            return QIcon(str(path))
    return QIcon()


def initial_kb_path(settings: Settings, kb_file: str | None = None) -> tuple[Path, str | None]:
    """Which KB to open at start-up (the application layer's rule: :func:`workspace.startup_kb`)."""
    return workspace.startup_kb(settings, kb_file)


def settle_before_first_frame() -> None:
    """Move every object loaded so far to the permanent generation, before the window is shown.

    A full garbage collection walks every tracked object while holding the GIL (on whichever thread
    happens to trigger it); after start-up's imports that is hundreds of thousands of long-lived
    objects, tens of ms of frozen window each time. Frozen ones are never walked again. Nothing
    heavy is imported here: torch and sentence-transformers load only in the index process, and the
    index is reached over its private channel, so ChromaDB is not imported in this process at all.

    What the first jobs import is imported here instead, before the first frame: numpy's C
    extensions (the embedding client's arrays) and the KB reader initialise holding the GIL for up
    to about 100 ms, which froze the window when the warm-up or the KB load imported them on a
    worker (measured on a quiet machine with py-spy --gil). The question-answering modules (about
    30 ms of module set-up, compiled patterns included) were the first question's imports, on its
    worker, at the moment the window starts showing the answer's progress.
    """
    import numpy  # noqa: F401
    import owlready2  # noqa: F401

    import kmds_desktop.app.workspace  # noqa: F401
    from kmds_desktop.app.presentation import preload_question_modules

    preload_question_modules()

    gc.freeze()


def warm_up_libraries(
    model_name: str,
    index_holder: IndexHolder | None = None,
    settings: Settings | None = None,
    *,
    progress: Any = None,
    cancel: Any = None,
) -> str:
    """Start the index process and load the embedding model in it (right after start-up).

    The embedding model (torch, sentence-transformers) loads in the index process, never in this
    one: importing them holds Python's GIL for 350-650 ms at a time, which would freeze the window
    even from a worker thread; ChromaDB runs in the index process too.
    """
    if progress:
        progress(0, 2, "starting the semantic index")
    from kmds_desktop.ui import markdown_render

    markdown_render.prepare()  # so the first answer does not build it on the GUI thread
    index = index_holder.current if index_holder is not None else None
    if index is None and index_holder is not None and settings is not None:
        # Start the index process now (about a second) rather than when the first build needs it.
        from kmds_desktop.app.presentation import SemanticIndexError

        try:
            index = index_holder.get_or_open(settings)  # under the holder's lock: one index, whoever asks
        except SemanticIndexError as err:  # the first build reports it, with what to do
            log.warning("semantic index not opened at start-up: %s", err)
    if index is not None:
        if progress:
            progress(1, 2, "loading the embedding model")
        index.encode(["warm-up"], model_name)  # where this index embeds: its own process in the app
    return model_name


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

        self.messages = MessageBar()
        self.browser = KBBrowser()
        self.ask = AskPanel(self.jobs, self)
        self.ask.set_history(self.settings.ui.question_history)
        self.literature = self._make_literature_panel(literature_kwargs or {})

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
        #: One bar per recovery copy found at start-up (see :meth:`offer_recoveries`).
        self.recovery_bars: list[RecoveryBar] = []
        self._recovery_layout = QVBoxLayout()
        self._recovery_layout.setSpacing(0)
        layout.addLayout(self._recovery_layout)
        layout.addWidget(self.splitter, 1)
        self.setCentralWidget(central)

        self._build_status_bar()
        self._build_menus()
        self._wire()
        self._restore_layout()
        self._update_title()
        if probe_llm:
            QTimer.singleShot(0, self, self.refresh_llm_status)

    # -- start-up --
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt API
        """Notice the window's first paint, then stop filtering (each filtered event costs a call into
        Python, which waits for the GIL while a worker holds it)."""
        if watched is self and event.type() == QEvent.Type.Paint and not self.first_frame_done:
            self.removeEventFilter(self)
            # Posted: it runs once the whole window has been painted and flushed, not inside the paint.
            QTimer.singleShot(0, self, self._first_frame)
        return False

    def _first_frame(self) -> None:
        if not self.first_frame_done:
            self.first_frame_done = True
            self.first_frame_shown.emit()

    def after_first_frame(self, action: Any, *, fallback_ms: int = 1000) -> None:
        """Run ``action`` once the window's first frame is on screen (soon, if it already is).

        The first frame is the widest paint of the session (every panel, first use of the style's
        caches); work started before it -- a job whose thread competes for the GIL, the slots that
        show its result -- only delays it. A window that is never painted (started minimised) runs
        ``action`` after ``fallback_ms`` all the same.
        """
        if self.first_frame_done:
            QTimer.singleShot(0, self, action)
            return
        pending = [True]

        def once() -> None:
            if pending:
                pending.clear()
                action()

        self.first_frame_shown.connect(once)
        QTimer.singleShot(fallback_ms, self, once)

    def start_up(self, kb_path: str | Path, *, note: str | None = None) -> None:
        """What follows ``show()`` at start-up (``run_app`` and the stall benchmark): once the first frame
        is on screen, open ``kb_path``; once the KB is shown (or has failed), start the warm-up job.
        Both jobs are in :attr:`startup_jobs`.

        One after the other: the warm-up's first steps (building the Markdown converter, starting
        the index process) ran Python beside the KB's arrival, when the GUI thread fills and first
        paints the tree, each call into Python waiting for the GIL. The warm-up takes seconds (the
        embedding model loads in the index process); the KB load before it, a fraction of one.
        """

        def warm_up() -> None:
            job = self.warm_up()
            if job is not None:
                self.startup_jobs.append(job)

        def begin() -> None:
            job = self.open_kb(kb_path, note=note)
            if job is None:
                warm_up()
                return
            self.startup_jobs.append(job)
            # Queued: after the tree's first paint, which the KB's arrival has just requested.
            job.finished.connect(lambda: QTimer.singleShot(0, self, warm_up))

        self.after_first_frame(begin)
        self.offer_recoveries()

    # -- recovery copies --
    def offer_recoveries(self) -> list[RecoveryBar]:
        """Offer back the unsaved edits an earlier session wrote to ``recovery/`` when it was killed:
        one bar per copy, Restore / Compare / Discard (the rules are the workspace's)."""
        for recovery in workspace.pending_recoveries():
            if any(bar.recovery.copy == recovery.copy for bar in self.recovery_bars):
                continue
            bar = RecoveryBar(recovery)
            bar.restore.connect(self._restore_recovery)
            bar.compare.connect(self._compare_recovery)
            bar.discard.connect(self._discard_recovery)
            self.recovery_bars.append(bar)
            self._recovery_layout.addWidget(bar)
        return self.recovery_bars

    def _drop_recovery_bar(self, recovery: Any) -> None:
        for bar in [b for b in self.recovery_bars if b.recovery == recovery]:
            self.recovery_bars.remove(bar)
            bar.hide()
            bar.deleteLater()

    def _restore_recovery(self, recovery: Any) -> None:
        def restore() -> None:
            self.jobs.submit(
                "kb.load", workspace.restore_recovery, recovery, label="Restoring the recovered edits",
                on_result=lambda kb: self._recovery_restored(recovery, kb),
                on_error=lambda exc: self.messages.show_exception(exc, "Could not restore the edits"),
            )

        if not self._ask_save_then(restore, "restore the recovered edits"):
            restore()

    def _recovery_restored(self, recovery: Any, kb: Any) -> None:
        self._drop_recovery_bar(recovery)
        self._kb_opened(kb, None)
        self.messages.info(f"Restored the unsaved edits of {Path(kb.path).name}; save to keep them.")

    def _compare_recovery(self, recovery: Any) -> None:
        bars = [b for b in self.recovery_bars if b.recovery == recovery]
        for bar in bars:
            bar.show_comparison("Comparing…")
        self.jobs.submit(
            "kb.compare", workspace.compare_recovery, recovery, label="Comparing the recovered edits",
            busy_cursor=False,
            on_result=lambda text: [b.show_comparison(text) for b in bars],
            on_error=lambda exc: [b.show_comparison(f"Could not compare: {exc}") for b in bars],
        )

    def _discard_recovery(self, recovery: Any) -> None:
        try:
            workspace.discard_recovery(recovery)
        except OSError as exc:
            self.messages.show_exception(exc, "Could not delete the recovery copy")
            return
        self._drop_recovery_bar(recovery)

    # -- construction --
    def _make_literature_panel(self, kwargs: dict[str, Any]) -> LiteraturePanel:
        panel = LiteraturePanel(self.settings, self.jobs, self, **kwargs)
        # Semantic rows and the embedding after an import embed through the index process, so torch
        # never loads in the window's process (called on workers).
        panel.session.encoder = self._literature_encoder
        panel.status_changed.connect(self._literature_status)
        # One message surface: the panel's messages appear in the window's bar only.
        panel.message_shown.connect(lambda level, text: self.messages.show_message(text, level))
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

    def _literature_status(self, text: str) -> None:
        """Short text in the status bar ("Literature: 6,473 documents"), the full one as tooltip."""
        self.lit_status.setText(text.split(" (", 1)[0])
        self.lit_status.setToolTip(text)

    def _build_status_bar(self) -> None:
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

    def _action(self, menu: QMenu, text: str, slot: Any, shortcut: Any = None, name: str = "") -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        if name:
            action.setObjectName(name)
        action.triggered.connect(lambda _checked=False: slot())
        menu.addAction(action)
        return action

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        self.open_action = self._action(
            file_menu, "&Open knowledge base…", self.open_kb_dialog, QKeySequence.StandardKey.Open, "openKb"
        )
        self.recent_menu = file_menu.addMenu("Open &recent")
        self.save_action = self._action(
            file_menu, "&Save knowledge base", self.save_kb, QKeySequence.StandardKey.Save, "saveKb"
        )
        self.save_as_action = self._action(
            file_menu,
            "Save knowledge base &as…",
            self.save_kb_as,
            QKeySequence.StandardKey.SaveAs,
            "saveKbAs",
        )
        file_menu.addSeparator()
        self.import_action = self._action(
            file_menu, "&Import literature…", self._import_literature, None, "importLiterature"
        )
        self.export_menu = file_menu.addMenu("&Export")
        self._fill_export_menu()
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence.StandardKey.Quit, "quit")

        edit_menu = bar.addMenu("&Edit")
        self._action(edit_menu, "Add &observation…", self.browser.add_observation, "Ctrl+N", "addObservation")
        self._action(edit_menu, "&Edit selected…", self.browser.edit_selected, None, "editSelected")
        self._action(
            edit_menu, "&Delete observation", self.browser.delete_observation, None, "deleteObservation"
        )
        self._action(edit_menu, "Add &workflow…", self.browser.add_workflow, None, "addWorkflow")
        edit_menu.addSeparator()
        self._action(
            edit_menu,
            "&Preferences…",
            self.open_preferences,
            QKeySequence.StandardKey.Preferences,
            "preferences",
        ).setShortcuts([QKeySequence("Ctrl+,")])

        view_menu = bar.addMenu("&View")
        self._action(view_menu, "&Filter the KB browser", self._focus_filter, QKeySequence.StandardKey.Find)
        self._action(view_menu, "Go to the &question", self.ask.focus_question, "Ctrl+L")
        view_menu.addSeparator()
        for i, (label, widget) in enumerate(
            (("KB browser", self.browser), ("Question and answer", self.ask), ("Literature", self.literature))
        ):
            action = QAction(f"Show {label}", self)
            action.setCheckable(True)
            action.setChecked(True)
            action.setObjectName(f"showPanel{i}")
            action.toggled.connect(widget.setVisible)
            view_menu.addAction(action)
        view_menu.addSeparator()
        self._action(view_menu, "&Reset layout", self.reset_layout)
        self._action(view_menu, "Rebuild the semantic &index", self.rebuild_index)

        help_menu = bar.addMenu("&Help")
        self._action(help_menu, "&Keyboard shortcuts", self.show_shortcuts, None, "shortcuts")
        self._action(help_menu, "&About KMDS Desktop", self.show_about, None, "about")
        self._update_recent_menu()

    def _fill_export_menu(self) -> None:
        self.export_menu.clear()
        formats = (("CSV…", "csv"), ("RIS…", "ris"), ("BibTeX…", "bibtex"))
        for label, fmt in formats:
            action = self.export_menu.addAction(f"Documents as {label}")
            action.setObjectName(f"export:{fmt}")
            action.triggered.connect(lambda _c=False, f=fmt: self._export(f))
        log_action = self.export_menu.addAction("Search log (JSON)…")
        log_action.setObjectName("export:log")
        log_action.triggered.connect(lambda _c=False: self._export("log"))
        self.export_menu.addSeparator()
        answer_action = self.export_menu.addAction("Answer as Markdown…")
        answer_action.setObjectName("export:answer")
        answer_action.triggered.connect(lambda _c=False: self.ask.export_answer_dialog())

    def _wire(self) -> None:
        self.jobs.refused.connect(lambda _kind, text: self.messages.warning(text))
        self.jobs.job_error.connect(lambda job, exc: self.messages.show_exception(exc, job.label))
        self.jobs.callback_error.connect(lambda exc: self.messages.show_exception(exc, "Unexpected error"))
        self.browser.kb_edited.connect(self._on_kb_edited)
        self.browser.edit_failed.connect(lambda text: self.messages.error(text))
        self.ask.citation_activated.connect(self.reveal_observation)
        self.ask.message.connect(
            lambda level, text, details: self.messages.show_message(text, level, details)
        )
        self.ask.context_provider = self.ask_context

    # -- layout memory --
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

    def persist_settings(self) -> bool:
        try:
            save_settings(self.settings, self.settings_path)
            return True
        except (SettingsError, OSError) as exc:
            self.messages.error(f"Could not save the settings: {exc}")
            return False

    # -- knowledge base --
    def open_kb_dialog(self) -> None:
        start = str(Path(self.kb.path).parent) if self.kb is not None else str(Path.home())
        name, _ = QFileDialog.getOpenFileName(self, "Open knowledge base", start, KB_FILE_FILTER)
        if name:
            self.open_kb(name)

    def open_kb(self, path: str | Path, *, note: str | None = None) -> Job | None:
        """Load ``path`` on a worker; the current KB stays open until the new one has loaded."""
        path = Path(path).expanduser()
        if self._ask_save_then(lambda: self.open_kb(path, note=note), f"open {path.name}"):
            return None
        self.kb_status.setText(f"Opening {path.name}…")
        return self.jobs.submit(
            "kb.load",
            workspace.load_kb,
            str(path),
            label=f"Opening {path.name}",
            on_result=lambda kb: self._kb_opened(kb, note),
            on_error=lambda exc: self._kb_failed(path, exc),
            on_cancelled=self._update_kb_status,
        )

    def _kb_opened(self, kb: Any, note: str | None) -> None:
        self.kb = kb
        build = self.index_follower.kb_opened(kb)
        self.browser.set_kb(kb)
        self.ask.kb_changed(kb)
        workspace.remember_opened(self.settings.ui, kb.path)
        self.persist_settings()
        self._update_recent_menu()
        self._update_title()
        self._update_kb_status()
        if note:
            self.messages.warning(note)
        elif kb.notes:
            self.messages.info(f"{Path(kb.path).name}: " + "; ".join(kb.notes))
        self.kb_loaded.emit(kb)
        if build:
            self.update_index()

    def _kb_failed(self, path: Path, exc: BaseException) -> None:
        self._update_kb_status()
        # KnowledgeBaseError already names the file: say it once.
        context = "Could not open the knowledge base" if str(path) in str(exc) else f"Could not open {path}"
        self.messages.show_exception(exc, context)

    def _update_kb_status(self) -> None:
        if self.kb is None:
            self.kb_status.setText("No knowledge base")
            return
        counts = self.kb.counts() if hasattr(self.kb, "counts") else {}
        n_obs = counts.get("observations", len(self.kb.observations))
        n_wf = counts.get("workflows", len(self.kb.workflows))
        index = " · indexed" if self.index_follower.is_ready(self.kb) else ""
        self.kb_status.setText(
            f"KB: {Path(self.kb.path).name} — {n_wf} workflow{'s' if n_wf != 1 else ''}, "
            f"{n_obs} observation{'s' if n_obs != 1 else ''}{index}"
        )
        self.kb_status.setToolTip(str(self.kb.path))

    def _update_title(self) -> None:
        if self.kb is None:
            self.setWindowTitle(APP_TITLE)
            return
        # Qt draws "[*]" as "*" while the window is modified (the platform's own mark on macOS); a
        # title without it makes setWindowModified warn on every edit.
        self.setWindowTitle(f"{Path(self.kb.path).name}[*] — {APP_TITLE}")
        self.setWindowModified(bool(self.kb.dirty))

    def _update_recent_menu(self) -> None:
        self.recent_menu.clear()
        recent = list(self.settings.ui.recent_files)
        for path in recent:
            action = self.recent_menu.addAction(path)
            action.triggered.connect(lambda _c=False, p=path: self.open_kb(p))
        if not recent:
            empty = self.recent_menu.addAction("(none yet)")
            empty.setEnabled(False)
        else:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction("Clear the list", self._clear_recent)
        self.recent_menu.addSeparator()
        self.recent_menu.addAction("Demo knowledge base",
                                   lambda: self.open_kb(workspace.installed_demo_path()))

    def _clear_recent(self) -> None:
        self.settings.ui.recent_files = []
        self.persist_settings()
        self._update_recent_menu()

    def _on_kb_edited(self, what: str) -> None:
        self._update_title()
        self._update_kb_status()
        self.statusBar().showMessage(f"Unsaved change: {what}", 5000)
        self.ask.kb_changed(self.kb, edited=True)
        if self.index_follower.kb_edited(self.kb):
            self.update_index()  # only changed entries are re-embedded

    def save_kb(self, path: str | Path | None = None) -> Job | None:
        if self.kb is None:
            return None
        kb = self.kb
        return self.jobs.submit(
            "kb.save",
            workspace.save_kb,
            kb,
            str(path) if path else None,
            label=f"Saving {Path(kb.path).name}",
            on_result=self._kb_saved,
            on_error=lambda exc: self.messages.show_exception(exc, "The knowledge base was not saved"),
        )

    def save_kb_as(self) -> None:
        if self.kb is None:
            return
        name, _ = QFileDialog.getSaveFileName(
            self, "Save knowledge base as", str(self.kb.path), KB_FILE_FILTER
        )
        if name:
            self.save_kb(name)

    def _kb_saved(self, target: Path) -> None:
        if not workspace.is_demo(target):
            workspace.remember_opened(self.settings.ui, target)
            self.persist_settings()
        self._update_recent_menu()
        self._update_title()
        self.statusBar().showMessage(f"Saved {target}", 5000)
        self.kb_saved.emit(str(target))
        if self.index_follower.kb_saved(self.kb):
            self.update_index()

    def _ask_save_then(self, action: Any, what: str) -> bool:
        """When ``what`` would drop unsaved edits, ask the application layer's question (non-blocking)
        and run ``action`` as the answer says; returns False when nothing needed asking."""
        prompt = workspace.unsaved_changes_prompt(self.kb, what)
        if prompt is None:
            return False
        buttons = {
            "save": QMessageBox.StandardButton.Save,
            "discard": QMessageBox.StandardButton.Discard,
            "cancel": QMessageBox.StandardButton.Cancel,
        }
        box = QMessageBox(QMessageBox.Icon.Warning, prompt.title, prompt.text,
                          QMessageBox.StandardButton.NoButton, self)
        for choice in prompt.choices:
            box.addButton(buttons[choice])
        box.setDefaultButton(buttons[prompt.default])
        kb = self.kb

        def done(_result: int) -> None:
            self.active_dialog = None
            clicked = box.standardButton(box.clickedButton())
            choice = next((c for c, b in buttons.items() if b == clicked), "cancel")
            then = workspace.after_unsaved_choice(kb, choice)
            if then == "save":
                job = self.save_kb()
                if job is not None:
                    job.result.connect(lambda _v: action())
            elif then == "proceed":
                action()

        box.finished.connect(done)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.active_dialog = box
        box.open()
        return True

    # -- index --
    def warm_up(self) -> Job | None:
        """Load the embedding stack in the background right after start-up (see warm_up_libraries)."""
        return self.jobs.submit(
            "warmup",
            warm_up_libraries,
            self.settings.index.embedding_model,
            self.index_holder,
            self.settings,
            label="Loading the embedding model",
            busy_cursor=False,
            on_error=lambda exc: self.messages.show_exception(
                exc, "The embedding model could not be loaded (semantic search will retry)"
            ),
        )

    def update_index(self) -> Job | None:
        """Bring the index up to date with the open KB on a worker (newer requests replace waiting ones)."""
        if self.kb is None:
            return None
        kb = self.kb
        return self.jobs.submit(
            "index.build",
            workspace.update_index,
            self.index_holder,
            self.settings,
            kb,
            label="Indexing the knowledge base",
            busy_cursor=False,
            on_result=lambda report: self._index_done(kb, report),
            on_error=lambda exc: self.messages.show_exception(
                exc, "The semantic index could not be updated (questions still work from the templates)"
            ),
        )

    def _index_done(self, kb: Any, report: Any) -> None:
        if self.index_follower.built(kb, self.kb):
            self._update_kb_status()
        self.index_updated.emit(report)

    def rebuild_index(self) -> None:
        if self.index_follower.rebuild(self.kb):
            self._update_kb_status()
            self.update_index()

    # -- LLM and preferences --
    def refresh_llm_status(self) -> Job | None:
        from kmds_desktop.app.preferences import probe_llm_backend

        self.llm_status.setText(f"LLM: {self.settings.llm.backend} (checking…)")
        return self.jobs.submit(
            "llm.status",
            probe_llm_backend,
            self.settings.llm.model_copy(),
            label="Checking the LLM backend",
            policy="latest",
            busy_cursor=False,
            on_result=self._llm_status_arrived,
            on_error=lambda exc: self.llm_status.setText(f"LLM: {self.settings.llm.backend} (error: {exc})"),
        )

    def _llm_status_arrived(self, status: tuple[str, str]) -> None:
        text, tip = status
        self.llm_status.setText(f"LLM: {text}")
        self.llm_status.setToolTip(tip)

    def open_preferences(self) -> None:
        from kmds_desktop.ui.preferences import PreferencesDialog

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
        self.literature.settings = self.settings
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

    # -- cross-panel --
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

    def _focus_filter(self) -> None:
        self.browser.filter_edit.setFocus()
        self.browser.filter_edit.selectAll()

    def _import_literature(self) -> None:
        self.literature.import_files_dialog()

    def _export(self, fmt: str) -> None:
        if fmt == "log":
            self.literature.export_log()
        else:
            self.literature.export_documents(fmt)

    def show_about(self) -> None:
        box = QMessageBox(self)
        box.setWindowTitle("About KMDS Desktop")
        box.setIconPixmap(app_icon().pixmap(64, 64))
        box.setText(
            f"<h3>KMDS Desktop {__version__}</h3><p>Browse KMDS knowledge bases, ask them questions, "
            "and search a local literature database with queries that several LLMs propose "
            "and you review.</p>"
            f"<p>Data folder: <code>{paths.data_dir()}</code></p><p>Apache-2.0</p>"
        )
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.active_dialog = box
        box.open()

    def show_shortcuts(self) -> None:
        box = QMessageBox(self)
        box.setWindowTitle("Keyboard shortcuts")
        box.setText(SHORTCUTS_HTML)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.active_dialog = box
        box.open()

    # -- drag and drop --
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

    # -- closing --
    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt API
        if not self._force_close and self._ask_close():
            event.ignore()
            return
        self._remember_layout()
        self.ask.remember_history(self.settings.ui)
        self.persist_settings()
        self.jobs.shutdown()
        if hasattr(self.literature, "shutdown"):
            self.literature.shutdown()
        event.accept()

    def close_for_signal(self) -> None:
        """Close without asking (the session is ending); unsaved KB edits go to a recovery copy first.

        The copy is written next to the other app data (``recovery/`` in the data folder), never over
        the user's file, and the window says where it is in the log.
        """
        if workspace.has_unsaved_changes(self.kb):
            try:
                original = self.kb.path
                target = workspace.write_recovery_copy(self.kb)
                log.warning("unsaved changes to %s were written to %s", original, target)
            except Exception:  # noqa: BLE001 - closing must go on even if the copy fails
                log.exception("could not write a recovery copy of the knowledge base")
        self._force_close = True
        self.close()

    def _ask_close(self) -> bool:
        """Closing with unsaved changes: Save (then close once saved), Discard, or Cancel; False when
        there is nothing to ask."""

        def close_now() -> None:
            self._force_close = True
            self.close()

        return self._ask_save_then(close_now, "close")


__all__ = ["MainWindow", "initial_kb_path"]
