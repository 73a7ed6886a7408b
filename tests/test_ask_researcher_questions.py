"""Questions worded as researchers word them, answered offline with the right records.

A workflow named by its place ("workflow 2", "the second workflow") or part of its name ("the
body mass workflow") is an exact workflow filter; everyday words ("problems in the data") become
the KB's own type; a question about results ("which model was best, by how much") gets the model
selection records that state the figures. Record counts are those of the files themselves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kmds_desktop.ask.kb_vocabulary import KBVocabulary
from kmds_desktop.ask.question_words import asks_for_results, everyday_type, figures_bonus
from kmds_desktop.config import Settings
from kmds_desktop.index import SemanticIndex
from kmds_desktop.kb import load_kb
from kmds_desktop.search import SearchOrchestrator

DEMO = Path(__file__).resolve().parent.parent / "resources" / "demo_kb.xml"
SPECIES, BODY_MASS = "penguin species classification", "penguin body mass regression"


@pytest.fixture(scope="module")
def index() -> SemanticIndex:
    return SemanticIndex(None)


def _orchestrator(path: Path, index: SemanticIndex) -> SearchOrchestrator:
    return SearchOrchestrator(load_kb(path), backend="offline", settings=Settings(), index=index)


def _keys(result) -> list[tuple[str, str, int | None]]:
    return [(r["workflow_name"], r["category"], r["finding_seq"]) for r in result.results]


def test_workflow_2_of_the_demo_kb_gives_all_its_modelling_choices(index: SemanticIndex) -> None:
    orch = _orchestrator(DEMO, index)
    expected = [o for o in orch.kb.observations
                if o.category == "modelling_choice" and BODY_MASS in o.workflows]
    assert len(expected) == 4
    result = orch.retrieve("What modelling choices were made in workflow 2")
    assert result.intent_class == "modelling_choice_search" and result.route.filters.workflow == BODY_MASS
    assert result.listing and result.fallback_reason is None
    assert sorted(r["iri"] for r in result.results) == sorted(o.iri for o in expected)


def test_workflow_2_of_a_file_with_two_workflows(kmds_data: Path, index: SemanticIndex) -> None:
    orch = _orchestrator(kmds_data / "test_kb_exp_workflow.xml", index)
    second = orch.kb.workflows[1].name
    assert second == "test experiment workflow"
    expected = [o for o in orch.kb.observations if o.category == "modelling_choice" and second in o.workflows]
    assert len(expected) == 5  # 3 modelling assumptions and 2 modelling choices in the file
    for question in ("What modelling choices were made in workflow 2",
                     "What modelling choices were made in the second workflow?",
                     "Show the modelling choices of the experiment workflow"):
        result = orch.retrieve(question)
        assert result.route.filters.workflow == second, question
        assert sorted(r["iri"] for r in result.results) == sorted(o.iri for o in expected), question


def test_problems_in_the_data_are_every_data_quality_observation(kmds_data: Path,
                                                                 index: SemanticIndex) -> None:
    orch = _orchestrator(kmds_data / "example_ml_kb_exp_workflow.xml", index)
    expected = [o for o in orch.kb.observations if o.obs_type == "Data Quality Observation"]
    assert len(expected) == 5
    result = orch.retrieve("what problems were found in the data?")
    assert result.intent_class == "exploratory_search"
    assert result.route.filters.obs_type_filter == "Data Quality Observation"
    assert [r["iri"] for r in result.results] == [o.iri for o in expected]  # all of them, in order
    assert all(r["obs_type"] != "Relevance Observation" for r in result.results)


def test_which_model_was_best_cites_the_figures(index: SemanticIndex) -> None:
    orch = _orchestrator(DEMO, index)
    result = orch.retrieve("Which model predicted body mass best, and by how much?")
    assert result.intent_class == "model_selection_search" and not result.listing
    keys = _keys(result)
    assert {r["category"] for r in result.results} == {"model_selection"}
    # the statement of the winner with its error (MAE 231 g) and the comparison with the ensembles
    assert (BODY_MASS, "model_selection", 5) in keys
    assert (BODY_MASS, "model_selection", 3) in keys
    assert keys[0][0] == BODY_MASS
    assert len(keys) <= 5


def test_workflow_by_ordinal_and_by_part_of_its_name() -> None:
    vocab = KBVocabulary({}, [SPECIES, BODY_MASS], [])
    cases = {
        "What modelling choices were made in workflow 2": BODY_MASS,
        "Show workflow #1": SPECIES,
        "the data of workflow two": BODY_MASS,
        "the second workflow's findings": BODY_MASS,
        "findings of the first workflow": SPECIES,
        "the last workflow": BODY_MASS,
        "the 2nd workflow": BODY_MASS,
        "Any data issues in the body mass workflow?": BODY_MASS,
        "Summarise the species workflow": SPECIES,
        "the classifier workflow": SPECIES,
        "in the regression analysis": BODY_MASS,
        "the penguin body mass regression workflow": BODY_MASS,
        "the penguin workflow": None,  # both are penguin workflows: neither is meant
        "workflow 3": None,  # the KB has two
        "Which features separate the species?": None,  # no workflow is named
    }
    for question, expected in cases.items():
        assert vocab.workflow_in_question(question) == expected, question
    # an LLM's filter is read the same way
    assert vocab.resolve_workflow("workflow 2") == BODY_MASS
    assert vocab.resolve_workflow("2") == BODY_MASS
    assert vocab.resolve_workflow("the species") == SPECIES
    assert vocab.workflow_topic("Which model predicted body mass best?") == BODY_MASS
    assert vocab.workflow_topic("Which penguin model was best?") is None


def test_everyday_words_name_the_types_the_kb_holds() -> None:
    demo = KBVocabulary({"exploratory": ["Data Quality Observation", "Relevance Observation"],
                         "modelling_choice": ["Modelling Assumption Observation",
                                              "Modelling Choice Observation"],
                         "data_representation": ["Data Transformation Observation",
                                                 "Feature Engineering Observation"]}, [], [])
    assert everyday_type("what problems were found in the data?", demo)[:2] == \
        ("Data Quality Observation", "exploratory")
    assert everyday_type("What went wrong with the data?", demo)[0] == "Data Quality Observation"
    assert everyday_type("What did we assume when modelling?", demo)[0] == "Modelling Assumption Observation"
    assert everyday_type("Which features were derived?", demo)[0] == "Feature Engineering Observation"
    assert everyday_type("What preprocessing was applied?", demo) == (None, "data_representation", True)
    assert everyday_type("Which problems did the model have?", demo)[1] is None  # not about the data
    # a KB without modelling assumptions: the question goes to the category, with no type filter
    retail = KBVocabulary({"modelling_choice": ["Modelling Choice Observation"]}, [], [])
    assert everyday_type("What assumptions were made?", retail) == (None, "modelling_choice", True)


def test_questions_about_results_and_their_figures() -> None:
    assert asks_for_results("Which model predicted body mass best, and by how much?")
    assert asks_for_results("How accurate was logistic regression?")
    assert asks_for_results("What are the results of the clustering?")
    assert not asks_for_results("What problems were found in the data?")
    assert not asks_for_results("Which model was selected?")
    question = "Which model predicted body mass best, and by how much?"
    winner = "The linear model is selected (MAE 231 g, R2 0.87): as accurate as the tree ensembles."
    setup = "5-fold cross-validation (shuffled, random_state=42) on 333 penguins."
    assert figures_bonus(winner, question) > figures_bonus(setup, question) > figures_bonus("No figures.")
