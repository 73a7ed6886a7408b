"""Start the desktop application: a QApplication on a qasync event loop, the main window, first run.

The app runs on a ``qasync.QEventLoop`` (asyncio inside Qt's loop); the rule for blocking work is in
:mod:`kmds_desktop.ui.jobs.runner`: every blocking call is a QThread job, the app defines no coroutines.
On the first run (no KB opened before) the demo KB opens; afterwards the last KB does.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from kmds_desktop import __version__

log = logging.getLogger(__name__)


def _quit_on_signals(window: object) -> None:
    """Close the window properly on SIGTERM/SIGINT/SIGHUP (logout, Ctrl+C in a terminal).

    Without this, Python dies on SIGTERM without running ``atexit``, so the embedded PostgreSQL
    server would keep running and the layout and settings would not be saved. Python only runs
    signal handlers between bytecodes, so a light timer gives it the chance while Qt's loop waits.
    """
    from PySide6.QtCore import QTimer

    def handler(signum: int, _frame: object) -> None:
        log.info("signal %s received: closing the window", signum)
        # Unsaved KB edits cannot be asked about here; the close proceeds as if "Discard" was chosen
        # only after the user's KB is written to a recovery copy (see MainWindow.close_for_signal).
        QTimer.singleShot(0, window.close_for_signal)  # type: ignore[attr-defined]

    for name in ("SIGTERM", "SIGINT", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, handler)
    ticker = QTimer(window)  # type: ignore[arg-type]
    ticker.setInterval(250)
    ticker.timeout.connect(lambda: None)
    ticker.start()


def run_app(kb_file: str | None = None) -> int:
    """Show the main window and run until it closes; returns the exit code."""
    import qasync
    from PySide6.QtWidgets import QApplication

    from kmds_desktop.app.preferences import load_settings_or_defaults
    from kmds_desktop.ui.shell.main_window import MainWindow, initial_kb_path
    from kmds_desktop.ui.shell.menus import app_icon
    from kmds_desktop.ui.shell.message_bar import install_excepthook, uninstall_excepthook
    from kmds_desktop.ui.shell.startup import settle_before_first_frame

    app = QApplication.instance() or QApplication(sys.argv)
    app.setApplicationName("KMDS Desktop")
    app.setApplicationVersion(__version__)
    app.setOrganizationName("kmds-desktop")
    app.setWindowIcon(app_icon())

    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)

    settings, settings_note = load_settings_or_defaults()
    settle_before_first_frame()
    window = MainWindow(settings)
    install_excepthook(window.messages)
    if settings_note:
        window.messages.warning(settings_note)
    path, note = initial_kb_path(settings, kb_file)
    window.show()
    window.start_up(path, note=note)  # the KB and the warm-up, once the first frame is on screen

    closed = asyncio.Event()
    app.aboutToQuit.connect(closed.set)
    _quit_on_signals(window)
    try:
        with loop:
            loop.run_until_complete(closed.wait())
    finally:
        uninstall_excepthook()
    return 0
