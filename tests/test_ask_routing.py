"""The router's prompt and the tolerant parsing of LLM replies (no model, no server: fast)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kmds_desktop.ask import INTENT_CLASSES, OrchestratorRoute, RouteError, parse_route, routing_prompt
from kmds_desktop.ask.answers import (
    PROMPT_FINDING_CHARS,
    PROMPT_FINDINGS_BUDGET,
    PROMPT_RECORDS,
    cited_numbers,
    clean_citations,
    extractive_answer,
    prompt_finding,
    prompt_records,
    prompt_records_said,
    record_label,
    repair_citations,
    strip_reasoning,
    synthesis_prompt,
)
from kmds_desktop.ask.catalog import ROUTES
from kmds_desktop.ask.relevance import distinctive_word_share
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
    assert "ONLY the numbered records" in prompt and "workflow wf, finding 2)" in prompt
    assert "workflow wf" in prompt and "name each workflow" in prompt
    # the intent names a step, not a fact: the reader's label keeps it, the prompt does not
    assert "intent MODEL_SELECTION" not in prompt and "intent MODEL_SELECTION" in record_label(RECORDS[1])
    # a long finding is cut after its last whole sentence within the limit
    line = next(x for x in prompt.splitlines() if x.startswith("[2] "))
    finding = line.split(") ", 1)[1]
    assert finding.endswith("Random forest chosen.") and len(finding) <= PROMPT_FINDING_CHARS


def _scored(n: int, workflows: tuple[str, ...] = ("wf",)) -> list[dict[str, Any]]:
    """``n`` records in view order (grouped by workflow, as the view shows them), each scored."""
    return [{"iri": f"http://x#{i}", "finding": f"Finding number {i} is stated here. It has a second "
             "sentence that explains it at some length.", "obs_type": DQ, "category": "exploratory",
             "workflow_name": workflows[(i - 1) * len(workflows) // n], "finding_seq": i, "intent": None,
             "score": 0.1 + 0.01 * i} for i in range(1, n + 1)]


def test_the_answer_prompt_carries_the_most_relevant_records_under_their_view_numbers() -> None:
    records = _scored(7)
    for r, score in zip(records, (0.30, 0.55, 0.20, 0.61, 0.10, 0.58, 0.40), strict=True):
        r["score"] = score
    assert prompt_records(records) == [2, 4, 6]  # the three best, in view order
    prompt = synthesis_prompt("What was found?", records)
    numbers = [int(x) for x in re.findall(r"^\[(\d+)\] \(", prompt, re.MULTILINE)]
    assert numbers == [2, 4, 6] and len(numbers) == PROMPT_RECORDS
    for n in numbers:  # each number carries that record of the view, nothing else
        assert f"[{n}] (Data Quality Observation, workflow wf, finding {n}) Finding number {n} " in prompt
    # a tie keeps view order; fewer records than the limit are all carried
    tied = _scored(5)
    for r in tied:
        r["score"] = 0.5
    assert prompt_records(tied) == [1, 2, 3]
    assert prompt_records(records[:2]) == [1, 2]
    # the instructions before the records are the same whatever the records: a prompt cache keeps them
    head = synthesis_prompt("q", records).split("Records:")[0]
    assert head == synthesis_prompt("another question", tied).split("Records:")[0]


def test_the_answer_prompt_follows_the_search_s_rank_over_the_similarity_alone() -> None:
    """A search that ranked by more than similarity (figures for a question about results, a stated
    choice for one about what was chosen) numbers its records' ``rank``: the prompt takes the first by
    it, as the search meant, not the closest by ``score``."""
    records = _scored(5)
    for r, score, rank in zip(records, (0.40, 0.35, 0.30, 0.25, 0.20), (4, 5, 1, 3, 2), strict=True):
        r["score"], r["rank"] = score, rank
    assert prompt_records(records) == [3, 4, 5]
    for r in records:
        del r["rank"]
    assert prompt_records(records) == [1, 2, 3]


def test_a_listing_prompt_takes_the_most_relevant_else_each_workflow_in_turn() -> None:
    listing = _scored(6, ("first workflow", "second workflow"))
    for r in listing:
        r["score"] = None
    # view order: 1-3 from the first workflow, 4-6 from the second; the prompt sees both
    assert prompt_records(listing) == [1, 2, 4]
    assert prompt_records(listing, limit=4) == [1, 2, 4, 5]
    assert prompt_records_said(listing, [1, 2, 4]) == "3 of the 6 records, taken in turn from each workflow"
    # where the records' similarity to the question is known, the most relevant whatever the workflow
    for r, relevance in zip(listing, (0.1, 0.2, 0.6, 0.5, 0.3, 0.4), strict=True):
        r["relevance"] = relevance
    assert prompt_records(listing) == [3, 4, 6]
    assert prompt_records_said(listing, [3, 4, 6]) == "the 3 most relevant of the 6 records"
    # the last place goes to the record with most of the question's distinctive words among the rest
    for r, share in zip(listing, (0.0, 0.9, 0.2, 0.0, 0.5, 0.0), strict=True):
        r["word_share"] = share
    assert prompt_records(listing) == [2, 3, 4]  # 3 and 4 by similarity, 2 by its words
    assert prompt_records_said(listing, [2, 3, 4]) == (
        "the 2 most relevant of the 6 records and the one holding most of the question's distinctive words")
    assert prompt_records_said(listing, list(range(1, 7))) == ""  # every record: nothing to say
    assert prompt_records(listing, limit=1) == [3]  # one place: the most relevant alone
    listing[1]["word_share"] = 0.0
    assert prompt_records(listing) == [3, 4, 5]


def test_a_listings_distinctive_words_weigh_most() -> None:
    """Over a listing that shares its topic, the question's word no other record has decides."""
    listing = [
        "Flipper length is the strongest single predictor of body mass over all penguins.",
        "Body mass ranges from 2,700 g to 6,300 g.",
        "Within each species flipper length and body mass are less tightly related.",
        "Rows without sex (11) are dropped for this analysis because sex is a predictor.",
    ]
    shares = distinctive_word_share("Why were some penguins dropped from the body mass analysis?", listing)
    assert max(range(4), key=shares.__getitem__) == 3  # "dropped" and "analysis" are its alone
    assert all(0.0 <= share <= 1.0 for share in shares) and shares[1] > 0.0  # "body mass" counts a little
    # no word of the question in any record: nothing to add, and the question's other words never dilute
    assert distinctive_word_share("What about the weather?", listing) == [0.0] * 4
    assert distinctive_word_share("Which were dropped?", listing)[3] == 1.0
    assert distinctive_word_share("anything", []) == []


