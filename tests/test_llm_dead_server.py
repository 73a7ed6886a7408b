"""A server that dies between two questions: the next answer falls back at once and says why once.

Real HTTP servers on free ports (:mod:`support.fake_openai`, :mod:`support.fake_ollama`), the real
embedding model and index, the window's ask path (:func:`~kmds_desktop.app.ask.answer_question`) and
the CLI's and export's texts. A killed server refuses the connection; a server being stopped (or
hung) still holds its port and serves nothing, which only the liveness watch ends before the
whole timeout: the tests set a long timeout and check that the answer comes back as "stopped
answering", not as a timeout.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_ollama import ModelScript
from support.fake_openai import FakeOpenAI, OpenAIScript

from kmds_desktop.app import workspace
from kmds_desktop.app.ask import (
    answer_markdown,
    answer_question,
    answered_line,
    displayed_answer,
    settings_for_ask,
)
from kmds_desktop.commands.ask import format_result
from kmds_desktop.config import Settings
from kmds_desktop.llm import LLMError, LLMTimeout, OllamaBackend, OpenAIBackend

QUESTION = "What data quality problems were found?"
ROUTE = {"intent_class": "exploratory_search", "listing": True, "explanation": "named",
         "filters": {"obs_type_filter": "Data Quality Observation", "workflow": None,
                     "finding_seq_min": None, "finding_seq_max": None, "keyword": None}}


@pytest.fixture()
def holder(tmp_path: Path) -> workspace.IndexHolder:
    return workspace.IndexHolder.in_process(tmp_path / "index")


@pytest.fixture()
def silent_port() -> Iterator[int]:
    """A port that takes connections and never serves them: a server being stopped, or hung."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]


def _settings(url: str, timeout: float = 120.0) -> Settings:
    settings = settings_for_ask(Settings(), backend="openai", openai_base_url=f"{url}/v1", model="m")
    settings.llm.timeout_s = timeout
    return settings


def _said(text: str, reason: str) -> int:
    return text.count(reason)


def test_a_server_killed_between_two_questions_is_said_once(holder) -> None:
    kb = workspace.load_kb(workspace.installed_demo_path())
    with FakeOpenAI() as fake:
        fake.models["m"] = OpenAIScript(replies=[json.dumps(ROUTE), "Problems [1]."])
        settings = _settings(fake.url)
        first = answer_question(kb, settings, holder, QUESTION)
        assert first.synthesis == "llm" and first.answer == "Problems [1]."
    # the server is gone: its port refuses the connection
    second = answer_question(kb, settings, holder, QUESTION)
    assert second.synthesis == "extractive" and second.fallback_code == "llm_error" and second.results
    reason = "Cannot reach the OpenAI-compatible server"
    assert reason in second.fallback_reason
    # the window: the line under the answer says it; the answer's heading and the route do not
    window_text = "\n".join([displayed_answer(second), answered_line(second), second.route_explanation])
    assert _said(window_text, reason) == 1 and _said(answered_line(second), reason) == 1
    assert second.answer.startswith("The LLM could not write an answer, so this is an extractive summary")
    # the CLI and the Markdown export: the Fallback line says it
    assert _said(format_result(second.to_dict()), reason) == 1
    assert _said(answer_markdown(second), reason) == 1


def test_an_answer_that_failed_alone_says_why_once(holder, fake_ollama) -> None:
    """The route worked, the answer's request failed: the reason is on the Backend line, once."""
    kb = workspace.load_kb(workspace.installed_demo_path())
    fake_ollama.models["m"] = ModelScript(replies=[json.dumps(ROUTE), "never"], statuses=[200, 500],
                                          error="out of memory")
    settings = settings_for_ask(Settings(), backend="ollama", ollama_host=fake_ollama.url, model="m")
    result = answer_question(kb, settings, holder, QUESTION)
    assert result.fallback_reason is None and result.synthesis == "extractive"
    assert _said(format_result(result.to_dict()), "out of memory") == 1
    assert _said(answer_markdown(result), "out of memory") == 1
    assert _said(displayed_answer(result) + answered_line(result), "out of memory") == 1


def test_a_server_that_holds_its_port_is_busy_until_the_deadline_not_gone(holder, silent_port) -> None:
    """A port that takes connections but leaves the model list unanswered looks like a busy
    llama-cpp-python server (its model list waits for the model's lock): it is not declared gone
    after the silence, and the request ends at its own deadline with the timeout's message, said once."""
    kb = workspace.load_kb(workspace.installed_demo_path())
    url = f"http://127.0.0.1:{silent_port}"
    with pytest.raises(LLMTimeout, match="did not finish within 6 s"):
        OpenAIBackend(f"{url}/v1", "m", timeout=6, api_key="").chat("q")
    with pytest.raises(LLMTimeout, match="did not finish within 6 s"):
        OllamaBackend(url, "m", timeout=6).chat("q")
    result = answer_question(kb, _settings(url, timeout=6), holder, QUESTION)
    assert result.fallback_code == "llm_error" and "did not finish" in result.fallback_reason
    assert result.synthesis == "extractive" and result.results
    assert _said(format_result(result.to_dict()), "did not finish within") == 1


def test_a_server_that_closes_its_port_mid_request_is_given_up_not_waited_for() -> None:
    """Gone means nobody listens: a server that closes its port while a request waits ends the request
    as unreachable, long before its 120 s deadline (which would say "did not finish")."""
    import threading

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    port = sock.getsockname()[1]
    threading.Timer(3.0, sock.close).start()  # after the silence window: the probe then finds no one
    with pytest.raises(LLMError) as info:
        OllamaBackend(f"http://127.0.0.1:{port}", "m", timeout=120).chat("q")
    assert not isinstance(info.value, LLMTimeout), info.value


def test_a_model_that_thinks_long_is_not_taken_for_dead(fake_ollama, monkeypatch) -> None:
    """Silence while the server still answers its model list (a long prompt being read) is work."""
    from kmds_desktop.llm import ollama_backend

    asked: list[bool] = []
    real = ollama_backend.server_answers
    monkeypatch.setattr(ollama_backend, "server_answers", lambda url, **kw: asked.append(real(url, **kw))
                        or asked[-1])
    fake_ollama.models["slow"] = ModelScript(replies=["done thinking"], delay=5.0)
    assert OllamaBackend(fake_ollama.url, "slow", timeout=60).chat("q") == "done thinking"
    assert asked and all(asked)  # it was asked whether it lives while silent, and it did
