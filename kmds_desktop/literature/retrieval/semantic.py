"""Semantic rows: search the literature by meaning beside the full-text (tsquery) rows.

A review-table row has a *kind*: ``tsquery`` (a PostgreSQL full-text query), ``semantic`` (a sentence,
the question by default, embedded and run as an ID-only nearest-neighbour query on the document
vectors) or ``hypothetical`` (an abstract an LLM wrote that would answer the question, searched the
same way: a written-out answer often lies closer to the relevant abstracts than the question does,
the HyDE idea of Gao et al. 2022). Every kind is shown, edited, ticked and logged like the others.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kmds_desktop.literature.errors import LiteratureError
from kmds_desktop.literature.retrieval.fusion import cosine_similarities
from kmds_desktop.tasks import CancelToken

ROW_TSQUERY = "tsquery"
ROW_SEMANTIC = "semantic"
ROW_HYPOTHETICAL = "hypothetical"
ROW_KINDS = (ROW_TSQUERY, ROW_SEMANTIC, ROW_HYPOTHETICAL)
#: Kinds whose text is embedded and searched by meaning.
SEMANTIC_KINDS = (ROW_SEMANTIC, ROW_HYPOTHETICAL)
#: What a row is, in the words the search log, the history, the overlap and the report use. Why four
#: and not three: the question searched by meaning and a sentence the user wrote are different
#: evidence for a methods section (the first is the search's own question, the second a choice).
KIND_FULL_TEXT = "full-text"
KIND_SEMANTIC_QUESTION = "semantic: the question"
KIND_SEMANTIC_HAND = "semantic: hand-written"
KIND_HYPOTHETICAL = "hypothetical abstract"
ROW_KIND_LABELS = (KIND_FULL_TEXT, KIND_SEMANTIC_QUESTION, KIND_SEMANTIC_HAND, KIND_HYPOTHETICAL)
#: The longest hypothetical abstract kept (characters); the model reads 256 tokens of it anyway.
MAX_ABSTRACT_CHARS = 4000
#: The most tokens the model may write for it. A 4-6 sentence abstract is 110-180 tokens; without a
#: limit a small model that starts repeating itself writes until its context or the timeout (one of 8
#: abstracts ran past 600 s on the 2-core machine), and the search waits for it.
HYPOTHETICAL_MAX_TOKENS = 320

HYPOTHETICAL_PROMPT = """\
Write the abstract of a biomedical research paper that answers the question below. Write it as it \
would appear in PubMed: 4 to 6 sentences with the background, what was studied, how, and the main \
finding, using the field's usual terms and abbreviations. Answer with the abstract text only: no title, \
no headings, no preamble, no references.

Question: {question}
"""


@dataclass(frozen=True)
class SearchRow:
    """One row of the review table as it runs: its text and its kind (see :data:`ROW_KINDS`)."""

    text: str
    kind: str = ROW_TSQUERY

    def __post_init__(self) -> None:
        if self.kind not in ROW_KINDS:
            raise ValueError(f"unknown row kind {self.kind!r}: use one of {', '.join(ROW_KINDS)}")

    @property
    def semantic(self) -> bool:
        return self.kind in SEMANTIC_KINDS


def row_kind_label(row_type: str | None, is_question: bool = False) -> str:
    """The row's kind (:data:`ROW_KIND_LABELS`) from its type; a semantic row is "the question" when
    its sentence is the research question as typed, else "hand-written"."""
    if row_type == ROW_HYPOTHETICAL:
        return KIND_HYPOTHETICAL
    if row_type == ROW_SEMANTIC:
        return KIND_SEMANTIC_QUESTION if is_question else KIND_SEMANTIC_HAND
    return KIND_FULL_TEXT


@dataclass(frozen=True)
class VectorCoverage:
    """How many documents a semantic row searched (those with a vector) of all it could have.

    ``vectors`` says whose vectors they were when not the app's own ("the database's own
    snowflake-arctic-embed2:latest vectors"); ``estimated`` that both counts are the planner's
    estimates (a database too large to count while searching), shown with "≈"."""

    searched: int
    documents: int
    vectors: str = ""
    estimated: bool = False

    @property
    def partial(self) -> bool:
        """True when some documents have no vector: a semantic row cannot find them."""
        return self.documents > 0 and self.searched < self.documents

    @property
    def missing(self) -> int:
        return max(self.documents - self.searched, 0)

    def sentence(self, rows: int = 1) -> str:
        """"the semantic row searched 576 of 1,239 documents (those with a vector)"."""
        who = "the semantic row" if rows == 1 else f"the {rows} semantic rows"
        verb = "searched"
        about = "≈" if self.estimated else ""
        if not self.partial:
            whose = self.vectors or "every one has a vector"
            # "all 2 documents" reads oddly: the one document, both documents, then all n
            every = {1: "the one document", 2: "both documents"}.get(
                0 if about else self.documents, f"all {about}{self.documents:,} documents")
            return f"{who} {verb} {every} ({whose})"
        whose = f"those with a vector: {self.vectors}" if self.vectors else "those with a vector"
        return f"{who} {verb} {about}{self.searched:,} of {about}{self.documents:,} documents ({whose})"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"searched": self.searched, "documents": self.documents,
                                "partial": self.partial}
        if self.vectors:
            data["vectors"] = self.vectors
        if self.estimated:
            data["estimated"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> VectorCoverage | None:
        if not data or data.get("searched") is None or data.get("documents") is None:
            return None
        return cls(int(data["searched"]), int(data["documents"]), str(data.get("vectors") or ""),
                   bool(data.get("estimated")))


def describe_fusion(facts: Mapping[str, Any]) -> str:
    """The merge in words: "reciprocal rank fusion (k = 20; weight 1 for full-text rows, 3 for
    semantic rows)" or "best rank"."""
    fusion = facts.get("fusion") or {}
    if fusion.get("method") != "rrf":
        return "best rank (each document at the best rank any row gave it)"
    weights = fusion.get("weights") or {}
    return (f"reciprocal rank fusion (k = {fusion.get('k')}; weight {_num(weights.get(KIND_FULL_TEXT, 1))} "
            f"for full-text rows, {_num(weights.get('semantic', 1))} for semantic and hypothetical rows)")


