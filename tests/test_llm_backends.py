"""LLM backends against real HTTP servers: the fake Ollama (real ``ollama`` client) and the fake
Gemini endpoint (real ``google-genai`` client)."""

from __future__ import annotations

import threading
import time

import pytest
from support.fake_google import FakeGoogle
from support.fake_ollama import ModelScript

from kmds_desktop.config import LLMSettings
from kmds_desktop.llm import (
    FunctionBackend,
    GoogleBackend,
    LLMAuthError,
    LLMBadReply,
    LLMError,
    LLMModelNotFound,
    LLMQuotaError,
    LLMTimeout,
    LLMUnreachable,
    OllamaBackend,
    choose_backend,
    make_llm,
)
from kmds_desktop.tasks import Cancelled, CancelToken


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- Ollama ---------------------------------------------------------------------------------------------
def test_ollama_reply_options_and_system(fake_ollama) -> None:
    fake_ollama.models["m1"] = ModelScript(replies=["first reply", "second reply"])
    backend = OllamaBackend(fake_ollama.url, "m1", temperature=0.3, timeout=10)
    assert backend("hello") == "first reply"
    assert backend.chat("again", system="be terse", options={"num_predict": 7}) == "second reply"
    first, second = fake_ollama.completion_requests()
    assert first.body["options"]["temperature"] == 0.3
    assert second.body["messages"][0] == {"role": "system", "content": "be terse"}
    assert second.body["options"] == {"temperature": 0.3, "num_predict": 7}
    assert backend.chat("x", temperature=0.9).strip()
    assert fake_ollama.completion_requests()[-1].body["options"]["temperature"] == 0.9


def test_ollama_model_override_and_list_models(fake_ollama) -> None:
    fake_ollama.models["a:1b"] = ModelScript(replies=["from a"])
    fake_ollama.models["b:2b"] = ModelScript(replies=["from b"])
    backend = OllamaBackend(fake_ollama.url, "a:1b")
    assert backend.list_models() == ["a:1b", "b:2b"]
    assert backend.chat("q", model="b:2b") == "from b"
    assert fake_ollama.completion_requests()[-1].model == "b:2b"
    assert backend.is_available()
    assert not OllamaBackend(fake_ollama.url, "c:3b").is_available()


def test_ollama_streams_in_chunks(fake_ollama) -> None:
    fake_ollama.models["m"] = ModelScript(replies=["a reply long enough for chunks"], chunk_size=5)
    chunks = list(OllamaBackend(fake_ollama.url, "m").stream("q"))
    assert len(chunks) > 3
    assert "".join(chunks) == "a reply long enough for chunks"


def test_ollama_model_not_found_lists_available(fake_ollama) -> None:
    fake_ollama.models["llama3.1:8b"] = ModelScript()
    fake_ollama.models["gone:1b"] = ModelScript(status=404, error="model 'gone:1b' not found")
    with pytest.raises(LLMModelNotFound) as info:
        OllamaBackend(fake_ollama.url, "missing:7b")("q")
    assert "missing:7b" in str(info.value) and "llama3.1:8b" in str(info.value)
    assert "ollama pull missing:7b" in str(info.value)
    assert info.value.available == ["gone:1b", "llama3.1:8b"]
    with pytest.raises(LLMModelNotFound):
        OllamaBackend(fake_ollama.url, "gone:1b")("q")


def test_ollama_server_down_names_host() -> None:
    host = f"http://127.0.0.1:{_free_port()}"
    backend = OllamaBackend(host, "m", timeout=5)
    with pytest.raises(LLMUnreachable) as info:
        backend("q")
    assert host in str(info.value) and info.value.host == host
    with pytest.raises(LLMUnreachable):
        backend.list_models()
    assert not backend.is_available()


def test_ollama_total_timeout(fake_ollama) -> None:
    fake_ollama.models["slow"] = ModelScript(replies=["late"], delay=3)
    start = time.monotonic()
    with pytest.raises(LLMTimeout) as info:
        OllamaBackend(fake_ollama.url, "slow", timeout=0.4)("q")
    assert time.monotonic() - start < 2.0
    assert "0.4" in str(info.value)


def test_ollama_cancel_aborts_request_in_flight(fake_ollama) -> None:
    fake_ollama.models["slow"] = ModelScript(replies=["late"], delay=3)
    token = CancelToken()
    threading.Timer(0.3, token.cancel).start()
    start = time.monotonic()
    with pytest.raises(Cancelled):
        OllamaBackend(fake_ollama.url, "slow", timeout=30).chat("q", cancel=token)
    assert time.monotonic() - start < 1.5
    # the server saw the request start: the abort happened mid-flight, not before sending
    assert len(fake_ollama.completion_requests()) == 1


def test_ollama_cancel_before_start_sends_nothing(fake_ollama) -> None:
    fake_ollama.models["m"] = ModelScript()
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        OllamaBackend(fake_ollama.url, "m").chat("q", cancel=token)
    assert fake_ollama.completion_requests() == []


