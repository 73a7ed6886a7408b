"""How much a word tells, by how few texts of a collection hold it: BM25's inverse document frequency.

One formula for every layer that weighs words by rarity: the literature store's full-text ranking
(``literature.store.term_weights``), its top-k index's title weights (``literature.store.topk_tiers``)
and the answer prompt's pick within a listing (``ask.relevance``). It sits at the bottom of the import
layers (see ``pyproject.toml``) and imports nothing of the project.
"""

from __future__ import annotations

import math


def idf(document_frequency: int, documents: int) -> float:
    """BM25's inverse document frequency, ``ln(1 + (N - df + 0.5) / (df + 0.5))``; never negative, so a
    word every text holds still counts a little."""
    df = max(0, min(document_frequency, documents))
    return math.log(1.0 + (documents - df + 0.5) / (df + 0.5))
