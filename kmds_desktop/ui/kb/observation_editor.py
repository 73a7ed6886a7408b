"""Dialogs that add or edit an observation or a workflow of the open knowledge base.

The dialogs only collect values; the KB core's edit methods validate them. A value the core rejects
is shown inline in the dialog (which stays open), so nothing the user typed is lost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.app.presentation import (
    CATEGORIES,
    INTENTS,
    OBSERVATION_TYPES,
    WORKFLOW_KINDS,
    KnowledgeBaseError,
)
from kmds_desktop.ui.kb.tree_model import CATEGORY_LABELS

_OK = QDialogButtonBox.StandardButton.Ok
_CANCEL = QDialogButtonBox.StandardButton.Cancel

#: Applies the dialog's values to the KB; raises KnowledgeBaseError/ValueError to keep it open.
ApplyFn = Callable[[dict[str, Any]], Any]


def _checkable_list(names: Any, max_height: int) -> QListWidget:
    """A short list of names with a tick box each, all unticked (workflows, dependencies)."""
    widget = QListWidget()
    widget.setMaximumHeight(max_height)
    for name in names:
        item = QListWidgetItem(name)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(Qt.CheckState.Unchecked)
        widget.addItem(item)
    return widget


def _error_label() -> QLabel:
    label = QLabel()
    label.setObjectName("inlineError")
    label.setStyleSheet("color: #b00020;")
    label.setWordWrap(True)
    label.setVisible(False)
    return label


def _ticked(widget: QListWidget) -> list[str]:
    """The names ticked in a :func:`_checkable_list`, in list order."""
    return [widget.item(i).text() for i in range(widget.count())
            if widget.item(i).checkState() == Qt.CheckState.Checked]


def _tick(widget: QListWidget, names: Any) -> None:
    """Tick the names of a :func:`_checkable_list` that are in ``names``."""
    for i in range(widget.count()):
        item = widget.item(i)
        if item.text() in names:
            item.setCheckState(Qt.CheckState.Checked)


def _select_or_add(combo: QComboBox, text: str) -> None:
    """Select ``text`` in ``combo``, adding it first when the list lacks it (a KB's own value is kept)."""
    idx = combo.findText(text)
    if idx < 0:
        combo.addItem(text)
        idx = combo.count() - 1
    combo.setCurrentIndex(idx)


class _EditDialog(QDialog):
    """What the observation and the workflow dialogs share: labelled rows, the inline error, OK and
    Cancel, and OK applying the values (the dialog stays open with the KB's reason when it refuses)."""

    def __init__(self, title: str, min_width: int, rows: list[tuple[str, QWidget]],
                 apply: ApplyFn | None, parent: QWidget | None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setMinimumWidth(min_width)
        self._apply = apply
        self.applied: Any = None
        form = QFormLayout()
        for label, widget in rows:
            form.addRow(label, widget)
        self.error = _error_label()
        self.buttons = QDialogButtonBox(_OK | _CANCEL)
        self.buttons.accepted.connect(self._on_ok)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)

    def values(self) -> dict[str, Any]:
        raise NotImplementedError

    def show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.setVisible(bool(text))

    def _on_ok(self) -> None:
        values = self.values()  # the KB checks them (an empty finding, a bad name): one rule
        if self._apply is not None:
            try:
                self.applied = self._apply(values)
            except (KnowledgeBaseError, ValueError) as exc:
                self.show_error(getattr(exc, "problem", None) or str(exc))
                return
        self.accept()


class ObservationDialog(_EditDialog):
    """Category, type, finding, sequence, intent and workflows of one observation."""

    def __init__(
        self,
        workflows: list[str],
        observation: Any = None,
        *,
        default_workflow: str | None = None,
        default_category: str | None = None,
        apply: ApplyFn | None = None,
        parent: QWidget | None = None,
    ) -> None:
        self.category = QComboBox()
        for cat in CATEGORIES:
            self.category.addItem(CATEGORY_LABELS.get(cat, cat), cat)
        self.obs_type = QComboBox()
        self.obs_type.setEditable(False)
        self.finding = QPlainTextEdit()
        self.finding.setPlaceholderText("What was observed (Markdown allowed)")
        self.sequence = QSpinBox()
        self.sequence.setRange(0, 1_000_000)
        self.sequence.setSpecialValueText("(none)")  # 0 shows as "(none)": no sequence number
        self.intent = QComboBox()
        self.intent.setEditable(True)
        self.intent.addItem("")
        self.intent.addItems(list(INTENTS))
        self.workflows = _checkable_list(workflows, max_height=90)
        super().__init__("Edit observation" if observation is not None else "Add observation", 520, [
            ("Category", self.category), ("Type", self.obs_type), ("Finding", self.finding),
            ("Sequence", self.sequence), ("Intent", self.intent), ("Workflows", self.workflows),
        ], apply, parent)
        self.category.currentIndexChanged.connect(self._fill_types)

        if observation is not None:
            self.category.setCurrentIndex(max(0, self.category.findData(observation.category)))
            self._fill_types()
            _select_or_add(self.obs_type, observation.obs_type)
            self.finding.setPlainText(observation.finding or "")
            self.sequence.setValue(observation.finding_seq or 0)
            self.intent.setCurrentText(observation.intent or "")
            checked = set(observation.workflows)
        else:
            if default_category:
                self.category.setCurrentIndex(max(0, self.category.findData(default_category)))
            self._fill_types()
            checked = {default_workflow} if default_workflow else set(workflows[:1])
        _tick(self.workflows, checked)

    def _fill_types(self) -> None:
        cat = self.category.currentData()
        current = self.obs_type.currentText()
        self.obs_type.clear()
        self.obs_type.addItems(list(OBSERVATION_TYPES.get(cat, ())))
        idx = self.obs_type.findText(current)
        if idx >= 0:
            self.obs_type.setCurrentIndex(idx)

    def values(self) -> dict[str, Any]:
        seq = self.sequence.value()
        return {
            "category": self.category.currentData(),
            "obs_type": self.obs_type.currentText() or None,
            "finding": self.finding.toPlainText(),
            "finding_seq": seq if seq > 0 else None,
            "intent": self.intent.currentText().strip() or None,
            "workflows": _ticked(self.workflows),
        }


class WorkflowDialog(_EditDialog):
    """Name, kind, description and dependencies of one workflow."""

    def __init__(
        self,
        other_workflows: list[str],
        workflow: Any = None,
        *,
        apply: ApplyFn | None = None,
        parent: QWidget | None = None,
    ) -> None:
        self.name = QLineEdit()
        self.kind = QComboBox()
        self.kind.addItems(list(WORKFLOW_KINDS))
        self.description = QPlainTextEdit()
        self.depends_on = _checkable_list(other_workflows, max_height=80)
        super().__init__("Edit workflow" if workflow is not None else "Add workflow", 480, [
            ("Name", self.name), ("Kind", self.kind), ("Description", self.description),
            ("Depends on", self.depends_on),
        ], apply, parent)
        if workflow is not None:
            self.name.setText(workflow.name)
            _select_or_add(self.kind, workflow.kind)
            self.description.setPlainText(workflow.description or "")
            _tick(self.depends_on, workflow.depends_on)

    def values(self) -> dict[str, Any]:
        return {
            "name": self.name.text().strip(),
            "kind": self.kind.currentText(),
            "description": self.description.toPlainText().strip() or None,
            "depends_on": _ticked(self.depends_on),
        }
