"""In-window messages: errors and notices appear in the window, never only on the console.

A :class:`MessageBar` sits above the panels. It shows one line (the newest message) with a
"Details" button that reveals the full text (e.g. a traceback) on demand, and a close button. It
is non-modal on purpose: an error while the user is typing must not steal focus or block the
window. :func:`install_excepthook` routes every unexpected exception (GUI thread or any other
thread) to the bar, so the app never exits on an error.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QStyle,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.app.messages import user_message

log = logging.getLogger(__name__)

_COLOURS = {"info": "#e8f1fb", "warning": "#fff4d6", "error": "#fde2e1"}


@dataclass
class Message:
    level: str  # info | warning | error
    text: str
    details: str = ""
    #: What the message is about ("ask", a job's kind): the next success of it ends the message.
    topic: str = ""


class MessageBar(QWidget):
    """Shows the newest message with details on demand; keeps a short history for the session."""

    message_shown = Signal(object)  # Message

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("messageBar")
        self.history: list[Message] = []
        outer = QVBoxLayout(self)
        outer.setContentsMargins(6, 4, 6, 4)
        row = QHBoxLayout()
        self.icon = QLabel()
        self.label = QLabel()
        self.label.setObjectName("messageText")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details_button = QPushButton("Details")
        self.details_button.setCheckable(True)
        self.details_button.toggled.connect(self._toggle_details)
        self.close_button = QToolButton()
        self.close_button.setText("✕")
        self.close_button.setToolTip("Dismiss")
        self.close_button.clicked.connect(self.dismiss)
        row.addWidget(self.icon)
        row.addWidget(self.label, 1)
        row.addWidget(self.details_button)
        row.addWidget(self.close_button)
        outer.addLayout(row)
        self.details = QPlainTextEdit()
        self.details.setObjectName("messageDetails")
        self.details.setReadOnly(True)
        self.details.setMaximumHeight(180)
        self.details.setVisible(False)
        outer.addWidget(self.details)
        self.setVisible(False)

    @property
    def current(self) -> Message | None:
        return self.history[-1] if self.history else None

    def show_message(self, text: str, level: str = "info", details: str = "", topic: str = "") -> Message:
        msg = Message(level, text, details, topic)
        self.history.append(msg)
        del self.history[:-50]
        self.label.setText(text)
        # The style's own icons: emoji glyphs are missing from many desktop fonts (a hollow box).
        pixmap = {
            "error": QStyle.StandardPixmap.SP_MessageBoxCritical,
            "warning": QStyle.StandardPixmap.SP_MessageBoxWarning,
            "info": QStyle.StandardPixmap.SP_MessageBoxInformation,
        }.get(level, QStyle.StandardPixmap.SP_MessageBoxInformation)
        self.icon.setPixmap(self.style().standardIcon(pixmap).pixmap(16, 16))
        self.setStyleSheet(f"#messageBar {{ background: {_COLOURS.get(level, '#eee')}; }}")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.details.setPlainText(details)
        self.details_button.setVisible(bool(details))
        self.details_button.setChecked(False)
        self.setVisible(True)
        if level == "error":
            log.error("%s\n%s", text, details)
        self.message_shown.emit(msg)
        return msg

    def info(self, text: str, details: str = "") -> Message:
        return self.show_message(text, "info", details)

    def warning(self, text: str, details: str = "") -> Message:
        return self.show_message(text, "warning", details)

    def error(self, text: str, details: str = "") -> Message:
        return self.show_message(text, "error", details)

    def show_exception(self, exc: BaseException, context: str = "") -> Message:
        """An exception as a one-line message naming what failed, the traceback under Details."""
        text = user_message(exc, context)  # one line, no class name; the traceback is under Details
        details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return self.error(text, details)

    def dismiss(self) -> None:
        self.setVisible(False)

    def end_topic(self, topic: str) -> None:
        """The event a shown message was about has ended well (the next answer came): a warning or
        error about ``topic`` no longer holds, so it goes; a message about anything else stays."""
        current = self.current
        if self.isVisible() and current is not None and topic and current.topic == topic:
            self.setVisible(False)

    def _toggle_details(self, on: bool) -> None:
        self.details.setVisible(on)
        self.details_button.setText("Hide details" if on else "Details")


class _ExceptionRelay(QObject):
    """Carries exceptions from any thread to the GUI thread (queued signal)."""

    raised = Signal(object)


_relay: _ExceptionRelay | None = None


def install_excepthook(bar: MessageBar) -> None:
    """Show unexpected exceptions in ``bar`` instead of printing them (and keep the app running)."""
    global _relay
    relay = _ExceptionRelay(bar)
    relay.raised.connect(
        lambda exc: bar.show_exception(exc, "Unexpected error"), Qt.ConnectionType.QueuedConnection
    )
    _relay = relay

    def hook(etype: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if issubclass(etype, KeyboardInterrupt):
            sys.__excepthook__(etype, value, tb)
            return
        if value.__traceback__ is None and tb is not None:
            value = value.with_traceback(tb)
        log.error("unexpected error", exc_info=(etype, value, tb))
        try:
            relay.raised.emit(value)
        except RuntimeError:  # the bar is gone (window closed): fall back to the console
            sys.__excepthook__(etype, value, tb)

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None:
            hook(args.exc_type, args.exc_value, args.exc_traceback)

    sys.excepthook = hook
    threading.excepthook = thread_hook


def uninstall_excepthook() -> None:
    sys.excepthook = sys.__excepthook__
    threading.excepthook = threading.__excepthook__


class RecoveryBar(QWidget):
    """One recovery copy offered back at start-up: Restore, Compare (what the edits change) or
    Discard. The bar only shows and forwards; what each does is :mod:`kmds_desktop.app.workspace`'s."""

    restore = Signal(object)
    compare = Signal(object)
    discard = Signal(object)

    def __init__(self, recovery: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.recovery = recovery
        self.setObjectName("recoveryBar")
        self.setAutoFillBackground(True)
        self.setStyleSheet("#recoveryBar { background: #fff4d6; border-bottom: 1px solid #d9b650; }")
        self.label = QLabel(recovery.describe())
        self.label.setWordWrap(True)
        self.comparison = QLabel()
        self.comparison.setObjectName("recoveryComparison")
        self.comparison.setWordWrap(True)
        self.comparison.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.comparison.setVisible(False)
        self.restore_button = QPushButton("Restore")
        self.restore_button.setToolTip("Open the recovered edits (unsaved; Save writes them to the file)")
        self.compare_button = QPushButton("Compare")
        self.compare_button.setToolTip("Show what the recovered edits change against the file on disk")
        self.discard_button = QPushButton("Discard")
        self.discard_button.setToolTip("Delete the recovery copy; the file on disk stays as it is")
        self.restore_button.clicked.connect(lambda _c=False: self.restore.emit(self.recovery))
        self.compare_button.clicked.connect(lambda _c=False: self.compare.emit(self.recovery))
        self.discard_button.clicked.connect(lambda _c=False: self.discard.emit(self.recovery))
        row = QHBoxLayout()
        row.setContentsMargins(8, 4, 8, 4)
        row.addWidget(self.label, 1)
        for button in (self.restore_button, self.compare_button, self.discard_button):
            row.addWidget(button)
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(0)
        box.addLayout(row)
        box.addWidget(self.comparison)

    def show_comparison(self, text: str) -> None:
        self.comparison.setText(text)
        self.comparison.setContentsMargins(8, 0, 8, 4)
        self.comparison.setVisible(True)
