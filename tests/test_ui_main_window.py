"""The main window on real KB files: first run, open (menu, recent, drop), errors, edit-save-reload, close."""

from __future__ import annotations

import json
import os
import shutil

from PySide6.QtCore import QMimeData, QPoint, Qt, QUrl
from PySide6.QtGui import QAction, QDropEvent
from PySide6.QtWidgets import QDialogButtonBox, QMessageBox

from kmds_desktop import paths
from kmds_desktop.config import Settings, load_settings
from kmds_desktop.kb import load_kb
from kmds_desktop.ui.shell.main_window import initial_kb_path

LOAD_TIMEOUT = 30_000


def _open(qtbot, window, path):
    with qtbot.waitSignal(window.kb_loaded, timeout=LOAD_TIMEOUT):
        window.open_kb(path)
    return window.kb


def test_first_run_opens_the_demo_kb_then_the_last_one(qtbot, make_window, kmds_data, data_home):
    settings = Settings()
    path, note = initial_kb_path(settings)
    assert path == paths.demo_kb_path() and note is None
    window = make_window(settings, auto_index=False)
    kb = _open(qtbot, window, path)
    assert len(kb.observations) > 0
    assert window.browser.model.rowCount() > 0
    assert "demo_kb.xml" in window.windowTitle() and not window.isWindowModified()
    assert "observations" in window.kb_status.text()
    assert window.settings.ui.last_kb is None  # the demo is not remembered as "last"

    other = kmds_data / "example_ml_kb_exp_workflow.xml"
    _open(qtbot, window, other)
    saved = load_settings(data_home / "settings.json")
    assert saved.ui.last_kb == str(other.resolve())
    assert saved.ui.recent_files[0] == str(other.resolve())
    assert initial_kb_path(saved) == (other.resolve(), None)
    gone = Settings()
    gone.ui.last_kb = str(data_home / "deleted.xml")
    path, note = initial_kb_path(gone)
    assert path == paths.demo_kb_path() and "no longer exists" in note


def test_open_error_shows_in_window_and_keeps_current_kb(qtbot, make_window, kmds_data, tmp_path):
    window = make_window(auto_index=False)
    kb = _open(qtbot, window, kmds_data / "example_analytics_kb_app_workflow.xml")
    bad = tmp_path / "notes.xml"
    bad.write_text("<html><body>not a knowledge base</body></html>", encoding="utf-8")
    job = window.open_kb(bad)
    with qtbot.waitSignal(job.finished, timeout=LOAD_TIMEOUT):
        pass
    assert window.messages.isVisible()
    msg = window.messages.current
    assert msg.level == "error" and "notes.xml" in msg.text
    assert "Traceback" in msg.details  # details on demand
    window.messages.details_button.click()
    assert window.messages.details.isVisible()
    assert window.kb is kb and window.browser.kb is kb


def test_second_open_while_loading_is_refused_with_a_message(qtbot, make_window, kmds_data):
    window = make_window(auto_index=False)
    first = window.open_kb(kmds_data / "generated_by_kmds" / "synth_250.xml")
    second = window.open_kb(kmds_data / "example_ml_kb_exp_workflow.xml")
    assert first is not None and second is None
    assert window.messages.current.level == "warning" and "still running" in window.messages.current.text
    with qtbot.waitSignal(first.finished, timeout=LOAD_TIMEOUT):
        pass


