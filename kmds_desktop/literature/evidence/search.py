"""A question's best passages: full-text (FTS5 bm25) and meaning (cosine to the shipped model's
vectors), fused by reciprocal rank fusion as the records' hybrid search is.

Why both: a question names rare terms ("S118L", "PEG-maleimide") that bm25 finds exactly and an
embedding blurs, and it paraphrases findings ("what fraction shows no transfection") that only the
embedding connects to the passage's words. Fusion by rank needs no calibration between a bm25 score
and a cosine, which are not comparable (:mod:`kmds_desktop.literature.retrieval.fusion`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kmds_desktop.literature.fulltext.store import FulltextStore
from kmds_desktop.literature.retrieval.fusion import reciprocal_rank_fusion

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

#: Candidates each row contributes to the fusion.
POOL = 50
#: ``embed_query(question) -> unit vector``.
QueryEmbedFn = Callable[[str], "np.ndarray"]


@dataclass(frozen=True)
class EvidenceHit:
    """One ranked passage with its paper, pages and text; ``similarity`` is the cosine to the
    question (the answer's evidence threshold reads it)."""

    rank: int
    passage_id: int
    paper_id: int
    doi: str | None
    file: str
    title: str | None
    record_id: int | None
    start_page: int
    end_page: int
    text: str
    score: float
    similarity: float

    @property
    def label(self) -> str:
        return self.doi or Path(self.file).name

    @property
    def pages(self) -> str:
        if self.start_page == self.end_page:
            return str(self.start_page)
        return f"{self.start_page}-{self.end_page}"

    def as_dict(self) -> dict[str, object]:
        return {
            "rank": self.rank, "passage_id": self.passage_id, "doi": self.doi, "file": self.file,
            "title": self.title, "record_id": self.record_id, "start_page": self.start_page,
            "end_page": self.end_page, "score": round(self.score, 6),
            "similarity": round(self.similarity, 4), "text": self.text,
        }


def choice_query(question: str, options: Sequence[str]) -> str:
    """What a multiple-choice question searches with: the question, then every option (sorted, so the
    order the options were given in, which may give the answer away, changes nothing).

    Why the options: the question names the subject ("which processes does the S118L mutation
    impair?"), and every passage of the right paper is about that subject; the sentence that answers it
    is the one that also names an option ("membrane trafficking"). On the LitQA dev questions the key
    passage is among the first five for 13 of 19 with the question alone and 17 of 19 with its options
    (bench/evidence.py). Wrong options are searched too, so nothing tells the search which is right.
    """
    cleaned = [" ".join(o.split()) for o in options if o and o.strip()]
    return " ".join([question.strip(), *sorted(cleaned, key=str.lower)])


def default_query_embed(question: str) -> np.ndarray:
    from kmds_desktop.index.embeddings import encode  # torch loads on first use, not at start-up

    return encode([question])[0]


def search_passages(
    store: FulltextStore,
    question: str,
    top: int = 10,
    *,
    paper_ids: Sequence[int] | None = None,
    embed_query: QueryEmbedFn = default_query_embed,
    pool: int = POOL,
) -> list[EvidenceHit]:
    """The ``top`` passages for ``question``, best first (only of ``paper_ids`` when given)."""
    import numpy as np  # on first use: the CLI's --help and the app's start stay fast

    if not question or not question.strip():
        raise ValueError("the question is empty: type what you want the papers to answer")
    if top < 1:
        raise ValueError(f"--top must be at least 1, not {top}")
    lexical = [pid for pid, _ in store.lexical(question, pool, paper_ids)]
    matrix, ids, papers = store.vector_matrix()
    similarities: dict[int, float] = {}
    semantic: list[int] = []
    if len(ids):
        query = np.asarray(embed_query(question), dtype=np.float32)
        scores = matrix @ query
        if paper_ids is not None:
            allowed = np.isin(np.asarray(papers), np.asarray(list(paper_ids)))
            scores = np.where(allowed, scores, -np.inf)
        order = np.argsort(-scores)[:pool]
        semantic = [ids[i] for i in order if np.isfinite(scores[i])]
        row_of = {pid: i for i, pid in enumerate(ids)}
        similarities = {pid: float(scores[row_of[pid]]) for pid in set(semantic) | set(lexical)
                        if pid in row_of}
    fused, fused_scores, _ = reciprocal_rank_fusion([lexical, semantic])
    chosen = fused[:top]
    rows = store.passages(chosen)
    paper_rows = {pid: store.paper(pid) for pid in {r.paper_id for r in rows.values()}}
    hits: list[EvidenceHit] = []
    for passage_id in chosen:
        row = rows.get(passage_id)
        paper = paper_rows.get(row.paper_id) if row else None
        if row is None or paper is None:
            continue
        hits.append(EvidenceHit(
            len(hits) + 1, passage_id, paper.id, paper.doi, paper.path, paper.title, paper.record_id,
            row.start_page, row.end_page, row.text, fused_scores[passage_id],
            similarities.get(passage_id, 0.0),
        ))
    return hits
