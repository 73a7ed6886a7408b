"""Structured output asked once per server and model, and prompts a server's cache can reuse.

A server that refuses the route's JSON schema is asked in plain text from then on (the window makes
a backend per question, so this is remembered for the process, per server and model): the second
question sends no schema request. Requests carry llama.cpp's ``cache_prompt``; a server that
refuses the field is asked again without it, once. The prompts put what does not change first and
the question last, so two questions share everything up to the question. Real HTTP servers on free
ports, the real embedding model and index, the window's ask path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.fake_openai import FakeOpenAI, OpenAIScript

from kmds_desktop.app import workspace
from kmds_desktop.app.ask import answer_question, settings_for_ask
from kmds_desktop.ask.answers import synthesis_prompt
from kmds_desktop.ask.kb_vocabulary import KBVocabulary
from kmds_desktop.ask.routing import routing_prompt
from kmds_desktop.config import Settings
from kmds_desktop.llm import OpenAIBackend

ROUTE = {"intent_class": "exploratory_search", "listing": True, "explanation": "named",
         "filters": {"obs_type_filter": "Data Quality Observation", "workflow": None,
                     "finding_seq_min": None, "finding_seq_max": None, "keyword": None}}
QUESTIONS = ("What data quality problems were found?", "List the data quality issues that were recorded.")


@pytest.fixture()
def holder(tmp_path: Path) -> workspace.IndexHolder:
    return workspace.IndexHolder.in_process(tmp_path / "index")


def _schema_requests(fake: FakeOpenAI) -> list[str]:
    return [r["response_format"]["type"] for r in fake.requests if "response_format" in r]


def test_a_refused_schema_is_not_asked_for_again(holder) -> None:
    kb = workspace.load_kb(workspace.installed_demo_path())
    with FakeOpenAI() as fake:
        fake.models["m"] = OpenAIScript(replies=[json.dumps(ROUTE), "Problems [1]."] * 2, refuse_schema=True)
        settings = settings_for_ask(Settings(), backend="openai", openai_base_url=f"{fake.url}/v1", model="m")
        first = answer_question(kb, settings, holder, QUESTIONS[0])
        assert first.route_format == "text" and first.synthesis == "llm"
        assert _schema_requests(fake) == ["json_schema", "json_object"]  # both ways, both refused
        asked = len(fake.requests)
        second = answer_question(kb, settings, holder, QUESTIONS[1])
        assert second.route_format == "text" and second.synthesis == "llm"
        assert second.route == first.route
        later = fake.requests[asked:]
        assert len(later) == 2 and not any("response_format" in r for r in later)  # route + answer
        # another model on the same server is still asked once: the refusal is per server and model
        fake.models["other"] = OpenAIScript(replies=[json.dumps(ROUTE), "Problems [1]."])
        settings = settings_for_ask(settings, model="other")
        assert answer_question(kb, settings, holder, QUESTIONS[0]).route_format == "schema"


def test_a_taken_schema_is_sent_the_way_the_server_took_it(holder) -> None:
    kb = workspace.load_kb(workspace.installed_demo_path())
    with FakeOpenAI() as fake:
        fake.models["m"] = OpenAIScript(replies=[json.dumps(ROUTE), "Problems [1]."] * 2,
                                        json_object_only=True)
        settings = settings_for_ask(Settings(), backend="openai", openai_base_url=f"{fake.url}/v1", model="m")
        for question in QUESTIONS:
            assert answer_question(kb, settings, holder, question).route_format == "schema"
        # the first question found the dialect; the second used it at once
        assert _schema_requests(fake) == ["json_schema", "json_object", "json_object"]


def test_requests_ask_for_the_prompt_cache_and_a_strict_server_is_asked_without() -> None:
    with FakeOpenAI() as fake:
        fake.models["m"] = OpenAIScript(replies=["one", "two"])
        fake.models["strict"] = OpenAIScript(replies=["one", "two"], strict_fields=True)
        assert OpenAIBackend(fake.url, "m", api_key="").chat("q") == "one"
        assert fake.requests[-1]["cache_prompt"] is True
        assert OpenAIBackend(fake.url + "/", "strict", api_key="").chat("q") == "one"
        assert [("cache_prompt" in r) for r in fake.requests[1:]] == [True, False]
        assert OpenAIBackend(fake.url, "strict", api_key="").chat("q") == "two"  # remembered: one request
        assert len(fake.requests) == 4 and "cache_prompt" not in fake.requests[-1]


def _shared_prefix(a: str, b: str) -> str:
    return os.path.commonprefix([a, b])


def test_two_questions_share_every_prompt_up_to_the_question(holder) -> None:
    kb = workspace.load_kb(workspace.installed_demo_path())
    vocabulary = KBVocabulary.of(kb)
    first, second = (routing_prompt(q, vocabulary) for q in QUESTIONS)
    assert first.endswith(QUESTIONS[0]) and second.endswith(QUESTIONS[1])
    assert _shared_prefix(first, second) == first[: first.rindex("Question: ") + len("Question: ")]
    records = [{"finding": "Missing values in bill length.", "obs_type": "Data Quality Observation",
                "workflow_name": "penguins"}]
    first, second = (synthesis_prompt(q, records) for q in QUESTIONS)
    assert _shared_prefix(first, second) == first[: first.rindex("Question: ") + len("Question: ")]
    # on the wire: the routing requests of two questions differ only after the question starts
    with FakeOpenAI() as fake:
        fake.models["m"] = OpenAIScript(replies=[json.dumps(ROUTE), "Problems [1]."] * 2)
        settings = settings_for_ask(Settings(), backend="openai", openai_base_url=f"{fake.url}/v1", model="m")
        for question in QUESTIONS:
            answer_question(kb, settings, holder, question)
        routes = [r["messages"][-1]["content"] for r in fake.requests if "response_format" in r]
        assert len(routes) == 2 and all(r.get("cache_prompt") for r in fake.requests)
        assert not any(m["role"] == "system" for r in fake.requests for m in r["messages"])
        assert _shared_prefix(*routes) == routes[0][: routes[0].rindex("Question: ") + len("Question: ")]
