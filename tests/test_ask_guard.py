"""The offline router is the model's floor: what a model's route keeps, what it loses, and what is said.

A model's filter the question does not support (a finding range with no numbers in the question, a
workflow it does not name, a type it does not name) is dropped and the result says which and why;
a grounded filter is kept. The model's route comes from the fake Ollama server (a real HTTP server
with scripted replies); the KB, the embedding model and the index are real. Also here: the offline
floor itself answers "which model was chosen and why?" from the model selection and modelling choice
records, and the window's Route box shows the guard's note and offers the other route.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_ollama import ModelScript

from kmds_desktop.ask.answers import PROMPT_RECORDS, prompt_records, prompt_records_said
from kmds_desktop.ask.guard import guard_route, numbers_in, workflow_grounded
from kmds_desktop.ask.kb_vocabulary import KBVocabulary
from kmds_desktop.ask.offline_router import OfflineDecision
from kmds_desktop.ask.question_words import asks_what_was_chosen
from kmds_desktop.config import Settings
from kmds_desktop.index import SemanticIndex
from kmds_desktop.kb import SearchFilters, load_kb
from kmds_desktop.search import OrchestratorRoute, SearchOrchestrator

DEMO = Path(__file__).resolve().parent.parent / "resources" / "demo_kb.xml"
MODEL = "router:1b"
ANSWER = "The records say so [1]."
SPECIES, BODY_MASS = "penguin species classification", "penguin body mass regression"


@pytest.fixture(scope="module")
def index() -> SemanticIndex:
    return SemanticIndex(None)


@pytest.fixture(scope="module")
def demo_kb():
    return load_kb(DEMO)


def _model_says(route: dict[str, Any]):
    """A scripted model: the route for the routing prompt, a short answer for anything else."""

    def reply(prompt: str, body: dict[str, Any]) -> str:
        return json.dumps(route) if "Reply with one JSON object" in prompt else ANSWER

    return ModelScript(replies=[reply])


def _with_model(kb, index: SemanticIndex, url: str) -> SearchOrchestrator:
    settings = Settings()
    settings.llm.ollama_host, settings.llm.ollama_model = url, MODEL
    return SearchOrchestrator(kb, backend="ollama", settings=settings, index=index)


def test_which_model_was_chosen_and_why_reaches_the_selection_and_the_choice(kmds_data: Path,
                                                                            index: SemanticIndex) -> None:
    kb = load_kb(kmds_data / "example_ml_kb_exp_workflow.xml")
    orch = SearchOrchestrator(kb, backend="offline", settings=Settings(), index=index)
    for question in ("which model was chosen and why?", "What was chosen, and for what reason?"):
        result = orch.retrieve(question)
        categories = {r["category"] for r in result.results}
        assert categories == {"model_selection", "modelling_choice"}, (question, result.route_explanation)
        assert all(r["obs_type"] != "Data Quality Observation" for r in result.results)
        assert "chosen and why" in result.route_explanation


@pytest.mark.parametrize(("question", "chosen"), [
    ("Why did we go with the random forest?", True),  # a model named by its name
    ("What made us pick PCA?", True),
    ("Why was logistic regression preferred over k-NN?", True),
    ("Which model did we choose for species?", True),
    ("Which classifier was picked?", True),
    ("What modelling choices were made?", False),  # names a category
    ("Which model predicted body mass best, and by how much?", False),  # how the models did
    ("What was chosen as the main metric?", False),  # no model named, no reason asked
    ("Why was the random forest dropped?", False),  # no choosing said
])
def test_a_question_about_what_was_chosen_is_read_from_its_words(question: str, chosen: bool) -> None:
    assert asks_what_was_chosen(question) is chosen


def test_which_model_was_chosen_without_why_reaches_the_statement_of_the_selection(
        demo_kb, index: SemanticIndex) -> None:
    """Without "why", "which model did we go with" still asks for what was selected: the statement of
    the selection is among the records, beside the modelling choice records (before, such questions went
    by similarity to the modelling choice records alone and missed the statement). Questions that name
    a category or ask how the models did keep their own reading."""
    orch = SearchOrchestrator(demo_kb, backend="offline", settings=Settings(), index=index)
    selected = {SPECIES: 6, BODY_MASS: 5}  # the Model Selection Statement of each workflow
    for question, workflow in (("What model did we go with for body mass?", BODY_MASS),
                               ("Which model was chosen for predicting weight?", BODY_MASS),
                               ("Which classifier was chosen?", SPECIES),
                               ("Which model did we choose for species?", SPECIES)):
        result = orch.retrieve(question)
        assert result.route.intent_class == "model_selection_search", (question, result.route_explanation)
        assert "asks which was chosen" in result.route_explanation
        assert not result.listing
        found = {(r["workflow_name"], r["category"], r["finding_seq"]) for r in result.results}
        assert (workflow, "model_selection", selected[workflow]) in found, (question, found)
        assert {r["category"] for r in result.results} == {"model_selection", "modelling_choice"}
        # the answer prompt's three records: the statement of the selection among them, and a modelling
        # choice record (by similarity alone "which classifier was chosen?" read three of those)
        given = [result.results[n - 1] for n in prompt_records(result.results)]
        assert (workflow, "model_selection", selected[workflow]) in {
            (r["workflow_name"], r["category"], r["finding_seq"]) for r in given}, (question, given)
        assert {r["category"] for r in given} == {"model_selection", "modelling_choice"}
    # "for species" names no workflow outright, but its own words are the species workflow's: the body
    # mass model (species is one of its features) is not the choice asked about
    species = orch.retrieve("Which model did we choose for species?")
    assert {r["workflow_name"] for r in species.results} == {SPECIES}
    assert f"of the workflow {SPECIES}" in species.route_explanation  # said, as a filter would be
    # a model's name is not a workflow's: "logistic regression" does not name "penguin body mass regression"
    named_model = orch.retrieve("What made us pick logistic regression over the random forest?")
    assert (SPECIES, "model_selection", 6) in {
        (r["workflow_name"], r["category"], r["finding_seq"]) for r in named_model.results}
    assert "of the workflow" not in named_model.route_explanation
    named = orch.retrieve("What approach did we settle on for the species workflow?")
    assert named.route.filters.workflow == SPECIES and not named.listing  # an open question in a workflow
    assert orch.retrieve("What modelling choices were made?").route.intent_class == "modelling_choice_search"
    results = orch.retrieve("Which model predicted body mass best, and by how much?")
    assert "how models did" in results.route_explanation


def test_an_invented_finding_range_is_dropped_and_the_note_says_why(fake_ollama, demo_kb,
                                                                    index: SemanticIndex) -> None:
    fake_ollama.models[MODEL] = _model_says({
        "intent_class": "exploratory_search", "listing": True, "explanation": "data quality",
        "filters": {"obs_type_filter": "Data Quality Observation", "finding_seq_min": 1,
                    "finding_seq_max": 6}})
    result = _with_model(demo_kb, index, fake_ollama.url).ask("What data quality problems were found?")
    assert result.backend == "ollama" and result.fallback_reason is None
    assert result.model_route is not None and result.model_route.filters.finding_seq_max == 6
    filters = result.route.filters
    assert (filters.finding_seq_min, filters.finding_seq_max) == (None, None)  # dropped
    assert filters.obs_type_filter == "Data Quality Observation"  # grounded in "data quality": kept
    assert len(result.route_notes) == 1
    assert "findings 1 to 6" in result.route_notes[0] and "no numbers" in result.route_notes[0]
    expected = [o.iri for o in demo_kb.observations if o.obs_type == "Data Quality Observation"]
    assert sorted(r["iri"] for r in result.results) == sorted(expected)  # every one, not only 1 to 6
    assert result.answer == ANSWER
    assert result.to_dict()["route_notes"] == result.route_notes


def test_a_model_listing_for_a_question_with_one_answer_is_answered_as_an_open_question(
        fake_ollama, demo_kb, index: SemanticIndex) -> None:
    """The 1.5B model called "which regression model was picked in the end?" a listing of every model
    selection record; the answer prompt then carried the 3 of 11 closest to the question, two of them the
    classifier's, and the model named the classifier. Asked what was chosen, in no listing words, the
    question is answered as an open one: the body mass workflow's statement of the selection is read."""
    fake_ollama.models[MODEL] = _model_says({"intent_class": "model_selection_search", "listing": True})
    orch = _with_model(demo_kb, index, fake_ollama.url)
    result = orch.retrieve("Which regression model was picked in the end?")
    assert result.model_route is not None and result.model_route.listing is True
    assert not result.listing and result.route.intent_class == "model_selection_search"
    assert any("not as the model's listing" in note for note in result.route_notes), result.route_notes
    given = [result.results[n - 1] for n in prompt_records(result.results)]
    assert (BODY_MASS, "model_selection", 5) in {
        (r["workflow_name"], r["category"], r["finding_seq"]) for r in given}, given
    assert {r["workflow_name"] for r in result.results} == {BODY_MASS}
    # a question in listing words keeps the model's listing
    listed = orch.retrieve("List the model selection findings")
    assert listed.listing and len(listed.results) == sum(
        o.category == "model_selection" for o in demo_kb.observations)
    assert not any("listing" in note for note in listed.route_notes)


