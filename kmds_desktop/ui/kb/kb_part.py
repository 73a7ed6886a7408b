"""The main window's knowledge base: open, save, the unsaved-changes question, and the index.

A mixin of :class:`~kmds_desktop.ui.shell.main_window.MainWindow`: every step is a job running one of
:mod:`kmds_desktop.app.workspace`'s functions; when the index follows the KB and what a choice in the
unsaved-changes question means are the workspace's rules (:class:`~kmds_desktop.app.workspace.IndexFollower`,
:func:`~kmds_desktop.app.workspace.after_unsaved_choice`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from kmds_desktop.app import last_folders, workspace
from kmds_desktop.ui.shell import file_dialogs
from kmds_desktop.ui.jobs.runner import Job

if TYPE_CHECKING:
    from kmds_desktop.ui.shell.main_window import MainWindow

KB_FILE_FILTER = "KMDS knowledge bases (*.xml *.owl *.rdf);;All files (*)"


class WindowKnowledgeBase:
    """Knowledge base and index of :class:`MainWindow` (see the module docstring)."""

    def open_kb_dialog(self: MainWindow) -> None:
        here = Path(self.kb.path).parent if self.kb is not None else None  # when none was chosen yet
        name = file_dialogs.open_file(self, last_folders.KB, "Open knowledge base", KB_FILE_FILTER,
                                      fallback=here)
        if name:
            self.open_kb(name)

    def open_kb(self: MainWindow, path: str | Path, *, note: str | None = None) -> Job | None:
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

    def _kb_opened(self: MainWindow, kb: Any, note: str | None) -> None:
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

    def _kb_failed(self: MainWindow, path: Path, exc: BaseException) -> None:
        self._update_kb_status()
        # KnowledgeBaseError already names the file: say it once.
        context = "Could not open the knowledge base" if str(path) in str(exc) else f"Could not open {path}"
        self.messages.show_exception(exc, context)

    def _on_kb_edited(self: MainWindow, what: str) -> None:
        self._update_title()
        self._update_kb_status()
        self.statusBar().showMessage(f"Unsaved change: {what}", 5000)
        self.ask.kb_changed(self.kb, edited=True)
        if self.index_follower.kb_edited(self.kb):
            self.update_index()  # only changed entries are re-embedded

    def save_kb(self: MainWindow, path: str | Path | None = None) -> Job | None:
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

    def save_kb_as(self: MainWindow) -> None:
        if self.kb is None:
            return
        path = Path(self.kb.path)
        name = file_dialogs.save_file(self, last_folders.KB, "Save knowledge base as", path.name,
                                      KB_FILE_FILTER, fallback=path.parent)
        if name:
            self.save_kb(name)

    def _kb_saved(self: MainWindow, target: Path) -> None:
        if not workspace.is_demo(target):
            workspace.remember_opened(self.settings.ui, target)
            self.persist_settings()
        self._update_recent_menu()
        self._update_title()
        self.statusBar().showMessage(f"Saved {target}", 5000)
        self.kb_saved.emit(str(target))
        if self.index_follower.kb_saved(self.kb):
            self.update_index()

    def _ask_save_then(self: MainWindow, action: Any, what: str) -> bool:
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

    def _ask_close(self: MainWindow) -> bool:
        """Closing with unsaved changes: Save (then close once saved), Discard, or Cancel; False when
        there is nothing to ask."""

        def close_now() -> None:
            self._force_close = True
            self.close()

        return self._ask_save_then(close_now, "close")

    def update_index(self: MainWindow) -> Job | None:
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

    def _index_done(self: MainWindow, kb: Any, report: Any) -> None:
        if self.index_follower.built(kb, self.kb):
            self._update_kb_status()
        self.index_updated.emit(report)

    def rebuild_index(self: MainWindow) -> None:
        if self.index_follower.rebuild(self.kb):
            self._update_kb_status()
            self.update_index()
