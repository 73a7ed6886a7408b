"""The review menu's small dialogs: a name (New review, Rename), the list to open one from (and rename,
delete or export one), the bar that says which reviews have new or withdrawn records, the badge over an
update's screening, the review's report.

Why non-modal dialogs opened with ``open()`` and a signal: a nested event loop (``exec()``) would let
the window's jobs deliver results into a half-finished action, and a test could not click them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QTabWidget,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.ui.screening.widgets import FlowView


class NameDialog(QDialog):
    """Asks for a review's name; ``named(text)`` when the user confirms a non-empty one."""

    named = Signal(str)

    def __init__(self, title: str, prompt: str, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("reviewNameDialog")
        self.setWindowTitle(title)
        self.prompt = QLabel(prompt)
        self.prompt.setWordWrap(True)
        self.name_edit = QLineEdit(text)
        self.name_edit.selectAll()
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.buttons.accepted.connect(self._confirm)
        self.buttons.rejected.connect(self.reject)
        self.name_edit.textChanged.connect(lambda t: self.ok_button.setEnabled(bool(t.strip())))
        self.ok_button.setEnabled(bool(text.strip()))
        layout = QVBoxLayout(self)
        layout.addWidget(self.prompt)
        layout.addWidget(self.name_edit)
        layout.addWidget(self.buttons)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.resize(460, self.sizeHint().height())

    def _confirm(self) -> None:
        text = " ".join(self.name_edit.text().split())
        if text:
            self.accept()
            self.named.emit(text)


class ReviewPicker(QDialog):
    """The data folder's reviews, one line each (screened, included, updates, question); ``chosen(id)``
    on Open or a double click; Rename…, Delete… and Export… act on the chosen review, open or not
    (``rename_chosen``, ``delete_chosen``, ``export_chosen``; the list closes first)."""

    chosen = Signal(str)
    rename_chosen = Signal(str)
    delete_chosen = Signal(str)
    export_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("reviewPicker")
        self.setWindowTitle("Open review")
        self.list = QListWidget()
        self.list.setWordWrap(True)
        self.list.itemActivated.connect(lambda _item: self._confirm())
        self.hint = QLabel("Reading the reviews…")
        self.hint.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Open
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.open_button = self.buttons.button(QDialogButtonBox.StandardButton.Open)
        self.open_button.setEnabled(False)
        self.action_buttons: dict[str, QPushButton] = {}
        for text, signal in (("Rename…", self.rename_chosen), ("Delete…", self.delete_chosen),
                             ("Export…", self.export_chosen)):
            button = self.buttons.addButton(text, QDialogButtonBox.ButtonRole.ActionRole)
            button.setEnabled(False)
            button.clicked.connect(lambda _c=False, signal=signal: self._act(signal))
            self.action_buttons[text.rstrip("…").lower()] = button
        self.buttons.accepted.connect(self._confirm)
        self.buttons.rejected.connect(self.reject)
        self.list.currentItemChanged.connect(lambda item, _p: self._enable(item is not None))
        layout = QVBoxLayout(self)
        layout.addWidget(self.hint)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.buttons)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.resize(720, 420)

    def show_reviews(self, choices: Sequence[Any]) -> None:
        self.list.clear()
        for choice in choices:
            item = QListWidgetItem(choice.line)
            item.setData(Qt.ItemDataRole.UserRole, choice.id)
            self.list.addItem(item)
        self.hint.setText("Choose a review to open (its search, results and screening come back):"
                          if choices else "No review yet: make one with File → New review…")
        if choices:
            self.list.setCurrentRow(0)

    def select(self, review: str) -> bool:
        for row in range(self.list.count()):
            if self.list.item(row).data(Qt.ItemDataRole.UserRole) == review:
                self.list.setCurrentRow(row)
                return True
        return False

    def _enable(self, on: bool) -> None:
        for button in (self.open_button, *self.action_buttons.values()):
            button.setEnabled(on)

    def _act(self, signal: Any) -> None:
        item = self.list.currentItem()
        if item is not None:
            self.accept()
            signal.emit(str(item.data(Qt.ItemDataRole.UserRole)))

    def _confirm(self) -> None:
        self._act(self.chosen)


