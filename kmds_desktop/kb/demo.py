"""The demo knowledge base shipped in ``resources/demo_kb.xml``, and the script that writes it.

It records two real analyses of the Palmer penguins data (Horst, Hill & Gorman 2020; 344 penguins
measured at Palmer Station, Antarctica, 2007-2009, CC0): species classification and body-mass
regression. The figures are from the data set itself and from scikit-learn runs with 5-fold
cross-validation (shuffled, random_state=42), so the demo answers questions with true statements.

Regenerate with ``python -m kmds_desktop.kb.demo [OUT]`` (default: the resources file).
"""

from __future__ import annotations

import sys
from pathlib import Path

from kmds_desktop.kb.knowledge_base import KnowledgeBase, new_kb, save_kb
from kmds_desktop.paths import demo_kb_path

CLASSIFICATION = "penguin species classification"
REGRESSION = "penguin body mass regression"

# (category, obs_type, intent, finding) per workflow, in finding order within each category.
_CLASSIFICATION_OBS: list[tuple[str, str, str, str]] = [
    (
        "exploratory",
        "Relevance Observation",
        "DATA_UNDERSTANDING",
        "The penguins table has 344 rows and 8 columns: species, island, bill_length_mm, bill_depth_mm, "
        "flipper_length_mm, body_mass_g, sex and year. Each row is one penguin.",
    ),
    (
        "exploratory",
        "Data Quality Observation",
        "DATA_UNDERSTANDING",
        "Two rows (an Adelie from Torgersen, 2007, and a Gentoo from Biscoe, 2009) have all four body "
        "measurements missing; they carry no information for the classifier and are dropped, leaving 342.",
    ),
    (
        "exploratory",
        "Data Quality Observation",
        "DATA_UNDERSTANDING",
        "sex is missing for 11 penguins (6 Adelie, 5 Gentoo); the other 333 are 168 male and 165 female.",
    ),
    (
        "exploratory",
        "Relevance Observation",
        "DATA_HETEROGENEITY_ASSESSMENT",
        "Classes are imbalanced: 152 Adelie, 124 Gentoo and 68 Chinstrap. A majority-class guess scores "
        "about 0.44 accuracy, which is the floor any model must beat.",
    ),
    (
        "exploratory",
        "Relevance Observation",
        "DATA_HETEROGENEITY_ASSESSMENT",
        "Island is confounded with species: Gentoo live only on Biscoe, Chinstrap only on Dream, and "
        "Adelie on all three islands (44 Biscoe, 56 Dream, 52 Torgersen).",
    ),
    (
        "exploratory",
        "Relevance Observation",
        "FEATURE_ASSESSMENT",
        "Gentoo penguins stand apart on bill depth (mean 15.0 mm against 18.3 mm for Adelie and 18.4 mm "
        "for Chinstrap) and flipper length (mean 217 mm against 190 and 196 mm).",
    ),
    (
        "exploratory",
        "Relevance Observation",
        "FEATURE_ASSESSMENT",
        "Bill length separates Adelie (mean 38.8 mm) from Chinstrap (48.8 mm) and Gentoo (47.5 mm); "
        "no single measurement separates all three species.",
    ),
    (
        "exploratory",
        "Data Quality Observation",
        "DATA_UNDERSTANDING",
        "Bill length and bill depth are negatively correlated over all penguins (r = -0.24) but "
        "positively within every species (r = 0.39 to 0.65): a Simpson's paradox caused by mixing species.",
    ),
    (
        "data_representation",
        "Data Transformation Observation",
        "FEATURE_ASSESSMENT",
        "The four numeric measurements are standardised (zero mean, unit variance), fitted inside each "
        "cross-validation fold so no information leaks from the test folds.",
    ),
    (
        "data_representation",
        "Feature Engineering Observation",
        "FEATURE_ASSESSMENT",
        "island is left out of the features: it is a proxy for species on Biscoe and Dream and would not "
        "transfer to penguins from other colonies.",
    ),
    (
        "data_representation",
        "Data Transformation Observation",
        "FEATURE_ASSESSMENT",
        "Rows with missing sex are kept for classification because sex is not used as a feature.",
    ),
    (
        "data_representation",
        "Feature Engineering Observation",
        "FEATURE_ASSESSMENT",
        "The target species is encoded as three unordered classes; no ordering between species is implied.",
    ),
    (
        "data_representation",
        "Data Transformation Observation",
        "DATA_UNDERSTANDING",
        "Folds are stratified by species so Chinstrap (20% of rows) appears in every test fold.",
    ),
    (
        "modelling_choice",
        "Modelling Choice Observation",
        "MODEL_EXPLANATION",
        "Multinomial logistic regression is the main model: the classes look close to linearly separable "
        "in the measurement space and its coefficients are easy to explain.",
    ),
    (
        "modelling_choice",
        "Modelling Assumption Observation",
        "MODEL_EXPLANATION",
        "We assume the 2007-2009 measurements are representative of each species; year is not used, "
        "so drift between seasons is not modelled.",
    ),
    (
        "modelling_choice",
        "Modelling Choice Observation",
        "MODEL_SELECTION",
        "k-nearest neighbours (k = 5), a depth-3 decision tree and a 500-tree random forest are compared "
        "against the logistic regression, with a majority-class baseline.",
    ),
    (
        "modelling_choice",
        "Modelling Assumption Observation",
        "MODEL_EXPLANATION",
        "Accuracy is the main metric because the costs of confusing any two species are taken as equal; "
        "the confusion matrix is read as well because Chinstrap is the minority class.",
    ),
    (
        "model_selection",
        "Model Selection Setup Description",
        "MODEL_SELECTION",
        "Stratified 5-fold cross-validation (shuffled, random_state=42) on the 342 complete rows, "
        "all four measurements as features.",
    ),
    (
        "model_selection",
        "Model Selection Result Summary",
        "MODEL_SELECTION",
        "Mean accuracy: logistic regression 0.988, k-NN 0.988, random forest 0.977, depth-3 tree 0.950, "
        "majority baseline 0.442.",
    ),
    (
        "model_selection",
        "Model Selection Observation",
        "MODEL_EXPLANATION",
        "The logistic regression misclassifies 4 of 342 penguins: 3 Chinstrap predicted as Adelie and "
        "1 Adelie predicted as Chinstrap. Gentoo is never confused.",
    ),
    (
        "model_selection",
        "Model Selection Observation",
        "FEATURE_ASSESSMENT",
        "With bill length and bill depth alone the logistic regression still reaches 0.962 accuracy; "
        "any single measurement gives at most 0.81 (flipper length).",
    ),
    (
        "model_selection",
        "Model Selection Observation",
        "MODEL_EXPLANATION",
        "k-NN matches the logistic regression (0.988) but keeps the whole training set for prediction and "
        "gives no per-feature coefficients, so the tie is broken on simplicity.",
    ),
    (
        "model_selection",
        "Model Selection Statement",
        "MODEL_SELECTION",
        "Logistic regression on the four standardised measurements is selected: it ties k-NN on accuracy "
        "and is simpler to explain and to deploy.",
    ),
]

