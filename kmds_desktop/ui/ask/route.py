"""The Ask panel's Route box: the route that ran, its template and filters to edit, Re-run.

What a route is and whether an edited one is valid are the application layer's
(:func:`kmds_desktop.app.ask.edited_route`); the box shows the result and hands the edited route on.
"""

from __future__ import annotations

import html
import re
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.app.ask import ANY_WORKFLOW, edited_route, fallback_search

INTENT_LABELS = {
    "exploratory_search": "Exploratory observations",
    "data_representation_search": "Data representation observations",
    "modelling_choice_search": "Modelling choice observations",
    "model_selection_search": "Model selection observations",
    "all_observations_search": "All observations",
    "semantic_search": "Semantic search (by meaning)",
}

#: The Route box's "answer:" while the answer is written, and after Cancel (no answer was given).
ANSWER_WRITING = "being written…"
ANSWER_CANCELLED = "cancelled"
ANSWER_FAILED = "none (the question could not be answered)"
#: The Route box after a Cancel that came before any route was chosen.
CANCELLED_BEFORE_ROUTE = "Cancelled before a route was chosen: no search ran and no answer was written."


def _plain(rich: str) -> str:
    """The text of one line of the route summary's HTML (its tooltip is plain text)."""
    return html.unescape(re.sub(r"<[^>]+>", "", rich))


class _WrappedLabel(QLabel):
    """A word-wrapped label that asks its layout for the height its lines need at its width.

    A wrapped label's minimum height is Qt's guess for some other width; in the Ask panel's
    splitter the Route box got only that, and the summary's last line ("Backend: …") was cut.
    """

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setWordWrap(True)

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._fit_height()

    def setText(self, text: str) -> None:  # noqa: N802 - Qt API
        super().setText(text)
        self._fit_height()

    def _fit_height(self) -> None:
        need = self.heightForWidth(self.width()) if self.width() > 0 else -1
        if need > 0 and need != self.minimumHeight():
            self.setMinimumHeight(need)


