"""Secrets never reach a message: an ``OLLAMA_API_KEY`` a server echoes back in its error, and the
``user:password`` of an Ollama host written ``http://user:password@host`` (real ``ollama`` client,
fake Ollama server on 127.0.0.1)."""

from __future__ import annotations

import base64
import socket

import pytest
from support.fake_ollama import ModelScript

from kmds_desktop import secrets
from kmds_desktop.literature.queries.query_generation import MultiModelQueryGenerator
from kmds_desktop.llm import LLMAuthError, LLMError, LLMUnreachable, OllamaBackend

KEY = "sk-test-KEY-8d1f0c"
PASSWORD = "pw-SECRET-4b2e"


def _with_userinfo(url: str, userinfo: str = f"alice:{PASSWORD}") -> str:
    return url.replace("http://", f"http://{userinfo}@", 1)


def test_an_echoed_api_key_is_redacted(fake_ollama, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_API_KEY", KEY)
    fake_ollama.models["m"] = ModelScript(status=401, error="invalid credentials: {authorization}")
    with pytest.raises(LLMAuthError) as info:
        OllamaBackend(fake_ollama.url, "m", timeout=10).chat("hello")
    assert fake_ollama.completion_requests()[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent
    message = str(info.value)
    assert KEY not in message and "invalid credentials: Bearer ***" in message


def test_host_user_and_password_are_redacted_and_used(fake_ollama) -> None:
    echo = f"proxy rejected alice:{PASSWORD} ({{authorization}})"
    fake_ollama.models["m"] = ModelScript(status=500, error=echo)
    backend = OllamaBackend(_with_userinfo(fake_ollama.url), "m", timeout=10)
    assert PASSWORD not in repr(backend) and backend.host == _with_userinfo(fake_ollama.url, "***")
    with pytest.raises(LLMError) as info:
        backend.chat("hello")
    sent = fake_ollama.completion_requests()[0].headers["authorization"]
    assert sent == "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()  # the proxy gets it
    message = str(info.value)
    assert PASSWORD not in message and "alice:" + PASSWORD not in message
    assert "http://***@127.0.0.1" in message
    assert sent.split()[1] not in message  # the Basic credentials, echoed by the server


def test_unreachable_host_with_a_password_is_redacted() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(LLMUnreachable) as info:
        OllamaBackend(f"http://alice:{PASSWORD}@127.0.0.1:{port}", "m", timeout=5).chat("hello")
    assert PASSWORD not in str(info.value) and f"http://***@127.0.0.1:{port}" in str(info.value)
    assert info.value.host == f"http://***@127.0.0.1:{port}"


def test_generation_errors_carry_no_secret(fake_ollama, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_API_KEY", KEY)
    echo = f"forbidden for {{authorization}} via alice:{PASSWORD}"
    fake_ollama.models["m"] = ModelScript(status=403, error=echo)
    generator = MultiModelQueryGenerator(ollama_host=_with_userinfo(fake_ollama.url), timeout=10)
    result = generator.generate_queries("Does aspirin prevent heart attacks?", None, ["m"], 1)
    [row] = result.all_queries
    assert row.error and KEY not in row.error and PASSWORD not in row.error and "***" in row.error


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:pw@host:11434", "http://***@host:11434"),
        ("user:pw@host:11434", "***@host:11434"),
        ("https://token@example.org/ollama", "https://***@example.org/ollama"),
        ("http://127.0.0.1:11434", "http://127.0.0.1:11434"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert secrets.redact_url(url) == shown
