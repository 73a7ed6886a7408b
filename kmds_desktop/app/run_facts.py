"""What a literature run was, in the terms a methods section needs: each row's kind, the embedding
model, how much of the database the semantic rows could search, the fusion and the re-ranking.

Why one module: the window, the exported search log, the search history and the report must say the
same thing about a run, and a reviewer must be able to tell from any of them that a semantic row
searched only the documents that had a vector. The facts are taken once, when the run is applied
(:func:`retrieval_facts`), so a later change in Preferences never rewrites what ran. The decision
"is the database partly embedded, so warn before a semantic row runs" is :func:`coverage_warning`,
here rather than in the window, so the CLI and a test reach the same verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kmds_desktop.literature.queries.query_cleaning import query_key
from kmds_desktop.literature.retrieval.semantic import (
    KIND_FULL_TEXT,
    KIND_HYPOTHETICAL,
    ROW_KIND_LABELS,
    ROW_TSQUERY,
    SEMANTIC_KINDS,
    VectorCoverage,
    row_kind_label,
)

__all__ = ["VectorCoverage", "coverage_from_status", "coverage_warning", "generation_counts",
           "kind_counts", "retrieval_facts", "row_kind_of", "run_coverage"]


def row_kind_of(row_type: str, text: str, question: str) -> str:
    """A row's kind (:data:`~kmds_desktop.literature.retrieval.semantic.ROW_KIND_LABELS`): a semantic row is
    "the question" when its sentence is the research question it was made for (case and spacing
    aside), "hand-written" otherwise (typed, or the question edited)."""
    is_question = bool(question.strip()) and query_key(text) == query_key(question)
    return row_kind_label(row_type, is_question)


def kind_counts(kinds: Iterable[str]) -> dict[str, int]:
    """How many rows of each kind, in :data:`ROW_KIND_LABELS` order (kinds with none left out)."""
    listed = list(kinds)
    return {label: listed.count(label) for label in ROW_KIND_LABELS if label in listed}


def generation_counts(attempts: Sequence[Any]) -> dict[str, int]:
    """The models' successful proposals and how many distinct texts they were (case and spacing
    aside): the numbers behind "6 generated, 4 after de-duplication". Hand-written and semantic rows
    are not generated, so they count in neither."""
    texts = [str(a.query) for a in attempts if getattr(a, "ok", False) and getattr(a, "query", None)]
    return {"queries_generated": len(texts), "queries_unique": len({query_key(t) for t in texts})}


def coverage_from_status(documents: int | None, vectors: Mapping[str, Any] | None,
                         database_vectors: Mapping[str, Any] | None = None) -> VectorCoverage | None:
    """Coverage from the database status (documents, and ``vector_status``'s ``with_vectors``); None
    when either is not known yet, and on a database whose own vectors semantic rows search (embedding
    with the app's model would not add to those; the run says how many they cover)."""
    if documents is None or not vectors or (database_vectors and database_vectors.get("with_vectors")):
        return None
    with_vectors = int(vectors.get("with_vectors") or 0) if vectors.get("available") else 0
    return VectorCoverage(min(with_vectors, int(documents)), int(documents))


def coverage_warning(kinds: Sequence[str], coverage: VectorCoverage | None) -> str | None:
    """What to say before running rows of ``kinds`` (row types) when the database is partly embedded;
    None when no semantic row runs, the coverage is not known, or every document has a vector.

    A semantic row on a partly embedded database silently misses the documents without a vector, so
    the user is offered to embed first; with no vector at all the row cannot run and says so itself.
    """
    semantic = sum(1 for k in kinds if k in SEMANTIC_KINDS)
    if not semantic or coverage is None or not coverage.partial or coverage.searched == 0:
        return None
    rows = "The semantic row" if semantic == 1 else f"The {semantic} semantic rows"
    return (f"{rows} would search only {coverage.searched:,} of {coverage.documents:,} documents: "
            f"{coverage.missing:,} have no vector yet. Embed first to search them all, or run anyway "
            "(the full-text rows search every document).")


def run_coverage(stats: Sequence[Any]) -> VectorCoverage | None:
    """The coverage a run's semantic rows recorded as they ran (``matches`` = documents with a vector,
    ``searchable`` = documents under the same filters); None when no semantic row ran."""
    for stat in stats:
        if getattr(stat, "kind", ROW_TSQUERY) in SEMANTIC_KINDS and stat.error is None:
            searchable = getattr(stat, "searchable", None)
            if stat.matches is not None and searchable is not None:
                whose = str(getattr(stat, "vectors", None) or "")
                return VectorCoverage(int(stat.matches), int(searchable), whose,
                                      bool(getattr(stat, "coverage_estimated", False)))
    return None


def retrieval_facts(retrieval: Any, embedding_model: str, result: Any) -> dict[str, Any]:
    """The run's retrieval as it happened: the embedding model (when a semantic row ran), coverage,
    the fusion (method, k, weights per row kind) and whether re-ranking applied (weight, candidates).

    ``retrieval`` is the :class:`~kmds_desktop.config.RetrievalSettings` the run used; ``result`` its
    :class:`~kmds_desktop.literature.queries.agent.ReviewedSearchResult` (``fusion`` says what was applied).
    """
    stats = list(result.queries)
    semantic = [s for s in stats if s.kind in SEMANTIC_KINDS]
    applied = str(getattr(result, "fusion", "") or "")
    if applied.startswith("rrf"):
        weight = float(retrieval.semantic_weight)
        weights = {KIND_FULL_TEXT: 1.0, "semantic": weight, KIND_HYPOTHETICAL: weight}
        fusion: dict[str, Any] = {"method": "rrf", "k": int(retrieval.fusion_k), "weights": weights}
    else:
        fusion = {"method": "best_rank"}
    coverage = run_coverage(stats)
    return {
        "embedding_model": (next((s.vectors_model for s in semantic if getattr(s, "vectors_model", None)),
                                 embedding_model) if semantic else None),
        "semantic_rows": len(semantic),
        "vector_coverage": coverage.to_dict() if coverage else None,
        "fusion": fusion,
        "rerank": {"applied": applied.endswith("+rerank"), "enabled": bool(retrieval.rerank),
                   "weight": float(retrieval.rerank_weight), "candidates": int(retrieval.rerank_candidates)},
        "fulltext_ranking": str(retrieval.fulltext_ranking),
        # rows (1-based) the fast index ranked within its impact tier (see tier_sentence)
        "tier_ranked_rows": [s.index + 1 for s in stats if getattr(s, "ranked_in_tier", False)],
        "merged": applied,
    }