class RouteEditor(QGroupBox):
    """Shows the route that ran and lets the user change its template and filters, then re-run."""

    rerun_requested = Signal(object)  # OrchestratorRoute

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Route", parent)
        self.summary = _WrappedLabel("Ask a question to see how it is answered.")
        self.summary.setObjectName("routeSummary")
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.template = QComboBox()
        for key, label in INTENT_LABELS.items():
            self.template.addItem(label, key)
        self.obs_type = QLineEdit()
        self.obs_type.setPlaceholderText("any type")
        self.keyword = QLineEdit()
        self.keyword.setPlaceholderText("any word")
        #: The open KB's workflows and "any" (data None): the records of one workflow, or of all.
        self.workflow = QComboBox()
        self.workflow.setObjectName("routeWorkflow")
        self.workflow.setToolTip("Only the records of this workflow of the open knowledge base")
        self.set_workflows([])
        self.seq_min = self._seq_box()
        self.seq_max = self._seq_box()
        #: The route the editor was filled from (Re-run without an edit runs exactly it).
        self._shown_route: Any = None
        seq_row = QHBoxLayout()
        seq_row.addWidget(self.seq_min)
        seq_row.addWidget(QLabel("to"))
        seq_row.addWidget(self.seq_max)
        #: The other router's route, one click away when the two disagreed (the model's or the offline one).
        self.other_button = QPushButton("Use the other route")
        self.other_button.setObjectName("otherRoute")
        self.other_button.setVisible(False)
        self.other_button.clicked.connect(self._use_other)
        self._other_route: Any = None
        self.rerun_button = QPushButton("Re-run on this route")
        self.rerun_button.setObjectName("rerunRoute")
        self.rerun_button.setEnabled(False)
        self.rerun_button.clicked.connect(self._rerun)
        self.error = QLabel()
        self.error.setStyleSheet("color: #b00020;")
        self.error.setVisible(False)
        form = QFormLayout()
        form.addRow("Template", self.template)
        form.addRow("Type contains", self.obs_type)
        form.addRow("Findings", seq_row)
        form.addRow("Keyword", self.keyword)
        form.addRow("Workflow", self.workflow)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addLayout(form)
        layout.addWidget(self.error)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.other_button)
        buttons.addWidget(self.rerun_button)
        layout.addLayout(buttons)

    def clear(self, text: str = "Ask a question to see how it is answered.") -> None:
        """Forget the shown route (its answer is gone): nothing to re-run, and no filters left.

        The template and filters go back to their defaults too: after another KB opened, the
        previous KB's type or keyword filter left in the fields would quietly narrow the next
        re-run, on a KB that may have no such type.
        """
        self.summary.setText(html.escape(text))
        self.summary.setToolTip("")
        self.template.setCurrentIndex(0)
        self.obs_type.clear()
        self.keyword.clear()
        if self.workflow.count() != len(self._kb_workflows) + 1:  # a router's loose name was added
            self.set_workflows(self._kb_workflows)
        self.workflow.setCurrentIndex(0)
        self.seq_min.setValue(-1)
        self.seq_max.setValue(-1)
        self.error.setVisible(False)
        self.rerun_button.setEnabled(False)
        self._shown_route = None
        self._other_route = None
        self.other_button.setVisible(False)

    def set_workflows(self, names: list[str]) -> None:
        """Offer the open KB's workflows (:func:`~kmds_desktop.app.ask.workflow_choices`) and "any";
        the choice goes back to "any" (another KB's workflow would narrow a re-run to nothing)."""
        self._kb_workflows = list(names)
        self.workflow.clear()
        self.workflow.addItem(ANY_WORKFLOW, None)
        for name in names:
            self.workflow.addItem(name, name)

    def _show_workflow(self, name: str | None) -> None:
        """Select ``name`` (None: "any"); a router's loose name ("Penguin") not in the list is added,
        so the field shows the filter that ran and a re-run keeps it (until the next question)."""
        if not name:
            self.workflow.setCurrentIndex(0)
            return
        idx = self.workflow.findData(name)
        if idx < 0:
            self.workflow.addItem(name, name)
            idx = self.workflow.count() - 1
        self.workflow.setCurrentIndex(idx)

    @staticmethod
    def _seq_box() -> QSpinBox:
        box = QSpinBox()
        box.setRange(-1, 1_000_000)
        box.setSpecialValueText("—")  # -1: no bound
        box.setValue(-1)
        return box

    def show_result(self, result: Any, answer: str | None = None) -> None:
        """Show the route ``result`` ran and who answered; ``answer`` says instead how the answer
        stands when it has not been written (yet): while it is written, or after Cancel. The
        result of a running answer still holds the default synthesis ("offline"): shown as is, it
        claimed an offline answer that was never given."""
        route = result.route
        lines = []
        intent = INTENT_LABELS.get(result.intent_class, result.intent_class)
        lines.append(
            f"<b>Template:</b> {html.escape(intent)} <code>{html.escape(result.intent_class)}</code>"
        )
        filters = route.describe_filters() if route is not None else ""
        lines.append(f"<b>Filters:</b> {html.escape(filters) if filters else 'none'}")
        explained = _without_fallback(result.route_explanation or "") if result.fallback_reason \
            else result.route_explanation
        if explained:
            lines.append(f"<b>Why:</b> {html.escape(explained)}")
        for note in getattr(result, "route_notes", None) or []:
            lines.append(f"<span style='color:#9a5b00'><b>Guard:</b> {html.escape(note)}</span>")
        if result.fallback_reason:
            proposed = result.proposed_route
            was = f" (the router chose {html.escape(proposed.intent_class)})" if proposed is not None else ""
            # a failing LLM's message is on the line under the answer: said once, not here again
            why = ("the LLM did not answer (the line under the answer says why)"
                   if result.fallback_code == "llm_error" else result.fallback_reason)
            lines.append(
                f"<span style='color:#9a5b00'><b>Fell back to {fallback_search(result)}</b>{was}: "
                f"{html.escape(why)}</span>"
            )
        backend = html.escape(str(result.backend))
        synth = html.escape(answer if answer is not None else str(getattr(result, "synthesis", "")))
        # why the model wrote no answer is on the line under the answer: said once, not here again
        failed = " (the line under the answer says why)" if answer is None and getattr(
            result, "synthesis_error", None) and result.fallback_code != "llm_error" else ""
        lines.append(f"<b>Backend:</b> {backend} · answer: {synth}{failed}")
        self.summary.setText("<br/>".join(lines))
        # The whole route in words, also where the splitter leaves the box too little height.
        self.summary.setToolTip("\n".join(_plain(line) for line in lines))
        # The editor holds the route that ran, as the summary above it says (after a fallback, the
        # router's choice is named in the fallback line); Re-run without an edit runs it again.
        if route is not None:
            self.set_route(route)
        self.rerun_button.setEnabled(True)
        self._other_route = getattr(result, "alternative_route", None)
        self.other_button.setVisible(self._other_route is not None)
        if self._other_route is not None:
            other = self._other_route
            described = other.describe_filters() or "no filters"
            label = INTENT_LABELS.get(other.intent_class, other.intent_class)
            self.other_button.setToolTip(f"Re-run on {label} ({described}): the route the other router chose")

    def set_route(self, route: Any) -> None:
        self._shown_route = route
        idx = self.template.findData(route.intent_class)
        self.template.setCurrentIndex(max(0, idx))
        f = route.filters
        self.obs_type.setText(f.obs_type_filter or "")
        self.keyword.setText(f.keyword or "")
        self._show_workflow(f.workflow)
        self.seq_min.setValue(-1 if f.finding_seq_min is None else f.finding_seq_min)
        self.seq_max.setValue(-1 if f.finding_seq_max is None else f.finding_seq_max)

    def route(self) -> Any:
        """The edited route (:func:`~kmds_desktop.app.ask.edited_route`; ValueError if invalid);
        a spin box at -1 is no bound."""
        low, high = self.seq_min.value(), self.seq_max.value()
        return edited_route(
            self.template.currentData(),
            obs_type=self.obs_type.text(),
            keyword=self.keyword.text(),
            finding_min=None if low < 0 else low,
            finding_max=None if high < 0 else high,
            previous=self._shown_route,
            workflow=self.workflow.currentData(),
        )

    def _use_other(self) -> None:
        if self._other_route is not None:
            self.rerun_requested.emit(self._other_route)

    def _rerun(self) -> None:
        try:
            route = self.route()
        except ValueError as exc:
            self.error.setText(str(exc))
            self.error.setVisible(True)
            return
        self.error.setVisible(False)
        self.rerun_requested.emit(route)


def _without_fallback(explanation: str) -> str:
    """The route's explanation without its "Fell back to …: <reason>." sentence: the orange fallback line
    of the Route box says that (said once). What the router said before it, and the offline router's
    own reading after it, stay."""
    for ran in ("the offline router", "semantic search"):
        head, said, tail = explanation.partition(f"Fell back to {ran}:")
        if said:
            _, own, reading = tail.partition("Offline router:")
            return " ".join(part for part in (head.strip(), (own + reading).strip()) if part)
    return explanation