def test_a_listings_prompt_carries_the_record_with_the_questions_point(
        fake_ollama, demo_kb, index: SemanticIndex) -> None:
    """"Why were some penguins dropped from the body mass analysis?" lists the body mass workflow's
    records; by similarity alone the 3 the model reads are about flipper length and the fit, all closer
    in topic than "Rows without sex (11) are dropped …", the one record that answers it."""
    fake_ollama.models[MODEL] = _model_says({"intent_class": "all_observations_search", "listing": True,
                                             "filters": {"workflow": BODY_MASS}})
    result = _with_model(demo_kb, index, fake_ollama.url).retrieve(
        "Why were some penguins dropped from the body mass analysis?")
    assert result.listing and len(result.results) > PROMPT_RECORDS
    given = [result.results[n - 1] for n in prompt_records(result.results)]
    assert any("are dropped for this analysis" in r["finding"] for r in given), [r["finding"] for r in given]
    # the note under the answer says that one record was picked by its words, not its meaning
    said = prompt_records_said(result.results, prompt_records(result.results))
    assert said == (f"the {PROMPT_RECORDS - 1} most relevant of the {len(result.results)} records "
                    "and the one holding most of the question's distinctive words")


def test_a_range_the_question_states_is_kept(fake_ollama, demo_kb, index: SemanticIndex) -> None:
    fake_ollama.models[MODEL] = _model_says({
        "intent_class": "all_observations_search", "listing": True, "explanation": "a range",
        "filters": {"finding_seq_min": 2, "finding_seq_max": 4}})
    result = _with_model(demo_kb, index, fake_ollama.url).retrieve("Show findings 2 to 4")
    assert (result.route.filters.finding_seq_min, result.route.filters.finding_seq_max) == (2, 4)
    assert result.route_notes == []
    assert result.results and all(2 <= r["finding_seq"] <= 4 for r in result.results)


