"""What each route searches, in words: the routing prompt and the offline router both read this.

One table keeps the two routers consistent: the LLM sees the same descriptions the offline router
embeds, so a question is routed the same way with or without an LLM as far as possible.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RouteSpec:
    intent_class: str
    #: Observation category the template returns (None: every category / the whole index).
    category: str | None
    description: str
    examples: tuple[str, ...]


ROUTES: tuple[RouteSpec, ...] = (
    RouteSpec(
        "exploratory_search",
        "exploratory",
        "Exploratory observations: first understanding of the data, relevance of attributes, data "
        "quality (missing values, outliers, distributions, duplicates), exploratory data analysis.",
        (
            "What did we learn when exploring the data?",
            "Which data quality problems were found?",
            "Were there missing values or outliers in the dataset?",
            "Which attributes are relevant according to the EDA?",
        ),
    ),
    RouteSpec(
        "data_representation_search",
        "data_representation",
        "Data representation observations: feature engineering and data transformations (encodings, "
        "scaling, aggregation, derived features, how the data was represented for modelling).",
        (
            "How were the features engineered?",
            "Which data transformations were applied?",
            "How was the data encoded and scaled before modelling?",
            "What derived features were created?",
        ),
    ),
    RouteSpec(
        "modelling_choice_search",
        "modelling_choice",
        "Modelling choice observations: which kind of model or algorithm was chosen, and the modelling "
        "assumptions behind that choice.",
        (
            "Which modelling choices were made and why?",
            "What modelling assumptions were made?",
            "Why was this type of algorithm chosen?",
            "Which model family did we decide to use?",
        ),
    ),
    RouteSpec(
        "model_selection_search",
        "model_selection",
        "Model selection observations: how candidate models were set up, compared and evaluated (metrics, "
        "validation), the results, and which model was finally selected.",
        (
            "How was the final model selected?",
            "Which model performed best in the comparison?",
            "What evaluation metrics were used to compare models?",
            "Summarise the model selection results.",
        ),
    ),
    RouteSpec(
        "all_observations_search",
        None,
        "Every observation of the knowledge base regardless of category; use it to list or count "
        "findings, or with a finding-sequence range (e.g. the first three findings).",
        (
            "List all observations.",
            "Show me every finding in the knowledge base.",
            "What are the first 3 findings?",
            "Give an overview of all recorded observations.",
        ),
    ),
    RouteSpec(
        "semantic_search",
        None,
        "Free-text similarity search over all findings; for questions about a specific topic that do "
        "not ask for one category of observation.",
        (),
    ),
)

ROUTE_BY_INTENT: dict[str, RouteSpec] = {r.intent_class: r for r in ROUTES}
