"""The Preferences dialog: LLM, query generation, literature database, retrieval and semantic index.

Each tab is a page widget of its own (:mod:`.llm_page`, :mod:`.query_page`, :mod:`.literature_page`,
:mod:`.retrieval_page`, :mod:`.index_page`) that owns its fields, loads them from the settings
(``load``) and writes them back (``apply``). The dialog composes the pages and wires their signals:
the models "List models" found go from the LLM page to the Query generation page, and a page's
request to check the form or show an error comes here, where every page's errors are shown at once.
Saving is the application layer's (:func:`kmds_desktop.app.preferences.save_preferences`: the
connection string, then validation by the core's settings model, then the OS keyring, then the
settings file); the dialog shows each error it gets back in red under its field, and nothing is saved
until all are valid.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.app.preferences import PreferencesForm, save_preferences, stored_keys, validate_form
from kmds_desktop.app.presentation import Settings
from kmds_desktop.ui.jobs.runner import JobRunner
from kmds_desktop.ui.preferences.form import PreferencesPage, error_label, scrolled
from kmds_desktop.ui.preferences.index_page import IndexPage
from kmds_desktop.ui.preferences.literature_page import LiteraturePage
from kmds_desktop.ui.preferences.llm_page import LLMPage
from kmds_desktop.ui.preferences.query_page import QueryPage
from kmds_desktop.ui.preferences.retrieval_page import RetrievalPage


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
        self.settings_path = settings_path
        self.saved: Settings | None = None

        self.llm_page = LLMPage(jobs)
        self.query_page = QueryPage()
        self.literature_page = LiteraturePage()
        self.retrieval_page = RetrievalPage()
        self.index_page = IndexPage()
        self.pages: tuple[PreferencesPage, ...] = (
            self.llm_page, self.query_page, self.literature_page, self.retrieval_page, self.index_page)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.llm_page, "LLM")
        self.tabs.addTab(self.query_page, "Query generation")
        self.tabs.addTab(self.literature_page, "Literature database")
        self.tabs.addTab(scrolled(self.retrieval_page), "Retrieval")
        self.tabs.addTab(self.index_page, "Semantic index")
        #: Every page's fields and error lines by settings key (the app's validation names the key).
        self.fields: dict[str, QWidget] = {k: w for page in self.pages for k, w in page.fields.items()}
        self.field_errors: dict[str, QLabel] = {
            k: label for page in self.pages for k, label in page.field_errors.items()}
        for page in self.pages:
            page.check_requested.connect(self.check_fields)
            page.errors_found.connect(self.show_errors)
        self.llm_page.ollama_models_listed.connect(self.query_page.mark_installed)

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
        for page in self.pages:
            page.load(settings)
        self.llm_page.show_stored_keys(stored_keys())

    def form_data(self) -> dict[str, Any]:
        """The settings as the form shows them (a dict for the core's validator; ui section kept)."""
        data = self.settings.model_dump(mode="json")
        for page in self.pages:
            page.apply(data)
        return data

    def validate(self) -> tuple[Settings | None, dict[str, str]]:
        """Validated settings, or None and ``{field key: message}`` for every invalid field
        (the checks and the field each error belongs to are :func:`validate_form`'s)."""
        return validate_form(self.form_data(), self.fields)

    def check_fields(self) -> dict[str, str]:
        """Validate the form and show every problem under its field, saving nothing (Enter in a field)."""
        _settings, errors = self.validate()
        self.show_errors(errors)
        return errors

    def show_errors(self, errors: dict[str, str]) -> None:
        """Show ``errors`` under their fields on every page (clearing the others), the one that
        belongs to no field on the general line, and bring the first page with a problem to the front."""
        for page in self.pages:
            page.show_errors(errors)
        general = errors.get("", "")
        self.general_error.setText(general)
        self.general_error.setVisible(bool(general))
        first = next((k for k in errors if k in self.fields), None)
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
            PreferencesForm(self.form_data(), self.fields, dsn=self.literature_page.connection_string(),
                            **self.llm_page.keys_typed()),
            self.settings_path,
        )
        self.literature_page.show_conninfo(outcome.conninfo)
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