_REGRESSION_OBS: list[tuple[str, str, str, str]] = [
    (
        "exploratory",
        "Relevance Observation",
        "DATA_UNDERSTANDING",
        "Body mass ranges from 2,700 g to 6,300 g (mean 4,202 g, standard deviation 802 g).",
    ),
    (
        "exploratory",
        "Relevance Observation",
        "FEATURE_ASSESSMENT",
        "Flipper length is the strongest single predictor of body mass (r = 0.87 over all penguins); "
        "bill depth is negatively correlated with mass overall (r = -0.47) because Gentoo are heavy "
        "with shallow bills.",
    ),
    (
        "exploratory",
        "Data Quality Observation",
        "DATA_HETEROGENEITY_ASSESSMENT",
        "Gentoo are much heavier (mean 5,076 g) than Adelie (3,701 g) and Chinstrap (3,733 g), so a "
        "model without species will mix three different mass distributions.",
    ),
    (
        "exploratory",
        "Relevance Observation",
        "DATA_HETEROGENEITY_ASSESSMENT",
        "Males are heavier than females in every species: Adelie 4,043 g vs 3,369 g, Chinstrap 3,939 g "
        "vs 3,527 g, Gentoo 5,485 g vs 4,680 g.",
    ),
    (
        "exploratory",
        "Relevance Observation",
        "DATA_HETEROGENEITY_ASSESSMENT",
        "Within each species flipper length and body mass are less tightly related (r = 0.47 Adelie, "
        "0.64 Chinstrap, 0.70 Gentoo) than over all penguins (0.87): part of the overall correlation is "
        "the difference between species.",
    ),
    (
        "exploratory",
        "Data Quality Observation",
        "DATA_UNDERSTANDING",
        "Rows without sex (11) are dropped for this analysis because sex is a predictor; "
        "333 penguins remain.",
    ),
    (
        "data_representation",
        "Feature Engineering Observation",
        "FEATURE_ASSESSMENT",
        "species is one-hot encoded with Adelie as the reference level "
        "(indicators for Chinstrap and Gentoo).",
    ),
    (
        "data_representation",
        "Feature Engineering Observation",
        "FEATURE_ASSESSMENT",
        "sex is encoded as a 0/1 indicator (1 = male).",
    ),
    (
        "data_representation",
        "Data Transformation Observation",
        "FEATURE_ASSESSMENT",
        "Body mass is modelled in grams without a log transform: residuals of the linear model show no "
        "strong heteroscedasticity across the 2.7-6.3 kg range.",
    ),
    (
        "data_representation",
        "Data Transformation Observation",
        "DATA_UNDERSTANDING",
        "island and year are left out: island adds little once species is known, and year spans only "
        "three seasons.",
    ),
    (
        "modelling_choice",
        "Modelling Choice Observation",
        "MODEL_EXPLANATION",
        "Ordinary least squares is the main model so that each coefficient reads as grams per unit of "
        "the predictor, which is what the field biologists asked for.",
    ),
    (
        "modelling_choice",
        "Modelling Assumption Observation",
        "MODEL_EXPLANATION",
        "The linear model assumes the same slope for each measurement in all species; species and sex "
        "only shift the intercept.",
    ),
    (
        "modelling_choice",
        "Modelling Choice Observation",
        "MODEL_SELECTION",
        "A random forest (500 trees, min_samples_leaf=3) and gradient boosting are fitted on the same "
        "features to check whether non-linear effects matter.",
    ),
    (
        "modelling_choice",
        "Modelling Assumption Observation",
        "MODEL_SELECTION",
        "Mean absolute error in grams is the selection metric because it is in the unit the biologists use; "
        "R squared is reported alongside.",
    ),
    (
        "model_selection",
        "Model Selection Setup Description",
        "MODEL_SELECTION",
        "5-fold cross-validation (shuffled, random_state=42) on 333 penguins, feature sets growing from "
        "flipper length alone to all measurements plus species and sex.",
    ),
    (
        "model_selection",
        "Model Selection Result Summary",
        "MODEL_SELECTION",
        "Linear regression MAE: flipper length only 314 g (R2 0.76), all measurements 315 g (0.76), plus "
        "species 251 g (0.84), plus species and sex 231 g (0.87). Predicting the mean gives 681 g.",
    ),
    (
        "model_selection",
        "Model Selection Observation",
        "MODEL_SELECTION",
        "On the full feature set the random forest (MAE 235 g) and gradient boosting (243 g) do not beat "
        "the linear model (231 g): there is no sign of important non-linear effects.",
    ),
    (
        "model_selection",
        "Model Selection Observation",
        "MODEL_EXPLANATION",
        "Fitted on all 333 penguins, the linear model gives +390 g for males, +1,015 g for Gentoo and "
        "-252 g for Chinstrap relative to Adelie, and +16 g per mm of flipper length.",
    ),
    (
        "model_selection",
        "Model Selection Statement",
        "MODEL_SELECTION",
        "The linear model with bill length, bill depth, flipper length, species and sex is selected "
        "(MAE 231 g, R2 0.87): as accurate as the tree ensembles and directly interpretable.",
    ),
]


