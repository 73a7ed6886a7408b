"""The active-learning order: which undecided record to offer next, from the decisions so far.

Why this design (chosen by ``bench/screening_simulation.py`` on the odd-numbered CF questions, the even
ones held out): TF-IDF over title + abstract with unigrams and bigrams (sublinear tf, English stop words),
fitted once per pool (it needs no labels, so a retrain only fits the classifier), and a linear SVM
(C = 0.11, includes weighted up to balance the excludes) on the decided records, whose score ranks the
undecided ones ("max" query: the most likely relevant first). On the dev questions it matched or beat
naive Bayes, logistic regression (C = 10; also 20-50x slower to train here) and SVM C = 1, and the SVM
trains fastest.
The review question, when there is one, joins the training set as one extra *included* document: before
many includes it pulls records that share the question's words upward (it helps most on small pools).

Before there is at least one include and one exclude no classifier can be trained; the order is then the
search's own rank (or the similarity to the question, or random), see :class:`OrderMode`.

Everything here is plain numpy/scipy/scikit-learn so training on 10,000 records stays under a second
(``bench/screening_simulation.py`` prints the figure), and it runs on the session's background thread.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.naive_bayes import ComplementNB, MultinomialNB
from sklearn.svm import LinearSVC


class OrderMode(StrEnum):
    """How the queue is ordered: the model's scores (the default), the search's rank, or random."""

    ACTIVE = "active"
    RANK = "rank"
    RANDOM = "random"


@dataclass(frozen=True)
class ModelConfig:
    """Features and classifier of the order (the defaults are the simulation's pick)."""

    classifier: str = "svm"  #: ``svm`` | ``lr`` | ``sgd`` | ``cnb`` | ``nb``
    ngram_max: int = 2
    question_prior: bool = True
    #: Weight of the question's pseudo-document among the includes.
    question_weight: float = 1.0
    #: Inverse regularisation (``lr``, ``svm``) or smoothing (``cnb``, ``nb``).
    c: float = 0.11
    #: Weight of the includes relative to the excludes (class balance: includes are rare).
    balance: bool = True

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
        return f"TF-IDF ({grams}) + {names.get(self.classifier, self.classifier)}{prior}"


DEFAULT_MODEL = ModelConfig()


@dataclass
class TextFeatures:
    """TF-IDF vectors of one pool (row i = record i) and of the question; fitted once, reused by
    every retrain."""

    matrix: sparse.csr_matrix
    terms: np.ndarray
    question: sparse.csr_matrix | None = None
    seconds: float = 0.0
    vectorizer: TfidfVectorizer | None = field(default=None, repr=False)

    @classmethod
    def build(cls, texts: Sequence[str], question: str = "", ngram_max: int = 2) -> TextFeatures:
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
            vectorizer = TfidfVectorizer(dtype=np.float32, token_pattern=r"(?u)\b\w+\b")
            matrix = vectorizer.fit_transform([(t or "") + " _" for t in texts]).tocsr()
        qvec = vectorizer.transform([question]).tocsr() if question.strip() else None
        if qvec is not None and qvec.nnz == 0:
            qvec = None
        return cls(
            matrix=matrix,
            terms=np.asarray(vectorizer.get_feature_names_out()),
            question=qvec,
            seconds=time.perf_counter() - started,
            vectorizer=vectorizer,
        )

    def with_question(self, question: str) -> TextFeatures:
        """The same vectors with another question (no refit: one pool, many questions)."""
        qvec = None
        if self.vectorizer is not None and question.strip():
            qvec = self.vectorizer.transform([question]).tocsr()
            if qvec.nnz == 0:
                qvec = None
        return TextFeatures(
            matrix=self.matrix,
            terms=self.terms,
            question=qvec,
            seconds=self.seconds,
            vectorizer=self.vectorizer,
        )

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


def train(
    features: TextFeatures,
    labels: Mapping[int, bool],
    config: ModelConfig = DEFAULT_MODEL,
    *,
    generation: int = 0,
) -> Scores | None:
    """Fit the classifier on the decided records (``labels``: record index -> included) and score all.

    None when there is not yet one include and one exclude."""
    if not can_train(labels):
        return None
    started = time.perf_counter()
    idx = np.fromiter(labels.keys(), dtype=np.int64, count=len(labels))
    y = np.fromiter((1 if labels[i] else 0 for i in idx), dtype=np.int64, count=len(idx))
    x = features.matrix[idx]
    weight = np.ones(len(y), dtype=np.float64)
    if config.question_prior and features.question is not None:
        x = sparse.vstack([x, features.question], format="csr")
        y = np.append(y, 1)
        weight = np.append(weight, config.question_weight)
    if config.balance:
        pos, neg = float(weight[y == 1].sum()), float(weight[y == 0].sum())
        weight[y == 1] *= max(1.0, neg / max(pos, 1e-9))
    model = _classifier(config)
    model.fit(x, y, sample_weight=weight)
    if hasattr(model, "decision_function"):
        values = np.asarray(model.decision_function(features.matrix), dtype=np.float64)
    else:
        values = np.asarray(model.predict_log_proba(features.matrix), dtype=np.float64)
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
    """ "Why ranked high": the record's terms that add most to its score (TF-IDF × weight), best first."""
    if scores is None or scores.weights is None:
        return []
    row = features.matrix[index]
    contrib = row.data * scores.weights[row.indices]
    order = np.argsort(-contrib)[:n]
    return [(str(features.terms[row.indices[j]]), float(contrib[j])) for j in order if contrib[j] > 0]


def question_similarity(features: TextFeatures) -> np.ndarray:
    """Cosine similarity of each record to the question (rows are L2-normalised); zeros without one."""
    if features.question is None:
        return np.zeros(features.size)
    return np.asarray((features.matrix @ features.question.T).toarray()).ravel()


def best_undecided(values: np.ndarray, decided: np.ndarray) -> int | None:
    """Index of the highest value among records not yet decided (ties: the earlier record)."""
    masked = np.where(decided, -np.inf, values)
    if not len(masked) or not np.isfinite(masked).any():
        return None
    return int(np.argmax(masked))
