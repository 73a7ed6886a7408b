"""Preferences' Retrieval page: semantic rows, how the rows' lists are merged, re-ranking, embedding."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QCheckBox, QComboBox, QLineEdit, QWidget

from kmds_desktop.app.literature_data import EXTERNAL_OPT_IN
from kmds_desktop.app.presentation import Settings
from kmds_desktop.ui.preferences.form import OwnEnterLineEdit, PreferencesPage


class RetrievalPage(PreferencesPage):
    """The ``retrieval`` section of the settings (``RetrievalSettings``).

    The number fields keep Enter for themselves and ask for the form to be checked
    (``check_requested``): Enter shows what is wrong under the field, and never saves or closes the
    dialog (Save does).
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("retrievalTab")
        self.ret_semantic = QCheckBox("Add the question as a semantic row when generating")
        self.ret_semantic.setObjectName("semanticRow")
        self.ret_hypothetical = QCheckBox("Ask the LLM for a hypothetical abstract row (needs an LLM model)")
        self.ret_hypothetical.setObjectName("hypotheticalRow")
        self.add_row("retrieval.semantic_row", "Semantic rows", self.ret_semantic,
                     "Rows searched by meaning on the document vectors; added only when the database has "
                     "vectors. 'Add semantic row' adds one by hand.")
        self.add_row("retrieval.hypothetical_row", "", self.ret_hypothetical)
        self.ret_fusion = QComboBox()
        self.ret_fusion.setObjectName("fusionMethod")
        self.ret_fusion.addItem("Reciprocal rank fusion", "rrf")
        self.ret_fusion.addItem("Best rank of any row", "best_rank")
        self.add_row("retrieval.fusion", "Merge the rows by", self.ret_fusion)
        self.ret_fusion_k = self._number_field("fusionK")
        self.add_row("retrieval.fusion_k", "Fusion constant k", self.ret_fusion_k,
                     "1 to 1000: a document scores the sum of weight / (k + rank) over the rows; larger k "
                     "flattens the difference between the first ranks")
        self.ret_semantic_weight = self._number_field("semanticWeight")
        self.add_row("retrieval.semantic_weight", "Semantic row weight", self.ret_semantic_weight,
                     "0 to 10; full-text rows weigh 1")
        self.ret_ranking = QComboBox()
        self.ret_ranking.setObjectName("fulltextRanking")
        self.ret_ranking.addItem("BM25 from the top-k index (term rarity until it is built)", "bm25")
        self.ret_ranking.addItem("Term rarity (idf-weighted, like BM25)", "idf")
        self.ret_ranking.addItem("Cover density (ts_rank_cd, every word alike)", "ts_rank_cd")
        self.add_row("retrieval.fulltext_ranking", "Rank full-text rows by", self.ret_ranking)
        self.ret_exact_broad = QCheckBox("Rank broad AND rows over every match (slower at PubMed size)")
        self.ret_exact_broad.setObjectName("exactBroadRows")
        self.add_row("retrieval.exact_broad_rows", "", self.ret_exact_broad,
                     "Off: on a very large database a broad AND row is ranked within the fast index's impact "
                     "tier (its best among the documents where a term weighs most), and reports say so")
        self.ret_rerank = QCheckBox("Re-rank the merged candidates by similarity to the question")
        self.ret_rerank.setObjectName("rerank")
        self.add_row("retrieval.rerank", "Re-ranking", self.ret_rerank)
        self.ret_rerank_weight = self._number_field("rerankWeight")
        self.add_row("retrieval.rerank_weight", "Re-ranking weight", self.ret_rerank_weight,
                     "0 (full-text scores only) to 1 (similarity to the question only)")
        self.ret_embed = QCheckBox("Embed new documents in the background after an import")
        self.ret_embed.setObjectName("embedAfterImport")
        self.add_row("retrieval.embed_after_import", "Embedding", self.ret_embed)
        self.ret_external = QCheckBox(EXTERNAL_OPT_IN + " (e.g. BMLibrarian's)")
        self.ret_external.setObjectName("allowExternalVectors")
        self.add_row("retrieval.allow_vectors_in_external_database", "", self.ret_external,
                     "Off: nothing is created in a database the app does not manage; semantic rows search "
                     "only the vectors it holds itself, if any")
        self.ret_database_vectors = QCheckBox("Search a BMLibrarian database's own chunk vectors")
        self.ret_database_vectors.setObjectName("useDatabaseVectors")
        self.add_row("retrieval.use_database_vectors", "", self.ret_database_vectors,
                     "When the database's embedding model is on the Ollama server, semantic rows search the "
                     "vectors the database already holds (nothing to embed)")
        self.ret_rerank.toggled.connect(self._update_enabled)

    def _number_field(self, name: str) -> QLineEdit:
        field = OwnEnterLineEdit()
        field.setObjectName(name)
        field.returnPressed.connect(self.check_requested)
        return field

    def load(self, settings: Settings) -> None:
        r = settings.retrieval
        self.ret_semantic.setChecked(r.semantic_row)
        self.ret_hypothetical.setChecked(r.hypothetical_row)
        self.ret_fusion.setCurrentIndex(max(0, self.ret_fusion.findData(r.fusion)))
        self.ret_fusion_k.setText(str(r.fusion_k))
        self.ret_semantic_weight.setText(str(r.semantic_weight))
        self.ret_ranking.setCurrentIndex(max(0, self.ret_ranking.findData(r.fulltext_ranking)))
        self.ret_exact_broad.setChecked(r.exact_broad_rows)
        self.ret_rerank.setChecked(r.rerank)
        self.ret_rerank_weight.setText(str(r.rerank_weight))
        self.ret_embed.setChecked(r.embed_after_import)
        self.ret_external.setChecked(r.allow_vectors_in_external_database)
        self.ret_database_vectors.setChecked(r.use_database_vectors)
        self._update_enabled()

    def apply(self, data: dict[str, Any]) -> None:
        data["retrieval"].update(
            {
                "semantic_row": self.ret_semantic.isChecked(),
                "hypothetical_row": self.ret_hypothetical.isChecked(),
                "fusion": self.ret_fusion.currentData(),
                "fusion_k": self.ret_fusion_k.text().strip(),
                "semantic_weight": self.ret_semantic_weight.text().strip(),
                "fulltext_ranking": self.ret_ranking.currentData(),
                "exact_broad_rows": self.ret_exact_broad.isChecked(),
                "rerank": self.ret_rerank.isChecked(),
                "rerank_weight": self.ret_rerank_weight.text().strip(),
                "embed_after_import": self.ret_embed.isChecked(),
                "allow_vectors_in_external_database": self.ret_external.isChecked(),
                "use_database_vectors": self.ret_database_vectors.isChecked(),
            }
        )

    def _update_enabled(self) -> None:
        self.ret_rerank_weight.setEnabled(self.ret_rerank.isChecked())
