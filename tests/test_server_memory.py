"""What the app found out about a server is found out again when the server's models change.

A real HTTP server (:mod:`support.fake_openai`) that refuses a schema, as a llama.cpp build without
grammar support does; the app remembers the refusal (one refused request, not one per question). When
the server then offers other models (another model loaded), listing them forgets the refusal, and the
next question asks with the schema again. In the window, the status line lists the models again on a
timer, so a model loaded meanwhile shows without a restart.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from support.fake_openai import FakeOpenAI, OpenAIScript

from kmds_desktop.config import Settings
from kmds_desktop.llm import OpenAIBackend, prompt_cache, server_memory, structured_chat
from kmds_desktop.llm.structured import SCHEMA, TEXT, forget_schema_refusals, schema_refused

SCHEMA_OBJECT = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


@pytest.fixture(autouse=True)
def fresh_memory() -> Iterator[None]:
    forget_schema_refusals()
    server_memory.forget_model_lists()
    prompt_cache.forget_route_times()
    yield
    forget_schema_refusals()
    server_memory.forget_model_lists()
    prompt_cache.forget_route_times()


def test_a_refused_schema_is_asked_again_once_the_server_offers_other_models() -> None:
    with FakeOpenAI() as fake:
        script = OpenAIScript(replies=['{"answer": "yes"}'], refuse_schema=True)
        fake.models["m"] = script
        backend = OpenAIBackend(f"{fake.url}/v1", "m")
        assert backend.list_models() == ["m"]  # the first list seen
        _, how = structured_chat(backend, "Is it?", SCHEMA_OBJECT)
        assert how == TEXT and schema_refused(backend)
        asked = len(fake.requests)
        _, how = structured_chat(backend, "Is it?", SCHEMA_OBJECT)
        assert how == TEXT and len(fake.requests) == asked + 1  # remembered: straight to text
        prompt_cache.slow_route_note(backend, 10.0)  # its first route's time, remembered too

        assert backend.list_models() == ["m"] and schema_refused(backend)  # the same models: kept
        script.refuse_schema = False  # another build loaded, with another model beside it
        fake.models["m-q8"] = OpenAIScript()
        assert backend.list_models() == ["m", "m-q8"]
        assert not schema_refused(backend)
        _, how = structured_chat(backend, "Is it?", SCHEMA_OBJECT)
        assert how == SCHEMA and "response_format" in fake.requests[-1]
        # its next route counts as a first one again: nothing said about a slow later route
        assert prompt_cache.slow_route_note(backend, 10.0) == ""


def test_the_status_line_lists_the_models_again_and_shows_one_loaded_meanwhile(qtbot, make_window) -> None:
    with FakeOpenAI() as fake:
        settings = Settings()
        settings.llm.backend, settings.llm.openai_model = "openai", "qwen"
        settings.llm.openai_base_url = f"{fake.url}/v1"
        window = make_window(settings)
        window.status.relist_timer.setInterval(200)
        window.refresh_llm_status()
        qtbot.waitUntil(lambda: "not offered" in window.llm_status.text(), timeout=30_000)
        fake.models["qwen"] = OpenAIScript(replies=[json.dumps({"intent_class": "semantic_search"})])
        qtbot.waitUntil(lambda: window.llm_status.text() == "LLM: openai · qwen (ready)", timeout=30_000)
        assert "checking" not in window.llm_status.text()
        assert fake.requests == []  # the model list only
