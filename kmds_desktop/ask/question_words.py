"""Everyday wording of researchers' questions, read against the open KB's own types.

Researchers do not ask for "Data Quality Observations"; they ask what "problems were found in the
data", which "issues" came up or what "went wrong". They ask "which model was best, and by how
much" rather than for "model selection observations". This module holds those words, so that the
offline router (:mod:`~kmds_desktop.ask.offline_router`) can turn them into the template and type
filter the KB actually holds — a type is only ever a filter when the open KB has records of it,
otherwise the question goes to the type's category — and so that the orchestrator can rank the
records of a question about results by whether they state the figures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kmds_desktop.ask.kb_vocabulary import KBVocabulary, type_stem


@dataclass(frozen=True)
class EverydayType:
    """Words for one observation type (named by its stem) or, with ``stem=None``, for a category."""

    #: The type's stem as :func:`~kmds_desktop.ask.kb_vocabulary.type_stem` gives it ("data quality").
    stem: str | None
    #: The category whose template answers these questions (also used when the KB lacks the type).
    category: str
    pattern: re.Pattern[str]
    #: The wording asks for every record of the type or category (a listing), not the relevant few.
    listing: bool = True


_MODEL_WORDS = re.compile(r"\bmodel(?:s|l?ed|l?ing)?\b|\bclassifiers?\b|\bregressors?\b|\balgorithms?\b"
                          r"|\bpredict\w*|\bcluster\w*", re.I)

#: Most specific first: the first entry whose pattern matches decides.
EVERYDAY_TYPES: tuple[EverydayType, ...] = (
    EverydayType("model selection setup", "model_selection", re.compile(
        r"\b(?:set[\s-]?up|setups?|set[\s-]ups)\b.*\b(?:model selection|evaluation|validation|comparison)\b"
        r"|\b(?:model selection|evaluation|validation|comparison)\b.*\b(?:set[\s-]?up|setups?)\b", re.I)),
    EverydayType("modelling assumption", "modelling_choice", re.compile(
        r"\bassum(?:e|ed|es|ing|ptions?)\b", re.I)),
    EverydayType("feature engineering", "data_representation", re.compile(
        r"\bfeature engineering\b|\bengineered\b|\bderived\b|\bnew features?\b"
        r"|\bfeatures?\s+(?:were|was|are|is|did we|we)?\s*(?:create|built|construct|add|made|engineer)\w*",
        re.I)),
    EverydayType("data transformation", "data_representation", re.compile(
        r"\btransform(?:s|ed|ations?)?\b", re.I)),
    EverydayType(None, "data_representation", re.compile(
        r"\bpre-?process\w*|\bprepar(?:e|ed|ation)\b|\bdone to the data\b|\bbefore modell?ing\b", re.I)),
    EverydayType("relevance", "exploratory", re.compile(
        r"\brelevan(?:t|ce)\b|\b(?:needed|required|used|kept)\s+for\s+(?:the|this|our)\s+"
        r"(?:analysis|task|report|study|model)\b|\bin scope\b", re.I)),
    EverydayType("data quality", "exploratory", re.compile(
        r"\bproblems?\b|\bissues?\b|\bwent wrong\b|\bwas wrong\b|\bwrong with\b|\bflaws?\b|\bdirty\b"
        r"|\berrors? in the data\b|\bdata errors?\b|\bquality\b", re.I)),
)

#: Wording that asks how models did: which was best, by how much, their accuracy or error.
_RESULTS_STRONG = re.compile(
    r"\bby how much\b|\bhow much (?:better|worse|more|less)\b|\bhow well\b|\bhow accurate\b|\baccura\w+"
    r"|\boutperform\w*|\b(?:performed|predicted|predicts|did|scored|worked)\s+(?:the\s+)?best\b"
    r"|\bbest (?:model|classifier|regressor|performing)\b|\bwhich model (?:won|was best|is best)\b"
    r"|\bstack(?:s|ed)? up\b|\b(?:came|come|comes) out on top\b|\bhighest\b|\blowest\b"
    r"|\bmae\b|\brmse\b|\br2\b|\br squared\b|\bmean absolute error\b"
    r"|\b(?:won|win|winner|winning)\b|\bbeat\b|\bmiss(?:ed)? the\b",
    re.I)
_RESULTS_WEAK = re.compile(r"\b(?:results?|errors?|scores?|performance|conclude\w*|came out)\b", re.I)


#: A choice made: "chosen", "picked", "went with", "decided on", "settled on", "opted for".
_CHOSE = re.compile(
    r"\b(?:chos(?:e|en)|choos(?:e|ing)|choice|select(?:ed|ion)?|pick(?:ed|ing)?|opt(?:ed)? for|adopt(?:ed)?"
    r"|decid(?:e|ed) (?:on|to use|for)|settl(?:e|ed) (?:on|for)|(?:went|go|going) with|end(?:ed)? up with"
    r"|prefer(?:red)?|favou?r(?:ed)?)\b", re.I)
#: Asking for the reason: "why", "the reason", "rationale", "justified", "what made us".
_WHY = re.compile(r"\bwhy\b|\breason(?:s|ing)?\b|\brationale\b|\bjustif\w*|\bwhat made (?:us|them|you)\b"
                  r"|\bhow come\b|\bmotivat\w*|\bbasis for\b|\bbased on what\b", re.I)
#: Models and methods named by their names, as researchers name what they chose ("why did we go with the
#: random forest?", "what made us pick PCA?").
_MODEL_NAMES = (r"\b(?:(?:logistic|linear|ridge|lasso|polynomial) regression|random forests?|decision trees?"
                r"|gradient boost\w*|xgboost|lightgbm|k-?nn|k-?nearest|nearest neighbou?rs?|k-?means|svms?"
                r"|support vector\w*|naive bayes|neural net\w*|pca|principal component\w*|ols|least squares"
                r"|arima|lstm|transformers?|dbscan|hierarchical clustering)\b")
_MODEL_NAME = re.compile(_MODEL_NAMES, re.I)


def without_model_names(question: str) -> str:
    """The question without the models it names: "logistic regression" says which model, not that the
    question is about the workflow named "penguin body mass regression"."""
    return _MODEL_NAME.sub(" ", question)


#: The thing chosen, named: a model, an algorithm, an approach.
_CHOSEN_NAMED = re.compile(_MODEL_WORDS.pattern + "|" + _MODEL_NAMES
                           + r"|\bapproach(?:es)?\b|\bmethods?\b|\btechniques?\b", re.I)
#: What is chosen, where the question asks why: named, or asked after ("what was chosen, and why?").
_CHOSEN_THING = re.compile(_CHOSEN_NAMED.pattern + r"|\bwhat (?:was|were|did we|did they)\b", re.I)


def question_topic(question: str, vocab: KBVocabulary) -> str | None:
    """The workflow whose own name words the question uses
    (:meth:`~kmds_desktop.ask.kb_vocabulary.KBVocabulary.workflow_topic`), the models it names left out."""
    return vocab.workflow_topic(without_model_names(question))


#: Asking which one was chosen, without asking why: "which model did we choose?", "what model did we go
#: with?", "which classifier was picked?". A verb of choosing, not the nouns "choice" or "selection",
#: which name a category ("what modelling choices were made?").
_WHICH_CHOSEN = re.compile(r"^\s*(?:which|what)\b", re.I)
_CHOSE_VERB = re.compile(
    r"\b(?:chos(?:e|en)|choose|selected|pick(?:ed)?|opt(?:ed)? for|adopt(?:ed)?|decid(?:e|ed) (?:on|to use)"
    r"|settl(?:e|ed) (?:on|for)|(?:went|go) with|end(?:ed)? up with)\b", re.I)


def asks_for_reason(question: str) -> bool:
    """Whether the question asks why ("why", "the reason", "rationale", "what made us")."""
    return bool(_WHY.search(question))


def asks_what_was_chosen(question: str, vocab: KBVocabulary | None = None) -> bool:
    """Whether the question asks which model or approach was chosen, and maybe why ("which model was
    chosen and why?", "why did we go with the random forest?", "what made us pick PCA?", "which
    model did we choose for species?").

    Why a rule of its own: the answer lies in two categories at once — the model selection records
    say what was selected (and how it compared), the modelling choice records say why that kind of
    model was wanted (and which is the main model) — and ranking the whole KB by similarity to such a
    question finds neither (on the retail KB it cited a data-quality record; on the demo KB "which
    model did we choose for species?" went to the modelling choice records alone, and "what model
    did we go with for body mass?" missed the statement of the model selected). Such a question is
    answered from both. Without "why", only a question that starts "which"/"what", says a verb of
    choosing and names the kind of thing chosen, and does not ask how the models did (those go to
    the model selection records stating figures, :func:`asks_for_results`)."""
    text = _without_names(question, vocab) if vocab is not None else question
    if _CHOSE.search(question) and _WHY.search(question) and _CHOSEN_THING.search(text):
        return True
    return bool(_WHICH_CHOSEN.search(question) and _CHOSE_VERB.search(question)
                and _CHOSEN_NAMED.search(text) and not asks_for_results(question, vocab))


def everyday_type(question: str, vocab: KBVocabulary) -> tuple[str | None, str | None, bool]:
    """``(obs_type, category, listing)`` that the question's everyday words name, read against the
    KB: ``obs_type`` is one of the KB's own types (None when the KB has none of that kind, or the
    words name a category); ``category`` is None when no everyday words were found.

    "Problems"/"issues" name data quality only when the question is not about models, so "which
    problems did the model have" is not read as a data quality question."""
    about_models = bool(_MODEL_WORDS.search(_without_names(question, vocab)))
    for entry in EVERYDAY_TYPES:
        if not entry.pattern.search(question):
            continue
        if entry.stem == "data quality" and about_models:
            continue
        if entry.stem == "relevance" and about_models and "relevan" not in question.lower():
            continue
        obs_type = None
        if entry.stem is not None:
            kinds = [t for t in vocab.types_by_category.get(entry.category, [])
                     if type_stem(t) == entry.stem]
            obs_type = kinds[0] if kinds else None
        return obs_type, entry.category, entry.listing
    return None, None, False


def asks_for_results(question: str, vocab: KBVocabulary | None = None) -> bool:
    """Whether the question asks how models did (which was best, by how much, accuracy, error):
    such a question is answered from model selection records, those stating figures first."""
    if _RESULTS_STRONG.search(question):
        return True
    text = _without_names(question, vocab) if vocab is not None else question
    return bool(_RESULTS_WEAK.search(question) and _MODEL_WORDS.search(text)
                and not re.search(r"\bin the data\b|\bdata (?:errors?|problems?|issues?)\b", question, re.I))


_NUMBER = re.compile(r"\d+(?:[.,]\d+)?\s*%?")
#: Metric names, each with the other ways a question or a finding writes it.
_METRICS: tuple[tuple[str, ...], ...] = (
    ("accuracy", "accurate"), ("mae", "mean absolute error"), ("rmse", "root mean squared error"),
    ("mse", "mean squared error"), ("r2", "r squared", "r²", "r^2"), ("auc", "roc"), ("f1", "f-score"),
    ("precision",), ("recall",), ("error",), ("score",),
)
_SELECTION = re.compile(r"\b(?:best|won|win\w*|chosen|choose|selected|select|final|better|beat|outperform\w*"
                        r"|by how much|how much)\b", re.I)
_COMPARED = re.compile(r"\b(?:selected|chosen|best|beat|beats|outperform\w*|better|worse|ties|tie|than"
                       r"|as accurate as|match(?:es)?|against|vs\.?)\b", re.I)
#: Added to a model selection record's similarity, for a question about results, per thing it
#: states that such a question asks for: figures, a metric, the metric the question names, and a
#: comparison or choice when the question asks which model won.
FIGURE_BONUS = 0.04


def _has_metric(text: str, names: tuple[str, ...]) -> bool:
    return any(re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", text, re.I) for n in names)


def figures_bonus(finding: str, question: str = "") -> float:
    """How much a finding states what a question about results asks for: two or more numbers, a
    metric's name, the metric the question itself names ("mean absolute error" for "MAE"), and,
    when the question asks which model won, a comparison or a choice ("does not beat", "is
    selected"). Each is worth :data:`FIGURE_BONUS`, so the record giving the winning model's error
    outranks one that only describes the set-up or the data."""
    bonus = 0.0
    if len(_NUMBER.findall(finding)) >= 2:
        bonus += FIGURE_BONUS
    if any(_has_metric(finding, names) for names in _METRICS):
        bonus += FIGURE_BONUS
    if any(_has_metric(question, names) and _has_metric(finding, names) for names in _METRICS[:-2]):
        bonus += FIGURE_BONUS
    if _SELECTION.search(question) and _COMPARED.search(finding):
        bonus += FIGURE_BONUS
    return bonus


#: A finding that states a choice made: "... is selected", "... is the main model", "we went with".
_STATES_CHOICE = re.compile(
    r"\b(?:is|was|are|were|been)\s+(?:selected|chosen|picked|preferred|adopted|kept as)\b"
    r"|\b(?:main|final|chosen|selected) (?:model|approach|method|classifier|regressor)\b"
    r"|\b(?:we|they) (?:chose|selected|picked|went with|settled on|opted for)\b", re.I)
#: Added to a record's similarity, for a question about what was chosen, when it states a choice: the
#: record saying which model was selected outranks results and set-ups that only resemble the question
#: ("which classifier was chosen?" is closer to "accuracy is the main metric" than to "logistic
#: regression ... is selected"). Two figures' worth.
CHOICE_BONUS = 2 * FIGURE_BONUS


def choice_bonus(finding: str) -> float:
    """:data:`CHOICE_BONUS` when ``finding`` states a choice made, else 0."""
    return CHOICE_BONUS if _STATES_CHOICE.search(finding) else 0.0


def _without_names(question: str, vocab: KBVocabulary | None) -> str:
    """The question with the KB's workflow names taken out ("retail_customer_modelling" says
    nothing about whether the question is about models)."""
    if vocab is None:
        return question
    text = " " + re.sub(r"[_\-]+", " ", question.lower()) + " "
    for name in vocab.workflows:
        text = text.replace(" ".join(re.sub(r"[_\-]+", " ", name.lower()).split()), " ")
    return text
