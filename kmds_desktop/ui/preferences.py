"""The Preferences dialog: LLM, query generation, literature database, retrieval and semantic index.

Values are validated by the core's settings model (:func:`kmds_desktop.config.validate_settings`)
before anything is written; each invalid value is shown in red under its field and nothing is saved
until all are valid. The Google API key goes to the OS keyring (:mod:`kmds_desktop.secrets`), never
into the settings file. Listing the models an Ollama server has is a job (network call); whether a
model is installed is decided by :mod:`kmds_desktop.app.preferences` (the same code the ask job uses).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QScrollArea,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop import secrets
from kmds_desktop.app.literature_data import EXTERNAL_OPT_IN
from kmds_desktop.app.preferences import (
    list_ollama_models,
    server_address_error,
    split_conninfo,
    validate_form,
)
from kmds_desktop.config import Settings, SettingsError, save_settings
from kmds_desktop.ui.workers import JobRunner


def _error_label() -> QLabel:
    label = QLabel()
    label.setStyleSheet("color: #b00020;")
    label.setWordWrap(True)
    label.setVisible(False)
    return label


def _scrolled(page: QWidget) -> QScrollArea:
    """``page`` in a frameless scroll area: a tab with many wrapped hints is taller than the dialog
    once errors show, and squeezed into it the hints' lines ran into the rows below them."""
    area = QScrollArea()
    area.setObjectName(page.objectName() + "Scroll")
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setWidgetResizable(True)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    area.setWidget(page)
    return area


class _OwnEnterLineEdit(QLineEdit):
    """A line edit that keeps Enter for itself (``returnPressed``): in a dialog, an Enter the line
    edit lets through presses the default button, so typing a model and pressing Enter, as the
    field's hint says, would save and close the dialog instead of adding the model."""

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt's name
        super().keyPressEvent(event)
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            event.accept()


