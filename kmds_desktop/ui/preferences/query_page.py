"""Preferences' Query generation page: which models propose queries, how many, and their limits."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QWidget,
)

from kmds_desktop.app.preferences import model_installed, model_list_label
from kmds_desktop.app.presentation import Settings
from kmds_desktop.ui.preferences.form import OwnEnterLineEdit, PreferencesPage, hint_label


class QueryPage(PreferencesPage):
    """The ``query_generation`` section of the settings, with the list of models that propose queries.

    The models a server has are not this page's to ask for: :meth:`mark_installed` is given them
    (the dialog connects it to the LLM page's "List models" answer), and a model added by hand is
    then marked installed or not by the same rule.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        #: The models the Ollama server listed last (empty: not asked yet).
        self.available_models: list[str] = []
        self.qg_multi = QCheckBox("Ask several models for queries")
        self.form.addRow("", self.qg_multi)
        self.qg_models = QListWidget()
        self.qg_models.setMaximumHeight(120)
        self.add_row("query_generation.models", "Models", self.qg_models,
                     "Ticked models propose queries, one after another. 'builtin:keywords' needs no LLM.")
        self.qg_models.setObjectName("queryModels")
        self.qg_models.itemSelectionChanged.connect(self._update_remove_button)
        self.qg_models.installEventFilter(self)  # the Delete key removes the selected models
        self.qg_add = OwnEnterLineEdit()
        self.qg_add.setObjectName("addModel")
        self.qg_add.setPlaceholderText("add a model name and press Enter")
        self.qg_add.returnPressed.connect(self._add_typed_model)
        self.qg_remove = QPushButton("Remove selected")
        self.qg_remove.setObjectName("removeModel")
        self.qg_remove.setAutoDefault(False)
        self.qg_remove.clicked.connect(self._remove_selected_models)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.qg_add, 1)
        row.addWidget(self.qg_remove)
        holder = QWidget()
        holder.setLayout(row)
        self.form.addRow("", holder)
        self._update_remove_button()
        self.qg_per_model = QLineEdit()
        self.add_row(
            "query_generation.queries_per_model", "Queries per model", self.qg_per_model,
            "1 to 3 (precise, medium, broad); without 'Ask several models' the first model writes them all",
        )
        # A short box and a wrapped hint: the whole sentence as the box's text (775 px) was cut at
        # the dialog's edge.
        self.qg_neighbours = QCheckBox("Add embedding neighbours to builtin:keywords")
        self.qg_neighbours.setObjectName("builtinNeighbours")
        self.qg_neighbours.setToolTip("Off: the built-in generator writes its queries without loading the "
                                      "embedding model (abbreviations, spellings and feedback words only).")
        self.form.addRow("", self.qg_neighbours)
        self.form.addRow("", hint_label("each concept's neighbours in the embedding model's space "
                                        "(\"pulmonary function\" for \"lung function\")",
                                        "hint:builtinNeighbours"))
        self.qg_verbatim = QLineEdit()
        self.qg_verbatim.setObjectName("verbatimModels")
        self.add_row(
            "query_generation.verbatim_query_models", "Models writing their own query", self.qg_verbatim,
            "comma-separated; every other model names the question's concepts and the app writes the "
            "queries from them",
        )
        self.qg_temperature = QLineEdit()
        self.add_row("query_generation.temperature", "Temperature", self.qg_temperature)
        self.qg_host = QLineEdit()
        self.add_row("query_generation.ollama_host", "Ollama host", self.qg_host)
        self.qg_openai = QLineEdit()
        self.add_row("query_generation.openai_base_url", "OpenAI-compatible server", self.qg_openai,
                     "answers the models written openai:NAME")
        self.qg_timeout = QLineEdit()
        self.qg_timeout.setObjectName("queryTimeout")
        self.add_row(
            "query_generation.timeout_s", "Time limit per attempt (s)", self.qg_timeout,
            "A model that has not answered one attempt by then is skipped for this round; "
            "generation goes on with the next model",
        )

    def load(self, settings: Settings) -> None:
        qg = settings.query_generation
        self.qg_multi.setChecked(qg.multi_model_enabled)
        self.qg_models.clear()
        for name in qg.models:
            self._add_model_item(name, True)
        self.qg_per_model.setText(str(qg.queries_per_model))
        self.qg_neighbours.setChecked(qg.builtin_embedding_variants)
        self.qg_verbatim.setText(", ".join(qg.verbatim_query_models))
        self.qg_temperature.setText(str(qg.temperature))
        self.qg_host.setText(qg.ollama_host)
        self.qg_openai.setText(qg.openai_base_url)
        self.qg_timeout.setText(str(qg.timeout_s))
        self._update_remove_button()

    def apply(self, data: dict[str, Any]) -> None:
        data["query_generation"].update(
            {
                "multi_model_enabled": self.qg_multi.isChecked(),
                "models": self.ticked_models(),
                "queries_per_model": self.qg_per_model.text().strip(),
                "builtin_embedding_variants": self.qg_neighbours.isChecked(),
                "verbatim_query_models": [m.strip() for m in self.qg_verbatim.text().split(",") if m.strip()],
                "temperature": self.qg_temperature.text().strip(),
                "ollama_host": self.qg_host.text().strip(),
                "openai_base_url": self.qg_openai.text().strip(),
                "timeout_s": self.qg_timeout.text().strip(),
            }
        )

    def ticked_models(self) -> list[str]:
        """The models ticked in the list, in its order (the ones that will propose queries)."""
        return [
            self.qg_models.item(i).data(Qt.ItemDataRole.UserRole)
            for i in range(self.qg_models.count())
            if self.qg_models.item(i).checkState() == Qt.CheckState.Checked
        ]

    def mark_installed(self, models: list[str]) -> None:
        """The server listed ``models``: mark each listed model installed or not (the app's rule),
        and list the server's others, unticked."""
        self.available_models = list(models)
        for i in range(self.qg_models.count()):
            item = self.qg_models.item(i)
            item.setText(model_list_label(item.data(Qt.ItemDataRole.UserRole), models))
        for name in models:
            self._add_model_item(name, False, True)

    def _add_model_item(self, name: str, checked: bool, available: bool | None = None) -> None:
        for i in range(self.qg_models.count()):
            item = self.qg_models.item(i)
            if item.data(Qt.ItemDataRole.UserRole) == name:
                if available is not None:
                    item.setText(f"{name}  ✓ installed" if available else name)
                return
        text = f"{name}  ✓ installed" if available else name
        item = QListWidgetItem(text)
        item.setData(Qt.ItemDataRole.UserRole, name)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
        self.qg_models.addItem(item)

    def _add_typed_model(self) -> None:
        name = self.qg_add.text().strip()
        if name:
            self._add_model_item(name, True, model_installed(self.available_models, name) or None)
            self.qg_add.clear()

    def _remove_selected_models(self) -> None:
        """Remove the selected models from the list (Delete key or the button); saved with Save."""
        for item in self.qg_models.selectedItems():
            self.qg_models.takeItem(self.qg_models.row(item))
        self._update_remove_button()

    def _update_remove_button(self) -> None:
        self.qg_remove.setEnabled(bool(self.qg_models.selectedItems()))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        """Delete or Backspace in the model list removes the selected models."""
        if (
            watched is self.qg_models
            and event.type() == QEvent.Type.KeyPress
            and event.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace)  # type: ignore[attr-defined]
            and self.qg_models.selectedItems()
        ):
            self._remove_selected_models()
            return True
        return super().eventFilter(watched, event)
