"""The screening window's list of decided records: each with its mark and title, the one on screen selected.

Why a widget of its own: it is given the session to show and says which record the user chose
(:attr:`DecidedList.chosen`); it knows nothing of the window around it, which sends the choice on to the
session (:meth:`~kmds_desktop.app.screening.ScreeningSession.go_to`).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QListWidget, QListWidgetItem, QWidget

from kmds_desktop.app.screening import ScreeningSession
from kmds_desktop.ui.screening.widgets import MARKS


class DecidedList(QListWidget):
    """Decided records in the order they were first decided; :attr:`label` heads it with their number."""

    #: The record the user clicked or activated (its key, a tuple).
    chosen = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel("Decided")
        self.setToolTip("Click a decided record to read it again or change its decision")
        self.setWordWrap(True)  # a title elided to its first words cannot be told apart
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.itemClicked.connect(self._chosen)
        self.itemActivated.connect(self._chosen)

    def show_decided(self, session: ScreeningSession) -> None:
        """Every decided record of ``session``, marked with its decision; the one on screen selected."""
        by_key = {r.key: r for r in session.records}
        self.clear()
        for key in session.decided_keys():
            d = session.decisions.get(key)
            rec = by_key.get(key)
            if d is None or rec is None:
                continue
            item = QListWidgetItem(f"{MARKS.get(d.decision, ' ')}  {rec.title or key[1]}")
            item.setData(Qt.ItemDataRole.UserRole, list(key))
            item.setToolTip(f"{d.decision}{' — ' + d.reason if d.reason else ''}")
            self.addItem(item)
        self.label.setText(f"Decided ({self.count():,})")
        self.select(session)

    def select(self, session: ScreeningSession | None) -> None:
        """Select the record on screen when it is decided (else nothing)."""
        current = session.current if session is not None else None
        for row in range(self.count()):
            item = self.item(row)
            if current is not None and tuple(item.data(Qt.ItemDataRole.UserRole)) == current.key:
                self.setCurrentItem(item)
                return
        self.clearSelection()

    def _chosen(self, item: QListWidgetItem) -> None:
        self.chosen.emit(tuple(item.data(Qt.ItemDataRole.UserRole)))