def test_a_range_the_question_states_otherwise_is_replaced_by_its_own(fake_ollama, demo_kb,
                                                                      index: SemanticIndex) -> None:
    fake_ollama.models[MODEL] = _model_says({
        "intent_class": "all_observations_search", "listing": True, "explanation": "a range",
        "filters": {"finding_seq_min": 1, "finding_seq_max": 6}})
    result = _with_model(demo_kb, index, fake_ollama.url).retrieve("Show findings 2 to 4")
    assert result.backend == "ollama" and result.fallback_reason is None
    assert (result.route.filters.finding_seq_min, result.route.filters.finding_seq_max) == (2, 4)
    assert len(result.route_notes) == 1
    assert "findings 1 to 6" in result.route_notes[0]
    assert "the question's own range (findings 2 to 4) is used" in result.route_notes[0]


def test_a_workflow_the_question_does_not_name_is_dropped(fake_ollama, demo_kb, index: SemanticIndex) -> None:
    fake_ollama.models[MODEL] = _model_says({
        "intent_class": "modelling_choice_search", "listing": True, "explanation": "assumptions",
        "filters": {"obs_type_filter": "Modelling Assumption Observation", "workflow": SPECIES}})
    result = _with_model(demo_kb, index, fake_ollama.url).retrieve("What modelling assumptions were made?")
    assert result.route.filters.workflow is None
    assert result.route.filters.obs_type_filter == "Modelling Assumption Observation"
    assert any(SPECIES in note and "does not name that workflow" in note for note in result.route_notes)
    workflows = {w for r in result.results for w in r["workflows"]}
    assert workflows == {SPECIES, BODY_MASS}


