"""Multi-model query generation against the fake Ollama server (real sockets, the real ``ollama`` client).

Covers cleaning and de-duplication of model output, strictly serial model-then-attempt order, a
missing model (404) recorded while the others continue, attempt variation, cancel during a slow call,
the built-in keyword generator, and the ``query_generation`` settings validation.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from support.fake_ollama import ModelScript

from kmds_desktop.config import QueryGenerationSettings, SettingsError, load_settings
from kmds_desktop.literature.queries.keyword_queries import KeywordQueryBuilder, content_words
from kmds_desktop.literature.queries.query_cleaning import clean_query, deduplicate_queries, query_key
from kmds_desktop.literature.queries.query_generation import (
    DEFAULT_SYSTEM_PROMPT,
    MultiModelQueryGenerator,
    MultiModelQueryResult,
    QueryGenerationResult,
)
from kmds_desktop.tasks import Cancelled, CancelToken

QUESTION = "Does aspirin reduce the risk of heart attack in diabetic patients?"


# --- cleaning -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("a & b", "a & b"),
        ("A&b", "A & b"),
        ("Here is the query:\n\n```sql\n(diabetes | \"blood sugar\") & insulin:*\n```\nIt finds...",
         "(diabetes | (blood <-> sugar)) & insulin:*"),
        ('Query: "aspirin AND (heart OR cardiac) AND NOT placebo"', "aspirin & (heart | cardiac) & !placebo"),
        ("to_tsquery('english', 'covid-19 & vaccin:*')", "covid-19 & vaccin:*"),
        ("1. **Query:** cancer && p53", "cancer & p53"),
        ("heart attack & aspirin", "heart & attack & aspirin"),
        ("((tau | amyloid) & alzheimer's", "(tau | amyloid) & alzheimer"),
        ("& stroke | )", "stroke"),
        ("'migraine <-> aura & stroke'", "migraine <-> aura & stroke"),
        ("Sure! Here is a PostgreSQL query for your research question.", ""),
        ("", ""),
        ("()", ""),
        # a small model under the {"queries": [...]} format begins its query with the format's word
        ("queries & (lipid:* | fat) & (sputum | secretion:*)", "(lipid:* | fat) & (sputum | secretion:*)"),
        ("Queries: asthma | wheez:*", "asthma | wheez:*"),
        # a reply in that format cut off at the token limit (seen in the window): no JSON to decode
        ('{"queries": ["queries & (pseudomonas | aeruginosa) & (cystic <-> fibrosis | pseudomonas',
         "(pseudomonas | aeruginosa) & (cystic <-> fibrosis | pseudomonas)"),
        # a word after a colon is a word, not weight letters ("time:cadence" read as "time:CAD & ence")
        ("time:cadence & rate", "time & cadence & rate"),
        ("aspirin:A & heart:* & child:AB*", "aspirin:A & heart:* & child:AB*"),
        # PostgreSQL takes a phrase distance up to 16384: a longer one is that
        ("fever <99999> rash", "fever <16384> rash"),
        ("fever <3> rash", "fever <3> rash"),
    ],
)
def test_clean_query_repairs_model_output(reply: str, expected: str) -> None:
    assert clean_query(reply) == expected


def test_a_text_reply_written_as_the_json_format_gives_its_query() -> None:
    """A model asked in plain text (a backend that cannot enforce a schema) that answers
    ``{"queries": [...]}`` anyway gets its query read from the JSON, not ``queries & ...``."""

    class TextOnlyBackend:
        def chat(self, prompt: str, system: str | None = None, **kwargs: object) -> str:
            assert "schema" not in kwargs
            return '{"queries": ["asthma & (child:* | pediatric)"]}'

    generator = MultiModelQueryGenerator(TextOnlyBackend(), timeout=10, verbatim_models=["jsonish"])
    result = generator.generate_queries(QUESTION, DEFAULT_SYSTEM_PROMPT, ["jsonish"], 1)
    assert [(r.query, r.reply_format) for r in result.all_queries] == [
        ("asthma & (child:* | pediatric)", "text")]


def test_the_prompt_examples_are_not_questions_of_a_judged_corpus() -> None:
    """The model copies worked examples, so none may come from SciFact or CF (it once wrote the CF
    example as the query of another CF question); checked against the shared question files."""
    from pathlib import Path

    shared = Path(__file__).resolve().parents[2] / "shared" / "data" / "literature"
    examples = [line.split(":", 1)[1].strip().lower() for line in DEFAULT_SYSTEM_PROMPT.splitlines()
                if line.startswith("Question:")]
    assert len(examples) == 3
    texts = set()
    for name in ("scifact", "cf"):
        lines = (shared / name / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        assert lines, f"no questions in {name}"
        texts |= {json.loads(line)["text"].strip().lower() for line in lines if line.strip()}
    assert not set(examples) & texts
    assert not any("cystic fibrosis" in e or " cf " in f" {e} " for e in examples)


def test_deduplicate_keeps_first_spelling_and_drops_empties() -> None:
    replies = ["Aspirin&Stroke", "", "aspirin & stroke", "  ", "```\nASPIRIN & STROKE\n```",
               "stroke & aspirin"]
    cleaned = [clean_query(r) for r in replies]
    assert deduplicate_queries(cleaned) == ["Aspirin & Stroke", "stroke & aspirin"]
    assert query_key("a & b") == query_key("A&b")


# --- the built-in generator -----------------------------------------------------------------------------
def test_builtin_keywords_without_database_varies_per_attempt() -> None:
    words = content_words(QUESTION)
    assert "aspirin" in words and "Does" not in words and "risk" not in words and "reduce" not in words
    builder = KeywordQueryBuilder()
    strict, pairs, broad = (builder.query(QUESTION, a) for a in (1, 2, 3))  # strict to broad
    assert " & " in strict and "|" not in strict
    assert broad.startswith("aspirin | ") and "diabetic" in broad and ":*" not in broad
    assert pairs.count("&") >= 3 and "|" in pairs
    assert len({strict, broad, pairs}) == 3
    assert all(clean_query(q) == q for q in (strict, broad, pairs))  # already canonical


# --- the generator with the fake server -----------------------------------------------------------------
def _three_models(fake_ollama) -> None:
    fake_ollama.models["fenced"] = ModelScript(replies=[
        "Here is the PostgreSQL query:\n```\nAspirin&(heart <-> attack | myocardial <-> infarction)\n```",
        "Sure!\n\naspirin & (heart <-> attack | myocardial <-> infarction)",  # same query, other spelling
        lambda prompt, body: "aspirin:* AND diabet:*" if "SPECIFIC" in prompt else "wrong attempt",
    ])
    fake_ollama.models["missing"] = ModelScript(status=404, error="model 'missing' not found")
    fake_ollama.models["slow"] = ModelScript(replies=["`aspirin & stroke`"], delay=0.15)


def test_generation_is_serial_records_404_and_cleans(fake_ollama) -> None:
    _three_models(fake_ollama)
    rows: list[QueryGenerationResult] = []
    progress: list[tuple[int, int | None, str]] = []
    generator = MultiModelQueryGenerator(ollama_host=fake_ollama.url, timeout=10,
                                         verbatim_models=["fenced", "missing", "slow"])
    result = generator.generate_queries(QUESTION, DEFAULT_SYSTEM_PROMPT, ["fenced", "missing", "slow"], 3,
                                        temperature=0.1, progress=lambda *a: progress.append(a),
                                        on_result=rows.append)
    assert isinstance(result, MultiModelQueryResult)
    assert rows == result.all_queries and result.total_queries == 9 and result.model_count == 3

    requests = fake_ollama.completion_requests()
    # strictly one at a time, model then attempt; the missing model is asked once, not three times
    assert fake_ollama.max_active == 1
    assert [r.model for r in requests] == ["fenced"] * 3 + ["missing"] + ["slow"] * 3
    for before, after in zip(requests, requests[1:], strict=False):
        assert before.end <= after.start
    assert [(r.model, r.attempt_number) for r in result.all_queries] == [
        (m, a) for m in ("fenced", "missing", "slow") for a in (1, 2, 3)]

    fenced = [r for r in result.all_queries if r.model == "fenced"]
    assert fenced[0].query == "Aspirin & (heart <-> attack | myocardial <-> infarction)"
    assert fenced[1].query == "aspirin & (heart <-> attack | myocardial <-> infarction)"
    missing = [r for r in result.all_queries if r.model == "missing"]
    assert missing[0].error_kind == "LLMModelNotFound" and "missing" in missing[0].error
    assert not missing[0].error.startswith("LLM"), "the message is for people: no class name"
    assert all(r.query == "" and r.error for r in missing)
    assert [r.skipped for r in missing] == [False, True, True]
    slow = [r for r in result.all_queries if r.model == "slow"]
    assert all(r.ok and r.query == "aspirin & stroke" and r.generation_time >= 0.14 for r in slow)

    # de-duplication: first spelling kept, the three equal 'slow' queries count once
    assert result.unique_queries == [
        "Aspirin & (heart <-> attack | myocardial <-> infarction)",
        "aspirin:* & diabet:*",
        "aspirin & stroke",
    ]
    assert result.models_for("aspirin & stroke") == ["slow"]
    assert progress[-1][0] == progress[-1][1] == 9
    assert result.total_generation_time >= sum(r.generation_time for r in result.all_queries) - 0.01


def test_later_attempts_vary_temperature_and_prompt(fake_ollama) -> None:
    fake_ollama.models["m"] = ModelScript(replies=["a & b", "a | b:*", "a & c"])
    MultiModelQueryGenerator(ollama_host=fake_ollama.url, verbatim_models=["m"]).generate_queries(
        QUESTION, None, ["m"], 3, temperature=0.2)
    bodies = [r.body for r in fake_ollama.completion_requests()]
    temps = [b["options"]["temperature"] for b in bodies]
    assert temps == [0.2, 0.4, 0.6]
    prompts = [r.prompt for r in fake_ollama.completion_requests()]
    assert QUESTION in prompts[0] and "BROADER" in prompts[1] and "SPECIFIC" in prompts[2]
    assert "- a & b" in prompts[1] and "- a | b:*" in prompts[2]  # earlier queries are shown, not repeated
    system = [m for m in bodies[0]["messages"] if m["role"] == "system"][0]["content"]
    for token in ("&", "|", "!", ":*", "<->", "parentheses", "OR group", "no explanation"):
        assert token in system


def test_cancel_during_slow_call_returns_promptly(fake_ollama) -> None:
    fake_ollama.models["slow"] = ModelScript(replies=["a & b"], delay=5.0)
    fake_ollama.models["next"] = ModelScript(replies=["c & d"])
    token = CancelToken()
    seen: list[QueryGenerationResult] = []
    threading.Timer(0.3, token.cancel).start()
    start = time.monotonic()
    with pytest.raises(Cancelled):
        MultiModelQueryGenerator(ollama_host=fake_ollama.url, timeout=30).generate_queries(
            QUESTION, None, ["slow", "next"], 2, cancel=token, on_result=seen.append)
    assert time.monotonic() - start < 1.5
    assert [r.model for r in fake_ollama.completion_requests()] == ["slow"]  # nothing after the cancel
    assert seen == []


def test_builtin_model_works_without_any_server() -> None:
    generator = MultiModelQueryGenerator(ollama_host="http://127.0.0.1:9", timeout=2)
    result = generator.generate_queries(QUESTION, None, ["builtin:keywords", "builtin:nope"], 2)
    ok = [r for r in result.all_queries if r.model == "builtin:keywords"]
    assert len(ok) == 2 and all(r.ok for r in ok) and ok[0].query != ok[1].query
    bad = [r for r in result.all_queries if r.model == "builtin:nope"]
    assert bad[0].error and "unknown built-in generator" in bad[0].error
    assert len(result.unique_queries) == 2


def test_unreachable_host_and_timeout_are_recorded(fake_ollama) -> None:
    fake_ollama.models["slow"] = ModelScript(replies=["a & b"], delay=2.0)
    result = MultiModelQueryGenerator(ollama_host=fake_ollama.url, timeout=0.4).generate_queries(
        QUESTION, None, ["slow", "builtin:keywords"], 1)
    assert result.all_queries[0].error_kind == "LLMTimeout" and result.all_queries[0].error
    assert result.all_queries[1].ok
    result = MultiModelQueryGenerator(ollama_host="http://127.0.0.1:9", timeout=2).generate_queries(
        QUESTION, None, ["llama3.1:8b"], 2)
    error = result.all_queries[0].error or ""
    assert result.all_queries[0].error_kind == "LLMUnreachable" and "127.0.0.1:9" in error
    assert result.unique_queries == []


def test_deduplicate_off_keeps_repeats(fake_ollama) -> None:
    fake_ollama.models["m"] = ModelScript(replies=["a & b", "A&B", "a & b"])
    result = MultiModelQueryGenerator(ollama_host=fake_ollama.url, deduplicate=False,
                                      verbatim_models=["m"]).generate_queries(QUESTION, None, ["m"], 3)
    assert result.unique_queries == ["a & b", "A & B", "a & b"] and not result.deduplicated


def test_invalid_arguments_fail_clearly() -> None:
    generator = MultiModelQueryGenerator()
    with pytest.raises(ValueError, match="empty"):
        generator.generate_queries("  ", None, ["builtin:keywords"], 1)
    with pytest.raises(ValueError, match="1-3"):
        generator.generate_queries(QUESTION, None, ["builtin:keywords"], 4)
    with pytest.raises(ValueError, match="no model"):
        generator.generate_queries(QUESTION, None, [" "], 1)


# --- settings ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("section", "key", "message"),
    [
        ({"execution_mode": "parallel"}, "query_generation.execution_mode", "only 'serial'"),
        ({"queries_per_model": 4}, "query_generation.queries_per_model", "less than or equal to 3"),
        ({"models": []}, "query_generation.models", ""),
        ({"temperature": 5}, "query_generation.temperature", ""),
        ({"multi_model_enabled": "maybe"}, "query_generation.multi_model_enabled", ""),
    ],
)
def test_invalid_query_generation_settings_fail_at_load(tmp_path, section, key, message) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"query_generation": section}), encoding="utf-8")
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    assert key in str(info.value) and message in str(info.value)


def test_query_generation_defaults_are_offline_capable() -> None:
    settings = QueryGenerationSettings()
    assert settings.models == ["builtin:keywords"] and settings.execution_mode == "serial"
    assert not settings.multi_model_enabled and 1 <= settings.queries_per_model <= 3


def test_agent_settings_reach_the_generator(fake_ollama) -> None:
    """``ollama_host``, ``timeout_s``, ``models`` and ``queries_per_model`` as the agent passes them on."""
    from kmds_desktop.literature import QueryAgent

    fake_ollama.models["slow"] = ModelScript(replies=["a & b"], delay=1.5)
    settings = QueryGenerationSettings(multi_model_enabled=True, models=["slow", "builtin:keywords"],
                                       queries_per_model=2, ollama_host=fake_ollama.url, timeout_s=0.3)
    result = QueryAgent(None, settings).convert_question_multi_model(QUESTION)
    assert [(r.model, r.attempt_number) for r in result.all_queries] == [
        ("slow", 1), ("slow", 2), ("builtin:keywords", 1), ("builtin:keywords", 2)]
    # the first attempt's timeout ends the model's turn: its second attempt is not asked
    assert all(r.error_kind == "LLMTimeout" for r in result.all_queries[:2])
    assert [r.skipped for r in result.all_queries[:2]] == [False, True]
    assert all(r.ok for r in result.all_queries[2:])
    assert len(fake_ollama.completion_requests()) == 1
