"""The router's prompt and the tolerant parsing of LLM replies (no model, no server: fast)."""

from __future__ import annotations

import pytest

from kmds_desktop.ask import INTENT_CLASSES, OrchestratorRoute, RouteError, parse_route, routing_prompt
from kmds_desktop.ask.answers import (
    cited_numbers,
    clean_citations,
    extractive_answer,
    strip_reasoning,
    synthesis_prompt,
)
from kmds_desktop.ask.catalog import ROUTES
from kmds_desktop.search import OrchestratorResult, SearchFilters, SearchOrchestrator

ROUTE = '{"intent_class": "exploratory_search", "filters": {"obs_type_filter": null}, "explanation": "EDA"}'


def test_search_facade_exports_the_orchestrator() -> None:
    from kmds_desktop.ask import orchestrator
    from kmds_desktop.kb import SearchFilters as KBFilters

    assert SearchOrchestrator is orchestrator.SearchOrchestrator
    assert SearchFilters is KBFilters
    assert OrchestratorResult.__dataclass_fields__.keys() >= {"answer", "intent_class", "route_explanation",
                                                               "results", "backend", "fallback_reason"}


def test_prompt_lists_every_template_with_what_it_searches() -> None:
    prompt = routing_prompt("Which models were compared?", ["Data Quality Observation"])
    for spec in ROUTES:
        assert f"- {spec.intent_class}: {spec.description}" in prompt
    assert set(INTENT_CLASSES) == {s.intent_class for s in ROUTES}
    assert '"Data Quality Observation"' in prompt
    assert prompt.rstrip().endswith("Question: Which models were compared?")


@pytest.mark.parametrize(
    "reply",
    [
        ROUTE,
        f"```json\n{ROUTE}\n```",
        f"```\n{ROUTE}\n```\nI chose this because the question is about EDA.",
        f"Sure! Here is the route you asked for: {ROUTE} Let me know if you need more.",
        "Route:\n{'intent_class': 'exploratory_search', 'filters': {}, 'explanation': 'EDA',}",
        '{"intent_class": "exploratory_search", "filters": {"keyword": null,}, "explanation": "EDA",}',
        '{"intent": "Exploratory", "explanation": "EDA"}',
        '<think>Maybe {"intent_class": "model_selection_search"}? No, it is about EDA.</think>\n' + ROUTE,
        'The format is {"intent_class": "<one of the templates>", "filters": {}}. My answer: ' + ROUTE,
    ],
)
def test_tolerant_parsing(reply: str) -> None:
    route = parse_route(reply)
    assert route.intent_class == "exploratory_search"
    assert route.filters == SearchFilters()


def test_filters_at_top_level_and_string_numbers() -> None:
    route = parse_route('{"intent_class": "all_observations_search", "finding_seq_min": "2", '
                        '"finding_seq_max": 5, "obs_type_filter": "null", "keyword": "churn"}')
    assert route.filters == SearchFilters(finding_seq_min=2, finding_seq_max=5, keyword="churn")


def test_nested_route_key() -> None:
    route = parse_route('{"route": {"intent_class": "semantic_search", "filters": {"keyword": "churn"}}}')
    assert route.intent_class == "semantic_search" and route.filters.keyword == "churn"


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("I think you should look at the exploratory observations.", "invalid_route"),
        ("", "invalid_route"),
        ('{"intent_class": "exploratory_search", "filters": {"finding_seq_min": "three"}}', "invalid_route"),
        ('{"intent_class": "sql_search", "filters": {}}', "unknown_intent"),
        ('{"intent_class": null}', "unknown_intent"),
        ('{"foo": 1} {"bar": 2}', "invalid_route"),
    ],
)
def test_unusable_replies_raise_route_error(reply: str, code: str) -> None:
    with pytest.raises(RouteError) as info:
        parse_route(reply)
    assert info.value.code == code


def test_route_with_filters_copy() -> None:
    route = OrchestratorRoute(intent_class="model_selection_search", explanation="x")
    edited = route.with_filters(finding_seq_min=2)
    assert edited.filters.finding_seq_min == 2 and route.filters.finding_seq_min is None


DQ, MC = "Data Quality Observation", "Modelling Choice Observation"
RECORDS = [
    {"iri": "http://x#a", "finding": "Missing values in ticket dates.", "obs_type": DQ,
     "category": "exploratory", "workflow_name": "wf", "finding_seq": 1, "intent": None},
    {"iri": "http://x#b", "finding": "Random forest chosen. " * 30, "obs_type": MC,
     "category": "modelling_choice", "workflow_name": "wf", "finding_seq": 2, "intent": "MODEL_SELECTION"},
    {"iri": "http://x#c", "finding": "Only Q2 tickets are relevant.", "obs_type": DQ,
     "category": "exploratory", "workflow_name": "", "finding_seq": None, "intent": None},
]


def test_synthesis_prompt_numbers_records_in_result_order() -> None:
    prompt = synthesis_prompt("What was found?", RECORDS)
    first, second = prompt.index("[1] (Data Quality Observation"), prompt.index("[2] (Modelling Choice")
    assert first < second < prompt.index("[3] (Data Quality")
    assert "intent MODEL_SELECTION" in prompt and "ONLY the numbered records" in prompt
    assert "workflow wf" in prompt and "name each workflow" in prompt


def test_reasoning_preamble_is_not_part_of_the_answer() -> None:
    assert strip_reasoning("<think>\nrecords 1 and 2 [2]\n</think>\n\nThe answer [1].") == "The answer [1]."
    assert strip_reasoning("No preamble [1].") == "No preamble [1]."


def test_citations_outside_the_records_are_dropped() -> None:
    assert clean_citations("A [1], B [4] and C [3].", 3) == "A [1], B  and C [3]."
    assert cited_numbers("x [2] y [1] z [2]") == [2, 1]


def test_extractive_answer_groups_by_workflow_names_it_and_cites() -> None:
    text = extractive_answer(RECORDS, "Heading.")
    lines = text.splitlines()
    assert lines[0] == "Heading."
    workflow = lines.index("Workflow wf:")
    assert lines[workflow + 1].startswith("- Data Quality Observation 1: ")
    assert lines[workflow + 1].endswith("[1]")
    assert lines[workflow + 2].startswith("- Modelling Choice Observation 2: ")
    unlinked = lines.index("Not linked to a workflow:")
    assert unlinked > workflow and lines[unlinked + 1].endswith("[3]")
    assert all(len(line) < 300 for line in lines)


def test_merged_duplicate_cites_both_places() -> None:
    from kmds_desktop.ask.relevance import group_by_workflow, merge_duplicates

    copy = {**RECORDS[0], "iri": "http://x#a2", "workflow_name": "other", "workflows": ["other"],
            "finding": "  missing values in   ticket dates.", "finding_seq": 4}
    first = {**RECORDS[0], "workflows": ["wf"]}
    merged = group_by_workflow(merge_duplicates([first, RECORDS[1], copy]))
    assert [r["iri"] for r in merged] == ["http://x#a", "http://x#b"]
    assert merged[0]["workflows"] == ["wf", "other"]
    assert merged[0]["also"] == [{"iri": "http://x#a2", "name": None, "workflow_name": "other",
                                  "finding_seq": 4}]
    text = extractive_answer(merged, "Heading.")
    assert "Workflow wf and other:" in text and "(also recorded in other finding 4)" in text
    assert "also recorded as other finding 4" in synthesis_prompt("q", merged)
