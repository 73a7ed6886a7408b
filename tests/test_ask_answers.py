"""Answers a researcher can trust, on the demo KB and the shared KBs: the journeys of issue 15 in
offline mode and with the fake Ollama server (real ``ollama`` client), the real embedding model and
a real (in-memory) ChromaDB index.

Listings return every match in workflow and sequence order up to a visible limit; open questions
return the relevant records and stop where relevance drops; the routers read the KB's own
vocabulary; answers group by workflow and name it; identical findings are merged, citing both.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.fake_ollama import ModelScript

from kmds_desktop.ask.answers import cited_numbers
from kmds_desktop.commands.ask import format_result
from kmds_desktop.config import LLMSettings, Settings
from kmds_desktop.index import SemanticIndex
from kmds_desktop.kb import load_kb
from kmds_desktop.search import SearchOrchestrator

REPO = Path(__file__).resolve().parent.parent
W1, W2 = "penguin species classification", "penguin body mass regression"
MODEL = "router:1b"


@pytest.fixture(scope="module")
def demo_kb():
    return load_kb(REPO / "resources" / "demo_kb.xml")


@pytest.fixture(scope="module")
def retail_kb(kmds_data: Path):
    return load_kb(kmds_data / "example_ml_kb_exp_workflow.xml")


@pytest.fixture(scope="module")
def twin_kb(kmds_data: Path):
    """Two workflows recording identical findings."""
    return load_kb(kmds_data / "test_kb_exp_workflow.xml")


@pytest.fixture(scope="module")
def index() -> SemanticIndex:
    return SemanticIndex(None)


def offline(kb: Any, index: SemanticIndex, **kw: Any) -> SearchOrchestrator:
    return SearchOrchestrator(kb, backend="offline", settings=Settings(), index=index, **kw)


def places(result: Any) -> list[tuple[str, str, int | None]]:
    return [(r["workflow_name"], r["category"], r["finding_seq"]) for r in result.results]


# --------------------------------------------------------------------------- offline


def test_first_three_exploratory_findings_are_listed_in_order(demo_kb, index) -> None:
    result = offline(demo_kb, index).ask("Show the first 3 exploratory findings")
    assert result.listing and result.intent_class == "exploratory_search"
    assert (result.route.filters.finding_seq_min, result.route.filters.finding_seq_max) == (1, 3)
    assert places(result) == [(W1, "exploratory", 1), (W1, "exploratory", 2), (W1, "exploratory", 3),
                              (W2, "exploratory", 1), (W2, "exploratory", 2), (W2, "exploratory", 3)]
    assert result.total_matches == 6 and not result.truncated
    assert "all 6 matching observations, in workflow and sequence order" in result.answer
    assert result.answer.index(f"Workflow {W1}:") < result.answer.index(f"Workflow {W2}:")
    assert "5 most relevant" not in result.answer


def test_data_quality_question_lists_every_typed_record(demo_kb, retail_kb, index) -> None:
    result = offline(demo_kb, index).ask("What data quality problems were found?")
    assert result.route.filters.obs_type_filter == "Data Quality Observation" and result.listing
    findings = [r["finding"] for r in result.results]
    assert len(findings) == 5 and {r["obs_type"] for r in result.results} == {"Data Quality Observation"}
    assert any(f.startswith("sex is missing for 11 penguins") for f in findings)
    assert not any("344 rows" in f for f in findings)
    retail = offline(retail_kb, index).ask("What data quality problems were found?")
    assert [r["finding_seq"] for r in retail.results] == [1, 2, 3, 4, 5]
    assert any(r["finding"].startswith("Some Prices are not numbers") for r in retail.results)


def test_open_question_stops_where_relevance_drops(retail_kb, index) -> None:
    result = offline(retail_kb, index).ask("Were there negative prices?")
    assert not result.listing
    assert result.results[0]["finding"].startswith("Some Prices are not numbers")
    assert len(result.results) < 3  # not padded with unrelated records
    scores = [r["score"] for r in result.results]
    assert scores == sorted(scores, reverse=True)


def test_numbered_range_and_named_workflow_become_filters(demo_kb, index) -> None:
    numbered = offline(demo_kb, index).ask("Show modelling choices numbered 1 to 3")
    assert numbered.intent_class == "modelling_choice_search"
    assert (numbered.route.filters.finding_seq_min, numbered.route.filters.finding_seq_max) == (1, 3)
    assert [(r["workflow_name"], r["finding_seq"]) for r in numbered.results] == [
        (W1, 1), (W1, 2), (W1, 3), (W2, 1), (W2, 2), (W2, 3)]
    last = offline(demo_kb, index).ask(f"Show the last 2 model selection findings of the {W1} workflow")
    assert last.route.filters.workflow == W1
    assert places(last) == [(W1, "model_selection", 5), (W1, "model_selection", 6)]


def test_answers_name_the_workflow_of_each_record(demo_kb, index) -> None:
    result = offline(demo_kb, index).ask("Which model was selected?")
    workflows = [r["workflow_name"] for r in result.results]
    assert {W1, W2} <= set(workflows)
    selected = [r for r in result.results if r["obs_type"] == "Model Selection Statement"]
    assert {r["workflow_name"] for r in selected} == {W1, W2}
    assert f"Workflow {W1}:" in result.answer and f"Workflow {W2}:" in result.answer
    text = format_result(result.to_dict())
    assert f"(workflow {W1})" in text and f"(workflow {W2})" in text


def test_identical_findings_are_merged_citing_both(twin_kb, index) -> None:
    result = offline(twin_kb, index).ask("Show exploratory findings 2 to 4")
    assert [r["finding"] for r in result.results] == [f"Exploratory Observation - {i}" for i in (2, 3, 4)]
    for r in result.results:
        assert r["workflows"] == ["test application workflow", "test experiment workflow"]
        assert [a["workflow_name"] for a in r["also"]] == ["test experiment workflow"]
        assert r["also"][0]["iri"] != r["iri"] and twin_kb.observation(r["also"][0]["iri"]) is not None
    assert result.answer.count("(also recorded in test experiment workflow finding") == 3


def test_the_limit_is_visible_and_can_be_raised(demo_kb, index, tmp_path: Path) -> None:
    capped = offline(demo_kb, index, n_results=2).ask("Show the first 3 exploratory findings")
    assert len(capped.results) == 2 and capped.total_matches == 6 and capped.truncated
    assert capped.limit == 2 and capped.to_dict()["truncated"] is True
    assert "the first 2 of the 6 matching observations (raise the limit" in capped.answer
    from kmds_desktop.cli import main

    kb = str(REPO / "resources" / "demo_kb.xml")
    for limit, shown in (("2", 2), ("10", 6)):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["--data-dir", str(tmp_path / "home"), "ask", kb,
                         "Show the first 3 exploratory findings", "--backend", "offline", "--json",
                         "--persist-dir", str(tmp_path / "idx"), "--limit", limit])
        data = json.loads(out.getvalue())
        assert code == 0 and len(data["results"]) == shown and data["total_matches"] == 6
        assert data["limit"] == int(limit) and data["truncated"] is (shown < 6)


# --------------------------------------------------------------------------- fake Ollama


def llm_orchestrator(kb: Any, index: SemanticIndex, url: str) -> SearchOrchestrator:
    settings = Settings(llm=LLMSettings(ollama_host=url, ollama_model=MODEL, timeout_s=30))
    return SearchOrchestrator(kb, backend="ollama", settings=settings, index=index)


def test_llm_router_is_given_the_kbs_vocabulary(fake_ollama, demo_kb, index) -> None:
    route = {"intent_class": "exploratory_search", "listing": True, "explanation": "type named",
             "filters": {"obs_type_filter": "data quality", "workflow": "Penguin_Body_Mass_Regression"}}

    def reply(prompt: str, body: dict[str, Any]) -> str:
        return json.dumps(route) if "Reply with one JSON object" in prompt else "Two problems [1] [2]."

    fake_ollama.models[MODEL] = ModelScript(replies=[reply])
    result = llm_orchestrator(demo_kb, index, fake_ollama.url).ask(
        "What data quality problems were found in the body mass workflow?")
    prompt = fake_ollama.completion_requests()[0].prompt
    for word in ('"Data Quality Observation"', '"Feature Engineering Observation"', f'"{W1}"', f'"{W2}"',
                 f"{W1} / exploratory: 1-8", "DATA_HETEROGENEITY_ASSESSMENT", "listing", "workflow"):
        assert word in prompt, word
    # the LLM's loose spellings are read in the KB's own terms
    assert result.route.filters.obs_type_filter == "Data Quality Observation"
    assert result.route.filters.workflow == W2
    assert places(result) == [(W2, "exploratory", 3), (W2, "exploratory", 6)]
    synthesis = fake_ollama.completion_requests()[-1].prompt
    assert f"workflow {W2}" in synthesis and result.answer == "Two problems [1] [2]."


def test_llm_open_question_and_listing_flag(fake_ollama, retail_kb, demo_kb, index) -> None:
    def script(route: dict[str, Any]):
        def reply(prompt: str, body: dict[str, Any]) -> str:
            return json.dumps(route) if "Reply with one JSON object" in prompt else "Answer [1]."
        return reply

    fake_ollama.models[MODEL] = ModelScript(replies=[script(
        {"intent_class": "semantic_search", "listing": False, "explanation": "a topic"})])
    result = llm_orchestrator(retail_kb, index, fake_ollama.url).ask("Were there negative prices?")
    assert not result.listing and len(result.results) < 3
    assert result.results[0]["finding"].startswith("Some Prices are not numbers")
    fake_ollama.models[MODEL] = ModelScript(replies=[script(
        {"intent_class": "exploratory_search", "listing": True, "explanation": "first three",
         "filters": {"finding_seq_min": 1, "finding_seq_max": 3}})])
    listed = llm_orchestrator(demo_kb, index, fake_ollama.url).ask("Show the first 3 exploratory findings")
    assert listed.listing and [r["finding_seq"] for r in listed.results] == [1, 2, 3, 1, 2, 3]
    assert [r["workflow_name"] for r in listed.results] == [W1] * 3 + [W2] * 3


def test_citations_are_repaired_and_an_uncited_answer_is_flagged():
    from kmds_desktop.ask.answers import repair_citations

    # a citation written before its claim moves to the claim's end; one out of range is dropped
    text, note, uncited = repair_citations("Columns hold null values [1]. [3] Some quantities are not "
                                           "numbers. Model B won [9].", 3)
    assert text == "Columns hold null values [1]. Some quantities are not numbers [3]. Model B won."
    assert note == "Drawn from [1], [3]." and uncited == 0  # "Model B won" is too short to be a claim
    # a group of them, and a verb that only reports the records, go along (the 1.5B model writes them so):
    # moving "[2]" alone had left "and [3] indicate that two rows …" and "states that rows …"
    text, _, uncited = repair_citations("Yes, there were missing values. [2] and [3] indicate that two rows "
                                        "had every measurement missing. [3] also states that sex is missing "
                                        "for 11 penguins. [1], [2] show the same.", 3)
    assert text == ("Yes, there were missing values. Two rows had every measurement missing [2] [3]. Sex is "
                    "missing for 11 penguins [3]. [1], [2] show the same.")
    assert uncited == 1  # the opening sentence; "[1], [2] show the same" states too little to count
    text, _, _ = repair_citations("[1]: Some prices are not numbers. [2] - Some rows were dropped.", 3)
    assert text == "Some prices are not numbers [1]. Some rows were dropped [2]."
    # markers after the full stop cite the sentence before them
    text, note, uncited = repair_citations("Yes, some products were invalid. [1]", 3)
    assert (text, note, uncited) == ("Yes, some products were invalid [1].", "Drawn from [1].", 0)
    # an answer citing nothing is never shown as cited: the note says so and names what it was given
    text, note, uncited = repair_citations("The PCA loadings show two components. They explain most of "
                                           "the variance in the data.", 2)
    assert "[" not in text and uncited == 2
    assert note.startswith("The model cited no record") and "[1], [2]" in note
    # list items keep their bullets; claims without a source are counted
    text, note, uncited = repair_citations("- Model A was chosen for its lowest error [2] [7].\n"
                                           "- The features were scaled before fitting the models.", 2)
    assert text.splitlines()[0] == "- Model A was chosen for its lowest error [2]."
    assert uncited == 1 and note == "Drawn from [2]. 1 of 2 statements cite no record."


def test_an_llm_answer_carries_its_citation_note_everywhere(fake_ollama, demo_kb, index) -> None:
    from kmds_desktop.app.ask import answer_markdown, displayed_answer

    route = {"intent_class": "exploratory_search", "listing": True, "explanation": "type named",
             "filters": {"obs_type_filter": "data quality"}}

    def reply(prompt: str, body: dict[str, Any]) -> str:
        if "Reply with one JSON object" in prompt:
            return json.dumps(route)
        cite = re.findall(r"^\[(\d+)\] \(", prompt, re.MULTILINE)[-1]  # a record it was shown
        return f"[{cite}] One column has missing values in the body mass data. The rest is fine."

    fake_ollama.models[MODEL] = ModelScript(replies=[reply])
    result = llm_orchestrator(demo_kb, index, fake_ollama.url).ask("What data quality problems were found?")
    assert result.synthesis == "llm"
    # the model was shown the three of the five records most similar to the question (the view
    # keeps the listing's order)
    assert len(result.results) == 5 and len(result.given_records) == 3
    assert [r["finding_seq"] for r in result.results] == [2, 3, 8, 3, 6]  # the listing's order
    shown = result.given_records
    relevance = [r["relevance"] for r in result.results]
    assert sorted(relevance[n - 1] for n in shown) == sorted(relevance)[2:]
    assert result.answer.startswith(f"One column has missing values in the body mass data [{shown[-1]}].")
    # "The rest is fine." states something without a source: flagged, not shown as cited; the note
    # also says which records the model was shown
    note = (f"Drawn from [{shown[-1]}]. 1 of 2 statements cite no record. The model read only [{shown[0]}], "
            f"[{shown[1]}] and [{shown[2]}], the 3 most relevant of the 5 records.")
    assert result.citation_note == note and result.uncited_claims == 1
    assert displayed_answer(result).endswith(f"*{note}*")
    assert f"*{note}*" in answer_markdown(result)
    assert note in format_result(result.to_dict())


def test_the_model_writes_from_the_most_relevant_records_and_its_citations_stay_the_views(
        fake_ollama, demo_kb, index) -> None:
    """The answer prompt carries the few most relevant records (reading every record made the first
    token wait 16-20 s with a 1.5B model on 2 cores), each under the number the view gives it, so a
    citation still opens the record it names; a citation of a record the model was not shown is
    dropped, and the note says which records the model was shown."""
    from kmds_desktop.ask.answers import PROMPT_RECORDS

    route = {"intent_class": "model_selection_search", "listing": False}
    prompts: list[str] = []

    def reply(prompt: str, body: dict[str, Any]) -> str:
        if "Reply with one JSON object" in prompt:
            return json.dumps(route)
        prompts.append(prompt)
        shown = [int(n) for n in re.findall(r"^\[(\d+)\] \(", prompt, re.MULTILINE)]
        unshown = next(n for n in range(1, 10) if n not in shown)
        return (f"The selected model is described in record {shown[0]} [{shown[0]}]. "
                f"Another record says more about the choice [{unshown}] [{shown[-1]}].")

    fake_ollama.models[MODEL] = ModelScript(replies=[reply])
    result = llm_orchestrator(demo_kb, index, fake_ollama.url).ask("Which model was selected and why?")
    assert result.synthesis == "llm" and len(result.results) > PROMPT_RECORDS
    shown = [int(n) for n in re.findall(r"^\[(\d+)\] \(", prompts[-1], re.MULTILINE)]
    assert shown == result.given_records and len(shown) == PROMPT_RECORDS
    # the most relevant records of the view, under the view's own numbers
    by_score = sorted(range(1, len(result.results) + 1), key=lambda n: -result.results[n - 1]["score"])
    assert sorted(by_score[:PROMPT_RECORDS]) == shown
    for n in shown:
        record = result.results[n - 1]
        first_words = " ".join(record["finding"].split()[:6])
        line = next(x for x in prompts[-1].splitlines() if x.startswith(f"[{n}] ("))
        assert first_words in line and f"workflow {record['workflow_name']}" in line
    # every citation left in the answer is a record the model was shown, and means results[n-1]
    assert cited_numbers(result.answer) == [shown[0], shown[-1]]
    assert result.citation_note.startswith(f"Drawn from [{shown[0]}], [{shown[-1]}].")
    shown_line = f"the {PROMPT_RECORDS} most relevant of the {len(result.results)} records."
    assert shown_line in result.citation_note
    assert "The model read only" in format_result(result.to_dict())


def test_uncited_claims_that_restate_a_record_get_its_citation_and_say_so() -> None:
    """A small model writes the right facts without markers (seen with Qwen2.5-Coder-1.5B): a claim
    whose words are mostly one record's gets that record's number, the note says the app added it,
    and a claim that restates nothing stays uncited and counted."""
    from kmds_desktop.ask.answers import repair_citations

    sources = ["Two rows (an Adelie from Torgersen, 2007, and a Gentoo) have all four body measurements "
               "missing",
               "sex is missing for 11 penguins (6 Adelie, 5 Gentoo); the other 333 rows are complete",
               "Bill length and bill depth are negatively correlated over all penguins"]
    answer = ("Two rows have all four body measurements missing and were dropped. "
              "The sex was missing for 11 penguins. The study was carried out with great care.")
    text, note, uncited = repair_citations(answer, 3, sources)
    assert text == ("Two rows have all four body measurements missing and were dropped [1]. "
                    "The sex was missing for 11 penguins [2]. The study was carried out with great care.")
    assert note.startswith("Drawn from [1], [2]. The app added [1], [2] where the model cited nothing")
    assert note.endswith("1 of 3 statements cite no record.") and uncited == 1
    # the model's own citations are kept as they are; only uncited claims are attributed
    text, note, uncited = repair_citations("Bill length and bill depth are negatively correlated [2].", 3,
                                           sources)
    assert text.endswith("[2].") and "The app added" not in note and uncited == 0
