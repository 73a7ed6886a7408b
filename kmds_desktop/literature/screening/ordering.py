"""The active-learning order: which undecided record to offer next, from the decisions so far.

Why this design (chosen by ``bench/screening_simulation.py`` on the odd-numbered CF questions, the even
ones held out): TF-IDF over title + abstract with unigrams and bigrams (sublinear tf, English stop words),
fitted once per pool (it needs no labels, so a retrain only fits the classifier), joined by the record's
document vector (the shipped embedding model's, all-MiniLM-L6-v2, as the literature database holds it)
scaled by :attr:`ModelConfig.vector_weight`; a linear SVM (C = 0.05) on the decided records, the includes
weighted 9.8 times what would balance the excludes (ASReview's "balanced" sample weights), whose score
ranks the undecided ones ("max" query: the most likely relevant first).
The review question, when there is one, joins the training set as one extra *included* document (its
TF-IDF and its vector): before many includes it pulls records that share the question's words upward.

What moved it on the dev questions (mean WSS@95, whole corpus / bm25s top 500; ASReview's default
0.466 / 0.462): TF-IDF alone, includes balanced 0.443 / 0.493; weighted 9.8x 0.462 / 0.499; with the
document vectors at weight 0.5, 1.0, 2.0: 0.526 / 0.552, 0.535 / 0.530, 0.519 / 0.502; weight 0.5 and
C = 0.05: 0.536 / 0.566 (the default). Adding the search rank as a prior (−w·log(1 + rank)) lowered it at
every weight tried, the question's vector as well as its words helped (0.524 / 0.532 without it at 0.7),
and a logistic regression on the same features trained too slowly for a retrain per decision.
Without vectors (records from a file, a database without them) the TF-IDF part alone is used.

Model scores as features (:meth:`TextFeatures.with_scores`; which scorers feed them is the session's
call, :mod:`kmds_desktop.app.screening`: by default those whose scores separate the user's includes from
excludes): each record's 1–5 score (the LLMs' mean, or the embedding-similarity score) scaled to 0–1
becomes one more column, and a second column marks the records without a score (they get the mean of the
others). The question's pseudo-document gets the top score. They move the order only; no score decides a
record. The simulation cannot measure them (its pools have no LLM scores).

An updated review (records joined in a later round, :mod:`kmds_desktop.literature.reviews`) trains on
every decision, on TF-IDF refitted over every record of the review (both rounds' words and idf: the session
builds the features from all its records), and the earlier rounds' decisions fade as the update's own grow
(:attr:`ModelConfig.earlier_round_fade`: each weighs 1 / (1 + n / 30) after n decisions of the update). Why:
round one's decisions are what the warm start knows that a cold one does not, but the update's records are
of other years, their words drift, and the update's own decisions describe them better as they accumulate.
Measured (``bench/living_review.py``: CF 1974–77 then 1978–79, 44 questions a side with 2 or more new
relevant records, 5 draws of the priors, warm / cold WSS@95; each option paired against the previous default,
every decision alike, on the same kept rounds and draws): odd questions 1.189 → 1.210 (higher in each of the
5 draws), with every record's vector 1.049 → 1.065; held-out even ones 1.250 → 1.249, with vectors 1.044 →
1.041 (both within one standard error: a tie, not a loss); in two runs of the bench, with the previous
default replayed beside it, odd 1.171 → 1.191 and 1.196 → 1.213, held out 1.249 and 1.253 either way. So
the gain is the odd questions'; the held-out ones neither gain nor lose. A fade of 10 gave 1.206 odd but
1.238 held out.

Tried and not adopted (same pairing; odd → held-out even, without vectors unless said; none moved both): the
earlier rounds weighed 0.5 with :attr:`ModelConfig.earlier_round_c` 0.2 (1.225 odd, 1.247 held out; with
vectors 1.077 / 1.006, a loss); round one's excludes weighed 0.5 (1.198 / 1.247); its includes weighed 2, as
extra question pseudo-documents (1.183 / 1.232); the half of round one's excludes least like the update's
records left out (1.217 / 1.242), or those least like any include (1.208 / 1.247); the update's own model
beside the warm one, z-scores summed at half weight (1.200 / 1.255; with vectors 1.051 / 1.044) or whole
(1.179 / 1.230); features split per round (Daumé's augmentation: shared, earlier-only and update-only copies;
× 0.5: 1.192 / 1.260, with vectors 1.050 / 1.052); include ratio 1, 3 or 20, C from 0.02 to
0.5, the earlier rounds weighed 0.25 or 2, the question weighed 3 or left out (each within ±0.02 on the
odd questions, 3 draws).

Before there is at least one include and one exclude no classifier can be trained; the order is then the
search's own rank (or the similarity to the question, or random), see :class:`OrderMode`.

Everything here is plain numpy/scipy/scikit-learn so training on 10,000 records stays under a second
(``bench/screening_simulation.py`` prints the figure), and it runs on the session's background thread.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.naive_bayes import ComplementNB, MultinomialNB
from sklearn.svm import LinearSVC


class OrderMode(StrEnum):
    """How the queue is ordered: the model's scores (the default), the search's rank, random, or the
    LLMs' (or the embedding model's) 1–5 scores, best first (unscored records after, in rank order)."""

    ACTIVE = "active"
    RANK = "rank"
    RANDOM = "random"
    SCORE = "score"


@dataclass(frozen=True)
class ModelConfig:
    """Features and classifier of the order (the defaults are the simulation's pick)."""

    classifier: str = "svm"  #: ``svm`` | ``lr`` | ``sgd`` | ``cnb`` | ``nb``
    ngram_max: int = 2
    question_prior: bool = True
    #: Weight of the question's pseudo-document among the includes.
    question_weight: float = 1.0
    #: Inverse regularisation (``lr``, ``svm``) or smoothing (``cnb``, ``nb``).
    c: float = 0.05
    #: Weight of the includes relative to the excludes (class balance: includes are rare).
    balance: bool = True
    #: With ``balance``: the includes weigh this many times what balances the excludes (ASReview: 9.8).
    include_ratio: float = 9.8
    #: Scale of the document vectors beside the TF-IDF columns (0: TF-IDF only). Naive Bayes cannot
    #: take them (negative values) and ignores them.
    vector_weight: float = 0.5

    #: An updated review's model (its new records ordered by what earlier rounds taught): the decisions
    #: of earlier rounds weigh this much each beside the latest round's (1: alike), and the classifier's
    #: C is :attr:`earlier_round_c` (None: :attr:`c`). See the module docstring for what was measured.
    earlier_round_weight: float = 1.0
    earlier_round_c: float | None = None
    #: ... and fade as the latest round's own decisions grow: × 1 / (1 + n / fade) with n the latest
    #: round's decisions so far (0: no fading). 30: half weight after 30 decisions of the update.
    earlier_round_fade: float = 30.0

    #: Scale of the model-score columns (score 0–1 and "no score") when the scores feed the order.
    score_weight: float = 1.0

    def describe(self) -> str:
        names = {
            "lr": "logistic regression",
            "svm": "linear SVM",
            "sgd": "SGD (log loss)",
            "cnb": "complement naive Bayes",
            "nb": "multinomial naive Bayes",
        }
        grams = "unigrams" if self.ngram_max == 1 else f"1–{self.ngram_max}-grams"
        prior = ", the question as an extra include" if self.question_prior else ""
        vectors = f" and document vectors (× {self.vector_weight:g})" if self.vector_weight else ""
        weights = f", includes × {self.include_ratio:g} balanced" if self.balance else ""
        return (
            f"TF-IDF ({grams}){vectors} + {names.get(self.classifier, self.classifier)} "
            f"(C = {self.c:g}{weights}){prior}"
        )


DEFAULT_MODEL = ModelConfig()


DEFAULT_VECTOR_WEIGHT = DEFAULT_MODEL.vector_weight


def _dense_block(
    vectors: Sequence[np.ndarray | None] | np.ndarray | None, n: int, weight: float
) -> tuple[sparse.csr_matrix | None, int]:
    """The vector columns (× ``weight``; zeros for a record without a vector) and how many have one.
    None when no record has a vector, the weight is 0, or the vectors disagree in length."""
    if vectors is None or weight <= 0 or n == 0:
        return None, 0
    rows = list(vectors)
    if len(rows) != n:
        raise ValueError(f"{len(rows)} vectors for {n} records")
    present = [np.asarray(v, dtype=np.float32).ravel() for v in rows if v is not None]
    if not present:
        return None, 0
    dim = present[0].shape[0]
    if dim == 0 or any(v.shape[0] != dim for v in present):
        return None, 0
    block = np.zeros((n, dim), dtype=np.float32)
    for i, v in enumerate(rows):
        if v is not None:
            block[i] = np.asarray(v, dtype=np.float32).ravel() * weight
    return sparse.csr_matrix(block), len(present)


@dataclass
class TextFeatures:
    """TF-IDF vectors of one pool (row i = record i) and of the question; fitted once, reused by
    every retrain."""

    matrix: sparse.csr_matrix
    terms: np.ndarray
    question: sparse.csr_matrix | None = None
    seconds: float = 0.0
    vectorizer: TfidfVectorizer | None = field(default=None, repr=False)
    #: The TF-IDF part alone (naive Bayes, "why ranked high"); ``matrix`` adds the vector columns.
    tfidf: sparse.csr_matrix | None = field(default=None, repr=False)
    #: Records that have a document vector (the rest have zeros in those columns).
    with_vectors: int = 0
    vector_weight: float = 0.0
    question_text: sparse.csr_matrix | None = field(default=None, repr=False)
    question_vector: np.ndarray | None = field(default=None, repr=False)
    #: The model-score columns at the end of ``matrix`` (0, or 2: score 0–1 and "no score").
    score_columns: int = 0
    score_weight: float = 0.0
    #: What the score columns hold ("LLM score (1–5)"), for "why ranked high".
    score_label: str = ""
    #: Records with a score (the others carry the mean and the "no score" mark).
    with_scores_count: int = 0

    @classmethod
    def build(
        cls,
        texts: Sequence[str],
        question: str = "",
        ngram_max: int = 2,
        *,
        vectors: Sequence[np.ndarray | None] | np.ndarray | None = None,
        question_vector: np.ndarray | None = None,
        vector_weight: float = DEFAULT_VECTOR_WEIGHT,
    ) -> TextFeatures:
        """TF-IDF of ``texts`` and, where ``vectors`` are given (one per text, None where a record has
        none), the unit-length document vectors × ``vector_weight`` as extra columns."""
        started = time.perf_counter()
        vectorizer = TfidfVectorizer(
            ngram_range=(1, ngram_max),
            sublinear_tf=True,
            stop_words="english",
            min_df=1,
            max_df=0.95 if len(texts) > 20 else 1.0,
            dtype=np.float32,
        )
        try:
            matrix = vectorizer.fit_transform([t or "" for t in texts]).tocsr()
        except ValueError:  # no words at all (an empty pool or only stop words)
            vectorizer = TfidfVectorizer(dtype=np.float32, token_pattern=r"(?u)\b\w+\b")  # noqa: S106 - a regex
            matrix = vectorizer.fit_transform([(t or "") + " _" for t in texts]).tocsr()
        qvec = vectorizer.transform([question]).tocsr() if question.strip() else None
        if qvec is not None and qvec.nnz == 0:
            qvec = None
        dense, have = _dense_block(vectors, len(texts), vector_weight)
        full = matrix if dense is None else sparse.hstack([matrix, dense], format="csr", dtype=np.float32)
        feats = cls(
            matrix=full,
            terms=np.asarray(vectorizer.get_feature_names_out()),
            question=None,
            seconds=0.0,
            vectorizer=vectorizer,
            tfidf=matrix,
            with_vectors=have,
            vector_weight=vector_weight if dense is not None else 0.0,
        )
        feats._set_question(qvec, question_vector)
        feats.seconds = time.perf_counter() - started
        return feats

    def _set_question(self, qvec: sparse.csr_matrix | None, question_vector: np.ndarray | None) -> None:
        self.question_text = qvec
        self.question_vector = question_vector
        self.question = self._question_row(qvec, question_vector)
        if self.question is not None and self.score_columns:
            # The question is the one record sure to be relevant: the top score, not "no score".
            top = np.array([[self.score_weight, 0.0]], dtype=np.float32)
            self.question = sparse.hstack([self.question, sparse.csr_matrix(top)], format="csr")

    def _question_row(
        self, qvec: sparse.csr_matrix | None, question_vector: np.ndarray | None
    ) -> sparse.csr_matrix | None:
        dim = self.vector_columns
        if dim == 0:  # no vector columns
            return qvec
        qv = None
        if question_vector is not None and np.asarray(question_vector).shape == (dim,):
            qv = np.asarray(question_vector, dtype=np.float32) * self.vector_weight
        if qvec is None and qv is None:
            return None
        text = qvec if qvec is not None else sparse.csr_matrix((1, self.terms.shape[0]), dtype=np.float32)
        empty = sparse.csr_matrix((1, dim), dtype=np.float32)
        dense = sparse.csr_matrix(qv[None, :]) if qv is not None else empty
        return sparse.hstack([text, dense], format="csr", dtype=np.float32)

    @property
    def vector_columns(self) -> int:
        return int(self.matrix.shape[1]) - int(self.terms.shape[0]) - self.score_columns

    def with_scores(
        self, scores: Sequence[float | None] | None, *, weight: float = 1.0, label: str = "model score"
    ) -> TextFeatures:
        """The same features with the records' model scores (1–5, None where a record has none) as two
        columns × ``weight``: the score scaled to 0–1 (the mean of the others where there is none) and
        "no score" (1 where there is none). ``scores`` None, all None, or ``weight`` 0: no columns."""
        base = self.matrix
        if self.score_columns:
            base = base[:, : base.shape[1] - self.score_columns]
        values = list(scores) if scores is not None else []
        if values and len(values) != self.size:
            raise ValueError(f"{len(values)} scores for {self.size} records")
        present = [float(v) for v in values if v is not None]
        feats = TextFeatures(
            matrix=base,
            terms=self.terms,
            seconds=self.seconds,
            vectorizer=self.vectorizer,
            tfidf=self.tfidf,
            with_vectors=self.with_vectors,
            vector_weight=self.vector_weight,
        )
        if present and weight > 0:
            scaled = np.array(
                [np.nan if v is None else (min(5.0, max(1.0, float(v))) - 1.0) / 4.0 for v in values],
                dtype=np.float32,
            )
            missing = np.isnan(scaled)
            scaled[missing] = float(np.nanmean(scaled))
            block = np.stack([scaled, missing.astype(np.float32)], axis=1) * weight
            feats.matrix = sparse.hstack([base, sparse.csr_matrix(block)], format="csr", dtype=np.float32)
            feats.score_columns, feats.score_weight, feats.score_label = 2, weight, label
            feats.with_scores_count = len(present)
        feats._set_question(self.question_text, self.question_vector)
        return feats

    def with_question(self, question: str, question_vector: np.ndarray | None = None) -> TextFeatures:
        """The same features with another question (no refit: one pool, many questions)."""
        qvec = None
        if self.vectorizer is not None and question.strip():
            qvec = self.vectorizer.transform([question]).tocsr()
            if qvec.nnz == 0:
                qvec = None
        feats = TextFeatures(
            matrix=self.matrix,
            terms=self.terms,
            seconds=self.seconds,
            vectorizer=self.vectorizer,
            tfidf=self.tfidf,
            with_vectors=self.with_vectors,
            vector_weight=self.vector_weight,
            score_columns=self.score_columns,
            score_weight=self.score_weight,
            score_label=self.score_label,
            with_scores_count=self.with_scores_count,
        )
        feats._set_question(qvec, question_vector)
        return feats

    @property
    def text_matrix(self) -> sparse.csr_matrix:
        return self.tfidf if self.tfidf is not None else self.matrix

    @property
    def size(self) -> int:
        return int(self.matrix.shape[0])


@dataclass
class Scores:
    """One finished training: a score per record (higher = more likely included) and the weights."""

    values: np.ndarray
    weights: np.ndarray | None
    trained_on: int
    seconds: float
    #: The decision count when the training started (the session compares it with its own).
    generation: int = 0
    config: ModelConfig = field(default_factory=ModelConfig)


def _classifier(config: ModelConfig, seed: int = 0):  # noqa: ANN202 - sklearn estimators have no common type
    if config.classifier == "lr":
        return LogisticRegression(C=config.c, max_iter=200, solver="liblinear")
    if config.classifier == "svm":
        return LinearSVC(C=config.c)
    if config.classifier == "sgd":
        return SGDClassifier(
            loss="log_loss", alpha=1e-4 / max(config.c, 1e-6), max_iter=30, tol=None, random_state=seed
        )
    if config.classifier == "cnb":
        return ComplementNB(alpha=config.c)
    if config.classifier == "nb":
        return MultinomialNB(alpha=config.c)
    raise ValueError(f"unknown classifier {config.classifier!r}")


def can_train(labels: Mapping[int, bool]) -> bool:
    """A classifier needs at least one include and one exclude."""
    values = set(labels.values())
    return True in values and False in values


def earlier_weight(config: ModelConfig, latest_decisions: int) -> float:
    """The weight of each earlier round's decision once the latest round has ``latest_decisions``: the
    update's own decisions describe its records (their words drift from year to year) better as they
    grow, so round one's count for less (see the module docstring for what was measured)."""
    fade = config.earlier_round_fade
    faded = 1.0 / (1.0 + max(0, latest_decisions) / fade) if fade > 0 else 1.0
    return config.earlier_round_weight * faded


def train(
    features: TextFeatures,
    labels: Mapping[int, bool],
    config: ModelConfig = DEFAULT_MODEL,
    *,
    generation: int = 0,
    earlier: Collection[int] = (),
) -> Scores | None:
    """Fit the classifier on the decided records (``labels``: record index -> included) and score all.
    ``earlier``: the records decided in earlier rounds of an updated review; their decisions weigh
    :func:`earlier_weight` of the decisions of the others (the latest round's); none for a first screening.

    None when there is not yet one include and one exclude."""
    if not can_train(labels):
        return None
    started = time.perf_counter()
    idx = np.fromiter(labels.keys(), dtype=np.int64, count=len(labels))
    y = np.fromiter((1 if labels[i] else 0 for i in idx), dtype=np.int64, count=len(idx))
    x = features.matrix[idx]
    weight = np.ones(len(y), dtype=np.float64)
    earlier_set = frozenset(earlier)
    warm = bool(earlier_set) and any(int(i) in earlier_set for i in idx)
    if warm:
        from_earlier = np.fromiter((int(i) in earlier_set for i in idx), dtype=bool, count=len(idx))
        weight[from_earlier] = earlier_weight(config, int((~from_earlier).sum()))
    if config.question_prior and features.question is not None:
        x = sparse.vstack([x, features.question], format="csr")
        y = np.append(y, 1)
        weight = np.append(weight, config.question_weight)
    if config.balance:
        pos, neg = float(weight[y == 1].sum()), float(weight[y == 0].sum())
        weight[y == 1] *= config.include_ratio * neg / max(pos, 1e-9)
        weight *= len(y) / weight.sum()  # mean 1, so C means the same at any balance
    earlier_c = config.earlier_round_c
    model = _classifier(replace(config, c=earlier_c) if warm and earlier_c is not None else config)
    everything = features.matrix
    if config.classifier in ("cnb", "nb") and features.tfidf is not None:  # no negative columns
        text_cols = features.terms.shape[0]
        x, everything = x[:, :text_cols], features.tfidf
    model.fit(x, y, sample_weight=weight)
    if hasattr(model, "decision_function"):
        values = np.asarray(model.decision_function(everything), dtype=np.float64)
    else:
        values = np.asarray(model.predict_log_proba(everything), dtype=np.float64)
        values = values[:, 1] - values[:, 0]
    weights: np.ndarray | None
    if hasattr(model, "coef_"):
        weights = np.asarray(model.coef_).ravel()
    elif hasattr(model, "feature_log_prob_"):
        weights = np.asarray(model.feature_log_prob_[1] - model.feature_log_prob_[0]).ravel()
    else:
        weights = None
    return Scores(
        values=values,
        weights=weights,
        trained_on=len(labels),
        generation=generation,
        seconds=time.perf_counter() - started,
        config=config,
    )


def top_terms(
    features: TextFeatures, scores: Scores | None, index: int, n: int = 8
) -> list[tuple[str, float]]:
    """ "Why ranked high": the record's terms that add most to its score (TF-IDF × weight), best first;
    with document vectors, their part as one entry ("meaning (document vector)") where it adds; with the
    model scores as features, theirs as one entry named by :attr:`TextFeatures.score_label`."""
    if scores is None or scores.weights is None:
        return []
    row = features.matrix[index]
    if len(scores.weights) < features.matrix.shape[1]:  # naive Bayes: the TF-IDF columns only
        keep = row.indices < len(scores.weights)
        row = sparse.csr_matrix((row.data[keep], row.indices[keep], [0, int(keep.sum())]), shape=row.shape)
    contrib = row.data * scores.weights[row.indices]
    text_cols = features.terms.shape[0]
    score_from = features.matrix.shape[1] - features.score_columns
    words = row.indices < text_cols
    rated = row.indices >= score_from
    out = [(str(features.terms[row.indices[j]]), float(contrib[j])) for j in np.flatnonzero(words)]
    meaning = float(contrib[~words & ~rated].sum())
    if meaning > 0:
        out.append((VECTOR_TERM, meaning))
    rating = float(contrib[rated].sum())
    if features.score_columns and rating > 0:
        out.append((features.score_label or SCORE_TERM, rating))
    out.sort(key=lambda t: -t[1])
    return [t for t in out[:n] if t[1] > 0]


#: The "why ranked high" entry for the document vector's part of a score.
VECTOR_TERM = "meaning (document vector)"
#: The entry for the model scores' part, when the features do not name them.
SCORE_TERM = "model score"


def question_similarity(features: TextFeatures) -> np.ndarray:
    """Cosine similarity of each record to the question (rows are L2-normalised); zeros without one."""
    if features.question is None:
        return np.zeros(features.size)
    cols = features.matrix.shape[1] - features.score_columns
    matrix, question = features.matrix, features.question
    if features.score_columns:
        matrix, question = matrix[:, :cols], question[:, :cols]
    return np.asarray((matrix @ question.T).toarray()).ravel()


def best_undecided(values: np.ndarray, decided: np.ndarray) -> int | None:
    """Index of the highest value among records not yet decided (ties: the earlier record)."""
    masked = np.where(decided, -np.inf, values)
    if not len(masked) or not np.isfinite(masked).any():
        return None
    return int(np.argmax(masked))
