"""The shell: the main window (:mod:`.main_window`) that composes the panels and wires them, its menus,
status line, message bar, start-up and recovery parts, the file dialogs, and the app's entry
(:mod:`.app`).

Import from the modules themselves: this package re-exports nothing, so a reader sees which module a
name comes from.
"""
