"""Opening a screening session on a finished search run, as the window's "Screen these results" does.

Why its own module: the window must not know the decision store or how a run's merged documents become
records; the CLI's ``screen add --set N`` and this path must both end in the same
:class:`~kmds_desktop.app.screening.ScreeningSession`. Everything here is slow (reading the store,
building TF-IDF features for thousands of records), so the window calls it on a worker.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kmds_desktop.app.screening import ScreeningSession
from kmds_desktop.literature.screening.decisions import DecisionStore
from kmds_desktop.literature.screening.records import record_from_document
from kmds_desktop.literature.store.facade import LiteratureStore

#: Longest review id made from a question (the id is shown in the CLI's ``screen`` commands).
REVIEW_ID_CHARS = 60


def review_id_for(question: str) -> str:
    """A review per question: searching the same question again adds to the same review, so decided
    records are never asked again. Lower case words joined by '-', e.g. ``cystic-fibrosis-in-adults``."""
    words = re.findall(r"[a-z0-9]+", question.lower())
    slug = "-".join(words)[:REVIEW_ID_CHARS].strip("-")
    return slug or "screening"


def open_for_documents(
    documents: Sequence[Mapping[str, Any]],
    *,
    question: str,
    origin: str,
    store_path: str | Path | None = None,
    background: bool = True,
    database: Any = None,
    encoder: Any = None,
) -> ScreeningSession:
    """Open (or create) the question's review and add a run's merged documents (best rank first, each
    with ``rank`` and ``found_by``) once: a run added before is not counted again in the PRISMA flow.

    With ``database``, the documents' stored vectors join the order's features (and with ``encoder``,
    the window's embedding function, the question's vector too): see :func:`attach_vectors`."""
    store = DecisionStore(store_path)
    review_id = review_id_for(question)
    try:
        # Named by the question: the window's title and the PRISMA diagram's heading show the name.
        store.create_review(review_id, name=question or review_id, question=question)
        session = ScreeningSession(store, review_id, background=background)
    except BaseException:
        store.close()
        raise
    if origin not in {s.origin for s in store.sources(session.review.id)}:
        ranks = {d["id"]: int(d["rank"]) for d in documents if isinstance(d.get("id"), int) and d.get("rank")}
        found_by = {d["id"]: list(d.get("found_by") or []) for d in documents if isinstance(d.get("id"), int)}
        per_row = Counter(name for d in documents for name in d.get("found_by") or [])
        session.add_documents(documents, origin=origin, ranks=ranks, found_by=found_by, per_row=per_row)
    if database is not None:
        attach_vectors(session, documents, database, encoder)
    return session


def attach_vectors(
    session: ScreeningSession, documents: Sequence[Mapping[str, Any]], database: Any, encoder: Any = None
) -> int:
    """Copy the literature database's vectors of ``documents`` into the review (the simulation chose
    TF-IDF + document vectors: WSS@95 1.15x ASReview's on the dev questions against 0.96x without), and
    the question's vector when ``encoder`` can make one. Never fails the opening: without vectors (no
    pgvector, nothing embedded yet) the order uses TF-IDF alone. Returns how many records have one."""
    ids = [d["id"] for d in documents if isinstance(d.get("id"), int)]
    try:
        found = LiteratureStore(database).vectors_for(ids)
    except Exception:  # noqa: BLE001 - vectors are an improvement of the order, never a requirement
        found = {}
    keys = {d["id"]: record_from_document(d).key for d in documents if isinstance(d.get("id"), int)}
    vectors = {keys[i]: v for i, v in found.items() if i in keys}
    question_vector = None
    if encoder is not None and session.review.question.strip() and vectors:
        try:
            question_vector = encoder([session.review.question])[0]
        except Exception:  # noqa: BLE001 - the question's words still count
            question_vector = None
    if not vectors:
        return 0
    return session.add_vectors(vectors, question_vector)


def open_store_session(
    review_id: str, store_path: str | Path | None = None, **kwargs: Any
) -> ScreeningSession:
    """Reopen an existing review (the same data folder after a crash finds every decision)."""
    store = DecisionStore(store_path)
    return ScreeningSession(store, review_id, **kwargs)


def close_session(session: ScreeningSession) -> None:
    """Stop the session's training (a job running now ends after the training in hand) and close the store
    (decisions are already committed)."""
    session.close()
    session.store.close()
