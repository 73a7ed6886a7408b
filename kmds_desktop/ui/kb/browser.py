"""The KB browser panel: tree of workflows -> categories -> observations, a filter box, details, edits.

Edits go straight to the open :class:`~kmds_desktop.kb.KnowledgeBase`'s edit methods (in memory, so
they are instant and safe on the GUI thread); saving and re-indexing are the main window's jobs,
triggered by :attr:`KBBrowser.kb_edited`. Dialogs open with ``open()`` (window-modal but not a
nested event loop), so the rest of the app keeps running while one is up.
"""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import QItemSelectionModel, QModelIndex, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QLineEdit,
    QMenu,
    QMessageBox,
    QSplitter,
    QTextBrowser,
    QToolButton,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.app.evidence_links import observation_evidence
from kmds_desktop.app.presentation import plural
from kmds_desktop.app.workspace import new_observation_defaults
from kmds_desktop.app.workspace_session import KB_OPENED, WorkspaceSession
from kmds_desktop.ui.ask.markdown_render import to_html
from kmds_desktop.ui.kb.observation_editor import ObservationDialog, WorkflowDialog
from kmds_desktop.ui.kb.tree_model import CATEGORY_LABELS, KBTreeModel, KindRole

FILTER_DEBOUNCE_MS = 250


def evidence_html(links: list[Any]) -> str:
    """The observation's evidence links: relation, the paper (a doi.org link), page(s) and quote."""
    if not links:
        return ""
    items = "".join(
        f"<li><b>{html.escape(link.relation)}</b> <a href='https://doi.org/{html.escape(link.doi)}'>"
        f"{html.escape(link.title or link.doi)}</a>{', ' + html.escape(link.page_text) if link.pages else ''}"
        + (f"<br/><i>\u201c{html.escape(link.quote)}\u201d</i>" if link.quote else "") + "</li>"
        for link in links)
    return f"<hr/><h4>Evidence</h4><ul>{items}</ul>"


def observation_html(obs: Any, evidence: list[Any] | None = None) -> str:
    """The detail view of one observation (finding rendered from Markdown), then its evidence links."""
    rows = [
        ("Category", CATEGORY_LABELS.get(obs.category, obs.category)),
        ("Type", obs.obs_type),
        ("Sequence", "—" if obs.finding_seq is None else str(obs.finding_seq)),
        ("Intent", obs.intent or "—"),
        ("Workflows", ", ".join(obs.workflows) if obs.workflows else "(not linked to a workflow)"),
        ("IRI", obs.iri),
    ]
    table = "".join(
        f"<tr><td style='color:#555;padding-right:8px'>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>"
        for k, v in rows
    )
    finding = to_html(obs.finding or "")
    head = f"<h3>{html.escape(obs.name)}</h3><table>{table}</table><hr/>"
    return f"{head}{finding}{evidence_html(evidence or [])}"


def workflow_html(wf: Any, n_observations: int) -> str:
    deps = ", ".join(wf.depends_on) if wf.depends_on else "—"
    desc = to_html(wf.description or "*No description.*")
    return (
        f"<h3>{html.escape(wf.name)}</h3><p>{html.escape(wf.kind)} · {plural(n_observations, 'observation')}"
        f" · depends on: {html.escape(deps)}</p><hr/>{desc}"
    )


