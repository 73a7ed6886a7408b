"""The Preferences dialog: LLM, query generation, literature database, retrieval and semantic index.

Each tab is a module of its own (:mod:`~kmds_desktop.ui.preferences_llm`, ``_query``,
``_literature``, ``_retrieval``, ``_index``) that builds its fields, loads them from the settings
and collects them back. Saving is the application layer's (:func:`kmds_desktop.app.preferences.
save_preferences`: the connection string, then validation by the core's settings model, then the
OS keyring, then the settings file); the dialog shows each error it gets back in red under its
field, and nothing is saved until all are valid. Listing the models an Ollama server has is a job
(network call); whether a model is installed is decided by :mod:`kmds_desktop.app.preferences`
(the same code the ask job uses).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.app.preferences import (
    PreferencesForm,
    list_ollama_models,
    models_summary,
    save_preferences,
    server_address_error,
    stored_keys,
    validate_form,
)
from kmds_desktop.app.presentation import Settings
from kmds_desktop.ui.preferences_form import error_label, scrolled
from kmds_desktop.ui.preferences_index import IndexTab
from kmds_desktop.ui.preferences_literature import LiteratureTab
from kmds_desktop.ui.preferences_llm import LLMTab
from kmds_desktop.ui.preferences_query import QueryTab
from kmds_desktop.ui.preferences_retrieval import RetrievalTab
from kmds_desktop.ui.workers import JobRunner


class PreferencesDialog(LLMTab, QueryTab, LiteratureTab, RetrievalTab, IndexTab, QDialog):
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
        self.tabs.addTab(scrolled(self._retrieval_tab()), "Retrieval")
        self.tabs.addTab(self._index_tab(), "Semantic index")
        self.general_error = error_label()
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)
        layout.addWidget(self.general_error)
        layout.addWidget(self.buttons)
        # As wide as the widest tab needs: an explicit minimum of 560 alone overrode the layout's, and
        # the Retrieval tab's check boxes and hints were cut at the dialog's right edge.
        self.setMinimumWidth(max(560, self.minimumSizeHint().width()))
        self._load(settings)

    # -- building --
    def _row(self, form: QFormLayout, key: str, label: str, widget: QWidget, hint: str = "") -> None:
        """Add ``widget`` under ``label``, its ``hint`` and its (hidden) error line as rows of their own.

        The three once shared one cell's box: when an error appeared the form was squeezed and the
        box gave the wrapped hint less than its height, so its second line ran under the error.
        As separate form rows each label gets its own height for the width it has.
        """
        self.fields[key] = widget
        err = error_label()
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

    def check_fields(self) -> dict[str, str]:
        """Validate the form and show every problem under its field, saving nothing (Enter in a field)."""
        _settings, errors = self.validate()
        self.show_errors(errors)
        return errors

    # -- values --
    def _load(self, s: Settings) -> None:
        self._load_llm(s, stored_keys())
        self._load_query(s)
        self._load_literature(s)
        self._load_retrieval(s)
        self._load_index(s)
        self._update_enabled()

    def _update_enabled(self) -> None:
        external = self.lit_mode.currentData() == "external"
        for w in (self.lit_host, self.lit_port, self.lit_dbname, self.lit_user, self.lit_dsn):
            w.setEnabled(external)
        server = self.index_mode.currentData() == "server"
        self.chroma_host.setEnabled(server)
        self.chroma_port.setEnabled(server)
        self.ret_rerank_weight.setEnabled(self.ret_rerank.isChecked())

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if self._model_list_key(watched, event):
            return True
        return super().eventFilter(watched, event)

    def form_data(self) -> dict[str, Any]:
        """The settings as the form shows them (a dict for the core's validator; ui section kept)."""
        data = self.settings.model_dump(mode="json")
        for collect in (self._collect_llm, self._collect_query, self._collect_literature,
                        self._collect_retrieval, self._collect_index):
            collect(data)
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
        """Save as the application layer says (:func:`save_preferences`); False (the dialog stays,
        each error under its field) when anything was wrong."""
        outcome = save_preferences(
            PreferencesForm(self.form_data(), self.fields, dsn=self.lit_dsn.text(),
                            google_key=self.google_key.text(), forget_google_key=self.forget_key.isChecked(),
                            openai_key=self.openai_key.text()),
            self.settings_path,
        )
        self._show_conninfo(outcome.conninfo)
        self.show_errors(outcome.errors)
        if outcome.settings is None:
            return False
        self.saved = outcome.settings
        self.settings_saved.emit(outcome.settings)
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
        self.models_state.setText(models_summary(models, current))
        self._mark_installed(models)