class NewRecordsBar(QWidget):
    """"2 reviews have 14 new records — Update": shown after an import, or on start when the database
    changed; ``update_requested(review)`` for the review with most new records."""

    update_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("newRecordsBar")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.setStyleSheet("#newRecordsBar { background: #e3efff; }")
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.update_button = QPushButton("Update")
        self.update_button.setToolTip("Re-run the review's saved search and screen only its new records")
        self.update_button.clicked.connect(lambda: self.update_requested.emit(self.review))
        close = QToolButton()
        close.setText("✕")
        close.setToolTip("Dismiss")
        close.clicked.connect(lambda: self.setVisible(False))
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 4, 6, 4)
        row.addWidget(self.label, 1)
        row.addWidget(self.update_button)
        row.addWidget(close)
        self.review = ""
        self.setVisible(False)

    def show_new(self, notice: Any) -> None:
        """Show what :func:`~kmds_desktop.app.review_resume.check_new_records` found (hidden when
        nothing changed); the button updates the review with most new records (or withdrawals)."""
        line = notice.new_line()
        if not line:
            self.setVisible(False)
            return
        self.review = notice.most_changed()
        what = ("screens the new records" if notice.new_per_review.get(self.review)
                else "flags the withdrawn records")
        self.label.setText(f"{line} — Update {what} of {self.review}")
        self.update_button.setText(f"Update {self.review}")
        self.setVisible(True)


class OnlyNewBadge(QWidget):
    """"Update 2: 14 new records only" above the screening, with "Show all": the queue offers an
    update's new records alone until they are screened or the user asks for every unscreened record
    (``show_all``)."""

    show_all = Signal()

    def __init__(self, round_number: int, new: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("onlyNewBadge")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.setStyleSheet("#onlyNewBadge { background: #fff1c4; border-radius: 4px; }")
        self.label = QLabel(f"<b>Update {round_number}: {new:,} new record{'' if new == 1 else 's'} only</b>"
                            " — the review's other unscreened records follow when these are screened")
        self.label.setWordWrap(True)
        self.show_all_button = QPushButton("Show all")
        self.show_all_button.setToolTip("Screen every unscreened record of the review, in the model's order")
        self.show_all_button.clicked.connect(self.show_all.emit)
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 3, 6, 3)
        row.addWidget(self.label, 1)
        row.addWidget(self.show_all_button)


class ReportDialog(QDialog):
    """The review's report (questions, strategy versions, each round's log and the PRISMA 2020 flow per
    round) as text, and the PRISMA 2020 diagram for updated reviews drawn in its own tab;
    ``save_requested`` / ``save_flow_requested`` when the user asks to save either to a file."""

    save_requested = Signal()
    save_flow_requested = Signal()

    def __init__(self, review: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("reviewReport")
        self.setWindowTitle(f"Review report — {review}")
        self.text = QTextBrowser()
        self.text.setPlainText("Reading the review…")
        self.text.setLineWrapMode(QTextBrowser.LineWrapMode.NoWrap)
        self.text.setStyleSheet("font-family: monospace")
        self.flow = FlowView()
        self.tabs = QTabWidget()
        self.tabs.addTab(self.text, "Report")
        self.tabs.addTab(self.flow, "PRISMA flow of the updates")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.save_button = self.buttons.addButton("Save report…", QDialogButtonBox.ButtonRole.ActionRole)
        self.save_flow_button = self.buttons.addButton("Save diagram…",
                                                       QDialogButtonBox.ButtonRole.ActionRole)
        for button, signal in ((self.save_button, self.save_requested),
                               (self.save_flow_button, self.save_flow_requested)):
            button.setEnabled(False)
            button.clicked.connect(signal.emit)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(self.buttons)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.resize(1000, 700)

    def show_report(self, text: str, flow_svg: str = "") -> None:
        self.text.setPlainText(text)
        self.save_button.setEnabled(True)
        if flow_svg:
            self.flow.set_svg(flow_svg)
            self.save_flow_button.setEnabled(True)