def test_the_offline_routers_template_stands_where_the_question_names_it(fake_ollama, demo_kb,
                                                                          index: SemanticIndex) -> None:
    fake_ollama.models[MODEL] = _model_says({"intent_class": "model_selection_search", "listing": False,
                                             "explanation": "models", "filters": {}})
    orch = _with_model(demo_kb, index, fake_ollama.url)
    result = orch.retrieve("List the feature engineering observations")
    assert result.intent_class == "data_representation_search"
    assert result.alternative_route is not None
    assert result.alternative_route.intent_class == "model_selection_search"  # one click away
    assert any("Kept the offline router's template" in note for note in result.route_notes)


def test_grounding_rules_read_the_kbs_own_vocabulary(demo_kb) -> None:
    vocab = KBVocabulary.of(demo_kb)
    assert numbers_in("the first three findings, then 7") == {1, 3, 7}
    assert numbers_in("which model was chosen and why?") == set()
    assert workflow_grounded("the species classifier work", SPECIES, vocab)  # said loosely
    assert workflow_grounded("in workflow 2", BODY_MASS, vocab)  # by its place
    assert not workflow_grounded("Which features separate the species?", SPECIES, vocab)  # a topic word
    assert not workflow_grounded("What modelling assumptions were made?", BODY_MASS, vocab)
    nothing_close = OrchestratorRoute(intent_class="semantic_search", explanation="none")
    offline = OfflineDecision(nothing_close, {}, "none")
    invented = OrchestratorRoute(intent_class="exploratory_search", filters=SearchFilters(
        keyword="penguin", finding_seq_min=1, finding_seq_max=6, workflow=SPECIES))
    guarded = guard_route("What went wrong with the measurements?", invented, offline, vocab)
    assert guarded.chosen_by == "model"  # the offline router found no template: the model's stands
    assert sorted(guarded.dropped) == ["findings", "keyword", "workflow"]
    assert guarded.route.filters.model_dump() == SearchFilters().model_dump()
    assert len(guarded.notes) == 3


def test_a_short_model_route_gets_the_filters_the_question_states_from_the_offline_reading(demo_kb) -> None:
    """The model is asked for a short route (template and listing; filters only when stated) and may leave
    out a filter the question does state: where its template runs, the offline router's reading of the
    question's own words fills it in. A range counted in the offline router's template ("the last 2") and
    a type of another template are not carried over."""
    vocab = KBVocabulary.of(demo_kb)
    offline_reads = OrchestratorRoute(intent_class="all_observations_search", filters=SearchFilters(
        workflow=BODY_MASS, finding_seq_min=2, finding_seq_max=4))
    short = OrchestratorRoute(intent_class="exploratory_search", listing=True)
    question = "What did the exploration find in findings 2 to 4 of the body mass workflow?"
    guarded = guard_route(question, short, OfflineDecision(offline_reads, {}, "none"), vocab)
    assert guarded.chosen_by == "model" and guarded.route.intent_class == "exploratory_search"
    f = guarded.route.filters
    assert (f.workflow, f.finding_seq_min, f.finding_seq_max) == (BODY_MASS, 2, 4)
    assert guarded.notes == [] and guarded.dropped == []

    last_two = OrchestratorRoute(intent_class="data_representation_search", filters=SearchFilters(
        obs_type_filter="Feature Engineering Observation", finding_seq_min=5, finding_seq_max=6))
    guarded = guard_route("the last 2 feature steps", short, OfflineDecision(last_two, {}, "none"), vocab)
    assert guarded.route.filters.model_dump() == SearchFilters().model_dump()
    quality = OrchestratorRoute(intent_class="all_observations_search",
                                filters=SearchFilters(obs_type_filter="Data Quality Observation"))
    guarded = guard_route("any data quality trouble?", short, OfflineDecision(quality, {}, "none"), vocab)
    assert guarded.route.filters.obs_type_filter == "Data Quality Observation"  # one of its template's types


def test_the_route_box_shows_the_guard_note_and_offers_the_other_route(qtbot, fake_ollama, demo_kb,
                                                                      index: SemanticIndex) -> None:
    from kmds_desktop.ui.ask.route import RouteEditor

    fake_ollama.models[MODEL] = _model_says({
        "intent_class": "model_selection_search", "listing": False, "explanation": "models",
        "filters": {"finding_seq_min": 1, "finding_seq_max": 6}})
    orch = _with_model(demo_kb, index, fake_ollama.url)
    result = orch.retrieve("List the feature engineering observations")
    editor = RouteEditor()
    qtbot.addWidget(editor)
    editor.show_result(result, answer="being written…")
    text = editor.summary.text()
    assert "Guard:" in text and "findings 1 to 6" in text and "Kept the offline router" in text
    assert editor.other_button.isVisibleTo(editor)
    with qtbot.waitSignal(editor.rerun_requested) as emitted:
        editor.other_button.click()
    assert emitted.args[0].intent_class == "model_selection_search"
    assert emitted.args[0].filters.finding_seq_min is None  # the other route, guarded too
    editor.clear()
    assert not editor.other_button.isVisibleTo(editor)


