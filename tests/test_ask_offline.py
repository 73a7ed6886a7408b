"""Offline mode end to end on the shared KBs: no LLM, the embedding router, extractive answers, CLI."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from kmds_desktop.commands.ask import register
from kmds_desktop.config import Settings
from kmds_desktop.kb import load_kb
from kmds_desktop.search import SearchOrchestrator

# Plain questions (not the catalogue's examples) and the template each must reach.
QUESTIONS = [
    ("What problems did the exploratory analysis reveal about the data?", "exploratory_search"),
    ("Which features were derived or transformed for the model?", "data_representation_search"),
    ("What modelling assumptions did the analyst make?", "modelling_choice_search"),
    ("Which candidate model won, and by which metric?", "model_selection_search"),
    ("Show every observation in this knowledge base", "all_observations_search"),
    ("customer purchase frequency", "semantic_search"),
]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ask-offline-index")


@pytest.fixture(scope="module")
def ml_orch(kmds_data: Path, index_dir: Path) -> SearchOrchestrator:
    """example_ml_kb_exp_workflow.xml has observations of all four main categories."""
    kb = load_kb(kmds_data / "example_ml_kb_exp_workflow.xml")
    return SearchOrchestrator(kb, persist_dir=index_dir, backend="offline", settings=Settings(), n_results=5)


@pytest.mark.parametrize(("question", "intent"), QUESTIONS, ids=[i for _, i in QUESTIONS])
def test_each_intent_is_reachable_by_a_plain_question(ml_orch, question: str, intent: str) -> None:
    result = ml_orch.ask(question)
    assert result.backend == "offline" and result.synthesis == "offline"
    assert result.intent_class == intent, result.route_explanation
    assert result.fallback_reason is None
    assert result.route_explanation.startswith("Offline router:")
    assert result.results
    # the template was guessed from the question's meaning, so an open question ranks the whole KB
    # (preferring the template's category): every record is the KB's, best first
    assert all(ml_orch.kb.observation(r["iri"]) is not None for r in result.results)
    distances = [r["distance"] for r in result.results]
    assert result.listing or distances == sorted(distances)
    assert result.answer.startswith("No LLM was used (offline mode)")
    for i in range(1, len(result.results) + 1):
        assert f"[{i}]" in result.answer


def test_sequence_range_and_first_n_cues(ml_orch) -> None:
    first = ml_orch.ask("What are the first two findings?")
    assert first.intent_class == "all_observations_search"
    assert (first.route.filters.finding_seq_min, first.route.filters.finding_seq_max) == (1, 2)
    assert first.results and all(1 <= r["finding_seq"] <= 2 for r in first.results)
    ranged = ml_orch.ask("Show me findings 2 to 3 of the exploratory analysis")
    assert ranged.intent_class == "exploratory_search"
    assert (ranged.route.filters.finding_seq_min, ranged.route.filters.finding_seq_max) == (2, 3)
    assert ranged.results and all(r["category"] == "exploratory" and 2 <= r["finding_seq"] <= 3
                                  for r in ranged.results)
    # "from" before a range, and a number of two digits kept whole ("from 12 to 15" once read "from 1")
    for question, expected in (("Show findings from 2 to 3", (2, 3)), ("Show findings from 2", (2, None))):
        filters = ml_orch.ask(question).route.filters
        assert (filters.finding_seq_min, filters.finding_seq_max) == expected, question
    beyond = ml_orch.ask("Show findings from 12 to 15")  # the KB has no finding numbered that high
    assert "findings 12 to 15" in (beyond.fallback_reason or "")


def test_quoted_word_becomes_keyword_filter(ml_orch) -> None:
    word = "revenue"
    result = ml_orch.ask(f'Which findings mention "{word}"?')
    assert result.route.filters.keyword == word
    assert result.results and all(word in r["finding"].lower() for r in result.results)


def test_observation_type_cue(ml_orch) -> None:
    result = ml_orch.ask("List the data quality observations")
    assert result.route.filters.obs_type_filter == "Data Quality Observation"
    assert result.results and {r["obs_type"] for r in result.results} == {"Data Quality Observation"}


def test_extractive_answer_groups_by_workflow(ml_orch) -> None:
    result = ml_orch.ask("Show every observation in this knowledge base")
    assert result.listing and len(result.results) == 5 and result.total_matches == 9 and result.truncated
    assert "\nWorkflow retail_customer_modelling:\n" in result.answer
    assert "the first 5 of the 9 matching observations (raise the limit" in result.answer
    assert result.answer.count("\n- ") == len(result.results)


def test_offline_ask_reuses_one_question_embedding(ml_orch, monkeypatch: pytest.MonkeyPatch) -> None:
    """Routing embeds the question itself; ranking then only embeds it once more at most."""
    from kmds_desktop.index import embeddings

    calls: list[int] = []
    real = embeddings.encode

    def counting(texts, *args, **kwargs):
        calls.append(len(texts))
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(embeddings, "encode", counting)
    ml_orch.ask("Which data transformations were applied to the raw data?")
    assert sum(calls) <= 2  # the question only: never the findings again


def test_empty_question_is_rejected(ml_orch) -> None:
    with pytest.raises(ValueError, match="question is empty"):
        ml_orch.ask("   ")


def _cli(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(list(argv))
    out, err = io.StringIO(), io.StringIO()
    code = args.func(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_json_and_text(kmds_data: Path, index_dir: Path) -> None:
    kb = str(kmds_data / "example_analytics_kb_app_workflow.xml")
    code, out, _ = _cli("ask", kb, "Which data quality issues were found?", "--backend", "offline", "--json",
                        "--persist-dir", str(index_dir))
    assert code == 0
    data = json.loads(out)
    keys = {"answer", "intent_class", "route_explanation", "results", "fallback_reason", "backend"}
    assert keys <= data.keys()
    assert data["backend"] == "offline" and data["intent_class"] == "exploratory_search"
    assert data["results"][0]["iri"].startswith("http://test.org/kmds/kmds.owl#")
    code, out, _ = _cli("ask", kb, "ticket resolution time", "--backend", "offline", "--persist-dir",
                        str(index_dir), "-n", "2")
    assert code == 0 and "No LLM was used" in out and "Route: " in out and "[2] " in out and "[3] " not in out


def test_cli_missing_file_is_one_line_error(tmp_path: Path) -> None:
    code, out, err = _cli("ask", str(tmp_path / "missing.xml"), "q", "--backend", "offline")
    assert code == 1 and out == "" and "missing.xml" in err and len(err.strip().splitlines()) == 1


def test_kmds_desktop_ask_entry_point(kmds_data: Path, index_dir: Path, capsys, data_home: Path) -> None:
    from kmds_desktop.cli import main

    kb = str(kmds_data / "example_ml_kb_exp_workflow.xml")
    code = main(["ask", kb, "How were the features engineered?", "--backend", "offline", "--json",
                 "--persist-dir", str(index_dir)])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["intent_class"] == "data_representation_search" and data["synthesis"] == "offline"
    assert data["results"] and data["fallback_reason"] is None


def test_six_intents_on_the_analytics_kb(kmds_data: Path, index_dir: Path) -> None:
    """Another shared KB, other plain questions; it has no modelling-choice observations, so a
    question about why a model was chosen is answered from its model selection records (what was
    chosen and why are answered from both categories)."""
    kb = load_kb(kmds_data / "example_analytics_kb_app_workflow.xml")
    orch = SearchOrchestrator(kb, persist_dir=index_dir, backend="offline", settings=Settings(), n_results=3)
    questions = [
        ("Were there data quality issues in the ticket data?", "exploratory_search", "exploratory"),
        ("How was the ticket data transformed into features?", "data_representation_search",
         "data_representation"),
        ("Why was this kind of model chosen?", "modelling_choice_search", None),
        ("How were the clustering models compared?", "model_selection_search", "model_selection"),
        ("List all findings of this knowledge base", "all_observations_search", None),
        ("how long are tickets open before they are closed", "semantic_search", None),
    ]
    for question, intent, category in questions:
        result = orch.ask(question)
        assert result.proposed_route.intent_class == intent, (question, result.route_explanation)
        assert result.results and result.answer.startswith("No LLM was used (offline mode)")
        assert all(kb.observation(r["iri"]) is not None for r in result.results)
        assert result.fallback_reason is None and result.intent_class == intent
        if intent == "modelling_choice_search":
            assert {r["category"] for r in result.results} == {"model_selection"}
        if category:
            assert result.results[0]["category"] == category
    resolution = orch.ask("how long are tickets open before they are closed").results[0]["finding"]
    assert "resol" in resolution.lower()


def test_cli_rejects_a_zero_result_count(kmds_data: Path) -> None:
    kb = str(kmds_data / "example_analytics_kb_app_workflow.xml")
    code, out, err = _cli("ask", kb, "q", "--backend", "offline", "-n", "0")
    assert code == 1 and out == "" and err.strip() == "error: -n/--limit must be at least 1, not 0"
