"""The OpenAI-compatible backend against a real HTTP server (:mod:`support.fake_openai`): replies,
server-sent events, the model list, a JSON schema and a server that refuses one, the error family,
cancel and the size limit; and ``openai:NAME`` models in query generation (issue 25, 1-2)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from support.fake_openai import FakeOpenAI, OpenAIScript

from kmds_desktop import secrets
from kmds_desktop.ask.routing import parse_route, route_json_schema
from kmds_desktop.config import LLMSettings
from kmds_desktop.literature.queries.query_generation import QUERY_LIST_SCHEMA, MultiModelQueryGenerator
from kmds_desktop.llm import (
    LLMAuthError,
    LLMBadReply,
    LLMModelNotFound,
    LLMSchemaRefused,
    LLMUnreachable,
    ModelDispatch,
    OpenAIBackend,
    choose_backend,
    structured_chat,
)
from kmds_desktop.llm.openai_backend import api_base
from kmds_desktop.tasks import Cancelled, CancelToken


@pytest.fixture()
def fake():
    with FakeOpenAI() as server:
        yield server


def test_api_base_adds_v1_only_to_a_bare_address() -> None:
    assert api_base("http://127.0.0.1:8080") == "http://127.0.0.1:8080/v1"
    assert api_base("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080/v1"
    assert api_base("https://proxy.example/openai/v1") == "https://proxy.example/openai/v1"


def test_reply_streams_in_chunks_with_options(fake) -> None:
    fake.models["m"] = OpenAIScript(["a reply long enough for several chunks"])
    backend = OpenAIBackend(fake.url, "m", temperature=0.3, timeout=10, api_key="")
    chunks = list(backend.stream("hello", "be terse", {"num_predict": 9, "seed": 1}))
    assert len(chunks) > 3 and "".join(chunks) == "a reply long enough for several chunks"
    body = fake.requests[-1]
    assert body["stream"] is True and body["temperature"] == 0.3
    assert body["max_tokens"] == 9 and body["seed"] == 1
    assert body["messages"][0] == {"role": "system", "content": "be terse"}
    assert backend.chat("again", temperature=0.9, model="m") == "a reply long enough for several chunks"
    assert fake.requests[-1]["temperature"] == 0.9
    assert backend.list_models() == ["m"] and backend.is_available()


def test_schema_is_sent_and_a_refusal_falls_back_to_text(fake) -> None:
    fake.models["strict"] = OpenAIScript(['{"queries": ["a & b"]}'])
    fake.models["plain"] = OpenAIScript(["a & b"], refuse_schema=True)
    backend = OpenAIBackend(fake.url, "strict", api_key="")
    reply, how = structured_chat(backend, "q (json)", QUERY_LIST_SCHEMA, text_prompt="q")
    assert how == "schema" and json.loads(reply) == {"queries": ["a & b"]}
    sent = fake.requests[-1]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["schema"] == QUERY_LIST_SCHEMA
    with pytest.raises(LLMSchemaRefused):
        backend.chat("q", model="plain", schema=QUERY_LIST_SCHEMA)
    reply, how = structured_chat(backend, "q (json)", QUERY_LIST_SCHEMA, text_prompt="q", model="plain")
    assert (reply, how) == ("a & b", "text")
    assert "response_format" not in fake.requests[-1]
    assert fake.requests[-1]["messages"][-1]["content"] == "q"


def test_the_json_object_dialect_is_tried_and_remembered(fake) -> None:
    fake.models["llama"] = OpenAIScript(['{"queries": ["x"]}'], json_object_only=True)
    backend = OpenAIBackend(fake.url, "llama", api_key="")
    for _ in range(2):
        assert structured_chat(backend, "q", QUERY_LIST_SCHEMA) == ('{"queries": ["x"]}', "schema")
    asked = [r["response_format"]["type"] for r in fake.requests]
    assert asked == ["json_schema", "json_object", "json_object"]
    assert fake.requests[-1]["response_format"]["schema"] == QUERY_LIST_SCHEMA


def test_route_schema_asks_for_a_short_route_and_a_constrained_reply_validates(fake) -> None:
    schema = route_json_schema()
    # the template and the listing are required; filters only when stated, never written as null
    assert schema["additionalProperties"] is False and schema["required"] == ["intent_class", "listing"]
    assert list(schema["properties"]) == ["intent_class", "listing", "filters"]
    filters = schema["properties"]["filters"]
    assert filters["required"] == [] and filters["additionalProperties"] is False
    assert "null" not in json.dumps(schema) and "$ref" not in json.dumps(schema)
    assert all(p.get("maxLength") for p in filters["properties"].values() if p["type"] == "string")
    assert "semantic_search" in schema["properties"]["intent_class"]["enum"]
    fake.models["r"] = OpenAIScript([
        '{"intent_class": "exploratory_search", "listing": false, "filters": {"keyword": "missing"}}',
        '{"intent_class": "exploratory_search", "listing": true}'])
    backend = OpenAIBackend(fake.url, "r", api_key="")
    reply, how = structured_chat(backend, "route?", schema)
    assert how == "schema" and parse_route(reply).filters.keyword == "missing"
    short = parse_route(structured_chat(backend, "route?", schema)[0])
    assert short.listing is True and short.describe_filters() == "" and short.explanation == ""


def test_errors_name_the_server_and_never_the_key(memory_keyring) -> None:
    with FakeOpenAI(api_key="sk-right-key") as fake:
        fake.models["m"] = OpenAIScript(["hi"])
        secrets.set_openai_api_key("sk-wrong-key")
        backend = OpenAIBackend(fake.url, "m")
        assert "sk-wrong" not in repr(backend)
        with pytest.raises(LLMAuthError) as info:
            backend.chat("q")
        assert fake.url in str(info.value) and "sk-wrong-key" not in str(info.value)
        secrets.set_openai_api_key("sk-right-key")
        assert OpenAIBackend(fake.url, "m").chat("q") == "hi"
        assert fake.headers[-1]["Authorization"] == "Bearer sk-right-key"
        with pytest.raises(LLMModelNotFound) as info:
            OpenAIBackend(fake.url, "absent").chat("q")
        assert "'absent'" in str(info.value) and "Available models: m" in str(info.value)
        assert info.value.available == ["m"]


def test_unreachable_dropped_and_too_long(fake, monkeypatch) -> None:
    port = fake.server.server_address[1]
    with pytest.raises(LLMUnreachable) as info:
        OpenAIBackend(f"http://127.0.0.1:{port + 1 if port < 65535 else 1}", "m", timeout=3).chat("q")
    assert "Cannot reach the OpenAI-compatible server" in str(info.value)
    fake.models["drop"] = OpenAIScript(["x" * 200], drop_after=3)
    with pytest.raises(LLMUnreachable) as info:
        OpenAIBackend(fake.url, "drop", api_key="").chat("q")
    assert "dropped the connection in the middle of the reply" in str(info.value)
    monkeypatch.setattr("kmds_desktop.llm.openai_backend.MAX_REPLY_CHARS", 50)
    fake.models["long"] = OpenAIScript(["y" * 400])
    with pytest.raises(LLMBadReply) as info:
        OpenAIBackend(fake.url, "long", api_key="").chat("q")
    assert "longer than 50 characters" in str(info.value)


def test_cancel_closes_the_connection_at_once(fake) -> None:
    fake.models["hang"] = OpenAIScript(hang=True)
    token = CancelToken()
    threading.Timer(0.3, token.cancel).start()
    started = time.perf_counter()
    with pytest.raises(Cancelled):
        OpenAIBackend(fake.url, "hang", timeout=30, api_key="").chat("q", cancel=token)
    assert time.perf_counter() - started < 3


def test_settings_choose_the_openai_backend(fake) -> None:
    settings = LLMSettings(backend="openai", openai_base_url=fake.url, openai_model="m")
    choice = choose_backend(settings)
    assert choice.name == "openai" and isinstance(choice.llm, OpenAIBackend)
    assert choice.llm.host == f"{fake.url}/v1" and choice.llm.model == "m"


def test_query_generation_dispatches_openai_models_and_logs_the_path(fake) -> None:
    fake.models["json-model"] = OpenAIScript(['{"queries": ["aspirin & diabet:*"]}'])
    fake.models["text-model"] = OpenAIScript(["Query: statin:* & myopathy"], refuse_schema=True)
    generator = MultiModelQueryGenerator(
        ModelDispatch(openai_base_url=fake.url, ollama=OpenAIBackend(fake.url, api_key="")),
        verbatim_models=["openai:json-model", "openai:text-model"])
    result = generator.generate_queries(
        "Does aspirin help diabetics?", None,
        ["openai:json-model", "openai:text-model", "builtin:keywords"], 1)
    by_model = {r.model: r for r in result.all_queries}
    assert by_model["openai:json-model"].query == "aspirin & diabet:*"
    assert by_model["openai:json-model"].reply_format == "schema"
    assert by_model["openai:text-model"].query == "statin:* & myopathy"
    assert by_model["openai:text-model"].reply_format == "text"
    assert by_model["openai:text-model"].server == f"openai {fake.url}/v1"
    assert by_model["builtin:keywords"].reply_format == "" and by_model["builtin:keywords"].ok
    assert [r["model"] for r in fake.requests] == ["json-model", "text-model", "text-model"]


def test_ollama_gets_the_route_schema_as_format(fake_ollama) -> None:
    from support.fake_ollama import ModelScript

    from kmds_desktop.llm import OllamaBackend

    fake_ollama.models["m"] = ModelScript(['{"intent_class": "semantic_search"}'])
    backend = OllamaBackend(fake_ollama.url, "m", timeout=10)
    reply, how = structured_chat(backend, "route?", route_json_schema(), options={"num_predict": 400})
    assert how == "schema" and parse_route(reply).intent_class == "semantic_search"
    body = fake_ollama.completion_requests()[-1].body
    assert body["format"] == route_json_schema() and body["options"]["num_predict"] == 400


def test_a_plain_callable_is_asked_the_text_prompt() -> None:
    from kmds_desktop.llm import FunctionBackend

    asked: list[str] = []
    backend = FunctionBackend(lambda p: asked.append(p) or "a & b")
    assert structured_chat(backend, "json please", QUERY_LIST_SCHEMA, text_prompt="text") == ("a & b", "text")
    assert asked == ["text"]


def test_settings_check_the_openai_address_and_the_probe_lists_models(fake) -> None:
    from kmds_desktop.app.ask import settings_for_ask
    from kmds_desktop.app.preferences import probe_llm_backend, validate_form
    from kmds_desktop.config import Settings, SettingsError

    data = Settings().model_dump(mode="json")
    data["llm"]["openai_base_url"] = "not an address"
    data["query_generation"]["openai_base_url"] = "http://127.0.0.1:8080/v1"
    settings, errors = validate_form(data, {"llm.openai_base_url", "query_generation.openai_base_url"})
    assert settings is None and set(errors) == {"llm.openai_base_url"}
    with pytest.raises(SettingsError, match="openai_base_url"):
        settings_for_ask(Settings(), openai_base_url="ftp://x")
    chosen = settings_for_ask(Settings(), backend="openai", model="m", openai_base_url=fake.url)
    llm = chosen.llm
    assert (llm.backend, llm.openai_model, llm.openai_base_url) == ("openai", "m", fake.url)
    fake.models["m"] = OpenAIScript()
    probe = probe_llm_backend(chosen.llm)
    assert probe.text == "openai · m (ready)" and "m" in probe.tooltip and probe.ready


def test_cli_options_name_openai_models_and_their_server() -> None:
    import argparse

    from kmds_desktop.commands.common import generation_settings
    from kmds_desktop.config import Settings
    from kmds_desktop.literature.queries.agent import QueryAgent

    args = argparse.Namespace(models="openai:qwen,builtin:keywords", openai_base_url="http://127.0.0.1:8080/v1")
    qg, _ = generation_settings(args, Settings())
    assert qg.models == ["openai:qwen", "builtin:keywords"] and qg.multi_model_enabled
    agent = QueryAgent(None, qg)
    backend, name = agent.generator.backend.backend_for("openai:qwen")
    assert isinstance(backend, OpenAIBackend) and name == "qwen" and backend.host == "http://127.0.0.1:8080/v1"


@pytest.mark.parametrize("body", [b'{"data": 5}', b'{"data": "models"}', b"[1, 2]", b"not json"])
def test_a_model_list_of_the_wrong_shape_is_a_bad_reply(body: bytes) -> None:
    """Whatever a server answers for /v1/models, the caller sees an LLMError (a TypeError from a list
    that was a number escaped the status line's probe and Automatic's look at the usual ports)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Odd(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server API
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Odd)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        backend = OpenAIBackend(f"http://127.0.0.1:{server.server_address[1]}/v1", "m")
        with pytest.raises(LLMBadReply, match="not a model list"):
            backend.list_models()
        assert not backend.is_available()
    finally:
        server.shutdown()
        server.server_close()