def test_a_model_template_far_from_the_question_gives_way_to_the_free_text_search(
        fake_ollama, demo_kb, index: SemanticIndex) -> None:
    """Where the offline router finds no close template the model's template runs, unless its records are
    far from the question: the 1.5B model sent "why was island left out of the features?" to modelling
    choices (an assumption about years, similarity 0.07), while the free-text search finds the record that
    answers it. The note says so and the model's route is one click away."""
    question = "Why was island left out of the features?"
    fake_ollama.models[MODEL] = _model_says({"intent_class": "modelling_choice_search", "listing": False})
    result = _with_model(demo_kb, index, fake_ollama.url).ask(question)
    assert result.model_route is not None and result.model_route.intent_class == "modelling_choice_search"
    assert result.route.intent_class == "semantic_search" and result.fallback_reason is None
    assert result.alternative_route is not None
    assert result.alternative_route.intent_class == "modelling_choice_search"
    assert "island is left out of the features" in result.results[0]["finding"]
    note = result.route_notes[-1]
    assert note.startswith("Ran the free-text search over the model's template modelling choice: its records "
                           "are far from the question (closest 0.0") and "one click away" in note
    # the model's route, run from the Route box, gives its own records back
    again = _with_model(demo_kb, index, fake_ollama.url).ask_with_route(question, result.alternative_route)
    assert again.route.intent_class == "modelling_choice_search"
    assert all("island is left out" not in r["finding"] for r in again.results)


def test_a_model_template_as_close_as_the_free_text_search_keeps_its_records(
        fake_ollama, demo_kb, index: SemanticIndex) -> None:
    """The hard question set's "why is OLS our main model for predicting weight?" is a modelling choice;
    the offline router finds no close template, and the model's template runs with its records."""
    fake_ollama.models[MODEL] = _model_says({"intent_class": "modelling_choice_search", "listing": False})
    question = "Why is OLS our main model for predicting weight?"
    result = _with_model(demo_kb, index, fake_ollama.url).ask(question)
    assert result.route.intent_class == "modelling_choice_search"
    assert not any(n.startswith("Ran the free-text search") for n in result.route_notes)
    assert any("Ordinary least squares is the main model" in r["finding"] for r in result.results)


def test_the_free_text_search_s_closer_record_joins_the_model_template_s(
        qtbot, fake_ollama, demo_kb, index: SemanticIndex) -> None:
    """The 1.5B model sent the hard set's "why is OLS our main model for predicting weight?" to model
    selection, whose closest record is 0.2 farther from the question than the modelling choice that answers
    it; within the far margin the template's records stay, and the free-text search's closest record comes
    first, shown and read by the model, and the note says so."""
    question = "Why is OLS our main model for predicting weight?"
    fake_ollama.models[MODEL] = _model_says({"intent_class": "model_selection_search", "listing": False})
    result = _with_model(demo_kb, index, fake_ollama.url).ask(question)
    assert result.route.intent_class == "model_selection_search" and result.fallback_reason is None
    first = result.results[0]
    assert first["category"] == "modelling_choice"
    assert "Ordinary least squares is the main model" in first["finding"]
    assert all(r["category"] == "model_selection" for r in result.results[1:]) and len(result.results) > 1
    assert 1 in result.given_records  # the model reads it
    assert prompt_records(result.results, limit=1) == [1]  # first, however many records the template has
    note = next(n for n in result.route_notes if n.startswith("Added the free-text search's closest record"))
    assert "model selection" in note
    assert not any(n.startswith("Ran the free-text") for n in result.route_notes)
    # the Route box says it, as one of its "Guard:" lines
    from kmds_desktop.ui.ask.route import RouteEditor

    editor = RouteEditor()
    qtbot.addWidget(editor)
    editor.show_result(result, answer="being written…")
    assert "Added the free-text search's closest record" in html.unescape(editor.summary.text())

    # offline, the same question is answered from the free-text search alone: nothing is added
    offline = SearchOrchestrator(demo_kb, backend="offline", settings=Settings(), index=index).ask(question)
    assert not any(n.startswith("Added the free-text") for n in offline.route_notes)


