"""Preferences' LLM status without Qt: one definition of "installed" with the ask job's backend choice.

Real parts: the fake Ollama server through the real ``ollama`` client; the in-memory keyring.
"""

from __future__ import annotations

from support.fake_ollama import ModelScript

from kmds_desktop.app.preferences import list_ollama_models, probe_llm_backend
from kmds_desktop.config import LLMSettings
from kmds_desktop.llm.factory import choose_backend


def test_latest_tag_and_plain_name_are_one_model(fake_ollama, memory_keyring) -> None:
    fake_ollama.models["foo"] = ModelScript(["hi"])
    for configured in ("foo", "foo:latest"):
        for backend in ("ollama", "auto"):
            llm = LLMSettings(backend=backend, ollama_host=fake_ollama.url, ollama_model=configured)
            status, _tip = probe_llm_backend(llm)
            assert status == f"ollama · {configured} (ready)", (backend, configured, status)
            if backend == "auto":
                assert choose_backend(llm).name == "ollama"
    assert list_ollama_models(fake_ollama.url) == ["foo"]


def test_status_says_what_asking_would_use(fake_ollama, memory_keyring) -> None:
    fake_ollama.models["other"] = ModelScript(["hi"])
    missing = LLMSettings(backend="ollama", ollama_host=fake_ollama.url, ollama_model="foo")
    status, tip = probe_llm_backend(missing)
    assert status == "ollama · foo (not installed)" and "other" in tip
    auto = LLMSettings(backend="auto", ollama_host=fake_ollama.url, ollama_model="foo")
    assert probe_llm_backend(auto)[0] == "offline (Ollama has no foo)"
    assert choose_backend(auto).name == "offline"
    gone = LLMSettings(backend="auto", ollama_host="http://127.0.0.1:9", ollama_model="foo")
    assert probe_llm_backend(gone)[0] == "offline (Ollama not reachable)"
    assert probe_llm_backend(LLMSettings(backend="offline"))[0].startswith("offline (no LLM")