class KBBrowser(QWidget):
    """Left panel of the main window."""

    observation_selected = Signal(str)  # IRI ("" when the selection is not an observation)
    kb_edited = Signal(str)  # what changed, for the status line ("added observation ...")
    edit_failed = Signal(str)

    def __init__(self, parent: QWidget | None = None, *, session: WorkspaceSession | None = None) -> None:
        super().__init__(parent)
        self.model = KBTreeModel(self)
        if session is not None:  # the window's: shows each KB the session opens (else set_kb)
            unsubscribe = session.subscribe(
                lambda change: self.set_kb(session.kb) if change.kind == KB_OPENED else None)
            self.destroyed.connect(lambda _obj=None: unsubscribe())
        self.active_dialog: QDialog | QMessageBox | None = None

        self.filter_edit = QLineEdit()
        self.filter_edit.setObjectName("kbFilter")
        self.filter_edit.setPlaceholderText("Filter findings, types, intents…")
        self.filter_edit.setClearButtonEnabled(True)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(FILTER_DEBOUNCE_MS)
        self._debounce.timeout.connect(self._apply_filter)
        self.filter_edit.textChanged.connect(lambda _t: self._debounce.start())

        self.tree = QTreeView()
        self.tree.setObjectName("kbTree")
        self.tree.setModel(self.model)
        self.tree.setHeaderHidden(True)
        self.tree.setUniformRowHeights(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._context_menu)
        self.tree.selectionModel().currentChanged.connect(self._on_current_changed)
        self.tree.doubleClicked.connect(lambda idx: self.edit_observation() if self._obs_at(idx) else None)

        self.details = QTextBrowser()
        self.details.setObjectName("kbDetails")
        self.details.setOpenExternalLinks(True)
        self.details.setPlaceholderText("Select an observation to see its details.")

        buttons = QHBoxLayout()
        self.add_button = self._tool("Add", "Add an observation (Ctrl+N)", self.add_observation)
        self.edit_button = self._tool("Edit", "Edit the selected observation or workflow", self.edit_selected)
        self.delete_button = self._tool("Delete", "Delete the selected observation", self.delete_observation)
        self.workflow_button = self._tool("Workflow…", "Add a workflow", self.add_workflow)
        for b in (self.add_button, self.edit_button, self.delete_button, self.workflow_button):
            buttons.addWidget(b)
        buttons.addStretch(1)

        split = QSplitter(Qt.Orientation.Vertical)
        split.setObjectName("kbBrowserSplit")
        split.addWidget(self.tree)
        split.addWidget(self.details)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.filter_edit)
        layout.addLayout(buttons)
        layout.addWidget(split, 1)
        self._update_buttons()

    def _tool(self, text: str, tip: str, slot: Any) -> QToolButton:
        button = QToolButton()
        button.setText(text)
        button.setToolTip(tip)
        button.clicked.connect(lambda: slot())
        return button

    # -- content --
    @property
    def kb(self) -> Any:
        return self.model.kb

    def set_kb(self, kb: Any) -> None:
        self.model.set_kb(kb)
        self.details.clear()
        self._expand_default()
        self._update_buttons()

    def refresh(self, select_iri: str | None = None) -> None:
        """Rebuild the tree after an edit, keeping (or moving) the selection."""
        keep = select_iri or self.current_iri()
        expanded = self._expanded_keys()
        self.model.refresh()
        self._restore_expanded(expanded)
        if keep and not self.select_observation(keep, clear_filter=False):
            self.details.clear()
        self._update_buttons()

    def set_filter_now(self, text: str) -> None:
        """Apply a filter without waiting for the debounce (tests, programmatic use)."""
        self.filter_edit.setText(text)
        self._debounce.stop()
        self._apply_filter()

    def _apply_filter(self) -> None:
        keep = self.current_iri()
        self.model.set_filter(self.filter_edit.text())
        if self.model.filter_text:
            self.tree.expandAll()
        else:
            self._expand_default()
        # The model was reset, so the tree has no current item: re-select the observation shown, or,
        # when the filter hides it, clear its details (they would describe a record not in the tree).
        if not (keep and self.select_observation(keep, clear_filter=False)):
            self.details.clear()
            self.observation_selected.emit("")
        self._update_buttons()

    def _expand_default(self) -> None:
        """Expand workflows and categories (small KBs) or just workflows (large ones)."""
        if self.model.visible_observation_count() <= 200:
            self.tree.expandAll()
        else:
            self.tree.expandToDepth(0)

    def _expanded_keys(self) -> set[tuple[str, str]]:
        out: set[tuple[str, str]] = set()
        for row in range(self.model.rowCount()):
            top = self.model.index(row, 0)
            if self.tree.isExpanded(top):
                out.add((top.data(KindRole), self.model.node(top).key))
            for sub in range(self.model.rowCount(top)):
                idx = self.model.index(sub, 0, top)
                if self.tree.isExpanded(idx):
                    out.add((self.model.node(top).key, self.model.node(idx).key))
        return out

    def _restore_expanded(self, keys: set[tuple[str, str]]) -> None:
        for row in range(self.model.rowCount()):
            top = self.model.index(row, 0)
            top_key = self.model.node(top).key
            self.tree.setExpanded(top, (top.data(KindRole), top_key) in keys or not keys)
            for sub in range(self.model.rowCount(top)):
                idx = self.model.index(sub, 0, top)
                self.tree.setExpanded(idx, (top_key, self.model.node(idx).key) in keys or not keys)

    # -- selection --
    def _obs_at(self, index: QModelIndex) -> Any:
        return self.model.observation_at(index)

    def current_iri(self) -> str:
        obs = self._obs_at(self.tree.currentIndex())
        return obs.iri if obs is not None else ""

    def current_observation(self) -> Any:
        return self._obs_at(self.tree.currentIndex())

    def select_observation(self, iri: str, *, clear_filter: bool = True) -> bool:
        """Select and reveal observation ``iri`` (clearing a filter that hides it); False if unknown."""
        index = self.model.index_for_iri(iri)
        if not index.isValid() and clear_filter and self.model.filter_text:
            self.filter_edit.blockSignals(True)
            self.filter_edit.clear()
            self.filter_edit.blockSignals(False)
            self._debounce.stop()
            self.model.set_filter("")
            self._expand_default()
            index = self.model.index_for_iri(iri)
        if not index.isValid():
            return False
        self.tree.expand(index.parent())
        self.tree.selectionModel().setCurrentIndex(index, QItemSelectionModel.SelectionFlag.ClearAndSelect)
        self.tree.scrollTo(index)
        return True

    def _on_current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        obs = self._obs_at(current)
        if obs is not None:
            evidence = observation_evidence(self.kb, obs.iri) if self.kb is not None else []
            self.details.setHtml(observation_html(obs, evidence))
            self.observation_selected.emit(obs.iri)
        else:
            wf = self.model.workflow_at(current)
            node = self.model.node(current)
            if wf is not None and node is not None and node.kind == "workflow":
                self.details.setHtml(workflow_html(wf, node.count))
            elif node is not None:
                count = plural(node.count, "observation")
                self.details.setHtml(f"<h3>{html.escape(node.label)}</h3><p>{count}</p>")
            else:
                self.details.clear()
            self.observation_selected.emit("")
        self._update_buttons()

    def _update_buttons(self) -> None:
        has_kb = self.kb is not None
        index = self.tree.currentIndex()
        node = self.model.node(index)
        self.add_button.setEnabled(has_kb)
        self.workflow_button.setEnabled(has_kb)
        self.delete_button.setEnabled(self._obs_at(index) is not None)
        self.edit_button.setEnabled(
            node is not None and node.kind in ("observation", "workflow") and node.obs is not None
        )

    def _context_menu(self, pos: Any) -> None:
        if self.kb is None:
            return
        index = self.tree.indexAt(pos)
        menu = QMenu(self)
        menu.addAction("Add observation…", self.add_observation)
        if self._obs_at(index) is not None:
            menu.addAction("Edit observation…", self.edit_observation)
            menu.addAction("Delete observation", self.delete_observation)
        if self.model.workflow_at(index) is not None:
            menu.addAction("Edit workflow…", self.edit_workflow)
        menu.addAction("Add workflow…", self.add_workflow)
        menu.popup(self.tree.viewport().mapToGlobal(pos))

    # -- edits --
    def _workflow_names(self) -> list[str]:
        return [wf.name for wf in self.kb.workflows] if self.kb is not None else []

    def _show_dialog(self, dialog: QDialog | QMessageBox) -> None:
        self.active_dialog = dialog
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        dialog.finished.connect(lambda _r: setattr(self, "active_dialog", None))
        dialog.open()

    def edit_selected(self) -> None:
        node = self.model.node(self.tree.currentIndex())
        if node is not None and node.kind == "workflow":
            self.edit_workflow()
        else:
            self.edit_observation()

    def add_observation(self) -> None:
        if self.kb is None:
            return
        category, workflow = new_observation_defaults(
            self.model.selection_path(self.tree.currentIndex()), self._workflow_names()
        )

        def apply(values: dict[str, Any]) -> Any:
            return self.kb.add_observation(
                values["category"],
                values["finding"],
                obs_type=values["obs_type"],
                finding_seq=values["finding_seq"],
                intent=values["intent"],
                workflows=values["workflows"],
            )

        dialog = ObservationDialog(
            self._workflow_names(),
            default_workflow=workflow,
            default_category=category,
            apply=apply,
            parent=self,
        )
        dialog.accepted.connect(lambda: self._after_edit(f"added {dialog.applied.name}", dialog.applied.iri))
        self._show_dialog(dialog)

    def edit_observation(self, iri: str | None = None) -> None:
        obs = self.kb.observation(iri) if (iri and self.kb is not None) else self.current_observation()
        if obs is None:
            return

        def apply(values: dict[str, Any]) -> Any:
            return self.kb.update_observation(obs.iri, **values)

        dialog = ObservationDialog(self._workflow_names(), obs, apply=apply, parent=self)
        dialog.accepted.connect(lambda: self._after_edit(f"edited {obs.name}", obs.iri))
        self._show_dialog(dialog)

    def delete_observation(self, iri: str | None = None) -> None:
        obs = self.kb.observation(iri) if (iri and self.kb is not None) else self.current_observation()
        if obs is None:
            return
        box = QMessageBox(
            QMessageBox.Icon.Question,
            "Delete observation",
            f"Delete {obs.name}?\n\n{(obs.finding or '')[:200]}",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            self,
        )
        box.setDefaultButton(QMessageBox.StandardButton.No)

        def done(_result: int) -> None:
            if box.standardButton(box.clickedButton()) == QMessageBox.StandardButton.Yes:
                try:
                    self.kb.delete_observation(obs.iri)
                except Exception as exc:  # noqa: BLE001 - shown in the window
                    self.edit_failed.emit(str(exc))
                    return
                self._after_edit(f"deleted {obs.name}", None)

        box.finished.connect(done)
        self._show_dialog(box)

    def add_workflow(self) -> None:
        if self.kb is None:
            return

        def apply(values: dict[str, Any]) -> Any:
            return self.kb.add_workflow(
                values["name"], values["kind"], values["description"], values["depends_on"]
            )

        dialog = WorkflowDialog(self._workflow_names(), apply=apply, parent=self)
        dialog.accepted.connect(lambda: self._after_edit(f"added workflow {dialog.applied.name}", None))
        self._show_dialog(dialog)

    def edit_workflow(self, name: str | None = None) -> None:
        if self.kb is None:
            return
        wf = self.kb.workflow(name) if name else self.model.workflow_at(self.tree.currentIndex())
        if wf is None:
            return

        def apply(values: dict[str, Any]) -> Any:
            return self.kb.update_workflow(wf.name, **values)

        others = [n for n in self._workflow_names() if n != wf.name]
        dialog = WorkflowDialog(others, wf, apply=apply, parent=self)
        dialog.accepted.connect(lambda: self._after_edit(f"edited workflow {dialog.applied.name}", None))
        self._show_dialog(dialog)

    def _after_edit(self, what: str, select_iri: str | None) -> None:
        self.refresh(select_iri)
        self.kb_edited.emit(what)
