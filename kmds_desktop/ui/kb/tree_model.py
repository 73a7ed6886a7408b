"""The KB browser's tree: workflow -> category -> observation, with counts, and a text filter.

Observations linked to no workflow get their own top-level node ("Unlinked observations") instead of
disappearing, and an observation linked to two workflows appears under both. Filtering rebuilds the
(small) tree rather than hiding rows through a proxy, so every node's count is the count of what the
user sees.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QPersistentModelIndex, Qt

from kmds_desktop.app.ask import one_line
from kmds_desktop.app.workspace import observation_matches

CATEGORY_LABELS = {
    "exploratory": "Exploratory",
    "data_representation": "Data representation",
    "modelling_choice": "Modelling choice",
    "model_selection": "Model selection",
    "experimental": "Experimental",
}
CATEGORY_ORDER = list(CATEGORY_LABELS)
UNLINKED_LABEL = "Unlinked observations"

#: Custom roles.
KindRole = Qt.ItemDataRole.UserRole + 1  # "workflow" | "category" | "unlinked" | "observation"
IriRole = Qt.ItemDataRole.UserRole + 2  # observation or workflow IRI
CountRole = Qt.ItemDataRole.UserRole + 3  # observations under the node
NameRole = Qt.ItemDataRole.UserRole + 4  # workflow name / category key

_Index = QModelIndex | QPersistentModelIndex


def _items(container: Any) -> list[Any]:
    """``kb.workflows`` / ``kb.observations`` as a list, whether the core gives a list or a dict."""
    if container is None:
        return []
    if isinstance(container, dict):
        return list(container.values())
    return list(container)


class _Node:
    __slots__ = ("kind", "label", "key", "obs", "parent", "children", "count", "tooltip", "position")

    def __init__(self, kind: str, label: str, key: str = "", obs: Any = None,
                 parent: _Node | None = None) -> None:
        self.kind = kind
        self.label = label
        self.key = key
        self.obs = obs
        self.parent = parent
        self.children: list[_Node] = []
        self.count = 0
        self.tooltip = ""
        self.position = 0  # row under the parent, set by add()

    def add(self, child: _Node) -> None:
        child.position = len(self.children)
        self.children.append(child)

    def row(self) -> int:
        """Stored, not searched: Qt asks for the parent of every index it lays out or paints, and
        ``children.index`` made each answer linear in the siblings (hundreds of observations)."""
        return self.position


class KBTreeModel(QAbstractItemModel):
    """Read-only tree over a :class:`~kmds_desktop.kb.KnowledgeBase` (rebuilt on reset/filter)."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._kb: Any = None
        self._filter = ""
        self._root = _Node("root", "")
        self._visible_count = 0  # observations the tree shows, counted once per build

    # -- content --
    @property
    def kb(self) -> Any:
        return self._kb

    @property
    def filter_text(self) -> str:
        return self._filter

    def set_kb(self, kb: Any) -> None:
        self.beginResetModel()
        self._kb = kb
        self._root = self._build()
        self.endResetModel()

    def set_filter(self, text: str) -> None:
        text = text.strip()
        if text == self._filter:
            return
        self.beginResetModel()
        self._filter = text
        self._root = self._build()
        self.endResetModel()

    def refresh(self) -> None:
        """Rebuild after the KB was edited."""
        self.set_kb(self._kb)

    def visible_observation_count(self) -> int:
        """Counted when the tree is built: walking every node again on the GUI thread after each
        load cost a visible share of the start-up stall on a 400-observation KB."""
        return self._visible_count

    def _build(self) -> _Node:
        root = _Node("root", "")
        kb = self._kb
        self._visible_count = 0
        if kb is None:
            return root
        observations = [o for o in _items(kb.observations) if observation_matches(o, self._filter)]
        observations.sort(key=lambda o: (o.finding_seq is None, o.finding_seq or 0, o.file_order))
        self._visible_count = len({id(o) for o in observations})
        by_workflow: dict[str, list[Any]] = {}
        unlinked: list[Any] = []
        for obs in observations:
            if not obs.workflows:
                unlinked.append(obs)
            for wf_name in obs.workflows:
                by_workflow.setdefault(wf_name, []).append(obs)
        workflows = _items(kb.workflows)
        known = {wf.name for wf in workflows}
        for wf in workflows:
            node = _Node("workflow", wf.name, key=wf.name, obs=wf, parent=root)
            node.tooltip = f"{wf.kind}\n{wf.description or ''}".strip()
            self._add_categories(node, by_workflow.get(wf.name, []))
            if node.count or not self._filter:
                root.add(node)
        for name in sorted(set(by_workflow) - known):  # link to a workflow the KB does not define
            node = _Node("workflow", name, key=name, parent=root)
            self._add_categories(node, by_workflow[name])
            root.add(node)
        if unlinked:
            node = _Node("unlinked", UNLINKED_LABEL, key="", parent=root)
            node.tooltip = "Observations that no workflow lists"
            self._add_categories(node, unlinked)
            root.add(node)
        return root

    @staticmethod
    def _add_categories(parent: _Node, observations: Iterable[Any]) -> None:
        by_cat: dict[str, list[Any]] = {}
        for obs in observations:
            by_cat.setdefault(obs.category, []).append(obs)
        order = CATEGORY_ORDER + sorted(set(by_cat) - set(CATEGORY_ORDER))
        for cat in order:
            items = by_cat.get(cat)
            if not items:
                continue
            cat_node = _Node("category", CATEGORY_LABELS.get(cat, cat), key=cat, parent=parent)
            for obs in items:
                seq = f"#{obs.finding_seq} " if obs.finding_seq is not None else ""
                label = f"{seq}{one_line(obs.finding, 90) or obs.name}"
                leaf = _Node("observation", label, key=obs.iri, obs=obs, parent=cat_node)
                leaf.tooltip = f"{obs.obs_type}" + (f" — {obs.intent}" if obs.intent else "")
                leaf.count = 1
                cat_node.add(leaf)
            cat_node.count = len(items)
            parent.add(cat_node)
        parent.count = sum(c.count for c in parent.children)

    def _walk(self, node: _Node) -> Iterable[_Node]:
        for child in node.children:
            yield child
            yield from self._walk(child)

    # -- lookups --
    def node(self, index: _Index) -> _Node | None:
        if not index.isValid():
            return None
        return index.internalPointer()

    def selection_path(self, index: _Index) -> list[tuple[str, str]]:
        """The node at ``index`` and its ancestors, nearest first, as ``(kind, key)`` (the form
        :func:`kmds_desktop.app.workspace.new_observation_defaults` reads)."""
        path = []
        node = self.node(index)
        while node is not None and node.kind != "root":
            path.append((node.kind, node.key))
            node = node.parent
        return path

    def observation_at(self, index: _Index) -> Any:
        node = self.node(index)
        return node.obs if node is not None and node.kind == "observation" else None

    def workflow_at(self, index: _Index) -> Any:
        """The Workflow of a workflow node, or of the workflow above a category/observation node."""
        node = self.node(index)
        while node is not None and node.kind not in ("workflow", "unlinked"):
            node = node.parent
        return node.obs if node is not None and node.kind == "workflow" else None

    def index_for_iri(self, iri: str) -> QModelIndex:
        """The first node showing observation ``iri`` (invalid when filtered out or unknown)."""
        for node in self._walk(self._root):
            if node.kind == "observation" and node.key == iri:
                return self.createIndex(node.row(), 0, node)
        return QModelIndex()

    def index_for_workflow(self, name: str) -> QModelIndex:
        for node in self._root.children:
            if node.kind == "workflow" and node.key == name:
                return self.createIndex(node.row(), 0, node)
        return QModelIndex()

    # -- QAbstractItemModel --
    def index(self, row: int, column: int, parent: _Index = QModelIndex()) -> QModelIndex:  # noqa: B008
        if column != 0 or row < 0:
            return QModelIndex()
        parent_node = self.node(parent) if parent.isValid() else self._root
        if parent_node is None or row >= len(parent_node.children):
            return QModelIndex()
        return self.createIndex(row, 0, parent_node.children[row])

    def parent(self, index: _Index = QModelIndex()) -> QModelIndex:  # noqa: B008
        node = self.node(index)
        if node is None or node.parent is None or node.parent is self._root:
            return QModelIndex()
        return self.createIndex(node.parent.row(), 0, node.parent)

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008, N802 - Qt API
        if parent.isValid():
            if parent.column() != 0:
                return 0
            node = self.node(parent)
            return len(node.children) if node is not None else 0
        return len(self._root.children)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008, N802 - Qt API
        return 1

    def hasChildren(self, parent: _Index = QModelIndex()) -> bool:  # noqa: B008, N802 - Qt API
        return self.rowCount(parent) > 0

    def flags(self, index: _Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802 - Qt's name
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole and section == 0:
            return "Knowledge base"
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        node = self.node(index)
        if node is None:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return node.label if node.kind == "observation" else f"{node.label} ({node.count})"
        if role == Qt.ItemDataRole.ToolTipRole:
            return node.tooltip or None
        if role == KindRole:
            return node.kind
        if role == IriRole:
            return getattr(node.obs, "iri", None)
        if role == CountRole:
            return node.count
        if role == NameRole:
            return node.key
        return None
