"""The controls a result is filed into the KB with, as the verdict and choice panes both show them: the
"File under the selected observation" button, disabled until there is something to file, and the line
under the pane that names the observation before the click (so nothing lands under the wrong finding
unseen)."""

from __future__ import annotations

from PySide6.QtCore import SignalInstance
from PySide6.QtWidgets import QLabel, QPushButton

FILE_BUTTON_TEXT = "File under the selected observation"


def file_controls(button_name: str, target_name: str, tooltip: str,
                  requested: SignalInstance) -> tuple[QPushButton, QLabel]:
    """``(button, target line)``; the button emits ``requested`` when clicked."""
    button = QPushButton(FILE_BUTTON_TEXT)
    button.setObjectName(button_name)
    button.setToolTip(tooltip)
    button.setEnabled(False)
    button.clicked.connect(requested)
    target = QLabel("")
    target.setObjectName(target_name)
    target.setWordWrap(True)
    return button, target