def test_the_offline_route_kept_over_the_model_s_finds_what_it_finds_offline(
        fake_ollama, demo_kb, index: SemanticIndex) -> None:
    """Where the guard keeps the offline router's route, or the model chooses the same, it runs as it runs
    offline: a category the offline
    router read from the question's meaning is preferred, not a fence. "How were rows with missing values
    handled?" is answered offline from a data representation record (the rows are kept: sex is not a
    feature); run fenced to exploratory records, the model's answer lost it."""
    question = "How were rows with missing values handled?"
    fake_ollama.models[MODEL] = _model_says({"intent_class": "data_representation_search", "listing": False})
    result = _with_model(demo_kb, index, fake_ollama.url).retrieve(question)
    assert any(n.startswith("Kept the offline router's template") for n in result.route_notes)
    offline = SearchOrchestrator(demo_kb, backend="offline", settings=Settings(), index=index)
    assert [r["iri"] for r in result.results] == [r["iri"] for r in offline.retrieve(question).results]
    assert "data_representation" in {r["category"] for r in result.results}

    # a model that chooses the offline router's own route gets what the offline router gets: "what metric
    # was used to compare the models?" is a guess at model selection, and the modelling choice that names
    # the metric is among its records offline; fenced to model selection, the model never read it
    question = "What metric was used to compare the models?"
    alone = offline.retrieve(question)
    fake_ollama.models[MODEL] = _model_says({"intent_class": alone.route.intent_class, "listing": False})
    agreed = _with_model(demo_kb, index, fake_ollama.url).retrieve(question)
    assert agreed.route.intent_class == alone.route.intent_class and not agreed.route_notes
    assert [r["iri"] for r in agreed.results] == [r["iri"] for r in alone.results]
    assert {r["category"] for r in agreed.results} > {alone.route.intent_class.removesuffix("_search")}
    # and Re-run without an edit gives that route back: it runs the same way again, finding the same records
    rerun = _with_model(demo_kb, index, fake_ollama.url).retrieve(question, route=agreed.route)
    assert [r["iri"] for r in rerun.results] == [r["iri"] for r in agreed.results]


def test_the_offline_router_s_route_given_back_finds_what_it_found(demo_kb, index: SemanticIndex) -> None:
    """Re-run without an edit, or "Use the other route" where the other route is the offline router's,
    gives its route back to the orchestrator: it runs as the offline router ran it, so it finds the same
    records. Run as a fence (the same template and filters, as a route the user set), "How were rows with
    missing values handled?" and "Which model was selected?" lose a record of the category the offline
    router did not guess."""
    offline = SearchOrchestrator(demo_kb, backend="offline", settings=Settings(), index=index)
    fence_differs = 0
    for question in ("How were rows with missing values handled?", "Which model was selected?",
                     "What metric was used to compare the models?"):
        first = offline.retrieve(question)
        assert first.route.from_offline_router
        again = offline.retrieve(question, route=first.route)
        assert [r["iri"] for r in again.results] == [r["iri"] for r in first.results], question
        set_by_user = first.route.with_filters()  # the same template and filters, the user's now
        assert not set_by_user.from_offline_router
        fenced = offline.retrieve(question, route=set_by_user)
        fence_differs += [r["iri"] for r in fenced.results] != [r["iri"] for r in first.results]
    assert fence_differs >= 2

    # the mark is the offline router's alone: a route read from a reply or a dump does not carry it
    dumped = OrchestratorRoute.model_validate(first.route.model_dump())
    assert dumped.model_dump() == first.route.model_dump() and not dumped.from_offline_router

    # where the model's template runs, the offline router's route is the other route, mark and all
    question = "Which model won, and what assumptions does it rest on?"
    vocab = offline.vocabulary()
    from kmds_desktop.ask.offline_router import route_offline

    decision = route_offline(question, offline._embed(question), offline.embedding_model, vocab,
                             encode=offline._encode)
    guarded = guard_route(question, OrchestratorRoute(intent_class="model_selection_search"), decision, vocab)
    assert guarded.chosen_by == "model" and guarded.alternative is not None
    assert guarded.alternative.from_offline_router and not guarded.route.from_offline_router
