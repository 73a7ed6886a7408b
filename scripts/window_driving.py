"""Driving the real window from a script: wait for a state, let events settle, shoot the screen.

Shared by ``scripts/first_run.py`` and ``scripts/real_model_run.py`` (a first-time user's journeys,
without and with a real local model); Qt is imported on first use, after the caller has set the
environment (data folder, platform) the window reads.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def wait_for(predicate: Any, timeout_s: float = 300, what: str = "the expected state") -> None:
    """Process events until ``predicate()`` holds; TimeoutError naming ``what`` after ``timeout_s``."""
    from PySide6.QtWidgets import QApplication

    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the app did not reach {what} in time")
        QApplication.processEvents()
        time.sleep(0.01)


def settle(seconds: float = 0.5) -> None:
    """Process events for ``seconds`` (layouts, repaints, queued signals)."""
    from PySide6.QtWidgets import QApplication

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        QApplication.processEvents()
        time.sleep(0.01)


class Shooter:
    """Numbered screenshots into one folder: the whole screen, or ``widget`` alone (the active window
    when there is no screen, offscreen)."""

    def __init__(self, folder: Path, root: Path) -> None:
        self.folder, self.root, self.count = folder, root, 0

    def __call__(self, name: str, widget: Any = None) -> Path:
        from PySide6.QtWidgets import QApplication

        settle()
        self.count += 1
        path = self.folder / f"{self.count:02d}-{name}.png"
        if widget is not None:
            pixmap = widget.grab()
        elif os.environ.get("QT_QPA_PLATFORM") == "offscreen":
            window = QApplication.activeWindow() or next(
                (w for w in QApplication.topLevelWidgets() if w.isVisible()), None)
            pixmap = window.grab() if window is not None else None
        else:
            pixmap = QApplication.primaryScreen().grabWindow(0)
        if pixmap is not None:
            pixmap.save(str(path), "PNG")
        print(f"shot {path.relative_to(self.root)}", flush=True)
        return path