def test_drop_a_file_and_recent_menu(qtbot, make_window, kmds_data):
    window = make_window(auto_index=False)
    path = kmds_data / "test_kb_app_workflow.xml"
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    event = QDropEvent(
        QPoint(10, 10),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    with qtbot.waitSignal(window.kb_loaded, timeout=LOAD_TIMEOUT):
        window.dropEvent(event)
    assert event.isAccepted()
    assert window.kb.path == path.resolve()
    texts = [a.text() for a in window.recent_menu.actions()]
    assert str(path.resolve()) in texts


def test_edit_save_reload_and_title_marks_unsaved(qtbot, make_window, kmds_data, tmp_path):
    copy = tmp_path / "kb.xml"
    shutil.copy(kmds_data / "example_analytics_kb_app_workflow.xml", copy)
    window = make_window(auto_index=False)
    kb = _open(qtbot, window, copy)
    n = len(kb.observations)

    window.browser.add_observation()
    dialog = window.browser.active_dialog
    dialog.finding.setPlainText("Closed tickets reopen in 3% of cases")
    dialog.intent.setCurrentText("DATA_UNDERSTANDING")
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    assert window.isWindowModified() and window.windowTitle().startswith("kb.xml[*]")
    victim = kb.observations[0]
    window.browser.select_observation(victim.iri)
    window.browser.delete_observation()
    window.browser.active_dialog.button(QMessageBox.StandardButton.Yes).click()

    with qtbot.waitSignal(window.kb_saved, timeout=LOAD_TIMEOUT):
        window.save_kb()
    assert not window.isWindowModified()
    reloaded = load_kb(copy)
    findings = [o.finding for o in reloaded.observations]
    assert "Closed tickets reopen in 3% of cases" in findings
    assert reloaded.observation(victim.iri) is None and len(reloaded.observations) == n


def test_close_with_unsaved_changes_asks(qtbot, make_window, kmds_data, tmp_path):
    copy = tmp_path / "kb.xml"
    shutil.copy(kmds_data / "example_ml_kb_exp_workflow.xml", copy)
    window = make_window(auto_index=False)
    kb = _open(qtbot, window, copy)
    kb.update_observation(kb.observations[0].iri, finding="changed finding")
    window.browser.kb_edited.emit("edited")
    window.close()
    box = window.active_dialog
    assert isinstance(box, QMessageBox) and window.isVisible()
    box.button(QMessageBox.StandardButton.Cancel).click()
    assert window.isVisible() and kb.dirty

    window.close()
    window.active_dialog.button(QMessageBox.StandardButton.Save).click()
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=LOAD_TIMEOUT)
    assert load_kb(copy).observation(kb.observations[0].iri).finding == "changed finding"


def test_layout_and_recent_files_persist(qtbot, make_window, data_home):
    window = make_window(auto_index=False)
    window.resize(1000, 700)  # fits the offscreen test screen, so the geometry restores exactly
    qtbot.wait(10)
    window.splitter.setSizes([250, 450, 280])
    sizes = window.splitter.sizes()
    window._force_close = True
    window.close()
    saved = load_settings(data_home / "settings.json")
    assert saved.ui.splitter_sizes == sizes and saved.ui.window_geometry
    again = make_window(saved, auto_index=False)
    qtbot.wait(20)
    restored = again.splitter.sizes()
    assert all(abs(a - b) <= 30 for a, b in zip(restored, sizes, strict=True)), (restored, sizes)


def test_excepthook_shows_unexpected_errors_in_window(qtbot, make_window):
    import sys

    from kmds_desktop.ui.shell.message_bar import install_excepthook, uninstall_excepthook

    window = make_window(auto_index=False)
    install_excepthook(window.messages)
    try:
        try:
            raise RuntimeError("boom in a slot")
        except RuntimeError:
            sys.excepthook(*sys.exc_info())
        qtbot.waitUntil(lambda: window.messages.current is not None, timeout=2000)
        assert "boom in a slot" in window.messages.current.text
        assert "RuntimeError" in window.messages.current.details
    finally:
        uninstall_excepthook()


def _app_script(ready: str, on_ready: str) -> str:
    """A Python program that runs the real app (``run_app``) and, once ``ready`` holds for its main
    window ``win``, runs ``on_ready``; it prints ``EXIT <code>`` when the app returns."""
    return (
        "import sys\n"
        "from PySide6.QtCore import QTimer\n"
        "from PySide6.QtWidgets import QApplication\n"
        "app = QApplication(sys.argv)\n"
        "def check():\n"
        "    wins = [w for w in app.topLevelWidgets() if w.objectName() == 'mainWindow']\n"
        "    win = wins[0] if wins else None\n"
        f"    if win is not None and {ready}:\n"
        f"        {on_ready}\n"
        "    else:\n"
        "        QTimer.singleShot(100, check)\n"
        "QTimer.singleShot(100, check)\n"
        "from kmds_desktop.ui.shell.app import run_app\n"
        "print('EXIT', run_app(), flush=True)\n"
    )


