"""The Qt part of ``kmds-desktop --self-test``: create the real main window briefly and close it.

Why here: only ``kmds_desktop/ui`` may import Qt, and the self-test (plain Python) must still prove
that Qt works in a bundle: the platform plugin loads, the widgets build, the image-format plugin
renders the app icon. The window starts no background work (no LLM probe, no index build, no
database), so creating and closing it is quick and leaves nothing running.
"""

from __future__ import annotations

import sys
from typing import Any


def open_main_window_briefly() -> dict[str, Any]:
    """Create, show and close the main window; return what the self-test checks.

    Keys: ``platform`` (Qt platform plugin in use), ``title``, ``icon`` (the window icon renders to a
    non-empty pixmap), ``qt_version``, ``styles`` (widget styles available).
    """
    from PySide6.QtCore import qInstallMessageHandler, qVersion
    from PySide6.QtWidgets import QApplication, QStyleFactory

    from kmds_desktop.app.presentation import Settings
    from kmds_desktop.ui.shell.main_window import MainWindow

    def quiet(mode: Any, context: Any, message: str) -> None:
        # The offscreen platform warns that it cannot resize windows; that is expected here and
        # would only clutter the self-test's one-line report. Everything else is passed on.
        if "propagateSizeHints" in message:
            return
        if previous is not None:
            previous(mode, context, message)
        else:
            sys.stderr.write(message + "\n")

    previous = qInstallMessageHandler(quiet)
    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "kmds-desktop"])
    window = MainWindow(Settings(), auto_index=False, probe_llm=False,
                        literature_kwargs={"open_on_start": False})
    try:
        window.show()
        app.processEvents()
        pixmap = window.windowIcon().pixmap(64, 64)
        return {
            "platform": QApplication.platformName(),
            "title": window.windowTitle(),
            "icon": not pixmap.isNull(),
            "qt_version": qVersion(),
            "styles": list(QStyleFactory.keys()),
        }
    finally:
        window.close()
        window.deleteLater()
        app.processEvents()
        qInstallMessageHandler(previous)
