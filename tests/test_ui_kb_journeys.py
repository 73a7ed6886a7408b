"""KB journeys on the real main window, by clicking and typing: the demo KB is edited and saved as the
user's copy in the data folder; the installed file is never written (real KB code, offscreen Qt)."""

from __future__ import annotations

import hashlib

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QDialogButtonBox

from kmds_desktop.app import workspace
from kmds_desktop.config import load_settings
from kmds_desktop.kb import load_kb

WAIT = 60_000
LEFT = Qt.MouseButton.LeftButton


def test_edit_the_demo_kb_and_save(qtbot, make_window, data_home) -> None:
    installed = workspace.installed_demo_path()
    before = hashlib.sha256(installed.read_bytes()).hexdigest()
    window = make_window(auto_index=False)
    # File > Open recent > Demo knowledge base
    demo_action = next(a for a in window.recent_menu.actions() if a.text() == "Demo knowledge base")
    with qtbot.waitSignal(window.kb_loaded, timeout=WAIT):
        demo_action.trigger()
    copy = workspace.demo_copy_path()
    assert window.kb.path.resolve() == copy.resolve() and copy.is_relative_to(data_home)

    # Double-click a record, change its finding in the dialog, OK.
    browser = window.browser
    obs = window.kb.observations[0]
    browser.select_observation(obs.iri)
    rect = browser.tree.visualRect(browser.tree.currentIndex())
    qtbot.mousePress(browser.tree.viewport(), LEFT, pos=rect.center())
    qtbot.mouseDClick(browser.tree.viewport(), LEFT, pos=rect.center())
    dialog = browser.active_dialog
    dialog.finding.selectAll()
    qtbot.keyClicks(dialog.finding, "Penguins on Biscoe are heavier (checked again)")
    qtbot.mouseClick(dialog.buttons.button(QDialogButtonBox.StandardButton.Ok), LEFT)
    assert window.isWindowModified() and window.windowTitle().startswith("demo_kb.xml[*]")

    # Ctrl+S saves the copy; the installed demo KB is untouched and is not remembered as "last".
    with qtbot.waitSignal(window.kb_saved, timeout=WAIT):
        qtbot.keySequence(window, QKeySequence(QKeySequence.StandardKey.Save))
    assert not window.isWindowModified()
    assert hashlib.sha256(installed.read_bytes()).hexdigest() == before
    assert load_kb(copy).observation(obs.iri).finding == "Penguins on Biscoe are heavier (checked again)"
    saved = load_settings(data_home / "settings.json")
    assert saved.ui.last_kb is None and str(copy) not in saved.ui.recent_files
