"""The model server reads the route prompt of the open KB ahead of the first question, once.

A real HTTP server (:mod:`support.fake_openai`) records what it is sent: one request of one token whose
prompt is the route prompt the first question then sends (up to the question); nothing for a second
call, another backend, or a server "Automatic" found and the user has not confirmed; again for another
KB, or once the server's models changed; nothing after a question's route has had it read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from support.fake_openai import FakeOpenAI, OpenAIScript

from kmds_desktop.app import workspace
from kmds_desktop.app.ask import settings_for_ask, warm_route_prompt
from kmds_desktop.ask import orchestrator
from kmds_desktop.config import Settings
from kmds_desktop.kb import load_kb
from kmds_desktop.llm import OpenAIBackend, server_memory
from kmds_desktop.search import SearchOrchestrator

ROUTE = json.dumps({"intent_class": "exploratory_search"})


@pytest.fixture(autouse=True)
def nothing_read_ahead() -> Iterator[None]:
    orchestrator._WARMED.clear()  # each test starts from a fresh process's memory
    server_memory.forget_model_lists()
    yield
    orchestrator._WARMED.clear()


def test_the_route_prompt_is_read_ahead_once_per_server_and_kb(kmds_data) -> None:
    demo = workspace.load_kb(workspace.installed_demo_path())
    with FakeOpenAI() as fake:
        fake.models["m"] = OpenAIScript(replies=["{"])
        settings = settings_for_ask(Settings(), backend="openai", openai_base_url=f"{fake.url}/v1", model="m")
        assert warm_route_prompt(demo, settings)
        assert len(fake.requests) == 1 and fake.requests[0]["max_tokens"] == 1
        assert not warm_route_prompt(demo, settings) and len(fake.requests) == 1  # once
        other = load_kb(kmds_data / "example_analytics_kb_app_workflow.xml")
        assert warm_route_prompt(other, settings) and len(fake.requests) == 2  # another vocabulary
        listing = OpenAIBackend(f"{fake.url}/v1", "m")
        listing.list_models()  # the list the status line saw
        fake.models["m2"] = OpenAIScript(replies=["{"])  # another model loaded: read again
        listing.list_models()
        assert warm_route_prompt(demo, settings) and len(fake.requests) == 3
        # the first question's route prompt begins as the one read ahead
        fake.models["m"] = OpenAIScript(replies=[ROUTE, "ok [1]"])
        SearchOrchestrator(demo, settings=settings, backend="openai").retrieve("What problems were found?")
        ahead, routed = (json.dumps(r["messages"]) for r in (fake.requests[2], fake.requests[3]))
        assert len(os.path.commonprefix([ahead, routed])) >= 0.9 * len(ahead)
    # a question's route is read as the read-ahead would be: nothing is read ahead after it
    orchestrator._WARMED.clear()
    with FakeOpenAI() as fake:
        fake.models["m"] = OpenAIScript(replies=[ROUTE, "ok [1]"])
        settings = settings_for_ask(Settings(), backend="openai", openai_base_url=f"{fake.url}/v1", model="m")
        SearchOrchestrator(demo, settings=settings, backend="openai").retrieve("What problems were found?")
        assert len(fake.requests) == 1
        assert not warm_route_prompt(demo, settings) and len(fake.requests) == 1


def test_nothing_is_sent_without_a_local_server_the_user_chose() -> None:
    demo = workspace.load_kb(workspace.installed_demo_path())
    offline = Settings()
    offline.llm.backend = "offline"
    assert not warm_route_prompt(demo, offline)
    with FakeOpenAI() as fake:
        fake.models["m"] = OpenAIScript(replies=["{"])
        automatic = Settings()
        automatic.llm.backend, automatic.llm.ollama_host = "auto", "http://127.0.0.1:9"
        automatic.llm.openai_base_url = f"{fake.url}/v1"  # found, never confirmed
        assert not warm_route_prompt(demo, automatic)
        assert fake.requests == []
