"""Preferences' Semantic index page: a local index or a Chroma server, the embedding model."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QComboBox, QLineEdit, QWidget

from kmds_desktop.app.presentation import Settings
from kmds_desktop.ui.preferences.form import PreferencesPage


class IndexPage(PreferencesPage):
    """The ``index`` section of the settings; the server's fields are enabled for a Chroma server only."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.index_mode = QComboBox()
        self.index_mode.addItem("Local (in the data folder)", "local")
        self.index_mode.addItem("Chroma server", "server")
        self.add_row("index.mode", "Index", self.index_mode)
        self.chroma_host = QLineEdit()
        self.add_row("index.chroma_host", "Chroma host", self.chroma_host)
        self.chroma_port = QLineEdit()
        self.add_row("index.chroma_port", "Chroma port", self.chroma_port)
        self.embedding_model = QLineEdit()
        self.add_row("index.embedding_model", "Embedding model", self.embedding_model)
        self.n_results = QLineEdit()
        self.add_row("index.n_results", "Records per answer", self.n_results)
        self.index_mode.currentIndexChanged.connect(self._update_enabled)

    def load(self, settings: Settings) -> None:
        idx = settings.index
        self.index_mode.setCurrentIndex(max(0, self.index_mode.findData(idx.mode)))
        self.chroma_host.setText(idx.chroma_host)
        self.chroma_port.setText(str(idx.chroma_port))
        self.embedding_model.setText(idx.embedding_model)
        self.n_results.setText(str(idx.n_results))
        self._update_enabled()

    def apply(self, data: dict[str, Any]) -> None:
        data["index"].update(
            {
                "mode": self.index_mode.currentData(),
                "chroma_host": self.chroma_host.text().strip(),
                "chroma_port": self.chroma_port.text().strip(),
                "embedding_model": self.embedding_model.text().strip(),
                "n_results": self.n_results.text().strip(),
            }
        )

    def _update_enabled(self) -> None:
        server = self.index_mode.currentData() == "server"
        self.chroma_host.setEnabled(server)
        self.chroma_port.setEnabled(server)
