"""Preferences' LLM tab: the backend, its servers and models, the keys (kept in the OS keyring)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QWidget,
)

from kmds_desktop.app.preferences import api_address_error, list_openai_models, openai_models_summary
from kmds_desktop.app.presentation import Settings

if TYPE_CHECKING:
    from kmds_desktop.ui.preferences import PreferencesDialog



class ModelCombo(QComboBox):
    """An editable model field whose list "List models" fills from the server: pick one, or type a
    name (a server may serve models it does not list). ``text()``/``setText()`` read and write the
    name as a line edit's would."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setEditable(True)
        self.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)

    def text(self) -> str:
        return self.currentText()

    def setText(self, text: str) -> None:  # noqa: N802 - the line edit's name, kept for its callers
        self.setCurrentText(text)

    def clear(self) -> None:
        super().clear()
        self.clearEditText()

    def set_models(self, models: list[str]) -> None:
        """The server's models as the list; the name typed stays."""
        kept = self.currentText()
        super().clear()
        self.addItems(models)
        self.setCurrentText(kept)


class LLMTab:
    """The LLM tab of :class:`PreferencesDialog`: builds its fields, loads and collects them."""

    def _llm_tab(self: PreferencesDialog) -> QWidget:
        page = QWidget()
        form = QFormLayout(page)
        self.backend = QComboBox()
        for key, label in (
            ("auto", "Automatic (Ollama, a local server you confirmed, Google, offline)"),
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
        self.openai_model = ModelCombo()
        self.openai_model.setObjectName("openaiModel")
        self.openai_models_button = QPushButton("List models")
        self.openai_models_button.setObjectName("listOpenAIModels")
        self.openai_models_button.clicked.connect(self.refresh_openai_models)
        openai_row = QHBoxLayout()
        openai_row.setContentsMargins(0, 0, 0, 0)
        openai_row.addWidget(self.openai_model, 1)
        openai_row.addWidget(self.openai_models_button)
        openai_holder = QWidget()
        openai_holder.setLayout(openai_row)
        self._row(form, "llm.openai_model", "Its model", openai_holder)
        self.openai_models_state = QLabel("")
        self.openai_models_state.setObjectName("openaiModelsState")
        self.openai_models_state.setWordWrap(True)
        form.addRow("", self.openai_models_state)
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

    def refresh_openai_models(self: PreferencesDialog) -> None:
        """Ask the OpenAI-compatible server at the address typed for its models (``/v1/models``),
        in the background; the answer (or why there is none) appears under the model field."""
        url = self.openai_url.text().strip()
        problem = api_address_error(url)
        if problem:
            self.show_errors({"llm.openai_base_url": problem})
            return
        self.openai_models_state.setText(f"Asking {url} for its models…")
        self.openai_models_button.setEnabled(False)
        self.jobs.submit(
            "llm.openai_models",
            list_openai_models,
            url,
            label=f"Listing the models on {url}",
            busy_cursor=False,
            on_result=self._openai_models_arrived,
            on_error=lambda exc: self.openai_models_state.setText(
                f"<span style='color:#b00020'>{html.escape(str(exc))}</span>"),
            on_finished=lambda: self.openai_models_button.setEnabled(True),
        )

    def _openai_models_arrived(self: PreferencesDialog, models: list[str]) -> None:
        if not self.openai_model.text().strip() and len(models) == 1:
            self.openai_model.setText(models[0])  # a one-model server (llama.cpp): that is the model
        self.openai_model.set_models(models)
        self.openai_models_state.setText(openai_models_summary(models, self.openai_model.text().strip()))

    def _load_llm(self: PreferencesDialog, s: Settings, keys: dict[str, bool]) -> None:
        self.backend.setCurrentIndex(max(0, self.backend.findData(s.llm.backend)))
        self.ollama_host.setText(s.llm.ollama_host)
        self.ollama_model.setCurrentText(s.llm.ollama_model)
        self.google_model.setText(s.llm.google_model)
        self.google_key.setPlaceholderText("a key is stored" if keys["google"] else "no key stored")
        self.openai_url.setText(s.llm.openai_base_url)
        self.openai_model.setText(s.llm.openai_model)
        self.openai_key.setPlaceholderText("a key is stored" if keys["openai"] else "no key stored")
        self.temperature.setText(str(s.llm.temperature))
        self.llm_timeout.setText(str(s.llm.timeout_s))

    def _collect_llm(self: PreferencesDialog, data: dict[str, Any]) -> None:
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
