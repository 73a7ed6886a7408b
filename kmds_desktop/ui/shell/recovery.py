"""The main window's recovery bars: unsaved edits an earlier session left in ``recovery/``.

A mixin of :class:`~kmds_desktop.ui.shell.main_window.MainWindow`: one bar per recovery copy, Restore /
Compare / Discard, and the copy written when the session ends with unsaved edits. Which copies are
pending, how one is restored, compared or discarded are :mod:`kmds_desktop.app.workspace`'s rules.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kmds_desktop.app import workspace
from kmds_desktop.ui.shell.message_bar import RecoveryBar

if TYPE_CHECKING:
    from kmds_desktop.ui.shell.main_window import MainWindow

log = logging.getLogger(__name__)


class WindowRecovery:
    """Recovery copies of :class:`MainWindow` (see the module docstring)."""

    def offer_recoveries(self: MainWindow) -> list[RecoveryBar]:
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

    def _drop_recovery_bar(self: MainWindow, recovery: Any) -> None:
        for bar in [b for b in self.recovery_bars if b.recovery == recovery]:
            self.recovery_bars.remove(bar)
            bar.hide()
            bar.deleteLater()

    def _restore_recovery(self: MainWindow, recovery: Any) -> None:
        def restore() -> None:
            self.jobs.submit(
                "kb.load", workspace.restore_recovery, recovery, label="Restoring the recovered edits",
                on_result=lambda kb: self._recovery_restored(recovery, kb),
                on_error=lambda exc: self.messages.show_exception(exc, "Could not restore the edits"),
            )

        if not self._ask_save_then(restore, "restore the recovered edits"):
            restore()

    def _recovery_restored(self: MainWindow, recovery: Any, kb: Any) -> None:
        self._drop_recovery_bar(recovery)
        self._kb_opened(kb, None)
        self.messages.info(f"Restored the unsaved edits of {Path(kb.path).name}; save to keep them.")

    def _compare_recovery(self: MainWindow, recovery: Any) -> None:
        bars = [b for b in self.recovery_bars if b.recovery == recovery]
        for bar in bars:
            bar.show_comparison("Comparing…")
        self.jobs.submit(
            "kb.compare", workspace.compare_recovery, recovery, label="Comparing the recovered edits",
            busy_cursor=False,
            on_result=lambda text: [b.show_comparison(text) for b in bars],
            on_error=lambda exc: [b.show_comparison(f"Could not compare: {exc}") for b in bars],
        )

    def _discard_recovery(self: MainWindow, recovery: Any) -> None:
        try:
            workspace.discard_recovery(recovery)
        except OSError as exc:
            self.messages.show_exception(exc, "Could not delete the recovery copy")
            return
        self._drop_recovery_bar(recovery)

    def close_for_signal(self: MainWindow) -> None:
        """Close without asking (the session is ending); unsaved KB edits go to a recovery copy first.

        The copy is written next to the other app data (``recovery/`` in the data folder), never over
        the user's file, and the window says where it is in the log.
        """
        if workspace.has_unsaved_changes(self.kb):
            try:
                original = self.kb.path
                target = workspace.write_recovery_copy(self.kb)
                log.warning("unsaved changes to %s were written to %s", original, target)
            except Exception:  # closing must go on even if the copy fails
                log.exception("could not write a recovery copy of the knowledge base")
        self._force_close = True
        self.close()
