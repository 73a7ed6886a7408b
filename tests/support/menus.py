"""Clicking a window's menus as a user does (shared by the GUI tests that open menus)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from pytestqt.exceptions import TimeoutError as WaitTimeout


def click_menu(qtbot, window, title: str, entry: str) -> None:
    """Open a menu of the window's menu bar and click one of its entries, as a user does. The click
    must trigger the entry's action: a test then fails here, saying so, rather than later waiting for
    what the entry should have started."""
    bar = window.menuBar()
    menu_action = next(a for a in bar.actions() if a.text() == title)
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.actionGeometry(menu_action).center())
    menu = menu_action.menu()
    qtbot.waitUntil(menu.isVisible, timeout=5_000)
    action = next(a for a in menu.actions() if a.text() == entry)
    triggered: list[bool] = []

    def mark(*_: object) -> None:
        triggered.append(True)

    action.triggered.connect(mark)
    try:
        qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())
        try:
            qtbot.waitUntil(lambda: bool(triggered), timeout=2_000)
        except WaitTimeout:
            raise AssertionError(f"clicking {title} > {entry} did not trigger it") from None
    finally:
        action.triggered.disconnect(mark)