def test_ollama_cancel_between_stream_chunks(fake_ollama) -> None:
    fake_ollama.models["m"] = ModelScript(replies=["x" * 400], chunk_size=4)
    token = CancelToken()
    received = []
    with pytest.raises(Cancelled):
        for chunk in OllamaBackend(fake_ollama.url, "m").stream("q", cancel=token):
            received.append(chunk)
            if len(received) == 3:
                token.cancel()
    assert 3 <= len(received) < 100


def test_ollama_empty_reply_is_bad_reply(fake_ollama) -> None:
    fake_ollama.models["m"] = ModelScript(replies=["   "])
    with pytest.raises(LLMBadReply):
        OllamaBackend(fake_ollama.url, "m")("q")


# --- Google GenAI -----------------------------------------------------------------------------------------
def test_google_reply_and_stream_through_real_client() -> None:
    with FakeGoogle(["Gemini says hello to you"]) as fake:
        backend = GoogleBackend("gemini-2.5-flash", api_key="test-key", base_url=fake.url, temperature=0.2)
        assert backend("what?") == "Gemini says hello to you"
        req = fake.requests[-1]
        assert req.model == "gemini-2.5-flash" and req.api_key == "test-key" and req.prompt == "what?"
        assert req.body["generationConfig"]["temperature"] == 0.2
        chunks = list(backend.stream("again", system="short answers"))
        assert len(chunks) > 1 and "".join(chunks) == "Gemini says hello to you"
        assert fake.requests[-1].body["systemInstruction"]["parts"][0]["text"] == "short answers"
        assert "test-key" not in repr(backend)


def test_google_auth_error_is_actionable_and_redacted() -> None:
    with FakeGoogle(api_key="the-right-key") as fake:
        backend = GoogleBackend(api_key="wrong-secret-key", base_url=fake.url)
        with pytest.raises(LLMAuthError) as info:
            backend("q")
    assert "GOOGLE_API_KEY" in str(info.value)
    assert "wrong-secret-key" not in str(info.value)


def test_google_quota_error() -> None:
    with (FakeGoogle(status=429, error_status="RESOURCE_EXHAUSTED", error_message="Quota exceeded") as fake,
          pytest.raises(LLMQuotaError, match="Quota exceeded")):
        GoogleBackend(api_key="test-key", base_url=fake.url)("q")


def test_google_unknown_model_lists_the_models_the_key_can_use() -> None:
    with FakeGoogle(["fine"], models=["gemini-2.5-flash", "gemini-2.5-pro"]) as fake:
        backend = GoogleBackend("gemini-9-ultra", api_key="test-key", base_url=fake.url)
        with pytest.raises(LLMModelNotFound) as info:
            backend("q")
        text = str(info.value)
        assert "no model 'gemini-9-ultra'" in text
        assert "Models this key can use: gemini-2.5-flash, gemini-2.5-pro." in text
        assert "text-embedding-004" not in text  # it cannot write answers
        assert GoogleBackend("gemini-2.5-pro", api_key="test-key", base_url=fake.url)("q") == "fine"


def test_google_key_from_environment_and_missing_key(monkeypatch: pytest.MonkeyPatch, memory_keyring) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(LLMAuthError, match="GOOGLE_API_KEY"):
        GoogleBackend()
    with FakeGoogle(["env key works"], api_key="env-key") as fake:
        monkeypatch.setenv("GOOGLE_API_KEY", "env-key")
        assert GoogleBackend(base_url=fake.url)("q") == "env key works"


# --- user callables and backend choice ---------------------------------------------------------------
def test_function_backend_maps_errors() -> None:
    assert FunctionBackend(lambda p: p.upper())("abc") == "ABC"

    def broken(prompt: str) -> str:
        raise ValueError("boom")

    with pytest.raises(LLMError, match="boom"):
        FunctionBackend(broken)("x")
    with pytest.raises(LLMBadReply):
        FunctionBackend(lambda p: None)("x")  # type: ignore[arg-type, return-value]


def test_auto_prefers_ollama_then_google_then_offline(
    fake_ollama, monkeypatch: pytest.MonkeyPatch, memory_keyring
) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    fake_ollama.models["llama3.1:8b"] = ModelScript(replies=["hi"])
    settings = LLMSettings(ollama_host=fake_ollama.url)
    llm, name = make_llm(settings)
    assert name == "ollama" and isinstance(llm, OllamaBackend) and llm("q") == "hi"

    down = LLMSettings(ollama_host=f"http://127.0.0.1:{_free_port()}")
    choice = choose_backend(down)
    assert choice.name == "offline" and choice.llm is None
    assert "not reachable" in choice.note and "no Google API key" in choice.note

    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    llm, name = make_llm(down)
    assert name == "google" and isinstance(llm, GoogleBackend)
    assert make_llm(down, backend="offline") == (None, "offline")
    with pytest.raises(LLMError, match="Unknown LLM backend"):
        make_llm(down, backend="gpt")


