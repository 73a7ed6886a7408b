"""A server that reads the route prompt afresh for every question is told once the setting that fixes it.

A real HTTP server (:mod:`support.fake_openai`) whose replies wait as a server reading a long prompt
waits, the real embedding model and index, and the window's ask path
(:func:`~kmds_desktop.app.ask.answer_question`) and its line under the answer. The thresholds are
lowered (seconds, not the 6 s a user waits) so the test runs in seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_openai import FakeOpenAI, OpenAIScript

from kmds_desktop.app import workspace
from kmds_desktop.app.ask import answer_question, answered_line, settings_for_ask
from kmds_desktop.commands.ask import format_result
from kmds_desktop.config import Settings
from kmds_desktop.llm import prompt_cache

QUESTION = "What data quality problems were found?"
ROUTE = json.dumps({"intent_class": "exploratory_search", "listing": False})
SLOW, QUICK = 0.6, 0.02


@pytest.fixture()
def holder(tmp_path: Path) -> workspace.IndexHolder:
    return workspace.IndexHolder.in_process(tmp_path / "index")


@pytest.fixture(autouse=True)
def quick_thresholds(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(prompt_cache, "SLOW_LATER_ROUTE_S", 0.3)
    prompt_cache.forget_route_times()
    yield
    prompt_cache.forget_route_times()


def _ask_three(holder: workspace.IndexHolder, route_delays: list[float]) -> list:
    """Three questions to one scripted server whose route replies wait ``route_delays`` in turn."""
    kb = workspace.load_kb(workspace.installed_demo_path())
    delays = [d for route in route_delays for d in (route, 0.0)]  # a route, then its answer
    with FakeOpenAI() as fake:
        fake.models["m"] = OpenAIScript(replies=[ROUTE, "Two rows were dropped [1]."] * 3, delays=delays)
        settings = settings_for_ask(Settings(), backend="openai", openai_base_url=f"{fake.url}/v1", model="m")
        return [answer_question(kb, settings, holder, QUESTION) for _ in route_delays]


def test_a_later_route_as_slow_as_the_first_says_the_cache_setting_once(holder) -> None:
    first, second, third = _ask_three(holder, [SLOW, SLOW, SLOW])
    assert first.synthesis == second.synthesis == "llm"
    assert first.speed_note == "" and third.speed_note == ""  # the first reads the prompt anyway; said once
    note = second.speed_note
    assert "about as long as the first one" in note and "--cache true" in note
    assert note in answered_line(second)  # the line under the answer in the window
    assert f"Speed: {note}" in format_result(second.to_dict())  # the CLI


def test_a_server_that_keeps_the_prompt_is_not_told(holder) -> None:
    results = _ask_three(holder, [SLOW, QUICK, QUICK])
    assert [r.speed_note for r in results] == ["", "", ""]
    assert all(r.synthesis == "llm" for r in results)
