"""Clicking a window's menus as a user does (shared by the GUI tests that open menus)."""

from __future__ import annotations

from PySide6.QtCore import Qt


def click_menu(qtbot, window, title: str, entry: str) -> None:
    """Open a menu of the window's menu bar and click one of its entries, as a user does."""
    bar = window.menuBar()
    menu_action = next(a for a in bar.actions() if a.text() == title)
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.actionGeometry(menu_action).center())
    menu = menu_action.menu()
    qtbot.waitUntil(menu.isVisible, timeout=5_000)
    action = next(a for a in menu.actions() if a.text() == entry)
    qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())
