"""Start the desktop application: a QApplication on a qasync event loop, the main window, first run.

The app runs on a ``qasync.QEventLoop`` (asyncio inside Qt's loop); the rule for blocking work is in
:mod:`kmds_desktop.ui.workers`: every blocking call is a QThread job, the app defines no coroutines.
On the first run (no KB opened before) the demo KB opens; afterwards the last KB does.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import sys

from kmds_desktop import __version__, paths
from kmds_desktop.config import Settings, SettingsError, load_settings

log = logging.getLogger(__name__)


def load_settings_or_defaults() -> tuple[Settings, str | None]:
    """The user's settings, or defaults plus a message when the file is unusable.

    A broken file is copied aside (``settings.json.broken``) before defaults are used, so saving the
    defaults later never destroys what the user wrote.
    """
    try:
        return load_settings(), None
    except SettingsError as exc:
        path = paths.settings_file()
        backup = path.with_name(path.name + ".broken")
        try:
            shutil.copy2(path, backup)
            where = f" A copy of the file was kept as {backup}."
        except OSError:
            where = ""
        return Settings(), f"The settings could not be used, so defaults apply: {exc}.{where}"


def run_app(kb_file: str | None = None) -> int:
    """Show the main window and run until it closes; returns the exit code."""
    import qasync
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from kmds_desktop.ui.main_window import MainWindow, app_icon, initial_kb_path
    from kmds_desktop.ui.messages import install_excepthook, uninstall_excepthook

    app = QApplication.instance() or QApplication(sys.argv)
    app.setApplicationName("KMDS Desktop")
    app.setApplicationVersion(__version__)
    app.setOrganizationName("kmds-desktop")
    app.setWindowIcon(app_icon())

    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)

    settings, settings_note = load_settings_or_defaults()
    window = MainWindow(settings)
    install_excepthook(window.messages)
    if settings_note:
        window.messages.warning(settings_note)
    path, note = initial_kb_path(settings, kb_file)
    window.show()
    QTimer.singleShot(0, window, lambda: window.open_kb(path, note=note))
    QTimer.singleShot(0, window, window.warm_up)

    closed = asyncio.Event()
    app.aboutToQuit.connect(closed.set)
    try:
        with loop:
            loop.run_until_complete(closed.wait())
    finally:
        uninstall_excepthook()
    return 0
