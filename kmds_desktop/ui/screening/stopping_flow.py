"""The screening window's Stopping and PRISMA flow pages.

Why pages of their own: each renders one report of the session (its stopping rules, its flow) and is
redrawn only while shown, so deciding a record never waits for a diagram. Nothing here decides a record:
the stopping rule only reports ("nothing stops for the user"), and drawing the sample is the session's.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.app import last_folders
from kmds_desktop.app.presentation import flow_svg
from kmds_desktop.app.screening import ScreeningSession
from kmds_desktop.ui.screening.widgets import FlowView
from kmds_desktop.ui.shell import file_dialogs


class StoppingPage(QWidget):
    """The stopping figures and the rule the user picks, with its assumption spelled out."""

    #: The session changed here (a sample was drawn): the window redraws the record on screen.
    changed = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.session: ScreeningSession | None = None
        self.rule_combo = QComboBox()
        self.rule_combo.addItem("N consecutive excluded", "consecutive")
        self.rule_combo.addItem("Target recall by random sample", "sample")
        self.rule_combo.activated.connect(lambda _i: self.render())
        self.consecutive_spin = QSpinBox()
        self.consecutive_spin.setRange(1, 100_000)
        self.consecutive_spin.setPrefix("N = ")
        self.consecutive_spin.valueChanged.connect(self._consecutive_changed)
        self.target_spin = QDoubleSpinBox()
        self.target_spin.setRange(50.0, 99.9)
        self.target_spin.setValue(95.0)
        self.target_spin.setSuffix(" % recall")
        self.sample_button = QPushButton("Draw the random sample")
        self.sample_button.setToolTip(
            "A random sample of the undecided records is offered next; once decided it gives a 95% "
            "lower bound on recall"
        )
        self.sample_button.clicked.connect(self.start_sample_check)
        self.report_label = QLabel()
        self.report_label.setWordWrap(True)
        self.report_label.setTextFormat(Qt.TextFormat.RichText)
        self.report_label.setAlignment(Qt.AlignmentFlag.AlignTop)
        bar = QHBoxLayout()
        for w in (QLabel("Stopping rule:"), self.rule_combo, self.consecutive_spin, self.target_spin,
                  self.sample_button):
            bar.addWidget(w)
        bar.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.report_label, 1)

    def set_session(self, session: ScreeningSession) -> None:
        self.session = session
        self.consecutive_spin.setValue(session.consecutive_rule)
        if session.sample_check() is not None:
            self.rule_combo.setCurrentIndex(self.rule_combo.findData("sample"))

    def _consecutive_changed(self, value: int) -> None:
        if self.session is not None:
            self.session.consecutive_rule = value
            self.render()

    def start_sample_check(self, _checked: bool = False) -> None:
        if self.session is not None:
            self.session.start_sample_check(self.target_spin.value() / 100)
            self.rule_combo.setCurrentIndex(self.rule_combo.findData("sample"))
            self.render()
            self.changed.emit()

    def render(self) -> None:
        if self.session is None:
            return
        report = self.session.stopping_report()
        lines = report.lines()
        rule = self.rule_combo.currentData()
        chosen = report.rules[0 if rule == "consecutive" else 1]
        self.consecutive_spin.setVisible(rule == "consecutive")
        self.target_spin.setVisible(rule == "sample")
        self.sample_button.setVisible(rule == "sample")
        verdict = "MET" if chosen.met else "not met"
        self.report_label.setText(
            f"<h3>{chosen.name}: {verdict}</h3><p>{chosen.detail}.</p><p><i>{chosen.assumption}</i></p>"
            "<p>" + "<br>".join(lines[:2]) + "</p><p>Nothing stops for you: the rule only reports.</p>"
        )


class FlowPage(QWidget):
    """The PRISMA 2020 flow diagram of the review, with Save as SVG / PNG."""

    def __init__(self) -> None:
        super().__init__()
        self.session: ScreeningSession | None = None
        self.flow_view = FlowView()
        self.save_svg_button = QPushButton("Save as SVG…")
        self.save_png_button = QPushButton("Save as PNG…")
        self.save_svg_button.clicked.connect(lambda: self.save("svg"))
        self.save_png_button.clicked.connect(lambda: self.save("png"))
        bar = QHBoxLayout()
        bar.addStretch(1)
        bar.addWidget(self.save_svg_button)
        bar.addWidget(self.save_png_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.flow_view, 1)
        layout.addLayout(bar)

    def render(self) -> None:
        if self.session is not None:
            self.flow_view.set_svg(flow_svg(self.session.flow(), self.session.review.name))

    def save(self, fmt: str, path: str | Path | None = None) -> Path | None:
        """Save the diagram as it stands now (redrawn first: decisions may have come since)."""
        if self.session is None:
            return None
        self.render()
        if path is None:
            chosen = file_dialogs.save_file(self, last_folders.SCREENING, "Save the PRISMA flow",
                                            f"prisma-flow.{fmt}", f"{fmt.upper()} (*.{fmt})")
            if not chosen:
                return None
            path = chosen
        return self.flow_view.save_svg(path) if fmt == "svg" else self.flow_view.save_png(path)
