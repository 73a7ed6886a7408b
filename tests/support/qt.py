"""Qt fixtures for every GUI test: one session-wide qasync loop and a guard against leaked threads.

pytest-qt owns the ``QApplication`` (``qapp``). qasync is attached to it once per session with
``already_running=True`` and never stopped per test: stopping and re-creating it between tests
breaks the shared application. The autouse guard fails any test that leaves a job's QThread running,
after stopping it so one leak does not cascade into later tests.
"""

from __future__ import annotations

import asyncio
import sys
import time

import pytest


@pytest.fixture(scope="session")
def qt_loop(qapp):
    """The app's ``qasync.QEventLoop`` for the whole session (never stopped per test)."""
    import qasync

    loop = qasync.QEventLoop(qapp, already_running=True)
    asyncio.set_event_loop(loop)
    yield loop


@pytest.fixture(autouse=True)
def _qt_thread_guard(request: pytest.FixtureRequest):
    """For tests that use Qt: run on the session qasync loop and fail on a leaked running QThread."""
    uses_qt = "qtbot" in request.fixturenames or "qapp" in request.fixturenames
    if uses_qt:
        request.getfixturevalue("qt_loop")
    yield
    workers = sys.modules.get("kmds_desktop.ui.jobs.runner")
    if workers is None:
        return
    leaked = workers.live_running_threads()
    if not leaked:
        return
    names = [t.objectName() or "QThread" for t in leaked]
    deadline = time.monotonic() + 15
    from PySide6.QtWidgets import QApplication

    for runner in list(workers.LIVE_RUNNERS):
        runner.cancel_all()
    while workers.live_running_threads() and time.monotonic() < deadline:
        app = QApplication.instance()
        if app is not None:
            app.processEvents()
        time.sleep(0.01)
    pytest.fail(f"test left running QThread(s): {', '.join(names)}; wait for its jobs or call shutdown()")


@pytest.fixture(scope="session")
def ui_index():
    """One in-memory semantic index for every GUI test (the embedding model loads once)."""
    from kmds_desktop.index import SemanticIndex

    return SemanticIndex(None)


@pytest.fixture()
def jobs(qtbot):
    """A job runner for a panel under test (its workers joined after the test)."""
    from kmds_desktop.ui.jobs.runner import JobRunner

    runner = JobRunner()
    yield runner
    runner.shutdown()


@pytest.fixture()
def make_window(qtbot, data_home, ui_index):
    """Factory for a :class:`MainWindow` on a private data folder; closed and joined after the test.

    The literature panel does not open its database here (the literature tests cover it), so a
    window test never starts PostgreSQL.
    """
    from kmds_desktop.config import Settings
    from kmds_desktop.ui.shell.main_window import MainWindow

    windows = []

    def make(settings: Settings | None = None, **kwargs):
        kwargs.setdefault("literature_kwargs", {"open_on_start": False})
        kwargs.setdefault("probe_llm", False)
        kwargs.setdefault("index", ui_index)
        window = MainWindow(settings or Settings(), settings_path=data_home / "settings.json", **kwargs)
        qtbot.addWidget(window)
        windows.append(window)
        window.show()
        return window

    yield make
    for window in windows:
        window.jobs.shutdown()
        window._force_close = True
        window.close()
