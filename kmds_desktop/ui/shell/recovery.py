"""The recovery bars: unsaved edits an earlier session left in ``recovery/``.

:class:`RecoveryBars` puts one bar per recovery copy into the layout it is given (Restore / Compare /
Discard) and emits :attr:`RecoveryBars.restored` with the KB a restore brought back;
:func:`write_recovery_copy_if_unsaved` is what closing for a signal writes. Which copies are pending,
how one is restored, compared or discarded are :mod:`kmds_desktop.app.workspace`'s rules.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QVBoxLayout

from kmds_desktop.app import workspace
from kmds_desktop.ui.jobs.runner import JobRunner
from kmds_desktop.ui.shell.message_bar import MessageBar, RecoveryBar

log = logging.getLogger(__name__)

#: ``ask_save_then(action, what)``: ask before unsaved edits would be dropped; False when nothing was asked.
AskSaveThen = Callable[[Callable[[], Any], str], bool]


class RecoveryBars(QObject):
    """One bar per recovery copy found, in ``layout`` (see the module docstring)."""

    restored = Signal(object)  # the KnowledgeBase a restore brought back (not saved yet)

    def __init__(self, layout: QVBoxLayout, jobs: JobRunner, messages: MessageBar,
                 ask_save_then: AskSaveThen, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.bar_layout = layout
        self.jobs = jobs
        self.messages = messages
        self.ask_save_then = ask_save_then
        self.bars: list[RecoveryBar] = []

    def offer(self) -> list[RecoveryBar]:
        """Offer back the unsaved edits an earlier session wrote to ``recovery/`` when it was killed:
        one bar per copy, Restore / Compare / Discard (the rules are the workspace's)."""
        for recovery in workspace.pending_recoveries():
            if any(bar.recovery.copy == recovery.copy for bar in self.bars):
                continue
            bar = RecoveryBar(recovery)
            bar.restore.connect(self._restore)
            bar.compare.connect(self._compare)
            bar.discard.connect(self._discard)
            self.bars.append(bar)
            self.bar_layout.addWidget(bar)
        return self.bars

    def _drop_bar(self, recovery: Any) -> None:
        for bar in [b for b in self.bars if b.recovery == recovery]:
            self.bars.remove(bar)
            bar.hide()
            bar.deleteLater()

    def _restore(self, recovery: Any) -> None:
        def restore() -> None:
            self.jobs.submit(
                "kb.load", workspace.restore_recovery, recovery, label="Restoring the recovered edits",
                on_result=lambda kb: self._restored(recovery, kb),
                on_error=lambda exc: self.messages.show_exception(exc, "Could not restore the edits"),
            )

        if not self.ask_save_then(restore, "restore the recovered edits"):
            restore()

    def _restored(self, recovery: Any, kb: Any) -> None:
        self._drop_bar(recovery)
        self.restored.emit(kb)
        self.messages.info(f"Restored the unsaved edits of {Path(kb.path).name}; save to keep them.")

    def _compare(self, recovery: Any) -> None:
        bars = [b for b in self.bars if b.recovery == recovery]
        for bar in bars:
            bar.show_comparison("Comparing…")
        self.jobs.submit(
            "kb.compare", workspace.compare_recovery, recovery, label="Comparing the recovered edits",
            busy_cursor=False,
            on_result=lambda text: [b.show_comparison(text) for b in bars],
            on_error=lambda exc: [b.show_comparison(f"Could not compare: {exc}") for b in bars],
        )

    def _discard(self, recovery: Any) -> None:
        try:
            workspace.discard_recovery(recovery)
        except OSError as exc:
            self.messages.show_exception(exc, "Could not delete the recovery copy")
            return
        self._drop_bar(recovery)


def write_recovery_copy_if_unsaved(kb: Any) -> None:
    """The session is ending: unsaved KB edits go to a recovery copy next to the other app data
    (``recovery/`` in the data folder), never over the user's file; the log says where."""
    if not workspace.has_unsaved_changes(kb):
        return
    try:
        original = kb.path
        target = workspace.write_recovery_copy(kb)
        log.warning("unsaved changes to %s were written to %s", original, target)
    except Exception:  # closing must go on even if the copy fails
        log.exception("could not write a recovery copy of the knowledge base")
