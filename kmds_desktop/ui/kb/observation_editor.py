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


class ObservationDialog(QDialog):
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
        super().__init__(parent)
        self.setWindowTitle("Edit observation" if observation is not None else "Add observation")
        self.setMinimumWidth(520)
        self._apply = apply
        self.applied: Any = None
        form = QFormLayout()
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
        form.addRow("Category", self.category)
        form.addRow("Type", self.obs_type)
        form.addRow("Finding", self.finding)
        form.addRow("Sequence", self.sequence)
        form.addRow("Intent", self.intent)
        form.addRow("Workflows", self.workflows)
        self.error = _error_label()
        self.buttons = QDialogButtonBox(_OK | _CANCEL)
        self.buttons.accepted.connect(self._on_ok)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)
        self.category.currentIndexChanged.connect(self._fill_types)

        if observation is not None:
            self.category.setCurrentIndex(max(0, self.category.findData(observation.category)))
            self._fill_types()
            idx = self.obs_type.findText(observation.obs_type)
            if idx < 0:
                self.obs_type.addItem(observation.obs_type)
                idx = self.obs_type.count() - 1
            self.obs_type.setCurrentIndex(idx)
            self.finding.setPlainText(observation.finding or "")
            self.sequence.setValue(observation.finding_seq or 0)
            self.intent.setCurrentText(observation.intent or "")
            checked = set(observation.workflows)
        else:
            if default_category:
                self.category.setCurrentIndex(max(0, self.category.findData(default_category)))
            self._fill_types()
            checked = {default_workflow} if default_workflow else set(workflows[:1])
        for i in range(self.workflows.count()):
            item = self.workflows.item(i)
            if item.text() in checked:
                item.setCheckState(Qt.CheckState.Checked)

    def _fill_types(self) -> None:
        cat = self.category.currentData()
        current = self.obs_type.currentText()
        self.obs_type.clear()
        self.obs_type.addItems(list(OBSERVATION_TYPES.get(cat, ())))
        idx = self.obs_type.findText(current)
        if idx >= 0:
            self.obs_type.setCurrentIndex(idx)

    def values(self) -> dict[str, Any]:
        workflows = [
            self.workflows.item(i).text()
            for i in range(self.workflows.count())
            if self.workflows.item(i).checkState() == Qt.CheckState.Checked
        ]
        seq = self.sequence.value()
        return {
            "category": self.category.currentData(),
            "obs_type": self.obs_type.currentText() or None,
            "finding": self.finding.toPlainText(),
            "finding_seq": seq if seq > 0 else None,
            "intent": self.intent.currentText().strip() or None,
            "workflows": workflows,
        }

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


class WorkflowDialog(QDialog):
    """Name, kind, description and dependencies of one workflow."""

    def __init__(
        self,
        other_workflows: list[str],
        workflow: Any = None,
        *,
        apply: ApplyFn | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Edit workflow" if workflow is not None else "Add workflow")
        self.setMinimumWidth(480)
        self._apply = apply
        self.applied: Any = None
        form = QFormLayout()
        self.name = QLineEdit()
        self.kind = QComboBox()
        self.kind.addItems(list(WORKFLOW_KINDS))
        self.description = QPlainTextEdit()
        self.depends_on = _checkable_list(other_workflows, max_height=80)
        form.addRow("Name", self.name)
        form.addRow("Kind", self.kind)
        form.addRow("Description", self.description)
        form.addRow("Depends on", self.depends_on)
        self.error = _error_label()
        self.buttons = QDialogButtonBox(_OK | _CANCEL)
        self.buttons.accepted.connect(self._on_ok)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)
        if workflow is not None:
            self.name.setText(workflow.name)
            idx = self.kind.findText(workflow.kind)
            if idx < 0:
                self.kind.addItem(workflow.kind)
                idx = self.kind.count() - 1
            self.kind.setCurrentIndex(idx)
            self.description.setPlainText(workflow.description or "")
            for i in range(self.depends_on.count()):
                item = self.depends_on.item(i)
                if item.text() in workflow.depends_on:
                    item.setCheckState(Qt.CheckState.Checked)

    def values(self) -> dict[str, Any]:
        return {
            "name": self.name.text().strip(),
            "kind": self.kind.currentText(),
            "description": self.description.toPlainText().strip() or None,
            "depends_on": [
                self.depends_on.item(i).text()
                for i in range(self.depends_on.count())
                if self.depends_on.item(i).checkState() == Qt.CheckState.Checked
            ],
        }

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
