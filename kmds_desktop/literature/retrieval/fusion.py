"""Merging the ranked ID lists of several rows, and re-ranking the merged candidates by meaning.

Reciprocal rank fusion (Cormack, Clarke and Büttcher, SIGIR 2009): a document's fused score is
``sum(weight_r / (k + rank_r))`` over the rows ``r`` that found it (rank from 1). It needs no score
calibration between a ``ts_rank_cd`` and a cosine similarity, which are not comparable, and a
document several rows agree on rises. ``k`` (``retrieval.fusion_k``, default 60 as in the paper and in
BMLibrarian) damps the head: with a larger ``k`` the first ranks weigh less against agreement.

Re-ranking: the fused candidates are ordered again by mixing their cosine similarity to the question
(vectors stored in the database; computed on demand for candidates that have none, e.g. imported
after the last ``literature embed``) with their full-text evidence (the best score a full-text row
gave them), both scaled to 0-1, by ``weight`` (0: the evidence, 1: similarity only). Fusion picks
the candidates from every row; the mix orders them by how well they match in meaning and in rare
terms. Measured on SciFact *train* claims by ``bench/retrieval_quality.py``.
"""

from __future__ import annotations

import math
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
    best: dict[int, int] = {}
    found_by: dict[int, list[int]] = {}
    parts: dict[int, list[float]] = {}
    for list_index, ids in enumerate(id_lists):
        weight = 1.0 if weights is None else float(weights[list_index])
        seen: set[int] = set()
        for position, doc_id in enumerate(ids):
            if doc_id in seen:  # a repeated id in one list counts once, at its best rank
                continue
            seen.add(doc_id)
            parts.setdefault(doc_id, []).append(weight / (k + position + 1))
            best[doc_id] = min(best.get(doc_id, position), position)
            found_by.setdefault(doc_id, []).append(list_index)
    # summed exactly (fsum), so two documents with the same ranks in other lists tie, and the tie-break
    # decides, whatever order the lists came in (a plain sum differed in the last bit)
    scores = {doc_id: math.fsum(values) for doc_id, values in parts.items()}
    ordered = sorted(scores, key=lambda i: (-scores[i], -len(found_by[i]), best[i], i))
    return ordered, scores, found_by


def rerank_by_similarity(
    ids: Sequence[int],
    similarities: Mapping[int, float],
    weight: float = 0.5,
    k: int = RRF_K,
    lexical: Mapping[int, float] | None = None,
) -> list[int]:
    """Order ``ids`` (a fused list, best first) again by mixing in their similarity to the question.

    Each id's new score is ``weight * similarity + (1 - weight) * evidence``, both on a 0-1 scale:
    the similarity scaled min-max over the candidates, the evidence the id's ``lexical`` score (its
    best full-text score, each row's scores divided by the row's top score; 0 for an id no full-text
    row found) or, without ``lexical``, its fused position (1 for the first, falling linearly).
    Scores rather than ranks are mixed because a clear lead in similarity or in term matches should
    count as one; measured on SciFact *train* claims (docs/design/ranking.md, *Measured*). Ids without a
    similarity keep only their evidence share. ``weight`` 0 keeps the evidence order (the fused order
    without ``lexical``), 1 sorts by similarity alone. ``k`` is accepted for callers of the earlier
    rank-mixing version and unused.
    """
    del k
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"the re-ranking weight must be between 0 and 1, not {weight}")
    known = [similarities[i] for i in ids if i in similarities]
    low, high = (min(known), max(known)) if known else (0.0, 0.0)
    spread = (high - low) or 1.0
    count = max(len(ids) - 1, 1)
    score = {}
    for position, doc_id in enumerate(ids):
        evidence = lexical.get(doc_id, 0.0) if lexical is not None else 1.0 - position / count
        value = (1.0 - weight) * evidence
        if doc_id in similarities:
            value += weight * (similarities[doc_id] - low) / spread
        score[doc_id] = value
    position_of = {doc_id: p for p, doc_id in enumerate(ids)}
    return sorted(ids, key=lambda i: (-score[i], position_of[i]))


def best_lexical_scores(rows: Sequence[tuple[Sequence[int], Sequence[float]]]) -> dict[int, float]:
    """Each id's best full-text score over ``rows`` of ``(ids, scores)``, every row's scores divided by
    its top score (so rows of different queries, whose raw scores do not compare, count alike)."""
    best: dict[int, float] = {}
    for ids, scores in rows:
        top = max(scores, default=0.0)
        if top <= 0:
            continue
        for doc_id, value in zip(ids, scores, strict=False):
            share = max(0.0, float(value)) / top
            if share > best.get(doc_id, -1.0):
                best[doc_id] = share
    return best


def cosine_similarities(query_vector: np.ndarray, vectors: Mapping[int, np.ndarray]) -> dict[int, float]:
    """Cosine similarity of each stored vector to the question's (vectors need not be unit length)."""
    import numpy as np  # why: numpy loads on first use, not at start-up

    if not vectors:
        return {}
    ids = list(vectors)
    matrix = np.stack([np.asarray(vectors[i], dtype=np.float32) for i in ids])
    q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    norms = np.linalg.norm(matrix, axis=1) * (float(np.linalg.norm(q)) or 1.0)
    norms[norms == 0] = 1.0
    sims = (matrix @ q) / norms
    return {doc_id: float(s) for doc_id, s in zip(ids, sims, strict=True)}


def merge_ranked(id_lists: Sequence[Sequence[int]]) -> tuple[list[int], dict[int, list[int]]]:
    """Union of ranked ID lists, ordered by the best position any list gave an ID.

    Ties (the same best position) go to the ID more lists found, then to the earlier list. Returns the
    merged IDs and, per ID, the indices of the lists that contain it.
    """
    best: dict[int, tuple[int, int]] = {}
    found_by: dict[int, list[int]] = {}
    for list_index, ids in enumerate(id_lists):
        for position, doc_id in enumerate(ids):
            found_by.setdefault(doc_id, [])
            if list_index not in found_by[doc_id]:
                found_by[doc_id].append(list_index)
            key = (position, list_index)
            if doc_id not in best or key < best[doc_id]:
                best[doc_id] = key
    ordered = sorted(best, key=lambda i: (best[i][0], -len(found_by[i]), best[i][1]))
    return ordered, found_by