def describe_rerank(facts: Mapping[str, Any]) -> str:
    """The re-ranking in words, or why there was none."""
    rerank = facts.get("rerank") or {}
    if not rerank.get("applied"):
        return "not re-ranked" + ("" if rerank.get("enabled") else " (re-ranking off)")
    w = float(rerank.get("weight", 0))
    return (f"the first {rerank.get('candidates')} merged documents re-ranked by {_num(w)} × similarity to "
            f"the question + {_num(round(1 - w, 4))} × full-text score")


def _num(value: Any) -> str:
    number = float(value)
    return f"{number:g}"


def as_row(item: Any) -> SearchRow:
    """A plain string is a tsquery row (what every caller passed before rows had kinds)."""
    if isinstance(item, SearchRow):
        return item
    if isinstance(item, str):
        return SearchRow(item)
    raise TypeError(f"a row is a SearchRow or a tsquery string, not {type(item).__name__}")


def clean_abstract(reply: str) -> str:
    """An LLM's reply as an abstract: bounded, without code fences, headings or a leading label."""
    text = (reply or "")[: MAX_ABSTRACT_CHARS * 2]
    text = re.sub(r"```[a-zA-Z]*", " ", text)
    kept = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or re.match(r"\**title\**\s*:", line, re.I):
            continue  # a heading or the paper's title: not part of the abstract
        kept.append(re.sub(r"^\**abstract\**\s*:\s*\**\s*", "", line, flags=re.I))
    return re.sub(r"\s+", " ", " ".join(kept)).strip()[:MAX_ABSTRACT_CHARS]


def write_hypothetical_abstract(backend: Any, model: str, question: str, *, temperature: float = 0.1,
                                cancel: CancelToken | None = None,
                                options: dict[str, Any] | None = None) -> str:
    """Ask ``model`` (through ``backend.chat``) for an abstract answering ``question``; ``options``
    (the token limit, :data:`HYPOTHETICAL_MAX_TOKENS`) go to backends that take them.

    Raises :class:`LiteratureError` with the reason when the model fails or answers nothing usable.
    """
    if not question or not question.strip():
        raise LiteratureError("the question is empty: type a question to write an abstract for")
    try:
        reply = backend.chat(HYPOTHETICAL_PROMPT.format(question=question.strip()), None,
                             temperature=temperature, cancel=cancel, model=model,
                             **({"options": options} if options else {}))
    except LiteratureError:
        raise
    except Exception as err:  # any backend failure becomes one message
        if cancel is not None and cancel.cancelled:
            raise
        raise LiteratureError(f"model '{model}' could not write a hypothetical abstract: {err}") from None
    abstract = clean_abstract(str(reply))
    if len(abstract.split()) < 5:
        raise LiteratureError(f"model '{model}' wrote no usable abstract (reply: {str(reply)[:80]!r})")
    return abstract


def similarities_to_question(db: Any, question_vector: Any, ids: list[int], *, model_name: str,
                             cancel: CancelToken | None = None, encoder: Any = None) -> dict[int, float]:
    """Cosine similarity of each candidate to the question: stored vectors, and for candidates without
    one (imported after the last embedding run, or no vector table) the vector is computed now and
    kept in the vector table where there is one (the semantic row then finds them too)."""
    # why: start-up time: it loads psycopg
    from kmds_desktop.literature.store.vectors import (
        document_texts,
        encoder_for,
        store_vectors,
        stored_vectors,
    )

    encode = encoder_for(model_name, encoder)
    vectors = dict(stored_vectors(db, ids, cancel=cancel))
    missing = [i for i in ids if i not in vectors]
    if missing:
        texts = {i: t for i, t in document_texts(db, missing, cancel=cancel).items() if t}
        if texts:
            order = list(texts)
            computed = dict(zip(order, encode([texts[i] for i in order]), strict=True))
            vectors.update(computed)
            store_vectors(db, computed, texts, model_name, cancel=cancel)
    return cosine_similarities(question_vector, vectors)