def test_ollama_connection_dropped_mid_reply(fake_ollama) -> None:
    fake_ollama.models["m"] = ModelScript(replies=["0123456789" * 20], chunk_size=5, drop_after=4)
    received: list[str] = []
    with pytest.raises(LLMUnreachable) as info:
        for chunk in OllamaBackend(fake_ollama.url, "m", timeout=10).stream("q"):
            received.append(chunk)
    assert "".join(received) == "01234567890123456789"
    assert "in the middle of the reply" in str(info.value) and fake_ollama.url in str(info.value)


def test_google_timeout_is_actionable() -> None:
    with FakeGoogle(["too late"], delay=2) as fake:
        backend = GoogleBackend(api_key="test-key", base_url=fake.url, timeout=0.5)
        start = time.monotonic()
        with pytest.raises(LLMTimeout) as info:
            backend("q")
    assert time.monotonic() - start < 1.8
    assert "0.5 s" in str(info.value) and "timeout" in str(info.value).lower()


def test_google_key_never_reaches_logs_errors_or_settings(
        tmp_path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, memory_keyring) -> None:
    """The key is sent to the server (it must be) but appears in no log record, error or settings file."""
    import logging

    from kmds_desktop.config import Settings, load_settings, save_settings

    secret = "AIza-very-secret-key-0123456789"
    monkeypatch.setenv("GOOGLE_API_KEY", secret)
    caplog.set_level(logging.DEBUG)
    errors: list[str] = []
    with FakeGoogle(["fine"], api_key="another-key") as fake:
        backend = GoogleBackend(base_url=fake.url)
        assert fake.requests == []
        for call in (lambda: backend("q"), lambda: list(backend.stream("q"))):
            with pytest.raises(LLMAuthError) as info:
                call()
            errors.append(str(info.value))
        assert [r.api_key for r in fake.requests] == [secret, secret]  # really used...
    assert all("GOOGLE_API_KEY" in e and secret not in e for e in errors)  # ...never shown
    assert caplog.records and not any(secret in r.getMessage() for r in caplog.records)
    assert secret not in repr(backend) and secret not in str(vars(backend).get("base_url"))
    settings = Settings()
    settings.llm.backend = "google"
    assert choose_backend(settings.llm).name == "google"
    path = save_settings(settings, tmp_path / "settings.json")
    saved = path.read_text(encoding="utf-8")
    assert secret not in saved and "api_key" not in saved
    assert load_settings(path).llm.backend == "google"


def test_auto_prefers_ollama_over_google_when_both_answer(
    fake_ollama, monkeypatch: pytest.MonkeyPatch, memory_keyring
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    fake_ollama.models["llama3.1:8b"] = ModelScript(replies=["hi"])
    choice = choose_backend(LLMSettings(ollama_host=fake_ollama.url))
    assert choice.name == "ollama" and isinstance(choice.llm, OllamaBackend)
    # Ollama answers but lacks the configured model: Google, and the note says why Ollama was skipped
    choice = choose_backend(LLMSettings(ollama_host=fake_ollama.url, ollama_model="absent:1b"))
    assert choice.name == "google" and isinstance(choice.llm, GoogleBackend)
    assert "no model 'absent:1b'" in choice.note


def test_an_address_that_answers_404_to_everything_is_said_once_not_asked_again() -> None:
    """A web server or proxy on the Ollama address: the model list is 404 too, so the "no such model"
    message must not look the list up again and again (it once recursed until Python's limit)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    asked: list[str] = []

    class NotOllama(BaseHTTPRequestHandler):
        def _not_found(self) -> None:
            asked.append(self.path)
            body = b"<html><body>404 Not Found</body></html>"
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _not_found  # noqa: N815 - http.server's own method names

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotOllama)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        backend = OllamaBackend(url, "llama3.1:8b", timeout=10)
        with pytest.raises(LLMError) as listed:
            backend.list_models()
        assert "does not look like an Ollama server" in str(listed.value)
        assert len(asked) == 1
        asked.clear()
        with pytest.raises(LLMModelNotFound) as info:
            backend("q")
        assert "llama3.1:8b" in str(info.value) and info.value.available == []
        assert len(asked) == 2  # the chat, then the model list once
        assert not backend.is_available()
    finally:
        server.shutdown()
        server.server_close()


def test_a_google_proxy_address_with_a_password_is_never_shown() -> None:
    """A proxy written ``http://user:password@host`` (``base_url``): messages and the error's host name
    the address with ``***@``, as the other backends do."""
    url = f"http://alice:s3cret-pw@127.0.0.1:{_free_port()}"
    with pytest.raises(LLMUnreachable) as info:
        GoogleBackend(api_key="test-key", base_url=url, timeout=5)("q")
    assert "s3cret-pw" not in str(info.value) and "s3cret-pw" not in str(info.value.host)
    assert "***@127.0.0.1" in str(info.value)