@pytest.mark.parametrize(
    ("text", "limit", "want"),
    [
        ("Short finding.", 300, "Short finding."),
        ("One sentence here. Two sentences here. Three sentences here.", 45,
         "One sentence here. Two sentences here."),
        ("MAE 231 g, R2 0.87 for the linear model. The trees miss it.", 50,
         "MAE 231 g, R2 0.87 for the linear model."),
        ("A first sentence that runs on and on without any stop at all for a long while", 40,
         "A first sentence that runs on and on…"),
        ("Spaces   and\nnew lines   are flattened.", 300, "Spaces and new lines are flattened."),
    ],
)
def test_a_prompt_finding_is_cut_at_a_sentence_end(text: str, limit: int, want: str) -> None:
    assert prompt_finding(text, limit) == want
    assert len(prompt_finding(text, limit)) <= limit


def test_fewer_records_each_carry_more_of_their_finding() -> None:
    """The findings share one budget: a record alone keeps what three would each lose past 300
    characters (the reason a product was dropped sat in the second half of an 800-character finding)."""
    sentence = "The products with low loadings on every principal component were dropped here. "
    long = _scored(3)
    for r in long:
        r["finding"] = sentence * 10  # 800 characters
    alone = synthesis_prompt("Why were products dropped?", long[:1])
    three = synthesis_prompt("Why were products dropped?", long)
    carried = [len(line.split(") ", 1)[1]) for line in three.splitlines() if line.startswith("[")]
    assert carried and all(n <= PROMPT_FINDING_CHARS for n in carried)
    single = next(line for line in alone.splitlines() if line.startswith("[1]")).split(") ", 1)[1]
    assert PROMPT_FINDING_CHARS < len(single) <= PROMPT_FINDINGS_BUDGET and single.endswith("here.")


def test_a_citation_of_a_record_the_model_was_not_shown_is_dropped() -> None:
    sources = ["Two rows have all four body measurements missing",
               "Sex is missing for 11 penguins of the Adelie and Gentoo species",
               "Bill length and bill depth are negatively correlated"]
    # shown [1] and [3]: a [2] it never saw is dropped (it cannot have drawn on it), [3] stays
    text, note, uncited = repair_citations("Rows lack measurements [1] [2]. Bills are correlated [3].", 3,
                                           sources, given=[1, 3])
    assert text == "Rows lack measurements [1]. Bills are correlated [3]."
    assert cited_numbers(text) == [1, 3] and note == "Drawn from [1], [3]." and uncited == 0
    # an uncited claim restating a record the model was not shown is not attributed to it
    text, note, uncited = repair_citations("Sex is missing for 11 penguins of the Adelie species.", 3,
                                           sources, given=[1, 3])
    assert "[2]" not in text and uncited == 1 and note.endswith("it was given [1], [3].")


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