def test_run_app_starts_on_qasync_opens_the_demo_kb_and_exits_cleanly(tmp_path):
    """The real entry point in a fresh process: first run opens the demo KB; closing exits with 0."""
    import subprocess
    import sys

    script = _app_script("win.kb is not None",
                         "print('TITLE', win.windowTitle(), flush=True); win.close()")
    env = dict(os.environ, KMDS_DESKTOP_HOME=str(tmp_path / "home"), QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=240, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "TITLE demo_kb.xml[*] — KMDS Desktop" in proc.stdout
    assert "placeholder" not in proc.stderr, "setWindowModified needs '[*]' in the title"
    assert "EXIT 0" in proc.stdout


def test_index_follows_edits_incrementally(qtbot, make_window, kmds_data, tmp_path, data_home, request):
    """The app's own index (the data folder's, in its index process) follows loads and edits."""
    from kmds_desktop.index import index_process

    copy = tmp_path / "kb.xml"
    shutil.copy(kmds_data / "example_ml_kb_exp_workflow.xml", copy)
    window = make_window(index=None)  # auto_index on: load -> build, edit -> update
    request.addfinalizer(index_process.stop_all)
    warm = window.warm_up()  # as at start-up: also starts the index process
    qtbot.waitUntil(lambda: warm.done, timeout=120_000)
    index = window.index_holder["index"]
    assert index.own_process and not index.in_process
    assert index.persist_dir == (data_home / "index").resolve()
    served = json.loads((index.persist_dir / index_process.SERVER_FILE).read_text(encoding="utf-8"))
    assert served["pid"] != os.getpid()
    with qtbot.waitSignal(window.index_updated, timeout=120_000) as first:
        window.open_kb(copy)
    assert first.args[0].embedded >= len(window.kb.observations)
    assert "indexed" in window.kb_status.text()
    target = window.kb.observations[2]
    window.browser.edit_observation(target.iri)
    dialog = window.browser.active_dialog
    dialog.finding.setPlainText("Seasonality dominates weekly sales")
    with qtbot.waitSignal(window.index_updated, timeout=60_000) as second:
        dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    report = second.args[0]
    assert report.embedded == 1 and report.unchanged >= len(window.kb.observations) - 1
    hits = window.index_holder["index"].search("weekly sales seasonality", n_results=1, kb_id=window.kb.kb_id)
    assert hits[0]["iri"] == target.iri
    assert window.index_holder["index"] is index


def test_help_and_preferences_open_without_blocking(qtbot, make_window):
    window = make_window(auto_index=False)
    for name in ("about", "shortcuts", "preferences"):
        action = window.findChild(QAction, name)
        action.trigger()
        assert window.active_dialog is not None and window.active_dialog.isVisible(), name
        window.active_dialog.close()
        qtbot.wait(10)


def test_sigterm_closes_the_app_cleanly_and_stops_the_embedded_server():
    """Logout or `kill` must not leave the private PostgreSQL server running or skip saving settings."""
    import signal
    import subprocess
    import sys
    import tempfile
    import time
    from pathlib import Path

    from kmds_desktop.index import index_process

    # Not under tmp_path: any pytest starting meanwhile resets /tmp/pytest-of-<user> to 0700, which
    # locks the server's unprivileged user out of its data folder when the tests run as root.
    home = Path(tempfile.mkdtemp(prefix="kmds-sigterm-test-")) / "home"
    served = home / "index" / index_process.SERVER_FILE
    # Ready once the KB is open, the database counted, and the warm-up has started the index process.
    script = _app_script(
        "win.kb is not None and 'documents' in win.lit_status.text()"
        f" and __import__('os').path.exists({str(served)!r})",
        "print('READY', flush=True)",
    )
    env = dict(os.environ, KMDS_DESKTOP_HOME=str(home), QT_QPA_PLATFORM="offscreen")
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        deadline = time.monotonic() + 180
        line = ""
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith("READY") or not line:
                break
        assert line.startswith("READY"), proc.stderr.read()[-3000:] if proc.poll() is not None else line
        pid_file = home / "postgres" / "pgdata" / "postmaster.pid"
        assert pid_file.exists(), "the embedded server should be running while the app is open"
        index_pid = json.loads(served.read_text(encoding="utf-8"))["pid"]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    try:
        assert proc.returncode == 0, err[-3000:]
        assert "EXIT 0" in out
        assert (home / "settings.json").exists()
        for _ in range(150):  # the server stops in the background; a loaded CI machine is slow
            if not pid_file.exists():
                break
            time.sleep(0.2)
        assert not pid_file.exists(), "the embedded PostgreSQL server was left running"
        assert not served.exists()
        for _ in range(100):
            try:
                os.kill(index_pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the index process was left running")
    finally:
        if pid_file.exists():  # never leave a server behind, even when the test fails
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
        shutil.rmtree(home.parent, ignore_errors=True)


def test_menus_and_status_bar_have_every_entry(qtbot, make_window, kmds_data):
    window = make_window(auto_index=False)
    _open(qtbot, window, kmds_data / "example_analytics_kb_app_workflow.xml")

    def texts(menu):
        return [a.text().replace("&", "") for a in menu.actions() if not a.isSeparator()]

    menus = {a.text().replace("&", ""): a.menu() for a in window.menuBar().actions()}
    assert list(menus) == ["File", "Edit", "View", "Help"]
    file_items = texts(menus["File"])
    for wanted in ("Open knowledge base…", "Open recent", "Save knowledge base", "Import literature…",
                   "Import literature folder…", "Export", "Quit"):
        assert wanted in file_items, file_items
    assert "Preferences…" in texts(menus["Edit"])
    assert any(t.startswith("Show ") for t in texts(menus["View"]))
    assert texts(menus["Help"]) == ["Keyboard shortcuts", "Diagnose data folder…", "About KMDS Desktop"]
    export_items = texts(window.export_menu)
    assert export_items[:4] == ["Documents as CSV…", "Documents as RIS…", "Documents as BibTeX…",
                                "Search log (JSON)…"]

    assert "example_analytics_kb_app_workflow.xml" in window.kb_status.text()
    assert "10 observations" in window.kb_status.text()
    assert window.llm_status.text().startswith("LLM: ")
    assert window.lit_status.text().startswith("Literature")

    # Export before any search: a non-modal message in the window, nothing crashes, no dialog.
    window.findChild(QAction, "export:csv").trigger()
    assert window.messages.isVisible() and "no documents to export" in window.messages.current.text
    assert window.active_dialog is None


def test_close_for_signal_keeps_unsaved_edits_in_a_recovery_copy(
    qtbot, make_window, kmds_data, tmp_path, data_home
):
    """When the session ends (SIGTERM) nobody can be asked: edits go to a recovery copy, the file stays."""
    from kmds_desktop.kb import load_kb

    original = tmp_path / "kb.xml"
    shutil.copy(kmds_data / "example_ml_kb_exp_workflow.xml", original)
    before = original.read_bytes()
    window = make_window(auto_index=False)
    with qtbot.waitSignal(window.kb_loaded, timeout=60_000):
        window.open_kb(original)
    target = window.kb.observations[0]
    window.kb.update_observation(target.iri, finding="Edited before the session ended")
    assert window.kb.dirty
    window.close_for_signal()
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=10_000)
    assert original.read_bytes() == before
    recovered = data_home / "recovery" / "kb.recovered.xml"
    assert recovered.exists()
    kb = load_kb(recovered)
    assert kb.observation(target.iri).finding == "Edited before the session ended"


def test_start_up_opens_the_kb_and_warms_up_after_the_first_frame(qtbot, make_window, kmds_data):
    """``start_up`` (what run_app calls after show) starts nothing until the window has been painted:
    the first frame does not compete with the KB parser and the warm-up for the GIL; the warm-up
    starts once the KB is shown, so its Python work does not slow the tree's arrival either."""
    window = make_window(auto_index=False)  # shown, not yet painted (no event loop has run)
    started = []
    window.jobs.job_started.connect(lambda job: started.append((job.kind, window.first_frame_done)))
    warm_up_saw_kb = []
    tree = window.browser.model
    window.jobs.job_started.connect(
        lambda job: warm_up_saw_kb.append(tree.rowCount() > 0) if job.kind == "warmup" else None
    )
    with qtbot.waitSignal(window.first_frame_shown, timeout=LOAD_TIMEOUT):
        window.start_up(kmds_data / "example_ml_kb_exp_workflow.xml")
        assert window.startup_jobs == [] and started == []
    qtbot.waitUntil(lambda: len(window.startup_jobs) == 2 and all(j.done for j in window.startup_jobs),
                    timeout=LOAD_TIMEOUT)
    assert [kind for kind, _ in started] == ["kb.load", "warmup"]
    assert all(after_frame for _, after_frame in started)
    assert warm_up_saw_kb == [True]
    assert [j.state for j in window.startup_jobs] == ["done", "done"]
    assert window.kb is not None and window.browser.model.rowCount() > 0
    # Asked again once the frame is shown, the action runs on the next turn of the event loop.
    ran = []
    window.after_first_frame(lambda: ran.append(True))
    qtbot.waitUntil(lambda: ran == [True], timeout=LOAD_TIMEOUT)
