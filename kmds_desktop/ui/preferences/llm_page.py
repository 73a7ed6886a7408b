"""Preferences' LLM page: the backend, its servers and models, the keys (kept in the OS keyring)."""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QWidget,
)

from kmds_desktop.app.preferences import (
    api_address_error,
    list_ollama_models,
    list_openai_models,
    models_summary,
    openai_models_summary,
    server_address_error,
)
from kmds_desktop.app.presentation import Settings
from kmds_desktop.ui.jobs.runner import JobRunner
from kmds_desktop.ui.preferences.form import PreferencesPage


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


class LLMPage(PreferencesPage):
    """The ``llm`` section of the settings, the API keys typed, and "List models" for both servers.

    Listing a server's models is a network call, run by ``jobs`` (the window's job runner) in the
    background; its answer fills the model field here and is announced as ``ollama_models_listed``
    (the Query generation page marks its models installed from it). A server address that cannot be
    asked is reported as ``errors_found``, under its field, like any other error.
    """

    ollama_models_listed = Signal(list)

    def __init__(self, jobs: JobRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.jobs = jobs
        self.backend = QComboBox()
        for key, label in (
            ("auto", "Automatic (Ollama, a local server you confirmed, Google, offline)"),
            ("ollama", "Ollama"),
            ("google", "Google Gemini"),
            ("openai", "OpenAI-compatible server (LM Studio, llama.cpp, vLLM)"),
            ("offline", "Offline (no LLM)"),
        ):
            self.backend.addItem(label, key)
        self.add_row("llm.backend", "Backend", self.backend)
        self.ollama_host = QLineEdit()
        self.add_row("llm.ollama_host", "Ollama host", self.ollama_host, "e.g. http://127.0.0.1:11434")
        self.ollama_model = QComboBox()
        self.ollama_model.setEditable(True)
        self.refresh_models_button = QPushButton("List models")
        self.refresh_models_button.setObjectName("listModels")
        self.refresh_models_button.clicked.connect(self.refresh_models)
        self.add_row("llm.ollama_model", "Ollama model", _side_by_side(self.ollama_model,
                                                                      self.refresh_models_button))
        self.models_state = QLabel("")
        self.models_state.setObjectName("modelsState")
        self.models_state.setWordWrap(True)
        self.form.addRow("", self.models_state)
        self.google_model = QLineEdit()
        self.add_row("llm.google_model", "Google model", self.google_model)
        self.google_key = QLineEdit()
        self.google_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.forget_key = QCheckBox("Remove the stored key")
        self.add_row("google_key", "Google API key", self.google_key,
                     "Stored in the OS keyring, never in the settings file. Leave empty to keep the "
                     "current key.")
        self.form.addRow("", self.forget_key)
        self.openai_url = QLineEdit()
        self.add_row("llm.openai_base_url", "OpenAI-compatible server", self.openai_url,
                     "e.g. http://127.0.0.1:8080/v1")
        self.openai_model = ModelCombo()
        self.openai_model.setObjectName("openaiModel")
        self.openai_models_button = QPushButton("List models")
        self.openai_models_button.setObjectName("listOpenAIModels")
        self.openai_models_button.clicked.connect(self.refresh_openai_models)
        self.add_row("llm.openai_model", "Its model",
                     _side_by_side(self.openai_model, self.openai_models_button))
        self.openai_models_state = QLabel("")
        self.openai_models_state.setObjectName("openaiModelsState")
        self.openai_models_state.setWordWrap(True)
        self.form.addRow("", self.openai_models_state)
        self.openai_key = QLineEdit()
        self.openai_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.add_row("openai_key", "Its API key", self.openai_key,
                     "Optional (local servers need none); kept in the OS keyring. Empty keeps the "
                     "current key.")
        self.temperature = QLineEdit()
        self.add_row("llm.temperature", "Temperature", self.temperature,
                     "0 to 2; low values answer more literally")
        self.llm_timeout = QLineEdit()
        self.add_row("llm.timeout_s", "Timeout (s)", self.llm_timeout)

    def load(self, settings: Settings) -> None:
        llm = settings.llm
        self.backend.setCurrentIndex(max(0, self.backend.findData(llm.backend)))
        self.ollama_host.setText(llm.ollama_host)
        self.ollama_model.setCurrentText(llm.ollama_model)
        self.google_model.setText(llm.google_model)
        self.openai_url.setText(llm.openai_base_url)
        self.openai_model.setText(llm.openai_model)
        self.temperature.setText(str(llm.temperature))
        self.llm_timeout.setText(str(llm.timeout_s))

    def apply(self, data: dict[str, Any]) -> None:
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

    def show_stored_keys(self, keys: dict[str, bool]) -> None:
        """Say in each key field whether a key is stored (``{"google": …, "openai": …}``); the keys
        themselves are never shown."""
        self.google_key.setPlaceholderText("a key is stored" if keys["google"] else "no key stored")
        self.openai_key.setPlaceholderText("a key is stored" if keys["openai"] else "no key stored")

    def keys_typed(self) -> dict[str, Any]:
        """The secrets typed, as :class:`~kmds_desktop.app.preferences.PreferencesForm` takes them:
        they go to the OS keyring, never into the settings."""
        return {"google_key": self.google_key.text(), "forget_google_key": self.forget_key.isChecked(),
                "openai_key": self.openai_key.text()}

    # -- models from the servers --
    def refresh_models(self) -> None:
        """Ask the Ollama server at the address typed for its models, in the background."""
        host = self.ollama_host.text().strip()
        problem = server_address_error(host)
        if problem:
            self.errors_found.emit({"llm.ollama_host": problem})
            return
        self.models_state.setText(f"Asking {host} for its models…")
        self.refresh_models_button.setEnabled(False)
        self.jobs.submit(
            "llm.models",
            list_ollama_models,
            host,
            label=f"Listing the models on {host}",
            busy_cursor=False,
            on_result=self._ollama_models_arrived,
            on_error=lambda exc: self.models_state.setText(f"<span style='color:#b00020'>{exc}</span>"),
            on_finished=lambda: self.refresh_models_button.setEnabled(True),
        )

    def _ollama_models_arrived(self, models: list[str]) -> None:
        current = self.ollama_model.currentText()
        self.ollama_model.clear()
        for name in models:
            self.ollama_model.addItem(f"{name}", name)
        self.ollama_model.setCurrentText(current)
        self.models_state.setText(models_summary(models, current))
        self.ollama_models_listed.emit(list(models))

    def refresh_openai_models(self) -> None:
        """Ask the OpenAI-compatible server at the address typed for its models (``/v1/models``),
        in the background; the answer (or why there is none) appears under the model field."""
        url = self.openai_url.text().strip()
        problem = api_address_error(url)
        if problem:
            self.errors_found.emit({"llm.openai_base_url": problem})
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

    def _openai_models_arrived(self, models: list[str]) -> None:
        if not self.openai_model.text().strip() and len(models) == 1:
            self.openai_model.setText(models[0])  # a one-model server (llama.cpp): that is the model
        self.openai_model.set_models(models)
        self.openai_models_state.setText(openai_models_summary(models, self.openai_model.text().strip()))


def _side_by_side(field: QWidget, button: QPushButton) -> QWidget:
    """A model field with its "List models" button on its right, as one form cell."""
    row = QHBoxLayout()
    row.setContentsMargins(0, 0, 0, 0)
    row.addWidget(field, 1)
    row.addWidget(button)
    holder = QWidget()
    holder.setLayout(row)
    return holder
