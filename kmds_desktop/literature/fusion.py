"""Merging the ranked ID lists of several rows, and re-ranking the merged candidates by meaning.

Reciprocal rank fusion (Cormack, Clarke and Büttcher, SIGIR 2009): a document's fused score is
``sum(weight_r / (k + rank_r))`` over the rows ``r`` that found it (rank from 1). It needs no score
calibration between a ``ts_rank_cd`` and a cosine similarity, which are not comparable, and a
document several rows agree on rises. ``k`` (``retrieval.fusion_k``, default 60 as in the paper and in
BMLibrarian) damps the head: with a larger ``k`` the first ranks weigh less against agreement.

Re-ranking: the fused candidates are ordered again by mixing their fused order with their cosine
similarity to the question (vectors stored in the database; computed on demand for candidates that
have none, e.g. imported after the last ``literature embed``). Both signals enter as ranks, mixed by
``weight`` (0: the fused order, 1: similarity only), again by reciprocal rank, so neither scale
dominates. Measured on SciFact *train* claims by ``bench/retrieval_quality.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

#: The reciprocal-rank-fusion constant of Cormack et al. (2009).
RRF_K = 60


def reciprocal_rank_fusion(
    id_lists: Sequence[Sequence[int]],
    k: int = RRF_K,
    weights: Sequence[float] | None = None,
) -> tuple[list[int], dict[int, float], dict[int, list[int]]]:
    """Fuse ranked ID lists: ``(ids best first, fused score per id, found_by)``.

    ``found_by`` maps each id to the indices of the lists that contain it, in list order. Equal scores
    go to the id found by more lists, then to the one ranked earliest anywhere, then the smaller id,
    so the order is fully determined.
    """
    if k < 1:
        raise ValueError(f"the fusion constant k must be at least 1, not {k}")
    if weights is not None and len(weights) != len(id_lists):
        raise ValueError(f"{len(weights)} weights for {len(id_lists)} lists")
    scores: dict[int, float] = {}
    best: dict[int, int] = {}
    found_by: dict[int, list[int]] = {}
    for list_index, ids in enumerate(id_lists):
        weight = 1.0 if weights is None else float(weights[list_index])
        seen: set[int] = set()
        for position, doc_id in enumerate(ids):
            if doc_id in seen:  # a repeated id in one list counts once, at its best rank
                continue
            seen.add(doc_id)
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (k + position + 1)
            best[doc_id] = min(best.get(doc_id, position), position)
            found_by.setdefault(doc_id, []).append(list_index)
    ordered = sorted(scores, key=lambda i: (-scores[i], -len(found_by[i]), best[i], i))
    return ordered, scores, found_by


def rerank_by_similarity(
    ids: Sequence[int],
    similarities: Mapping[int, float],
    weight: float = 0.5,
    k: int = RRF_K,
) -> list[int]:
    """Order ``ids`` (a fused list, best first) again by mixing in their similarity to the question.

    Each id's new score is ``(1 - weight) / (k + fused_rank) + weight / (k + similarity_rank)``; ids
    without a similarity keep only their fused share (they sink but stay). ``weight`` 0 keeps the
    order, 1 sorts by similarity alone.
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"the re-ranking weight must be between 0 and 1, not {weight}")
    by_similarity = sorted((i for i in ids if i in similarities), key=lambda i: (-similarities[i], i))
    sim_rank = {doc_id: r for r, doc_id in enumerate(by_similarity, start=1)}
    score = {}
    for fused_rank, doc_id in enumerate(ids, start=1):
        value = (1.0 - weight) / (k + fused_rank)
        if doc_id in sim_rank:
            value += weight / (k + sim_rank[doc_id])
        score[doc_id] = value
    position = {doc_id: p for p, doc_id in enumerate(ids)}
    return sorted(ids, key=lambda i: (-score[i], position[i]))


def cosine_similarities(query_vector: np.ndarray, vectors: Mapping[int, np.ndarray]) -> dict[int, float]:
    """Cosine similarity of each stored vector to the question's (vectors need not be unit length)."""
    import numpy as np

    if not vectors:
        return {}
    ids = list(vectors)
    matrix = np.stack([np.asarray(vectors[i], dtype=np.float32) for i in ids])
    q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    norms = np.linalg.norm(matrix, axis=1) * (float(np.linalg.norm(q)) or 1.0)
    norms[norms == 0] = 1.0
    sims = (matrix @ q) / norms
    return {doc_id: float(s) for doc_id, s in zip(ids, sims, strict=True)}
