"""Synthetic KMDS knowledge bases of any size, in the real file format, for benchmarks and scale tests.

The text is generated from templates over a small vocabulary of columns, transformations,
models and metrics, so findings are varied enough for keyword and semantic search to behave
as on real KBs (not "Observation - 17" placeholders). Deterministic for a given seed.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from kmds_desktop.kb.knowledge_base import KnowledgeBase, save_kb
from kmds_desktop.kb.model import Observation, Workflow
from kmds_desktop.kb.store import KBStore
from kmds_desktop.kb.vocabulary import CATEGORY_CLASS, KMDS_NS, MAIN_CATEGORIES, OBSERVATION_TYPES

_COLUMNS = (
    "age",
    "income",
    "tenure_months",
    "monthly_charges",
    "region",
    "signup_date",
    "last_login",
    "order_value",
    "basket_size",
    "discount_rate",
    "support_tickets",
    "device_type",
    "plan_tier",
    "payment_method",
    "credit_score",
    "household_size",
    "visits_per_week",
    "churn_flag",
)
_ISSUES = (
    "has {pct}% missing values, concentrated in records from {segment}",
    "is right-skewed with a long tail above the 99th percentile",
    "contains {n} duplicate rows that share the same customer id and timestamp",
    "mixes two date formats (ISO and day-first) across source systems",
    "has implausible values below zero in {n} rows, likely data-entry errors",
    "is almost constant ({pct}% of rows share one value) and carries little signal",
    "is strongly correlated (r = 0.{corr}) with {other}",
    "shows a sudden level shift after the {month} system migration",
    "differs in distribution between {segment} and the remaining customers",
    "is only relevant for the {segment} segment and can be dropped elsewhere",
)
_SEGMENTS = ("the north region", "new sign-ups", "mobile users", "enterprise accounts", "the 2019 cohort")
_MONTHS = ("March", "June", "September", "December")
_TRANSFORMS = (
    "{col} was log-transformed to reduce skew before scaling",
    "{col} was one-hot encoded; rare levels under 1% were grouped as 'other'",
    "{col} was standardised to zero mean and unit variance on the training split only",
    "a ratio feature {col}_per_visit was derived from {col} and visits_per_week",
    "missing {col} values were imputed with the median of the customer's segment",
    "{col} was binned into quintiles to stabilise the relationship with the target",
    "timestamps were converted to days since {col} to capture recency",
    "{col} was target-encoded with 5-fold out-of-fold means to avoid leakage",
)
_MODELS = (
    "logistic regression",
    "gradient boosted trees",
    "random forest",
    "a shallow decision tree",
    "a naive Bayes classifier",
    "a generalised additive model",
    "LightGBM",
    "a linear SVM",
)
_CHOICES = (
    "{model} was chosen as the baseline because it is fast and easy to explain to stakeholders",
    "we assume observations are independent across customers, so no mixed-effects term is used",
    "class imbalance ({pct}% positives) is handled with class weights instead of resampling",
    "{model} was preferred over deep models because the table has under {n}000 rows",
    "the decision threshold is tuned for recall because missed churners cost more than false alarms",
    "we assume the relationship between {col} and the target is monotonic",
    "time-based splitting is used so that the model never trains on future data",
)
_SELECTIONS = (
    "{model} reached AUC 0.{auc} on the hold-out set, {delta} points above the baseline",
    "5-fold cross-validation compared {model} and {model2}; {model} had the lower log loss",
    "the final model is {model}: best F1 (0.{f1}) at an acceptable training time",
    "model selection used a fixed 80/20 split stratified by the target",
    "{model2} overfitted: training AUC 0.{auc} but validation {delta} points lower",
    "calibration of {model} was checked with a reliability curve; Brier score 0.{brier}",
    "permutation importance ranks {col} first in the selected {model}",
)


def _fill(template: str, rng: random.Random) -> str:
    model, model2 = rng.sample(_MODELS, 2)
    col, other = rng.sample(_COLUMNS, 2)
    return template.format(
        col=col,
        other=other,
        model=model,
        model2=model2,
        pct=rng.randint(2, 45),
        n=rng.randint(2, 90),
        corr=rng.randint(70, 97),
        segment=rng.choice(_SEGMENTS),
        month=rng.choice(_MONTHS),
        auc=rng.randint(68, 94),
        f1=rng.randint(55, 88),
        brier=rng.randint(8, 25),
        delta=rng.randint(2, 12),
    )


def _finding(category: str, rng: random.Random) -> str:
    if category == "exploratory":
        return f"Column {rng.choice(_COLUMNS)} {_fill(rng.choice(_ISSUES), rng)}."
    if category == "data_representation":
        text = _fill(rng.choice(_TRANSFORMS), rng)
    elif category == "modelling_choice":
        text = _fill(rng.choice(_CHOICES), rng)
    else:
        text = _fill(rng.choice(_SELECTIONS), rng)
    return text[0].upper() + text[1:] + "."


_INTENTS = {
    "exploratory": ("DATA_UNDERSTANDING", "DATA_HETEROGENEITY_ASSESSMENT"),
    "data_representation": ("FEATURE_ASSESSMENT",),
    "modelling_choice": ("MODEL_EXPLANATION", "MODEL_SELECTION"),
    "model_selection": ("MODEL_SELECTION", "MODEL_EXPLANATION"),
}


def synthetic_kb(
    path: str | os.PathLike[str], n_observations: int, n_workflows: int = 2, seed: int = 0
) -> KnowledgeBase:
    """Build (without saving) a KB of ``n_observations`` spread over ``n_workflows`` workflows."""
    if n_observations < 0 or n_workflows < 1:
        raise ValueError("n_observations must be >= 0 and n_workflows >= 1")
    rng = random.Random(seed)  # noqa: S311 - a reproducible test KB, not a secret
    workflows: list[Workflow] = []
    for w in range(n_workflows):
        name = f"synthetic_workflow_{w + 1}"
        workflows.append(
            Workflow(
                iri=KMDS_NS + name,
                name=name,
                kind="KnowledgeExtractionExperimentationWorkflow"
                if w % 2 == 0
                else "KnowledgeApplicationWorkflow",
                description=f"Synthetic customer-analytics workflow {w + 1} of {n_workflows} (seed {seed})",
                depends_on=[workflows[-1].name] if workflows else [],
            )
        )
    seq: dict[tuple[str, str], int] = {}
    counter: dict[str, int] = {}
    observations = []
    for i in range(n_observations):
        category = MAIN_CATEGORIES[i % len(MAIN_CATEGORIES)]
        wf = workflows[(i // len(MAIN_CATEGORIES)) % n_workflows].name
        key = (wf, category)
        seq[key] = seq.get(key, 0) + 1
        counter[category] = counter.get(category, 0) + 1
        name = f"{CATEGORY_CLASS[category].lower()}{counter[category]}"
        observations.append(
            Observation(
                iri=KMDS_NS + name,
                name=name,
                category=category,
                obs_type=rng.choice(OBSERVATION_TYPES[category]),
                finding=_finding(category, rng),
                finding_seq=seq[key],
                intent=rng.choice(_INTENTS[category]),
                workflows=[wf],
                file_order=i,
            )
        )
    return KnowledgeBase(path, workflows, observations, _store=KBStore.empty())


def write_synthetic_kb(
    path: str | os.PathLike[str], n_observations: int, n_workflows: int = 2, seed: int = 0
) -> Path:
    """Write a synthetic KB file in the KMDS format and return its path."""
    kb = synthetic_kb(path, n_observations, n_workflows, seed)
    return save_kb(kb, path)
