"""Preferences' Semantic index tab: a local index or a Chroma server, the embedding model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtWidgets import QComboBox, QFormLayout, QLineEdit, QWidget

from kmds_desktop.app.presentation import Settings

if TYPE_CHECKING:
    from kmds_desktop.ui.preferences import PreferencesDialog



class IndexTab:
    """The Semantic index tab of :class:`PreferencesDialog`."""

    def _index_tab(self: PreferencesDialog) -> QWidget:
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

    def _load_index(self: PreferencesDialog, s: Settings) -> None:
        idx = s.index
        self.index_mode.setCurrentIndex(max(0, self.index_mode.findData(idx.mode)))
        self.chroma_host.setText(idx.chroma_host)
        self.chroma_port.setText(str(idx.chroma_port))
        self.embedding_model.setText(idx.embedding_model)
        self.n_results.setText(str(idx.n_results))

    def _collect_index(self: PreferencesDialog, data: dict[str, Any]) -> None:
        data["index"].update(
            {
                "mode": self.index_mode.currentData(),
                "chroma_host": self.chroma_host.text().strip(),
                "chroma_port": self.chroma_port.text().strip(),
                "embedding_model": self.embedding_model.text().strip(),
                "n_results": self.n_results.text().strip(),
            }
        )
