"""The window's knowledge-base part: open, save, save as, the unsaved-changes question, and the index.

A :class:`KnowledgeBasePart` is given the workspace session (:mod:`kmds_desktop.app.workspace_session`,
which owns the open KB and its index), the job runner and the message bar; it runs each blocking step
as a job calling one of :mod:`kmds_desktop.app.workspace`'s functions and reports the outcome to the
session, which announces it. It knows nothing of the window: the dialogs it opens are parented to
the widget it is given, and what the window must show (a dialog opened, a short status message) it
emits as signals.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QMessageBox, QWidget

from kmds_desktop.app import last_folders, workspace
from kmds_desktop.app.workspace_session import WorkspaceSession
from kmds_desktop.ui.jobs.job import Job
from kmds_desktop.ui.jobs.runner import JobRunner
from kmds_desktop.ui.shell import file_dialogs
from kmds_desktop.ui.shell.message_bar import MessageBar

KB_FILE_FILTER = "KMDS knowledge bases (*.xml *.owl *.rdf);;All files (*)"


class KnowledgeBasePart(QObject):
    """Opening, saving and indexing the KB the session holds (see the module docstring)."""

    kb_loaded = Signal(object)  # KnowledgeBase, once the session holds it
    kb_saved = Signal(str)  # the file written
    index_updated = Signal(object)  # BuildReport
    opening = Signal(str)  # file name: a load has started (the status line says so)
    load_ended = Signal()  # a load failed or was cancelled (the status line shows the KB still open)
    status_message = Signal(str)  # a short note for the status bar ("Saved …")
    dialog_opened = Signal(object)  # a modeless dialog this part opened (the window keeps it)

    def __init__(self, session: WorkspaceSession, jobs: JobRunner, messages: MessageBar,
                 dialog_parent: QWidget, persist_settings: Callable[[], bool]) -> None:
        super().__init__(dialog_parent)
        self.session = session
        self.jobs = jobs
        self.messages = messages
        self.dialog_parent = dialog_parent
        self.persist_settings = persist_settings

    # -- open --
    def open_kb_dialog(self) -> None:
        kb = self.session.kb
        here = Path(kb.path).parent if kb is not None else None  # when none was chosen yet
        name = file_dialogs.open_file(self.dialog_parent, last_folders.KB, "Open knowledge base",
                                      KB_FILE_FILTER, fallback=here)
        if name:
            self.open_kb(name)

    def open_kb(self, path: str | Path, *, note: str | None = None) -> Job | None:
        """Load ``path`` on a worker; the current KB stays open until the new one has loaded."""
        path = Path(path).expanduser()
        if self.ask_save_then(lambda: self.open_kb(path, note=note), f"open {path.name}"):
            return None
        self.opening.emit(path.name)
        return self.jobs.submit(
            "kb.load",
            workspace.load_kb,
            str(path),
            label=f"Opening {path.name}",
            on_result=lambda kb: self.kb_opened(kb, note),
            on_error=lambda exc: self._kb_failed(path, exc),
            on_cancelled=self.load_ended.emit,
        )

    def kb_opened(self, kb: Any, note: str | None = None) -> None:
        """``kb`` has loaded (or was restored): the session holds it from now on."""
        build = self.session.opened(kb)
        self.persist_settings()  # the recent files the session has just updated
        if note:
            self.messages.warning(note)
        elif kb.notes:
            self.messages.info(f"{Path(kb.path).name}: " + "; ".join(kb.notes))
        self.kb_loaded.emit(kb)
        if build:
            self.update_index()

    def _kb_failed(self, path: Path, exc: BaseException) -> None:
        self.load_ended.emit()
        # KnowledgeBaseError already names the file: say it once.
        context = "Could not open the knowledge base" if str(path) in str(exc) else f"Could not open {path}"
        self.messages.show_exception(exc, context)

    def kb_edited(self, what: str) -> None:
        """The browser changed the open KB (only the changed entries are embedded again)."""
        self.status_message.emit(f"Unsaved change: {what}")
        if self.session.edited():
            self.update_index()

    # -- save --
    def save_kb(self, path: str | Path | None = None) -> Job | None:
        kb = self.session.kb
        if kb is None:
            return None
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
        if self.session.kb is None:
            return
        path = Path(self.session.kb.path)
        name = file_dialogs.save_file(self.dialog_parent, last_folders.KB, "Save knowledge base as",
                                      path.name, KB_FILE_FILTER, fallback=path.parent)
        if name:
            self.save_kb(name)

    def _kb_saved(self, target: Path) -> None:
        build = self.session.saved(target)
        if not workspace.is_demo(target):
            self.persist_settings()
        self.status_message.emit(f"Saved {target}")
        self.kb_saved.emit(str(target))
        if build:
            self.update_index()

    # -- the unsaved-changes question --
    def ask_save_then(self, action: Callable[[], Any], what: str) -> bool:
        """When ``what`` would drop unsaved edits, ask the application layer's question (non-blocking)
        and run ``action`` as the answer says; returns False when nothing needed asking."""
        kb = self.session.kb
        prompt = workspace.unsaved_changes_prompt(kb, what)
        if prompt is None:
            return False
        buttons = {
            "save": QMessageBox.StandardButton.Save,
            "discard": QMessageBox.StandardButton.Discard,
            "cancel": QMessageBox.StandardButton.Cancel,
        }
        box = QMessageBox(QMessageBox.Icon.Warning, prompt.title, prompt.text,
                          QMessageBox.StandardButton.NoButton, self.dialog_parent)
        for choice in prompt.choices:
            box.addButton(buttons[choice])
        box.setDefaultButton(buttons[prompt.default])

        def done(_result: int) -> None:
            self.dialog_opened.emit(None)
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
        self.dialog_opened.emit(box)
        box.open()
        return True

    # -- the index --
    def update_index(self) -> Job | None:
        """Bring the index up to date with the open KB on a worker (newer requests replace waiting ones)."""
        kb = self.session.kb
        if kb is None:
            return None
        ticket = self.session.index_ticket()
        return self.jobs.submit(
            "index.build",
            workspace.update_index,
            self.session.index_holder,
            self.session.settings,
            kb,
            label="Indexing the knowledge base",
            busy_cursor=False,
            on_result=lambda report: self._index_done(kb, report, ticket),
            on_error=lambda exc: self.messages.show_exception(
                exc, "The semantic index could not be updated (questions still work from the templates)"
            ),
        )

    def _index_done(self, kb: Any, report: Any, ticket: int | None = None) -> None:
        self.session.index_built(kb, ticket)
        self.index_updated.emit(report)

    def rebuild_index(self) -> None:
        if self.session.rebuild():
            self.update_index()
