"""Clicking a window's menus as a user does (shared by the GUI tests that open menus)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from pytestqt.exceptions import TimeoutError as WaitTimeout

#: Times a menu entry is clicked before the click counts as failed: on a loaded machine the offscreen
#: platform now and then drops the click that comes right after the menu pops up (one full test run
#: in several waited 120 s for a job that the click never started), and a user would click again.
CLICK_TRIES = 3


def click_menu(qtbot, window, title: str, entry: str) -> None:
    """Open a menu of the window's menu bar and click one of its entries, as a user does, until the
    entry's action has been triggered (once: a click that triggered it is not repeated)."""
    bar = window.menuBar()
    menu_action = next(a for a in bar.actions() if a.text() == title)
    menu = menu_action.menu()
    action = next(a for a in menu.actions() if a.text() == entry)
    triggered: list[bool] = []

    def mark(*_: object) -> None:
        triggered.append(True)

    action.triggered.connect(mark)
    try:
        for _ in range(CLICK_TRIES):
            if not menu.isVisible():
                qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.actionGeometry(menu_action).center())
                qtbot.waitUntil(menu.isVisible, timeout=5_000)
            qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())
            try:
                qtbot.waitUntil(lambda: bool(triggered), timeout=2_000)
            except WaitTimeout:
                continue
            return
        raise AssertionError(f"{title} > {entry} was clicked {CLICK_TRIES} times and never triggered")
    finally:
        action.triggered.disconnect(mark)