def build_demo_kb(path: str | Path) -> KnowledgeBase:
    """The demo KB as an unsaved :class:`KnowledgeBase` that will be written to ``path``."""
    kb = new_kb(path)
    kb.add_workflow(
        CLASSIFICATION,
        "KnowledgeExtractionExperimentationWorkflow",
        "Predict penguin species (Adelie, Chinstrap, Gentoo) from bill, flipper and body-mass "
        "measurements of the Palmer penguins data (344 penguins, Palmer Station LTER, 2007-2009).",
    )
    kb.add_workflow(
        REGRESSION,
        "KnowledgeExtractionExperimentationWorkflow",
        "Estimate penguin body mass from bill and flipper measurements, species and sex; reuses the "
        "cleaning and exploration of the species classification workflow.",
        depends_on=[CLASSIFICATION],
    )
    for workflow, rows in ((CLASSIFICATION, _CLASSIFICATION_OBS), (REGRESSION, _REGRESSION_OBS)):
        for category, obs_type, intent, finding in rows:
            kb.add_observation(category, finding, obs_type=obs_type, intent=intent, workflows=[workflow])
    return kb


def write_demo_kb(path: str | Path) -> Path:
    return save_kb(build_demo_kb(path), path)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else demo_kb_path()
    written = write_demo_kb(out)
    print(f"wrote {written}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