class PreferencesDialog(QDialog):
    """Edits a copy of the settings; ``settings_saved(Settings)`` after a valid save."""

    settings_saved = Signal(object)

    def __init__(
        self,
        settings: Settings,
        jobs: JobRunner,
        *,
        settings_path: Path | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Preferences")
        self.setMinimumWidth(560)
        self.settings = settings
        self.jobs = jobs
        self.settings_path = settings_path
        self.saved: Settings | None = None
        self.field_errors: dict[str, QLabel] = {}
        self._error_forms: dict[str, QFormLayout] = {}
        self.fields: dict[str, QWidget] = {}
        self.available_models: list[str] = []

        self.tabs = QTabWidget()
        self.tabs.addTab(self._llm_tab(), "LLM")
        self.tabs.addTab(self._query_tab(), "Query generation")
        self.tabs.addTab(self._literature_tab(), "Literature database")
        self.tabs.addTab(_scrolled(self._retrieval_tab()), "Retrieval")
        self.tabs.addTab(self._index_tab(), "Semantic index")
        self.general_error = _error_label()
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)
        layout.addWidget(self.general_error)
        layout.addWidget(self.buttons)
        self._load(settings)

    # -- building --
    def _row(self, form: QFormLayout, key: str, label: str, widget: QWidget, hint: str = "") -> None:
        """Add ``widget`` under ``label``, its ``hint`` and its (hidden) error line as rows of their own.

        The three once shared one cell's box: when an error appeared the form was squeezed and the
        box gave the wrapped hint less than its height, so its second line ran under the error.
        As separate form rows each label gets its own height for the width it has.
        """
        self.fields[key] = widget
        err = _error_label()
        err.setObjectName(f"error:{key}")
        self.field_errors[key] = err
        form.addRow(label, widget)
        if hint:
            h = QLabel(hint)
            h.setObjectName(f"hint:{key}")
            h.setStyleSheet("color: #666;")
            h.setWordWrap(True)
            form.addRow("", h)
        form.addRow("", err)
        # A row with nothing to say still takes the form's spacing: it is shown with its error only.
        form.setRowVisible(err, False)
        self._error_forms[key] = form

    def _llm_tab(self) -> QWidget:
        page = QWidget()
        form = QFormLayout(page)
        self.backend = QComboBox()
        for key, label in (
            ("auto", "Automatic (Ollama, then Google, then offline)"),
            ("ollama", "Ollama"),
            ("google", "Google Gemini"),
            ("openai", "OpenAI-compatible server (LM Studio, llama.cpp, vLLM)"),
            ("offline", "Offline (no LLM)"),
        ):
            self.backend.addItem(label, key)
        self._row(form, "llm.backend", "Backend", self.backend)
        self.ollama_host = QLineEdit()
        self._row(form, "llm.ollama_host", "Ollama host", self.ollama_host, "e.g. http://127.0.0.1:11434")
        self.ollama_model = QComboBox()
        self.ollama_model.setEditable(True)
        self.refresh_models_button = QPushButton("List models")
        self.refresh_models_button.setObjectName("listModels")
        self.refresh_models_button.clicked.connect(self.refresh_models)
        row = QHBoxLayout()
        row.addWidget(self.ollama_model, 1)
        row.addWidget(self.refresh_models_button)
        holder = QWidget()
        holder.setLayout(row)
        row.setContentsMargins(0, 0, 0, 0)
        self._row(form, "llm.ollama_model", "Ollama model", holder)
        self.models_state = QLabel("")
        self.models_state.setObjectName("modelsState")
        self.models_state.setWordWrap(True)
        form.addRow("", self.models_state)
        self.google_model = QLineEdit()
        self._row(form, "llm.google_model", "Google model", self.google_model)
        self.google_key = QLineEdit()
        self.google_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.forget_key = QCheckBox("Remove the stored key")
        self._row(
            form,
            "google_key",
            "Google API key",
            self.google_key,
            "Stored in the OS keyring, never in the settings file. Leave empty to keep the current key.",
        )
        form.addRow("", self.forget_key)
        self.openai_url = QLineEdit()
        self._row(form, "llm.openai_base_url", "OpenAI-compatible server", self.openai_url,
                  "e.g. http://127.0.0.1:8080/v1")
        self.openai_model = QLineEdit()
        self._row(form, "llm.openai_model", "Its model", self.openai_model)
        self.openai_key = QLineEdit()
        self.openai_key.setEchoMode(QLineEdit.EchoMode.Password)
        self._row(form, "openai_key", "Its API key", self.openai_key,
                  "Optional (local servers need none); kept in the OS keyring. Empty keeps the current key.")
        self.temperature = QLineEdit()
        self._row(
            form,
            "llm.temperature",
            "Temperature",
            self.temperature,
            "0 to 2; low values answer more literally",
        )
        self.llm_timeout = QLineEdit()
        self._row(form, "llm.timeout_s", "Timeout (s)", self.llm_timeout)
        return page

    def _query_tab(self) -> QWidget:
        page = QWidget()
        form = QFormLayout(page)
        self.qg_multi = QCheckBox("Ask several models for queries")
        form.addRow("", self.qg_multi)
        self.qg_models = QListWidget()
        self.qg_models.setMaximumHeight(120)
        self._row(
            form,
            "query_generation.models",
            "Models",
            self.qg_models,
            "Ticked models propose queries, one after another. 'builtin:keywords' needs no LLM.",
        )
        self.qg_models.setObjectName("queryModels")
        self.qg_models.itemSelectionChanged.connect(self._update_remove_button)
        self.qg_models.installEventFilter(self)  # the Delete key removes the selected models
        self.qg_add = _OwnEnterLineEdit()
        self.qg_add.setObjectName("addModel")
        self.qg_add.setPlaceholderText("add a model name and press Enter")
        self.qg_add.returnPressed.connect(self._add_qg_model)
        self.qg_remove = QPushButton("Remove selected")
        self.qg_remove.setObjectName("removeModel")
        self.qg_remove.setAutoDefault(False)
        self.qg_remove.clicked.connect(self._remove_qg_models)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.qg_add, 1)
        row.addWidget(self.qg_remove)
        holder = QWidget()
        holder.setLayout(row)
        form.addRow("", holder)
        self._update_remove_button()
        self.qg_per_model = QLineEdit()
        self._row(
            form, "query_generation.queries_per_model", "Queries per model", self.qg_per_model,
            "1 to 3 (precise, medium, broad); without 'Ask several models' the first model writes them all",
        )
        self.qg_temperature = QLineEdit()
        self._row(form, "query_generation.temperature", "Temperature", self.qg_temperature)
        self.qg_host = QLineEdit()
        self._row(form, "query_generation.ollama_host", "Ollama host", self.qg_host)
        self.qg_openai = QLineEdit()
        self._row(form, "query_generation.openai_base_url", "OpenAI-compatible server", self.qg_openai,
                  "answers the models written openai:NAME")
        self.qg_timeout = QLineEdit()
        self.qg_timeout.setObjectName("queryTimeout")
        self._row(
            form, "query_generation.timeout_s", "Time limit per attempt (s)", self.qg_timeout,
            "A model that has not answered one attempt by then is skipped for this round; "
            "generation goes on with the next model",
        )
        return page

    def _literature_tab(self) -> QWidget:
        page = QWidget()
        form = QFormLayout(page)
        self.lit_mode = QComboBox()
        self.lit_mode.addItem("Embedded (a private PostgreSQL in the data folder)", "embedded")
        self.lit_mode.addItem("External PostgreSQL server", "external")
        self._row(form, "literature.mode", "Database", self.lit_mode)
        self.lit_host = QLineEdit()
        self._row(form, "literature.host", "Host", self.lit_host)
        self.lit_port = QLineEdit()
        self._row(form, "literature.port", "Port", self.lit_port)
        self.lit_dbname = QLineEdit()
        self._row(form, "literature.dbname", "Database name", self.lit_dbname)
        self.lit_user = QLineEdit()
        self._row(
            form,
            "literature.user",
            "User",
            self.lit_user,
            "The password is read from PGPASSWORD or the OS keyring.",
        )
        self.lit_timeout = QLineEdit()
        self._row(
            form,
            "literature.statement_timeout_ms",
            "Statement timeout (ms)",
            self.lit_timeout,
            "0 = no limit",
        )
        self.lit_dsn = QLineEdit()
        self.lit_dsn.setPlaceholderText("postgresql://user@host:5432/dbname  or  host=… dbname=… user=…")
        self._row(
            form,
            "literature.dsn",
            "Connection string",
            self.lit_dsn,
            "Optional: fills host, port, database and user. A password in it goes to the OS keyring.",
        )
        self.lit_mode.currentIndexChanged.connect(self._update_enabled)
        return page

    def _apply_dsn(self) -> tuple[str | None, str | None]:
        """Fill the external-server fields from the connection string; (error, password)."""
        text = self.lit_dsn.text().strip()
        if not text:
            return None, None
        try:
            fields, password = split_conninfo(text)
        except ValueError as exc:
            return str(exc), None
        self.lit_mode.setCurrentIndex(self.lit_mode.findData("external"))
        for key, field in (
            ("host", self.lit_host),
            ("port", self.lit_port),
            ("dbname", self.lit_dbname),
            ("user", self.lit_user),
        ):
            if key in fields:
                field.setText(fields[key])
        return None, password

    def _retrieval_tab(self) -> QWidget:
        """Semantic rows, how the rows' lists are merged, and embedding (``RetrievalSettings``).

        The number fields keep Enter for themselves: Enter checks the values and shows what is wrong
        under the field, and never saves or closes the dialog (Save does).
        """
        page = QWidget()
        page.setObjectName("retrievalTab")
        form = QFormLayout(page)
        self.ret_semantic = QCheckBox("Add the question as a semantic row when generating")
        self.ret_semantic.setObjectName("semanticRow")
        self.ret_hypothetical = QCheckBox("Ask the LLM for a hypothetical abstract row (needs an LLM model)")
        self.ret_hypothetical.setObjectName("hypotheticalRow")
        self._row(form, "retrieval.semantic_row", "Semantic rows", self.ret_semantic,
                  "Rows searched by meaning on the document vectors; added only when the database has "
                  "vectors. 'Add semantic row' adds one by hand.")
        self._row(form, "retrieval.hypothetical_row", "", self.ret_hypothetical)
        self.ret_fusion = QComboBox()
        self.ret_fusion.setObjectName("fusionMethod")
        self.ret_fusion.addItem("Reciprocal rank fusion", "rrf")
        self.ret_fusion.addItem("Best rank of any row", "best_rank")
        self._row(form, "retrieval.fusion", "Merge the rows by", self.ret_fusion)
        self.ret_fusion_k = self._number_field("fusionK")
        self._row(form, "retrieval.fusion_k", "Fusion constant k", self.ret_fusion_k,
                  "1 to 1000: a document scores the sum of weight / (k + rank) over the rows; larger k "
                  "flattens the difference between the first ranks")
        self.ret_semantic_weight = self._number_field("semanticWeight")
        self._row(form, "retrieval.semantic_weight", "Semantic row weight", self.ret_semantic_weight,
                  "0 to 10; full-text rows weigh 1")
        self.ret_ranking = QComboBox()
        self.ret_ranking.setObjectName("fulltextRanking")
        self.ret_ranking.addItem("Term rarity (idf-weighted, like BM25)", "idf")
        self.ret_ranking.addItem("Cover density (ts_rank_cd, every word alike)", "ts_rank_cd")
        self._row(form, "retrieval.fulltext_ranking", "Rank full-text rows by", self.ret_ranking)
        self.ret_rerank = QCheckBox("Re-rank the merged candidates by similarity to the question")
        self.ret_rerank.setObjectName("rerank")
        self._row(form, "retrieval.rerank", "Re-ranking", self.ret_rerank)
        self.ret_rerank_weight = self._number_field("rerankWeight")
        self._row(form, "retrieval.rerank_weight", "Re-ranking weight", self.ret_rerank_weight,
                  "0 (full-text scores only) to 1 (similarity to the question only)")
        self.ret_embed = QCheckBox("Embed new documents in the background after an import")
        self.ret_embed.setObjectName("embedAfterImport")
        self._row(form, "retrieval.embed_after_import", "Embedding", self.ret_embed)
        self.ret_external = QCheckBox(EXTERNAL_OPT_IN + " (e.g. BMLibrarian's)")
        self.ret_external.setObjectName("allowExternalVectors")
        self._row(form, "retrieval.allow_vectors_in_external_database", "", self.ret_external,
                  "Off: nothing is created in a database the app does not manage; semantic rows find "
                  "nothing there until vectors exist")
        self.ret_rerank.toggled.connect(self._update_enabled)
        return page

    def _number_field(self, name: str) -> QLineEdit:
        field = _OwnEnterLineEdit()
        field.setObjectName(name)
        field.returnPressed.connect(self.check_fields)
        return field

    def check_fields(self) -> dict[str, str]:
        """Validate the form and show every problem under its field, saving nothing (Enter in a field)."""
        _settings, errors = self.validate()
        self.show_errors(errors)
        return errors

    def _index_tab(self) -> QWidget:
        page = QWidget()
        form = QFormLayout(page)
        self.index_mode = QComboBox()
        self.index_mode.addItem("Local (in the data folder)", "local")
        self.index_mode.addItem("Chroma server", "server")
        self._row(form, "index.mode", "Index", self.index_mode)
        self.chroma_host = QLineEdit()
        self._row(form, "index.chroma_host", "Chroma host", self.chroma_host)
        self.chroma_port = QLineEdit()
        self._row(form, "index.chroma_port", "Chroma port", self.chroma_port)
        self.embedding_model = QLineEdit()
        self._row(form, "index.embedding_model", "Embedding model", self.embedding_model)
        self.n_results = QLineEdit()
        self._row(form, "index.n_results", "Records per answer", self.n_results)
        self.index_mode.currentIndexChanged.connect(self._update_enabled)
        return page

    # -- values --
    def _load(self, s: Settings) -> None:
        self.backend.setCurrentIndex(max(0, self.backend.findData(s.llm.backend)))
        self.ollama_host.setText(s.llm.ollama_host)
        self.ollama_model.setCurrentText(s.llm.ollama_model)
        self.google_model.setText(s.llm.google_model)
        self.google_key.setPlaceholderText("a key is stored" if secrets.google_api_key() else "no key stored")
        self.openai_url.setText(s.llm.openai_base_url)
        self.openai_model.setText(s.llm.openai_model)
        self.openai_key.setPlaceholderText("a key is stored" if secrets.openai_api_key() else "no key stored")
        self.temperature.setText(str(s.llm.temperature))
        self.llm_timeout.setText(str(s.llm.timeout_s))
        qg = s.query_generation
        self.qg_multi.setChecked(qg.multi_model_enabled)
        for name in qg.models:
            self._add_model_item(name, True)
        self.qg_per_model.setText(str(qg.queries_per_model))
        self.qg_temperature.setText(str(qg.temperature))
        self.qg_host.setText(qg.ollama_host)
        self.qg_openai.setText(qg.openai_base_url)
        self.qg_timeout.setText(str(qg.timeout_s))
        lit = s.literature
        self.lit_mode.setCurrentIndex(max(0, self.lit_mode.findData(lit.mode)))
        self.lit_host.setText(lit.host)
        self.lit_port.setText(str(lit.port))
        self.lit_dbname.setText(lit.dbname)
        self.lit_user.setText(lit.user)
        self.lit_timeout.setText(str(lit.statement_timeout_ms))
        r = s.retrieval
        self.ret_semantic.setChecked(r.semantic_row)
        self.ret_hypothetical.setChecked(r.hypothetical_row)
        self.ret_fusion.setCurrentIndex(max(0, self.ret_fusion.findData(r.fusion)))
        self.ret_fusion_k.setText(str(r.fusion_k))
        self.ret_semantic_weight.setText(str(r.semantic_weight))
        self.ret_ranking.setCurrentIndex(max(0, self.ret_ranking.findData(r.fulltext_ranking)))
        self.ret_rerank.setChecked(r.rerank)
        self.ret_rerank_weight.setText(str(r.rerank_weight))
        self.ret_embed.setChecked(r.embed_after_import)
        self.ret_external.setChecked(r.allow_vectors_in_external_database)
        idx = s.index
        self.index_mode.setCurrentIndex(max(0, self.index_mode.findData(idx.mode)))
        self.chroma_host.setText(idx.chroma_host)
        self.chroma_port.setText(str(idx.chroma_port))
        self.embedding_model.setText(idx.embedding_model)
        self.n_results.setText(str(idx.n_results))
        self._update_enabled()

    def _update_enabled(self) -> None:
        external = self.lit_mode.currentData() == "external"
        for w in (self.lit_host, self.lit_port, self.lit_dbname, self.lit_user, self.lit_dsn):
            w.setEnabled(external)
        server = self.index_mode.currentData() == "server"
        self.chroma_host.setEnabled(server)
        self.chroma_port.setEnabled(server)
        self.ret_rerank_weight.setEnabled(self.ret_rerank.isChecked())

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

    def _add_qg_model(self) -> None:
        name = self.qg_add.text().strip()
        if name:
            self._add_model_item(name, True, name in self.available_models or None)
            self.qg_add.clear()

    def _remove_qg_models(self) -> None:
        """Remove the selected models from the list (Delete key or the button); saved with Save."""
        for item in self.qg_models.selectedItems():
            self.qg_models.takeItem(self.qg_models.row(item))
        self._update_remove_button()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if (
            watched is self.qg_models
            and event.type() == QEvent.Type.KeyPress
            and event.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace)  # type: ignore[attr-defined]
            and self.qg_models.selectedItems()
        ):
            self._remove_qg_models()
            return True
        return super().eventFilter(watched, event)

    def _update_remove_button(self) -> None:
        self.qg_remove.setEnabled(bool(self.qg_models.selectedItems()))

    def form_data(self) -> dict[str, Any]:
        """The settings as the form shows them (a dict for the core's validator; ui section kept)."""
        data = self.settings.model_dump(mode="json")
        data["llm"].update(
            {
                "backend": self.backend.currentData(),
                "ollama_host": self.ollama_host.text().strip(),
                "ollama_model": self.ollama_model.currentText().strip(),
                "google_model": self.google_model.text().strip(),
                "openai_base_url": self.openai_url.text().strip(),
                "openai_model": self.openai_model.text().strip(),
                "temperature": self.temperature.text().strip(),
                "timeout_s": self.llm_timeout.text().strip(),
            }
        )
        models = [
            self.qg_models.item(i).data(Qt.ItemDataRole.UserRole)
            for i in range(self.qg_models.count())
            if self.qg_models.item(i).checkState() == Qt.CheckState.Checked
        ]
        data["query_generation"].update(
            {
                "multi_model_enabled": self.qg_multi.isChecked(),
                "models": models,
                "queries_per_model": self.qg_per_model.text().strip(),
                "temperature": self.qg_temperature.text().strip(),
                "ollama_host": self.qg_host.text().strip(),
                "openai_base_url": self.qg_openai.text().strip(),
                "timeout_s": self.qg_timeout.text().strip(),
            }
        )
        data["literature"].update(
            {
                "mode": self.lit_mode.currentData(),
                "host": self.lit_host.text().strip(),
                "port": self.lit_port.text().strip(),
                "dbname": self.lit_dbname.text().strip(),
                "user": self.lit_user.text().strip(),
                "statement_timeout_ms": self.lit_timeout.text().strip(),
            }
        )
        data["retrieval"].update(
            {
                "semantic_row": self.ret_semantic.isChecked(),
                "hypothetical_row": self.ret_hypothetical.isChecked(),
                "fusion": self.ret_fusion.currentData(),
                "fusion_k": self.ret_fusion_k.text().strip(),
                "semantic_weight": self.ret_semantic_weight.text().strip(),
                "fulltext_ranking": self.ret_ranking.currentData(),
                "rerank": self.ret_rerank.isChecked(),
                "rerank_weight": self.ret_rerank_weight.text().strip(),
                "embed_after_import": self.ret_embed.isChecked(),
                "allow_vectors_in_external_database": self.ret_external.isChecked(),
            }
        )
        data["index"].update(
            {
                "mode": self.index_mode.currentData(),
                "chroma_host": self.chroma_host.text().strip(),
                "chroma_port": self.chroma_port.text().strip(),
                "embedding_model": self.embedding_model.text().strip(),
                "n_results": self.n_results.text().strip(),
            }
        )
        return data

    def validate(self) -> tuple[Settings | None, dict[str, str]]:
        """Validated settings, or None and ``{field key: message}`` for every invalid field
        (the checks and the field each error belongs to are :func:`validate_form`'s)."""
        return validate_form(self.form_data(), self.fields)

    def show_errors(self, errors: dict[str, str]) -> None:
        for key, label in self.field_errors.items():
            msg = errors.get(key)
            label.setText(msg or "")
            self._error_forms[key].setRowVisible(label, bool(msg))
        general = errors.get("", "")
        self.general_error.setText(general)
        self.general_error.setVisible(bool(general))
        if errors:  # show the first tab with a problem
            first = next(iter(k for k in errors if k in self.fields), None)
            if first is not None:
                widget = self.fields[first]
                for i in range(self.tabs.count()):
                    if self.tabs.widget(i).isAncestorOf(widget):
                        self.tabs.setCurrentIndex(i)
                        break

    def save(self) -> bool:
        """Validate, store the key in the keyring, write the settings; False (dialog stays) on any error."""
        dsn_error, db_password = self._apply_dsn()
        settings, errors = self.validate()
        if dsn_error:
            errors["literature.dsn"] = dsn_error
            settings = None
        if settings is None:
            self.show_errors(errors)
            return False
        key = self.google_key.text().strip()
        try:
            if self.forget_key.isChecked():
                secrets.set_google_api_key(None)
            elif key:
                secrets.set_google_api_key(key)
            if self.openai_key.text().strip():
                secrets.set_openai_api_key(self.openai_key.text().strip())
            if db_password:
                secrets.set_db_password(settings.literature.user, settings.literature.host, db_password)
        except Exception as exc:  # noqa: BLE001 - no keyring backend: say so, keep the dialog open
            self.show_errors(
                {
                    "google_key": f"the OS keyring refused the secret ({exc}); set GOOGLE_API_KEY or "
                    "PGPASSWORD in the environment instead"
                }
            )
            return False
        try:
            save_settings(settings, self.settings_path)
        except (SettingsError, OSError) as exc:
            self.show_errors({"": f"Could not write the settings: {exc}"})
            return False
        self.show_errors({})
        self.saved = settings
        self.settings_saved.emit(settings)
        self.accept()
        return True

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt's name
        """Enter in a field checks the form and shows what is wrong, never saves or closes.

        QDialog turns an Enter that a field lets through into a click on the default button (Save),
        so typing a number and pressing Enter, as in any form, would save and close the dialog from
        whichever tab the field is on. Only a focused button takes Enter as a click; Save is clicked.
        """
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and not isinstance(
            self.focusWidget(), QPushButton
        ):
            self.check_fields()
            event.accept()
            return
        super().keyPressEvent(event)

    # -- models from the server --
    def refresh_models(self) -> None:
        host = self.ollama_host.text().strip()
        problem = server_address_error(host)
        if problem:
            self.show_errors({"llm.ollama_host": problem})
            return
        self.models_state.setText(f"Asking {host} for its models…")
        self.refresh_models_button.setEnabled(False)
        self.jobs.submit(
            "llm.models",
            list_ollama_models,
            host,
            label=f"Listing the models on {host}",
            busy_cursor=False,
            on_result=self._models_arrived,
            on_error=lambda exc: self.models_state.setText(f"<span style='color:#b00020'>{exc}</span>"),
            on_finished=lambda: self.refresh_models_button.setEnabled(True),
        )

    def _models_arrived(self, models: list[str]) -> None:
        self.available_models = list(models)
        current = self.ollama_model.currentText()
        self.ollama_model.clear()
        for name in models:
            self.ollama_model.addItem(f"{name}", name)
        self.ollama_model.setCurrentText(current)
        installed = current in models or f"{current}:latest" in models
        state = "installed" if installed else "NOT installed on this server"
        self.models_state.setText(
            f"{len(models)} models on the server; the chosen model {current!r} is {state}."
            if models
            else "The server has no models yet (ollama pull <model>)."
        )
        for i in range(self.qg_models.count()):
            item = self.qg_models.item(i)
            name = item.data(Qt.ItemDataRole.UserRole)
            if not name.startswith("builtin:"):
                ok = name in models or f"{name}:latest" in models
                item.setText(f"{name}  ✓ installed" if ok else f"{name}  (not installed)")
        for name in models:
            self._add_model_item(name, False, True)
