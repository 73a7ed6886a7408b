"""The LLM status line follows the server through each answer (no Qt)."""

from __future__ import annotations

from kmds_desktop.app.llm_status import status_after_answer
from kmds_desktop.ask.models import OrchestratorResult
from kmds_desktop.config import LLMSettings


def _result(**kw):
    return OrchestratorResult("text", "semantic_search", "", [], **kw)


def test_a_failed_answer_marks_the_backend_not_answering_and_a_good_one_ready():
    llm = LLMSettings(backend="ollama", ollama_model="qwen2.5-coder:1.5b")
    dead = status_after_answer(_result(backend="ollama", synthesis="extractive",
                                       synthesis_error="Ollama is not reachable at http://127.0.0.1:9"), llm)
    assert dead is not None and dead.text == "ollama · qwen2.5-coder:1.5b (not answering)"
    assert "not reachable" in dead.tooltip and not dead.ready
    router = status_after_answer(_result(backend="ollama", synthesis="extractive", fallback_code="llm_error",
                                         fallback_reason="the LLM failed: timed out"), llm)
    assert router is not None and "(not answering)" in router.text and "timed out" in router.tooltip
    # a route the model failed to give (a bad reply) where it then wrote the answer: it answers
    recovered = status_after_answer(_result(backend="ollama", synthesis="llm", fallback_code="llm_error",
                                            fallback_reason="the LLM failed: no JSON route"), llm)
    assert recovered is not None and recovered.ready
    back = status_after_answer(_result(backend="ollama", synthesis="llm"), llm)
    assert back is not None and back.ready
    assert back.text == "ollama · qwen2.5-coder:1.5b (ready)"
    assert back.tooltip == "It answered the last question."
    assert status_after_answer(_result(backend="offline", synthesis="offline"), llm) is None


def test_the_status_names_the_model_that_answered_not_only_the_one_the_settings_name():
    """Automatic may ask a confirmed server's only model where the settings name another."""
    llm = LLMSettings(backend="auto", openai_model="default")
    answered = status_after_answer(_result(backend="openai", model="qwen2.5-coder-1.5b", synthesis="llm"),
                                   llm)
    assert answered is not None and answered.text == "openai · qwen2.5-coder-1.5b (ready)"
    unnamed = status_after_answer(_result(backend="openai", synthesis="llm"), llm)
    assert unnamed is not None and unnamed.text == "openai · default (ready)"
