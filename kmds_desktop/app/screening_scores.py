"""Model scores of a screening review: each configured LLM rates the undecided records 1–5.

Why its own module: scoring is slow (seconds a record and model) and optional, so it runs on a worker
with progress and Cancel, and everything it learns is cached in the screening store per (model,
question, document): a second run, or a run after Cancel or a crash, asks only what is not cached yet
(resumable), and another review of the same question reuses the scores. A reply that holds no score
(hostile, runaway, prose) is kept as a note for that record and asked again on the next run. A score
never decides anything: it is a column, and the queue can be ordered by it
(:attr:`~kmds_desktop.literature.screening.ordering.OrderMode.SCORE`).

Without an LLM, :func:`score_by_similarity` scores by the embedding model's similarity between record
and question, labelled :data:`EMBEDDING_SCORER`, so nobody takes it for a reader's judgement.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any

import numpy as np

from kmds_desktop.app.screening import QUESTION_KEY, ScreeningSession
from kmds_desktop.config import load_settings
from kmds_desktop.literature.screening.decisions import EXCLUDE, INCLUDE, Key, ScreeningError
from kmds_desktop.literature.screening.model_scores import (
    CHECK_PER_CLASS,
    EMBEDDING_SCORER,
    SCORE_SCHEMA,
    SCORE_SYSTEM,
    ModelScore,
    ScoreReplyError,
    mean_score,
    parse_score,
    score_prompt,
    similarity_reason,
    similarity_score,
)
from kmds_desktop.llm.errors import LLMError
from kmds_desktop.llm.structured import structured_chat
from kmds_desktop.tasks import Cancelled, CancelToken

Progress = Callable[[int, int, str], None]
#: Most tokens a score reply may take: ``{"score": 4}`` is 6 of Qwen2.5's tokens (a fenced reply without
#: a schema about 12); generating is the slow half of a request on a CPU, so anything longer is cut here.
SCORE_MAX_TOKENS = 16


def score_record(backend: Any, model: str, question: str, title: str, abstract: str,
                 cancel: CancelToken | None = None) -> tuple[int | None, str, str]:
    """``(score or None, reason, note)`` of one record by one model: the reply constrained to the score
    schema where the server takes it; a reply without a score (or a model that failed) gives a note.
    :class:`~kmds_desktop.tasks.Cancelled` passes through (the run stops between records)."""
    try:
        reply, _path = structured_chat(
            backend, score_prompt(question, title, abstract), SCORE_SCHEMA, system=SCORE_SYSTEM,
            cancel=cancel, model=model, temperature=0.0, options={"num_predict": SCORE_MAX_TOKENS},
        )
        score, reason = parse_score(reply)
    except (ScoreReplyError, LLMError) as err:
        return None, "", str(err).splitlines()[0][:300] if str(err) else type(err).__name__
    return score, reason, ""


@dataclass
class ScoringSummary:
    """What one scoring run did."""

    models: list[str]
    asked: int = 0
    scored: int = 0
    cached: int = 0
    cancelled: bool = False
    notes: dict[tuple[str, Key], str] = field(default_factory=dict)
    #: Each model's check against the decisions made (:meth:`ScreeningSession.score_checks`), one line each.
    checks: list[str] = field(default_factory=list)

    def line(self) -> str:
        parts = [f"{self.scored:,} scored", f"{self.cached:,} already scored (cached)"]
        if self.notes:
            parts.append(f"{len(self.notes):,} without a score (see the note per record)")
        head = "Scoring cancelled" if self.cancelled else "Scoring finished"
        checked = "".join(f". {line[:1].upper()}{line[1:]}" for line in self.checks)
        return f"{head} ({', '.join(self.models)}): " + ", ".join(parts) + checked


def llm_models(models: Sequence[str]) -> list[str]:
    """The LLMs among the configured query-generation models (``builtin:*`` are not LLMs)."""
    return [m for m in models if not m.lower().startswith("builtin:")]


def scoring_backend(settings: Any = None) -> tuple[Any, list[str]]:
    """``(backend, LLM model names)`` of the app's settings (query generation's models and servers);
    no LLM configured: ``(None, [])``."""
    from kmds_desktop.llm.factory import ModelDispatch  # why: start-up time: it loads httpx, ollama

    settings = settings or load_settings()
    qg = settings.query_generation
    models = llm_models(qg.models)
    if not models:
        return None, []
    return ModelDispatch(qg.ollama_host, qg.openai_base_url, timeout=qg.timeout_s), models


def _undecided(session: ScreeningSession) -> list[int]:
    with session._lock:  # noqa: SLF001 - the session's own lock guards its records and decisions
        return [i for i, r in enumerate(session.records) if r.key not in session.decisions]


def _check_sample(session: ScreeningSession, model: str, cached: dict[tuple[str, Key], Any]) -> list[int]:
    """Screened records a model scores before the undecided ones, so its scores can be checked against
    the user's decisions: up to :data:`CHECK_PER_CLASS` includes and as many excludes (the latest
    first), includes and excludes taken in turn, leaving out those it scored already."""
    with session._lock:  # noqa: SLF001 - the session's own lock guards its records and decisions
        order = list(reversed(session.decided_keys()))
        index = {r.key: i for i, r in enumerate(session.records)}
        picked: dict[str, list[int]] = {INCLUDE: [], EXCLUDE: []}
        scored: dict[str, int] = {INCLUDE: 0, EXCLUDE: 0}
        for key in order:
            d = session.decisions.get(key)
            if d is None or d.decision not in picked or key not in index:
                continue
            hit = cached.get((model, key))
            if hit is not None and hit[0] is not None:
                scored[d.decision] += 1
            elif len(picked[d.decision]) < CHECK_PER_CLASS:
                picked[d.decision].append(index[key])
    inc = picked[INCLUDE][: max(0, CHECK_PER_CLASS - scored[INCLUDE])]
    exc = picked[EXCLUDE][: max(0, CHECK_PER_CLASS - scored[EXCLUDE])]
    return [i for pair in zip_longest(inc, exc) for i in pair if i is not None]


def score_undecided(
    session: ScreeningSession,
    backend: Any,
    models: Sequence[str],
    *,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    limit: int | None = None,
) -> ScoringSummary:
    """Ask each model in turn (serial: local models share one machine) to score each undecided record
    not scored before; each answer is committed at once and announced (the session's ``model_scores``
    event: the Scores tab shows it as it comes), and Cancel stops between records (a request in flight
    is aborted). Where the user has decided records, each model first scores a few of them
    (:func:`_check_sample`), so whether its scores separate includes from excludes is known before its
    scores may feed the order. ``limit``: at most that many undecided records per model."""
    question = session.review.question
    if not question.strip():
        raise ScreeningError("this review has no question to score records against")
    summary = ScoringSummary(models=list(models))
    todo = _undecided(session)[: limit if limit is not None else None]
    plans = []
    for model in models:
        cached = session.store.model_scores(question, model)
        plans.append((model, cached, _check_sample(session, model, cached) + todo))
    total = sum(len(plan) for _m, _c, plan in plans)
    done = 0
    for model, cached, plan in plans:
        for i in plan:
            rec = session.records[i]
            if cancel is not None and cancel.cancelled:
                summary.cancelled = True
                break
            done += 1
            hit = cached.get((model, rec.key))
            if hit is not None and hit[0] is not None:
                summary.cached += 1
                continue
            if progress is not None:
                progress(done, total, f"{model}: {rec.title[:80]}")
            summary.asked += 1
            try:
                score, reason, note = score_record(backend, model, question, rec.title, rec.abstract, cancel)
            except Cancelled:
                summary.cancelled = True
                break
            session.store.set_model_score(model, question, rec.key, score, reason, note)
            session.model_score_added(ModelScore(model, score, reason, note), rec.key)
            if score is None:
                summary.notes[(model, rec.key)] = note
            else:
                summary.scored += 1
        if summary.cancelled:
            break
    session.model_scores_changed()
    summary.checks = [c.line() for c in session.score_checks() if c.model in summary.models]
    return summary


def score_by_similarity(
    session: ScreeningSession, encoder: Callable[[Sequence[str]], Any] | None = None
) -> ScoringSummary:
    """Score every record by the embedding model's cosine similarity to the question (no LLM): the
    vectors the review holds, and where one is missing ``encoder``'s (the window's embedding function)."""
    question = session.review.question
    if not question.strip():
        raise ScreeningError("this review has no question to score records against")
    name = f"{EMBEDDING_SCORER} ({session.vector_model})"
    vectors = session.store.vectors(session.review.id, session.vector_model)
    qv = vectors.pop(QUESTION_KEY, None)
    if qv is None and encoder is not None:
        qv = np.asarray(encoder([question])[0], dtype=np.float32)
    missing = [r for r in session.records if r.key not in vectors]
    if missing and encoder is not None:
        for rec, v in zip(missing, encoder([r.text for r in missing]), strict=True):
            vectors[rec.key] = np.asarray(v, dtype=np.float32)
    if qv is None or not vectors:
        raise ScreeningError(
            "no embedding vectors for this review's records or question: open it from a search on an "
            "embedded database, or start the embedding model"
        )
    summary = ScoringSummary(models=[name])
    qn = float(np.linalg.norm(qv)) or 1.0
    for rec in session.records:
        v = vectors.get(rec.key)
        if v is None:
            continue
        sim = float(np.dot(v, qv) / ((float(np.linalg.norm(v)) or 1.0) * qn))
        session.store.set_model_score(
            name, question, rec.key, similarity_score(sim), similarity_reason(sim, session.vector_model)
        )
        summary.scored += 1
    session.model_scores_changed()
    return summary


__all__ = [
    "ModelScore", "ScoringSummary", "mean_score", "score_by_similarity", "score_undecided", "scoring_backend",
]
