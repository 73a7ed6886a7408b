"""A screening session as a user drives it: one record at a time, decisions, undo, order, stopping, flow.

Why a session: the window and ``kmds-desktop literature screen`` must mean the same by every decision and
every figure. The session holds the review's records (one per paper), the decisions (committed to the
:class:`~kmds_desktop.literature.screening.decisions.DecisionStore` as they are made), the record on
screen and the order; a view renders :meth:`ScreeningSession.view` and forwards key presses to
:meth:`ScreeningSession.press` (or calls :meth:`include`, :meth:`exclude`, :meth:`maybe`, :meth:`undo`,
:meth:`go_to` from buttons), and subscribes to changes with :meth:`subscribe`.

Keys (:data:`KEYS`, :data:`REASON_KEYS`): a decision takes its own key (I include, E or X exclude, M maybe);
the number keys 1–9 only choose the exclusion reason that E then uses. A number key never decides: a row of
numbered reasons reads as "pick a reason", and one key that excluded at once threw records away unread.
Undo (U or Ctrl+Z) takes the last decisions back one by one; each record comes back on screen, and the
records that were next come back after it in the order they had (see :meth:`ScreeningSession.undo`).

Ordering (:class:`~kmds_desktop.literature.screening.ordering.OrderMode`): until there is one include and
one exclude, the search's fused rank (records from a file: similarity to the question, else file order);
then the active-learning order. Each decision bumps a generation counter and asks for a training; the
next record always comes from the scores of the last *finished* training (never waiting for one in
progress). ``background=False`` (the CLI, tests) trains at once in the calling thread. Otherwise the
session announces :data:`TRAINING_WANTED` and whoever runs background work runs
:meth:`ScreeningSession.train`, a plain job taking ``progress`` and ``cancel`` that trains until the
scores are of the latest decision: the window on the one Qt job runner, a script on any thread.
:data:`SCORES_TRAINED` may therefore be announced on that thread; a Qt view hands it to its GUI thread
with a queued signal.

Events (:mod:`kmds_desktop.app.events`; ``session.subscribe(listener)``, ``change.kind``):
:data:`RECORD_SHOWN`, :data:`DECIDED`, :data:`SCORES_TRAINED`, :data:`RECORDS_ADDED`, :data:`REASON_CHOSEN`,
:data:`MODEL_SCORES_CHANGED`, :data:`TRAINING_WANTED`.

Model scores in the order (:meth:`ScreeningSession.set_scores_in_model`, kept per review): each record's
1–5 score (the LLMs' mean where an LLM scored the review, else the embedding-similarity score) joins the
active-learning features as a column; it orders the queue and is named in "why ranked high" where it
adds, and it never decides a record. Until the user chooses, the scores earn their place: each scorer's
scores are checked against the user's own includes and excludes
(:func:`~kmds_desktop.literature.screening.model_scores.check_scores`, AUC on the screened records), and
only scorers that separate them feed the order; scores that do not (a model that gives 3 of 5 to every
record) are left out and :meth:`ScreeningSession.scores_in_model_line` says so.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kmds_desktop.app.events import Observable
from kmds_desktop.literature.screening import agreement, prisma, screened_export, stopping
from kmds_desktop.literature.screening.decisions import (
    EXCLUDE,
    INCLUDE,
    MAYBE,
    Decision,
    DecisionStore,
    ImportReport,
    Key,
    Review,
    ScreeningError,
    read_decisions_file,
)
from kmds_desktop.literature.screening.model_scores import (
    EMBEDDING_SCORER,
    MIN_DECISIONS_EACH,
    ModelScore,
    ScoreCheck,
    check_scores,
    mean_score,
)
from kmds_desktop.literature.screening.ordering import (
    DEFAULT_MODEL,
    ModelConfig,
    OrderMode,
    Scores,
    TextFeatures,
    best_undecided,
    question_similarity,
    top_terms,
    train,
)
from kmds_desktop.literature.screening.records import (
    ScreeningRecord,
    merge_duplicates,
    read_records_file,
    record_from_document,
)
from kmds_desktop.tasks import CancelToken, ProgressFn, report

log = logging.getLogger(__name__)

#: What a :class:`ScreeningSession` announces (see the module docstring): another record on screen; a
#: decision made or taken back; a training finished (its scores order the queue; may come from the
#: training's thread); records joined; another exclusion reason chosen; a record's model score came or
#: the cached scores were re-read; a training is wanted (run :meth:`ScreeningSession.train` off the GUI
#: thread; only a ``background`` session asks).
RECORD_SHOWN = "screening.record"
DECIDED = "screening.decided"
SCORES_TRAINED = "screening.scores"
RECORDS_ADDED = "screening.records"
REASON_CHOSEN = "screening.reason"
MODEL_SCORES_CHANGED = "screening.model_scores"
TRAINING_WANTED = "screening.training"

#: The embedding model whose document vectors join the order's features (the literature database's).
VECTOR_MODEL = "all-MiniLM-L6-v2"
#: The key under which the question's vector is kept beside the records' vectors.
QUESTION_KEY: Key = ("", "question")
#: The review setting that says whether the model scores feed the active-learning order.
SCORES_SETTING = "model_scores_in_order"
#: The review's setting: the order the user chose last (kept, so a reopened review goes on in it).
ORDER_SETTING = "screening_order"
#: How "why ranked high" names the score column: LLM scores, or the embedding model's (labelled so).
LLM_SCORE_LABEL = "LLM score (1–5)"
EMBEDDING_SCORE_LABEL = "embedding similarity score (1–5, no LLM)"

#: Keys a view forwards (:meth:`ScreeningSession.press`): i include, x/e exclude (with the reason last
#: chosen, or the first), m maybe, u or ctrl+z undo, left/right back/forward. The number keys are
#: :data:`REASON_KEYS`: they choose a reason and decide nothing.
KEYS = {
    "i": "include",
    "x": "exclude",
    "e": "exclude",
    "m": "maybe",
    "u": "undo",
    "ctrl+z": "undo",
    "left": "back",
    "right": "forward",
}
#: The keys that choose the exclusion reason of that number (1 the first); a reason only, never a decision.
REASON_KEYS = "123456789"
#: The actions of :data:`KEYS` that record a decision.
DECISION_ACTIONS = ("include", "exclude", "maybe")


@dataclass(frozen=True)
class Progress:
    total: int
    screened: int
    included: int
    since_last_include: int

    def line(self) -> str:
        """ "312 of 1,240 screened · 41 included · 19 since the last include"."""
        return (
            f"{self.screened:,} of {self.total:,} screened · {self.included:,} included · "
            f"{self.since_last_include:,} since the last include"
        )


@dataclass(frozen=True)
class RecordView:
    """What the view shows for the record on screen."""

    record: ScreeningRecord
    decision: Decision | None
    score: float | None
    why: list[tuple[str, float]]
    position: str  #: "record 313 of 1,240" or "decided record 12 of 312 (change it, or go on)"
    reasons: list[str]
    order: OrderMode
    ordered_by: str  #: what chose this record ("model score", "search rank", ...)


@dataclass
class StoppingReport:
    figures: stopping.StoppingFigures
    rules: list[stopping.RuleStatus]
    estimate_method: str = stopping.ESTIMATE_METHOD

    def lines(self) -> list[str]:
        f = self.figures
        out = [
            f"{f.share_screened:.0%} of the records screened; "
            f"{stopping.plural(f.since_last_include, 'record')} since the last include",
            f"about {f.remaining_estimate:.0f} relevant records may remain ({self.estimate_method})",
        ]
        for rule in self.rules:
            out.append(f"{'MET' if rule.met else 'not met'} — {rule.name}: {rule.detail}. {rule.assumption}")
        return out


@dataclass
class _Training:
    """The training's bookkeeping (under the session's lock): ``generation`` counts the changes that call
    for a training, ``attempted`` the newest one a training ran for; ``busy`` while a job runs."""

    generation: int = 0
    attempted: int = 0
    stop: bool = False
    busy: bool = False
    times: list[float] = field(default_factory=list)


def _order_or_active(value: Any) -> OrderMode:
    """``value`` as an order; active learning for none or for one this version does not know (a
    setting written by another version is not an error)."""
    try:
        return OrderMode(value) if value is not None else OrderMode.ACTIVE
    except ValueError:
        return OrderMode.ACTIVE


class ScreeningSession(Observable):
    """One review being screened (see the module docstring). ``background=False`` trains in the calling
    thread after each decision (tests, the CLI); otherwise it announces :data:`TRAINING_WANTED` and a
    background runner runs :meth:`train`."""

    def __init__(
        self,
        store: DecisionStore,
        review_id: str,
        *,
        model: ModelConfig = DEFAULT_MODEL,
        order: OrderMode | str | None = None,
        background: bool = True,
        seed: int = 0,
        consecutive_rule: int = stopping.DEFAULT_CONSECUTIVE,
        vector_model: str = VECTOR_MODEL,
        scores_in_model: bool | None = None,
    ) -> None:
        self.store = store
        self.vector_model = vector_model
        self.review: Review = store.review(review_id)
        #: The user's choice whether the model scores feed the order (the review's saved one unless given);
        #: None: not chosen, so the scores that separate the user's decisions feed it (:meth:`score_checks`).
        saved = self.review.settings.get(SCORES_SETTING)
        self._scores_choice: bool | None = (
            (None if saved is None else bool(saved)) if scores_in_model is None else bool(scores_in_model)
        )
        #: The scorers whose scores make the order's score column now (see :meth:`_feeding`).
        self._fed: frozenset[str] = frozenset()
        self._readvance = False
        self.model = model
        #: The order given, else the one the user chose last for this review, else active learning.
        self.order = OrderMode(order) if order is not None else _order_or_active(
            self.review.settings.get(ORDER_SETTING))
        self.seed = seed
        self.consecutive_rule = consecutive_rule
        self._lock = threading.RLock()
        self._background = background
        self._training = _Training()
        self._wake = threading.Condition(self._lock)
        self._scores: Scores | None = None
        self._current: int | None = None
        self._browse: int | None = None  # index into the decided order while going back
        #: Records to show again before the order's next pick, last first: each undone record and the
        #: record that was on screen when it was undone (with what had chosen it), so deciding them
        #: again walks the queue as it was. Decided or vanished entries are dropped when reached.
        self._resume: list[tuple[Key, str]] = []
        self._ordered_by = ""
        self.last_reason = ""
        #: The records the queue offers (None: all): an update's screening shows its new records alone.
        self.only: frozenset[Key] | None = None
        self._load()
        self._retrain()
        self._advance()

    # -- opening -------------------------------------------------------------------------------------
    @classmethod
    def open(
        cls, store: DecisionStore, review_id: str, *, question: str = "", **kwargs: Any
    ) -> ScreeningSession:
        """Open review ``review_id`` (created empty when new)."""
        store.create_review(review_id, question=question)
        return cls(store, review_id, **kwargs)

    def _load(self) -> None:
        self.records: list[ScreeningRecord] = self.store.records(self.review.id)
        self._index: dict[Key, int] = {}
        for i, rec in enumerate(self.records):
            self._index[rec.key] = i
            for alias in rec.aliases:
                self._index.setdefault(alias, i)
        self.decisions: dict[Key, Decision] = self.store.decisions(self.review.id)
        self._order_of_decisions: list[Key] = self.store.decision_order(self.review.id)
        #: Records that joined before the review's latest update (see :meth:`_earlier_round_indices`).
        self.earlier_rounds = self._earlier_round_indices()
        self._text_features = self._build_features()
        self._model_scores = self._read_model_scores()
        self.features = self._scored(self._text_features)
        self._fallback = self._fallback_order()
        self._scores = None

    def _earlier_round_indices(self) -> frozenset[int]:
        """The records that joined before the review's latest update: their decisions weigh
        :func:`~kmds_desktop.literature.screening.ordering.earlier_weight` in the order's model (an
        updated review's store keeps each record's round; a store without rounds, or a review never
        updated, has none)."""
        rounds_of = getattr(self.store, "rounds", None)  # a review store has rounds; a screening store not
        rounds: Mapping[Key, int] = rounds_of(self.review.id) if callable(rounds_of) else {}
        latest = max(rounds.values(), default=0)
        if not latest:
            return frozenset()
        return frozenset(i for i, rec in enumerate(self.records) if rounds.get(rec.key, 0) < latest)

    def _read_model_scores(self) -> dict[Key, list[ModelScore]]:
        out: dict[Key, list[ModelScore]] = {}
        if not self.review.question.strip():
            return out
        cached = self.store.model_scores(self.review.question)
        for (model, key), (score, reason, note) in sorted(cached.items()):
            out.setdefault(key, []).append(ModelScore(model, score, reason, note))
        return out

    def model_scores(self, key: Key | None = None) -> list[ModelScore]:
        """The 1–5 scores (with reason, or the note of a failed reply) of a record (default: on screen)."""
        if key is None:
            rec = self.current
            if rec is None:
                return []
            key = rec.key
        return list(self._model_scores.get(tuple(key), []))  # type: ignore[arg-type]

    def model_score_added(self, score: ModelScore, key: Key) -> None:
        """One record's new score (a scoring run committed it): shown at once (:data:`MODEL_SCORES_CHANGED`);
        the order takes the scores in when the run ends (:meth:`model_scores_changed`), not once a record."""
        with self._lock:
            kept = [s for s in self._model_scores.get(key, []) if s.model != score.model]
            self._model_scores[key] = sorted([*kept, score], key=lambda s: s.model)
        self.announce(MODEL_SCORES_CHANGED)

    def model_scores_changed(self) -> None:
        """Re-read the cached model scores (a scoring run committed some); the score order follows."""
        with self._lock:
            self._model_scores = self._read_model_scores()
            if self.order is OrderMode.SCORE:
                self._fallback = self._fallback_order()
            fed_before = self._fed
            self.features = self._scored(self._text_features)
        if self._fed or fed_before:
            self._retrain()
        self.announce(MODEL_SCORES_CHANGED)
        if self.order is OrderMode.SCORE and self._browse is None:
            self._advance()

    @property
    def scores_in_model(self) -> bool:
        """Whether model scores feed the order now: the user's choice, else whether any scorer's scores
        separate the user's includes from excludes."""
        if self._scores_choice is not None:
            return self._scores_choice
        return bool(self._feeding())

    @property
    def scorers_in_order(self) -> frozenset[str]:
        """The scorers whose scores make the order's score column now (empty: no column)."""
        return self._fed

    def _llm_scored(self) -> bool:
        """Whether an LLM scored this review (then its scores alone are the column's kind). Under the lock:
        a scoring run adds scores from its worker while the view reads this."""
        with self._lock:
            return any(
                s.score is not None and not s.model.startswith(EMBEDDING_SCORER)
                for scores in self._model_scores.values()
                for s in scores
            )

    def score_checks(self) -> list[ScoreCheck]:
        """Each scorer of the column's kind against the decisions made: AUC of its scores on the screened
        includes and excludes (maybes left out)."""
        llm = self._llm_scored()
        pairs: dict[str, list[tuple[int | None, bool]]] = {}
        with self._lock:
            for key, d in self.decisions.items():
                if d.decision == MAYBE:
                    continue
                for s in self._model_scores.get(key, []):
                    if s.model.startswith(EMBEDDING_SCORER) != llm:
                        pairs.setdefault(s.model, []).append((s.score, d.decision == INCLUDE))
            scorers = sorted({s.model for v in self._model_scores.values() for s in v
                              if s.model.startswith(EMBEDDING_SCORER) != llm})
        return [check_scores(m, pairs.get(m, [])) for m in scorers]

    def _feeding(self) -> frozenset[str]:
        """The scorers whose scores make the column: with the user's "on", every one not shown to fail;
        without a choice, the ones shown to separate; with "off", none."""
        if self._scores_choice is False:
            return frozenset()
        checks = self.score_checks()
        if self._scores_choice:
            return frozenset(c.model for c in checks if c.separates is not False)
        return frozenset(c.model for c in checks if c.separates)

    def score_column(self, scorers: frozenset[str] | None = None) -> tuple[list[float | None], str]:
        """Each record's score as the order's feature, and its name: the mean of the LLMs' scores where
        any LLM scored this review (records they did not score have none), else the embedding-similarity
        score; one kind per review, so a column never mixes a reader's 4 with a cosine's 4. ``scorers``:
        only theirs (default: every scorer of the kind)."""
        llm = self._llm_scored()
        with self._lock:
            values = [
                mean_score([
                    s for s in self._model_scores.get(r.key, [])
                    if s.model.startswith(EMBEDDING_SCORER) != llm and (scorers is None or s.model in scorers)
                ])
                for r in self.records
            ]
        return values, LLM_SCORE_LABEL if llm else EMBEDDING_SCORE_LABEL

    def _scored(self, features: TextFeatures | None) -> TextFeatures | None:
        """``features`` with the score columns of the scorers that feed the order (none: the plain ones)."""
        self._fed = self._feeding()
        if features is None or not self._fed:
            return features
        values, label = self.score_column(self._fed)
        return features.with_scores(values, weight=self.model.score_weight, label=label)

    def _regate(self) -> None:
        """After the decisions changed: a scorer may have passed (or failed) its check; the features
        follow, so the next training uses the scores that earn their place."""
        with self._lock:
            if self._feeding() != self._fed:
                self.features = self._scored(self._text_features)

    @property
    def scores_choice(self) -> bool | None:
        """The user's choice whether the model scores feed the order; None: the check decides."""
        return self._scores_choice

    def set_scores_in_model(self, on: bool | None) -> None:
        """Let the model scores feed the active-learning order (or stop it), or with None let the check
        decide again (the scores that separate the user's decisions feed it); kept with the review.
        Once the model has retrained with (or without) them, the queue goes on from its new order."""
        on = None if on is None else bool(on)
        with self._lock:
            if on == self._scores_choice:
                return
            self._scores_choice = on
            if on is None:
                self.review.settings.pop(SCORES_SETTING, None)
            else:
                self.review.settings[SCORES_SETTING] = on
            self.features = self._scored(self._text_features)
            self._readvance = self._browse is None and self._labels_trainable()
        self.store.set_settings(self.review.id, self.review.settings)
        self._retrain()

    def scores_in_model_line(self) -> str:
        """What the option does now, in words (the window's tooltip, the CLI's ``order``)."""
        values, label = self.score_column()
        have = sum(v is not None for v in values)
        if not self.scores_in_model:
            gate = (f"; they join once they separate your includes from your excludes, checked from "
                    f"{MIN_DECISIONS_EACH} scored of each") if self._scores_choice is None else ""
            kind = label.split(" (")[0]
            known = f" ({kind}s for {have:,} of {len(values):,} records{gate})" if have else ""
            return "model scores do not feed the order" + known
        if not have:
            return "model scores feed the order once there are some (none yet: score the records first)"
        fed, _label = self.score_column(self._fed)
        return (
            f"{label.split(' (')[0]}s of {sum(v is not None for v in fed):,} of {len(values):,} records feed "
            "the order (as a feature of the model; they never decide a record)"
        )

    def score_check_line(self) -> str:
        """One line on whether the scores mean something (the screening view's order bar): the scorers
        left out because their scores do not separate the user's decisions, else the ones that do; empty
        while no check can tell (nothing scored, or too few scored decisions)."""
        checks = self.score_checks()
        failed = [c for c in checks if c.separates is False]
        shown = failed or [c for c in checks if c.separates]
        return "; ".join(c.line() for c in shown) + "." if shown else ""

    def _build_features(self) -> TextFeatures | None:
        """TF-IDF of the records, with the document vectors the review holds (see :meth:`add_vectors`)."""
        if not self.records:
            return None
        vectors = self.store.vectors(self.review.id, self.vector_model) if self.model.vector_weight else {}
        question_vector = vectors.pop(QUESTION_KEY, None)
        rows = []
        for rec in self.records:
            v = vectors.get(rec.key)
            for alias in rec.aliases if v is None else ():
                v = vectors.get(alias)
                if v is not None:
                    break
            rows.append(v)
        return TextFeatures.build(
            [r.text for r in self.records],
            self.review.question,
            self.model.ngram_max,
            vectors=rows if any(v is not None for v in rows) else None,
            question_vector=question_vector,
            vector_weight=self.model.vector_weight,
        )

    def add_vectors(self, vectors: Mapping[Key, Any], question_vector: Any = None) -> int:
        """Document vectors (of :attr:`vector_model`) for the review's records, and the question's: kept
        in the store and joined to the order's features. Returns how many records have one now."""
        wanted = dict(vectors)
        if question_vector is not None:
            wanted[QUESTION_KEY] = question_vector
        self.store.set_vectors(self.review.id, self.vector_model, wanted)
        with self._lock:
            self._text_features = self._build_features()
            self.features = self._scored(self._text_features)
            self._scores = None
        self._retrain()
        return self.features.with_vectors if self.features is not None else 0

    def _fallback_order(self) -> list[int]:
        n = len(self.records)
        if self.order is OrderMode.SCORE:
            means, _kind = self.score_column()  # one kind of score, as the active-learning column has
            return sorted(
                range(n),
                key=lambda i: (means[i] is None, -(means[i] or 0), self.records[i].rank or 10**9, i),
            )
        if self.order is OrderMode.RANDOM:
            order = list(range(n))
            random.Random(self.seed).shuffle(order)  # noqa: S311 - reproducible from the seed, not a secret
            return order
        ranked = [i for i in range(n) if self.records[i].rank is not None]
        if ranked:
            return sorted(
                range(n), key=lambda i: (self.records[i].rank is None, self.records[i].rank or 0, i)
            )
        if self.features is not None and self.features.question is not None:
            sim = question_similarity(self.features)
            return sorted(range(n), key=lambda i: (-sim[i], i))
        return list(range(n))

    def add_records(
        self, records: Iterable[ScreeningRecord], *, origin: str, per_row: Mapping[str, int] | None = None
    ) -> int:
        """New records join the queue (duplicates by identity, DOI or PMID are folded into the record the
        review already has; decided ones are never asked again). Returns how many are new."""
        incoming = list(records)
        for rec in incoming:
            if origin not in rec.origins:
                rec.origins.append(origin)
        with self._lock:
            unique, _ = merge_duplicates(list(self.records) + incoming)
            added = self.store.add_records(
                self.review.id, unique, origin=origin, identified=len(incoming), per_row=per_row,
                identities=[rec.key for rec in incoming],
            )
            self._load()
        self._retrain()
        if self._current is None or self._browse is None:
            self._advance()
        self.announce(RECORDS_ADDED)
        return added

    def add_file(self, path: str | Path) -> int:
        """Records of a RIS or CSV file."""
        return self.add_records(read_records_file(path), origin=f"file {Path(path).name}")

    def add_documents(
        self,
        documents: Sequence[Mapping[str, Any]],
        *,
        origin: str,
        ranks: Mapping[int, int] | None = None,
        found_by: Mapping[int, Sequence[str]] | None = None,
        per_row: Mapping[str, int] | None = None,
    ) -> int:
        """Literature-database documents (a search's merged documents, best rank first)."""
        recs = []
        for n, doc in enumerate(documents, start=1):
            doc_id = doc.get("id")
            rank = (ranks or {}).get(doc_id, n) if isinstance(doc_id, int) else n
            rows = (found_by or {}).get(doc_id, ()) if isinstance(doc_id, int) else ()
            recs.append(record_from_document(doc, rank=rank, found_by=rows, origin=origin))
        return self.add_records(recs, origin=origin, per_row=per_row)

    # -- training --------------------------------------------------------------------------------------
    def _labels(self) -> dict[int, bool]:
        return {
            self._index[k]: d.decision == INCLUDE
            for k, d in self.decisions.items()
            if d.decision != MAYBE and k in self._index
        }

    def _retrain(self) -> None:
        """The decisions, features or model changed: train now (``background=False``), else ask for a
        training (:data:`TRAINING_WANTED`); the queue goes on from the last finished scores meanwhile."""
        self._regate()
        with self._lock:
            self._training.generation += 1
            background = self._background
        if background:
            self.announce(TRAINING_WANTED)
            return
        with self._lock:
            self._training.attempted = self._training.generation
        self._train_once()

    @property
    def training_wanted(self) -> bool:
        """Whether a change since the last training asks for one (a background runner attached after the
        session opened starts with one when this is true)."""
        with self._lock:
            return self._background and self._training.attempted < self._training.generation

    def train(self, progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> bool:
        """The background training job: train until the scores are of the latest change, then return
        (True when a training finished). Plain Python: the window runs it on the one Qt job runner,
        a script on any thread.

        Why a loop and not one training per request: decisions come faster than trainings. A job that
        finds another one running leaves it the work (that one trains again for what came meanwhile),
        so requests queued behind it cost nothing and the order never lags more than one training.
        A failed training keeps the previous scores; the order goes on."""
        with self._lock:
            if self._training.busy:
                return False
            self._training.busy = True
        trained = False
        try:
            while True:
                with self._lock:
                    target = self._training.generation
                    decided = len(self.decisions)
                    if self._training.stop or self._training.attempted >= target or (
                        cancel is not None and cancel.cancelled
                    ):
                        self._training.busy = False
                        self._wake.notify_all()
                        return trained
                report(progress, 0, None, f"Learning the screening order from {decided:,} decisions")
                try:
                    trained = self._train_once() or trained
                except Exception:  # a failed training keeps the previous scores
                    log.warning("screening training failed; the previous order stays", exc_info=True)
                with self._lock:
                    self._training.attempted = max(self._training.attempted, target)
                    self._wake.notify_all()
        except BaseException:
            with self._lock:
                self._training.busy = False
                self._wake.notify_all()
            raise

    def _train_once(self) -> bool:
        with self._lock:
            features, labels, generation = self.features, self._labels(), self._training.generation
            config, earlier = self.model, self.earlier_rounds
        if features is None:
            return False
        started = time.perf_counter()
        result = train(features, labels, config, generation=generation, earlier=earlier)
        with self._lock:
            if features is not self.features:  # records changed while training
                return False
            if result is not None:
                self._training.times.append(time.perf_counter() - started)
            if result is not None and (self._scores is None or result.generation >= self._scores.generation):
                self._scores = result
            readvance = result is not None and self._readvance
            if readvance:
                self._readvance = False
        if result is not None:
            self.announce(SCORES_TRAINED)
        if readvance and self._browse is None:
            self._advance()  # the order changed (model scores in or out): go on from the new one
        return result is not None

    def wait_for_training(self, timeout: float = 10.0) -> bool:
        """Block until the latest change's training finished (tests and scripts; the view never waits).
        False after ``timeout``: a training still running, or none asked for ran (nothing runs
        :meth:`train` for this session)."""
        if not self._background:
            return True
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                done = not self._training.busy and (
                    self._scores is None
                    and not self._labels_trainable()
                    or self._scores is not None
                    and self._scores.generation >= self._training.generation
                    or self._training.attempted >= self._training.generation
                )
                if done:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wake.wait(left)

    def _labels_trainable(self) -> bool:
        values = set(self._labels().values())
        return True in values and False in values

    @property
    def training_seconds(self) -> list[float]:
        return list(self._training.times)

    def close(self, timeout: float = 5.0) -> None:
        """Stop training (decisions are already on disk): a training job running now ends after the
        training in hand (waited for up to ``timeout`` seconds), and no later one starts."""
        deadline = time.monotonic() + timeout
        with self._lock:
            self._training.stop = True
            self._wake.notify_all()
            while self._training.busy and (left := deadline - time.monotonic()) > 0:
                self._wake.wait(left)

    def __enter__(self) -> ScreeningSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the queue -------------------------------------------------------------------------------------
    def _decided_mask(self) -> np.ndarray:
        mask = np.zeros(len(self.records), dtype=bool)
        for k in self.decisions:
            i = self._index.get(k)
            if i is not None:
                mask[i] = True
        if self.only is not None:  # records outside the chosen ones are never offered
            mask |= np.array([rec.key not in self.only for rec in self.records], dtype=bool)
        return mask

    def show_only(self, keys: frozenset[Key] | None) -> None:
        """Offer only ``keys`` in the queue (None: every record again); decisions and training still
        use every record, so the model trained on all earlier decisions orders them."""
        with self._lock:
            self.only = frozenset(keys) if keys is not None else None
        if self._browse is None:
            self._advance()

    def _next_index(self) -> tuple[int | None, str]:
        mask = self._decided_mask()
        while self._resume:  # an undo's records first, as they were (see :meth:`undo`)
            key, how = self._resume[-1]
            i = self._index.get(key)
            if i is not None and not mask[i]:
                return i, how
            self._resume.pop()
        check = self.sample_check()
        if check is not None:
            for key in check.sample:
                i = self._index.get(tuple(key))  # type: ignore[arg-type]
                if i is not None and not mask[i]:
                    return i, "random sample"
        scores = self._scores
        if self.order is OrderMode.ACTIVE and scores is not None and len(scores.values) == len(self.records):
            pick = best_undecided(scores.values, mask)
            if pick is not None:
                return pick, "model score"
        for i in self._fallback:
            if not mask[i]:
                how = (
                    "random order"
                    if self.order is OrderMode.RANDOM
                    else "model score (1–5)"
                    if self.order is OrderMode.SCORE and self._model_scores.get(self.records[i].key)
                    else ("search rank" if self.records[i].rank is not None else "similarity to the question")
                )
                return i, how
        return None, ""

    def queue(self, n: int = 10) -> list[tuple[int, str]]:
        """The next ``n`` undecided records (index, what orders them) as the queue would offer them now."""
        with self._lock:
            mask = self._decided_mask()
            out: list[tuple[int, str]] = []
            for key, how in reversed(self._resume):
                i = self._index.get(key)
                if i is not None and not mask[i] and len(out) < n:
                    out.append((i, how))
                    mask[i] = True
            check = self.sample_check()
            for key in check.sample if check is not None else ():
                i = self._index.get(tuple(key))  # type: ignore[arg-type]
                if i is not None and not mask[i] and len(out) < n:
                    out.append((i, "random sample"))
                    mask[i] = True
            scores = self._scores
            trained = scores is not None and len(scores.values) == len(self.records)
            if self.order is OrderMode.ACTIVE and scores is not None and trained:
                ranked = np.argsort(-scores.values, kind="stable")
                out += [(int(i), "model score") for i in ranked if not mask[i]][: max(0, n - len(out))]
            else:
                out += [(i, self.order.value) for i in self._fallback if not mask[i]][: max(0, n - len(out))]
            return out

    def _advance(self) -> None:
        with self._lock:
            self._browse = None
            self._current, self._ordered_by = self._next_index()
        self.announce(RECORD_SHOWN)

    @property
    def current(self) -> ScreeningRecord | None:
        i = self._current
        return None if i is None else self.records[i]

    def set_order(self, mode: OrderMode | str) -> None:
        """Switch between the active-learning order, rank order, random order and the model scores'
        order; kept with the review, so reopening it goes on in the same order."""
        with self._lock:
            self.order = OrderMode(mode)
            self._fallback = self._fallback_order()
            self.review.settings[ORDER_SETTING] = self.order.value
        self.store.set_settings(self.review.id, self.review.settings)  # kept with the review
        if self._browse is None:
            self._advance()

    def set_model(self, model: ModelConfig) -> None:
        with self._lock:
            self.model = model
            self._text_features = self._build_features()
            self.features = self._scored(self._text_features)
            self._scores = None
        self._retrain()

    # -- deciding --------------------------------------------------------------------------------------
    def decide(self, decision: str, *, reason: str = "", note: str = "",
               shown: Key | None = None) -> ScreeningRecord | None:
        """Decide the record on screen (a new one, or a decided one being changed); returns the next.

        ``shown``: the key of the record the view showed when the user decided. A scoring run or a
        retraining may move the queue on (from a worker) between the view's last render and the key
        press; the decision then goes to the record the user read, not to the one that took its place."""
        at = self._current
        if shown is not None and (at is None or self.records[at].key != tuple(shown)):
            at = self._index.get(tuple(shown))  # type: ignore[arg-type]
        rec = None if at is None else self.records[at]
        if rec is None:
            raise ScreeningError("there is no record to decide: every record is screened")
        if decision == EXCLUDE and not reason:
            reason = self.last_reason
        if decision == EXCLUDE and reason:
            self.last_reason = reason
        score = None
        if self._scores is not None and at is not None and len(self._scores.values) > at:
            score = float(self._scores.values[at])
        made = self.store.decide(self.review.id, rec.key, decision, reason=reason, note=note, score=score)
        with self._lock:
            browsing = self._browse
            if rec.key not in self.decisions:
                self._order_of_decisions.append(rec.key)
            self.decisions[rec.key] = made
        self._retrain()
        self.announce(DECIDED)
        if browsing is not None and browsing + 1 < len(self._order_of_decisions):
            self._show_decided(browsing + 1)
        else:
            self._advance()
        return self.current

    def include(self, note: str = "") -> ScreeningRecord | None:
        return self.decide(INCLUDE, note=note)

    def exclude(self, reason: str = "", note: str = "") -> ScreeningRecord | None:
        return self.decide(EXCLUDE, reason=reason, note=note)

    def maybe(self, note: str = "") -> ScreeningRecord | None:
        return self.decide(MAYBE, note=note)

    def undo(self) -> ScreeningRecord | None:
        """Take back the last decision (repeatable: the store keeps every change, so Ctrl+Z three times
        takes back three); its record comes back on screen, undecided or with its decision before.

        Why the resume stack: the record that was next must stay next. Undo after deciding A, B and C
        (D on screen) shows C, B, A in turn; deciding A again shows B, then C, then D, whatever the
        model learnt meanwhile, so no record the user was about to read slips back into the queue."""
        key = self.store.undo(self.review.id)
        if key is None:
            return self.current
        with self._lock:
            self.decisions = self.store.decisions(self.review.id)
            self._order_of_decisions = self.store.decision_order(self.review.id)
            shown = self.current
            if shown is not None and self._browse is None and shown.key not in self.decisions:
                self._push_resume(shown.key, self._ordered_by)
            i = self._index.get(key)
            if i is not None and key not in self.decisions:
                self._push_resume(key, "undone")
                self._browse, self._current, self._ordered_by = None, i, "undone"
        self._retrain()
        self.announce(DECIDED)  # the decisions changed: the decided list and the progress follow
        if i is None:
            self._advance()  # the record left the review: the queue goes on
        elif key in self.decisions:
            self._show_decided(self._order_of_decisions.index(key))  # a change undone: its decision before
        else:
            self.announce(RECORD_SHOWN)
        return self.current

    def _push_resume(self, key: Key, how: str) -> None:
        """Put ``key`` on top of the resume stack (once: an older entry of it goes)."""
        self._resume = [entry for entry in self._resume if entry[0] != key]
        self._resume.append((key, how))

    def decided_keys(self) -> list[Key]:
        """Decided records in the order they were first decided (the view's list to go back in)."""
        return list(self._order_of_decisions)

    def go_to(self, key: Key) -> ScreeningRecord:
        """Show a record (decided or not) to read or change its decision."""
        i = self._index.get(tuple(key))  # type: ignore[arg-type]
        if i is None:
            raise ScreeningError(f"{key[0]}:{key[1]} is not in this review")
        rec = self.records[i]
        if rec.key in self.decisions:
            self._show_decided(self._order_of_decisions.index(rec.key))
        else:
            with self._lock:
                self._browse, self._current, self._ordered_by = None, i, "chosen"
            self.announce(RECORD_SHOWN)
        return rec

    def _show_decided(self, position: int) -> None:
        with self._lock:
            self._browse = position
            self._current = self._index[self._order_of_decisions[position]]
            self._ordered_by = "decided earlier"
        self.announce(RECORD_SHOWN)

    def back(self) -> ScreeningRecord | None:
        """The decided record before the one on screen (from the queue: the last decided). The record
        that was on screen in the queue is the one Forward comes back to, whatever the model learnt
        meanwhile (as after :meth:`undo`)."""
        if not self._order_of_decisions:
            return self.current
        if self._browse is None:  # leaving the queue: the record on screen is the one Forward comes back to
            shown = self.current
            if shown is not None and shown.key not in self.decisions:
                with self._lock:
                    self._push_resume(shown.key, self._ordered_by)
        pos = len(self._order_of_decisions) - 1 if self._browse is None else max(0, self._browse - 1)
        self._show_decided(pos)
        return self.current

    def forward(self) -> ScreeningRecord | None:
        """The next decided record, and after the last one the queue again."""
        if self._browse is None:
            return self.current
        if self._browse + 1 < len(self._order_of_decisions):
            self._show_decided(self._browse + 1)
        else:
            self._advance()
        return self.current

    def press(self, key: str) -> bool:
        """A key press forwarded by a view (see :data:`KEYS`); True when it meant something. A number
        key (:data:`REASON_KEYS`) chooses the reason E will use and decides nothing."""
        key = key.lower()
        if len(key) == 1 and key in REASON_KEYS:
            return self.choose_reason(int(key)) is not None
        action = KEYS.get(key)
        if action is None or (self.current is None and action in DECISION_ACTIONS):
            return False
        if action == "exclude":
            self.exclude(self.chosen_reason())
        else:
            getattr(self, action)()
        return True

    def chosen_reason(self) -> str:
        """The reason an exclude without one gets: the one last chosen or used, else the first."""
        return self.last_reason or (self.review.reasons[0] if self.review.reasons else "")

    def choose_reason(self, reason: str | int) -> str | None:
        """Choose the exclusion reason (its text, or its number from 1) that E and Exclude will use;
        decides nothing. Returns the reason, or None when there is no such reason."""
        reasons = self.review.reasons
        if isinstance(reason, int):
            if not 0 < reason <= len(reasons):
                return None
            reason = reasons[reason - 1]
        elif reason not in reasons:
            return None
        self.last_reason = reason
        self.announce(REASON_CHOSEN)
        return reason

    def highlight_words(self) -> dict[str, list[str]]:
        """The words the view marks in each record, kept with the review: ``include`` (green) and
        ``exclude`` (red)."""
        words = self.review.settings.get("keywords") or {}
        return {"include": list(words.get("include", [])), "exclude": list(words.get("exclude", []))}

    def set_highlight_words(self, include: Sequence[str], exclude: Sequence[str]) -> bool:
        """Keep the words to mark with the review (they decide nothing); True when they changed."""
        words = {"include": list(include), "exclude": list(exclude)}
        if self.review.settings.get("keywords") == words:
            return False
        self.review.settings["keywords"] = words
        self.store.set_settings(self.review.id, self.review.settings)
        return True

    def set_reasons(self, reasons: Sequence[str]) -> list[str]:
        """Edit the list of exclusion reasons (decisions keep the reason they were given)."""
        self.review.reasons = self.store.set_reasons(self.review.id, reasons)
        if self.last_reason not in self.review.reasons:
            self.last_reason = ""  # E must not exclude with a reason the list no longer shows
        return self.review.reasons

    # -- what the view shows ---------------------------------------------------------------------------
    def _sequence(self) -> list[bool]:
        return [
            self.decisions[k].decision == INCLUDE for k in self._order_of_decisions if k in self.decisions
        ]

    def progress(self) -> Progress:
        seq = self._sequence()
        fig = stopping.figures(len(self.records), seq)
        return Progress(
            total=len(self.records),
            screened=fig.screened,
            included=fig.included,
            since_last_include=fig.since_last_include,
        )

    def view(self) -> RecordView | None:
        i = self._current
        if i is None:
            return None
        rec = self.records[i]
        scores = self._scores
        score = float(scores.values[i]) if scores is not None and len(scores.values) > i else None
        why = self.why(i)
        if self._browse is not None:
            position = f"decided record {self._browse + 1:,} of {len(self._order_of_decisions):,}"
        else:
            position = f"record {len(self.decisions) + 1:,} of {len(self.records):,}"
        return RecordView(
            record=rec,
            decision=self.decisions.get(rec.key),
            score=score,
            why=why,
            position=position,
            reasons=list(self.review.reasons),
            order=self.order,
            ordered_by=self._ordered_by,
        )

    def why(self, index: int) -> list[tuple[str, float]]:
        """ "Why ranked high" for record ``index``: what adds most to its score in the last training."""
        scores, features = self._scores, self.features
        if features is None or scores is None or len(scores.values) != features.size:
            return []
        return top_terms(features, scores, index)

    def scores_by_key(self) -> dict[Key, float]:
        scores = self._scores
        if scores is None or len(scores.values) != len(self.records):
            return {}
        return {r.key: float(scores.values[i]) for i, r in enumerate(self.records)}

    # -- stopping --------------------------------------------------------------------------------------
    def sample_check(self) -> stopping.SampleCheck | None:
        data = self.review.settings.get("sample")
        if not data:
            return None
        return stopping.SampleCheck(
            target=float(data["target"]),
            sample=tuple(tuple(k) for k in data["keys"]),
            undecided_at_draw=int(data["undecided"]),
            included_at_draw=int(data["included"]),
        )

    def start_sample_check(
        self, target: float = stopping.DEFAULT_TARGET_RECALL, size: int | None = None
    ) -> stopping.SampleCheck:
        """Draw the random sample of the target-recall rule from the undecided records; they are offered
        next (in random order) until all are decided."""
        undecided = [r.key for r in self.records if r.key not in self.decisions]
        included = sum(1 for d in self.decisions.values() if d.decision == INCLUDE)
        n = size if size is not None else stopping.sample_size(len(undecided), included, target)
        rng = random.Random(self.seed + len(self.decisions))  # noqa: S311 - reproducible, not a secret
        keys = rng.sample(undecided, min(n, len(undecided)))
        data = {
            "target": target,
            "keys": [list(k) for k in keys],
            "undecided": len(undecided),
            "included": included,
        }
        self.review.settings["sample"] = data
        self.store.set_settings(self.review.id, self.review.settings)
        self._advance()
        return self.sample_check()  # type: ignore[return-value]

    def stopping_report(self) -> StoppingReport:
        seq = self._sequence()
        fig = stopping.figures(len(self.records), seq)
        check = self.sample_check()
        sampled = [
            None if k not in self.decisions else self.decisions[k].decision == INCLUDE
            for k in (check.sample if check else ())
        ]
        return StoppingReport(
            fig,
            [
                stopping.consecutive_rule(fig, self.consecutive_rule),
                stopping.sample_rule(check, sampled, fig.included),
            ],
        )

    # -- flow, exports, other reviewers ----------------------------------------------------------------
    def flow(self) -> prisma.PrismaFlow:
        return prisma.build_flow(
            sources=self.store.sources(self.review.id),
            unique_records=len(self.records),
            decisions={k: d for k, d in self.decisions.items() if k in self._index},
            identities=self.store.source_identities(self.review.id),
            reasons=self.review.reasons,
            entered=self.store.flow_numbers(self.review.id),
        )

    def write_flow_svg(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(prisma.flow_svg(self.flow(), self.review.name), encoding="utf-8")
        return path

    def export(self, path: str | Path, fmt: str | None = None, which: str = "included") -> Path:
        chosen = screened_export.select(self.records, self.decisions, which)
        return screened_export.export_screened(chosen, self.decisions, path, fmt, scores=self.scores_by_key())

    def export_decisions(self, path: str | Path, reviewer: str = "me") -> Path:
        path = Path(path)
        path.write_text(self.store.export_decisions(self.review.id, reviewer), encoding="utf-8", newline="")
        return path

    def import_decisions(self, path: str | Path, reviewer: str | None = None) -> ImportReport:
        return self.store.import_decisions(self.review.id, read_decisions_file(path), reviewer)

    def agreement(self, reviewer: str) -> agreement.Agreement:
        return agreement.compare(self.decisions, self.store.other_decisions(self.review.id, reviewer))


def records_from_history(
    history: Any, database: Any, number: int
) -> tuple[list[ScreeningRecord], dict[str, int]]:
    """A history set's documents as records (best rank first) with the rows that found each, and the
    number of documents per row (the PRISMA flow's "identified per row")."""
    saved = history.complete_set(number)
    members = history.members(number)
    labels = {r.position: f"row {r.position}: {r.text}" for r in saved.rows}
    row_ids = history.all_row_ids(number)
    found: dict[int, list[str]] = {}
    for pos, ids in row_ids.items():
        for doc_id in ids:
            found.setdefault(doc_id, []).append(f"#{number} {labels.get(pos, f'row {pos}')}")
    per_row = {labels.get(pos, f"row {pos}"): len(ids) for pos, ids in row_ids.items()}
    rank = {m.doc_id: m.rank for m in members}
    docs = database.fetch_documents_by_ids([m.doc_id for m in members], order="given")
    recs = [
        record_from_document(d, rank=rank.get(d["id"]), found_by=found.get(d["id"], []), origin=f"#{number}")
        for d in docs
    ]
    return recs, per_row


def latency_p95(samples: Sequence[float]) -> float:
    """95th percentile (nearest rank) of ``samples``."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
