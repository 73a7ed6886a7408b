"""Hostile LLM replies: deep nesting, a megabyte of braces or parentheses, ten megabytes.

Each goes through the real ``ollama`` client to the fake Ollama server (tests/support/fake_ollama.py)
and must end in the documented fallback with its reason: ``ask`` falls back to semantic search and
still answers, literature generation records the attempt's error and goes on with the next model.
Nothing may raise (RecursionError was the old outcome) and nothing may hang: the parsers are
bounded (their speed is measured in bench/hostile_reply.py, not here).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_ollama import ModelScript

from kmds_desktop.ask import RouteError, parse_route
from kmds_desktop.ask.answers import strip_reasoning
from kmds_desktop.ask.routing import MAX_DECODED_OBJECTS, MAX_ROUTE_DEPTH, MAX_SCAN_TOKENS
from kmds_desktop.config import LLMSettings, Settings
from kmds_desktop.kb import load_kb
from kmds_desktop.limits import MAX_REPLY_CHARS
from kmds_desktop.literature.queries.query_cleaning import (
    MAX_QUERY_CHARS,
    clean_query,
    clean_query_with_reason,
)
from kmds_desktop.literature.queries.query_generation import RAW_REPLY_KEPT, MultiModelQueryGenerator
from kmds_desktop.llm import LLMBadReply, OllamaBackend
from kmds_desktop.search import SearchOrchestrator

MB = 1024 * 1024
ROUTE = '{"intent_class": "exploratory_search", "filters": {"obs_type_filter": null}, "explanation": "EDA"}'
QUERY = "aspirin & (heart <-> attack | myocardial <-> infarction)"
MODEL = "router:1b"
ANSWER = "Two data quality issues were recorded [1]."

#: name -> (reply, what the router's parse says about it)
HOSTILE_ROUTES = {
    "deep-json": ('{"a":' * 2000, "deeper than"),
    "deep-json-1MB": ('{"a":' * (MB // 5), "deeper than"),
    "braces-1MB": ("{" * MB, "deeper than"),
    "pairs-1MB": ("{}" * (MB // 2), f"first {MAX_SCAN_TOKENS} braces"),
    "quotes-1MB": ("{" + '""' * (MB // 2), f"first {MAX_SCAN_TOKENS} braces"),
    "closing-1MB": ("}" * MB, "no JSON route found"),
    "objects-1MB": ('{"a": 1, "b": 2}' * (MB // 16), f"first {MAX_DECODED_OBJECTS} objects"),
}


# --- the parsers on their own ------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(HOSTILE_ROUTES))
def test_hostile_route_reply_is_a_route_error_with_its_reason(name: str) -> None:
    reply, reason = HOSTILE_ROUTES[name]
    with pytest.raises(RouteError) as info:
        parse_route(reply)
    assert info.value.code == "invalid_route" and reason in str(info.value)
    assert len(str(info.value)) < 300  # one line, not the reply echoed back


def test_route_reply_over_the_limit_is_refused_before_parsing() -> None:
    with pytest.raises(RouteError) as info:
        parse_route(ROUTE + " " * MAX_REPLY_CHARS)
    assert "too long" in str(info.value) and f"{MAX_REPLY_CHARS:,}" in str(info.value)


@pytest.mark.parametrize("noise", ["{ " * 10, "{" * (MAX_ROUTE_DEPTH - 3), "x " * (MB // 2), "{}" * 100])
def test_a_route_after_noise_is_still_found(noise: str) -> None:
    assert parse_route(noise + ROUTE).intent_class == "exploratory_search"


def test_nested_parentheses_clean_in_one_pass() -> None:
    depth = 450  # deep, and still under the query length limit
    assert clean_query("(" * depth + "a & b" + ")" * depth) == "a & b"
    assert clean_query("((a | b))") == "a | b"
    assert clean_query("(a | b) & (c | d)") == "(a | b) & (c | d)"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("(" * MB, "lines too long to be a query"),
        ("(" * 8000 + "a" + ")" * 8000, "lines too long to be a query"),
        ("to_tsquery(''" * (MB // 13), "lines too long to be a query"),
        ("“" * MB, "lines too long to be a query"),
        ("(\n" * (MB // 2), "first 1,000 lines"),
        (("x" * 999 + "\n") * 500, "first 16,384 characters"),
        ("(" * (10 * MB), "too long"),
    ],
    ids=["parens", "nested", "tsquery-calls", "curly-quotes", "paren-lines", "prose-lines", "10MB"],
)
def test_hostile_query_reply_gives_no_query_and_says_why(reply: str, reason: str) -> None:
    query, why = clean_query_with_reason(reply)
    assert query == "" and why is not None and reason in why


def test_a_query_after_a_long_think_part_is_found() -> None:
    reply = "<think>" + "Let me think & reconsider. " * 40000 + "</think>\n" + QUERY
    assert len(reply) > MB and clean_query(reply) == QUERY


# --- through the real ollama client ----------------------------------------------------------------
def test_ollama_backend_stops_reading_at_the_limit(fake_ollama) -> None:
    fake_ollama.models["big"] = ModelScript(replies=["{" * (10 * MB)], chunk_size=64 * 1024)
    fake_ollama.models["ok"] = ModelScript(replies=[QUERY])
    backend = OllamaBackend(fake_ollama.url, "big", timeout=60)
    with pytest.raises(LLMBadReply) as info:
        backend.chat("hello")
    assert f"longer than {MAX_REPLY_CHARS:,} characters" in str(info.value) and "'big'" in str(info.value)
    assert backend.chat("hello", model="ok") == QUERY  # the backend is still usable


@pytest.fixture(scope="module")
def analytics_kb(kmds_data: Path):
    return load_kb(kmds_data / "example_analytics_kb_app_workflow.xml")


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile-index")


def _router(route_reply: str):
    def reply(prompt: str, body: dict[str, Any]) -> str:
        return route_reply if "Reply with one JSON object" in prompt else ANSWER
    return reply


@pytest.mark.parametrize(
    ("reply", "code", "reason"),
    [
        ('{"a":' * 2000, "invalid_route", "deeper than"),
        ("{" * MB, "invalid_route", "deeper than"),
        ("{}" * (MB // 2), "invalid_route", "braces and quotes"),
        ("{" * (10 * MB), "llm_error", f"longer than {MAX_REPLY_CHARS:,} characters"),
    ],
    ids=["deep-nesting", "1MB-braces", "1MB-pairs", "10MB"],
)
def test_ask_falls_back_on_a_hostile_route_reply(fake_ollama, analytics_kb, index_dir, reply, code,
                                                 reason) -> None:
    fake_ollama.models[MODEL] = ModelScript(replies=[_router(reply)], chunk_size=64 * 1024)
    settings = Settings(llm=LLMSettings(ollama_host=fake_ollama.url, ollama_model=MODEL, timeout_s=60))
    orchestrator = SearchOrchestrator(analytics_kb, persist_dir=index_dir, backend="ollama",
                                      settings=settings)
    result = orchestrator.ask("How long does resolving a ticket take?")
    assert result.fallback_code == code and reason in result.fallback_reason
    assert result.intent_class == "semantic_search" and result.results
    assert result.answer  # the user still gets an answer
    assert len(result.fallback_reason) < 400


def test_literature_generation_records_hostile_replies_and_goes_on(fake_ollama) -> None:
    fake_ollama.models["deep"] = ModelScript(replies=["(" * 20000 + "a & b" + ")" * 20000])
    fake_ollama.models["braces"] = ModelScript(replies=["{(" * (MB // 2)], chunk_size=64 * 1024)
    fake_ollama.models["huge"] = ModelScript(replies=["(" * (10 * MB)], chunk_size=64 * 1024)
    fake_ollama.models["good"] = ModelScript(replies=[f"Query: {QUERY}"])
    generator = MultiModelQueryGenerator(ollama_host=fake_ollama.url, timeout=60,
                                         verbatim_models=["deep", "braces", "huge", "good"])
    result = generator.generate_queries("Does aspirin prevent heart attacks?", None,
                                        ["deep", "braces", "huge", "good"], 1)
    by_model = {r.model: r for r in result.all_queries}
    assert by_model["deep"].query == "" and f"at most {MAX_QUERY_CHARS:,}" in by_model["deep"].error
    assert by_model["braces"].query == "" and "too long to be a query" in by_model["braces"].error
    assert by_model["huge"].query == "" and by_model["huge"].error_kind == "LLMBadReply"
    assert f"longer than {MAX_REPLY_CHARS:,}" in by_model["huge"].error
    assert by_model["good"].ok and result.unique_queries == [QUERY]
    for row in result.all_queries:  # the kept raw reply (review table, search log) stays small
        assert len(row.raw_reply) <= RAW_REPLY_KEPT + 60
    assert len(json.dumps(result.to_dict())) < 50_000


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("<think>draft</think>The answer [1].", "The answer [1]."),
        ("<THINK>a</think>x<think>b</Think>y", "xy"),
        ("<think>unclosed, kept", "<think>unclosed, kept"),
        ("a<think>1</think>b<think>2", "ab<think>2"),
    ],
)
def test_strip_reasoning_matches_the_pattern_it_replaces(answer: str, expected: str) -> None:
    import re

    assert strip_reasoning(answer) == expected
    assert expected == re.sub(r"<think>.*?</think>", "", answer, flags=re.DOTALL | re.IGNORECASE).strip()


@pytest.mark.parametrize("hostile", [
    "<think>" * (MB // 7),  # unclosed, a megabyte of them (the old pattern took hours)
    "Two issues were found [" + "1" * 5000 + "].",  # int() of 5,000 digits raised ValueError out of ask()
    "Two issues were found" + " " * (MB // 4) + "x",  # a quarter megabyte of spaces before no marker
    "[1]" + " " * (MB // 4),  # a marker, then the spaces: the leading-marker pattern backtracked into them
], ids=["unclosed-think", "5000-digit-marker", "spaces", "marker-then-spaces"])
def test_ask_answers_after_a_hostile_synthesis_reply(fake_ollama, analytics_kb, index_dir,
                                                     hostile: str) -> None:
    route = '{"intent_class": "exploratory_search", "filters": {}, "explanation": "EDA"}'

    def reply(prompt: str, body: dict[str, Any]) -> str:
        return route if "Reply with one JSON object" in prompt else hostile

    fake_ollama.models[MODEL] = ModelScript(replies=[reply], chunk_size=64 * 1024)
    settings = Settings(llm=LLMSettings(ollama_host=fake_ollama.url, ollama_model=MODEL, timeout_s=60))
    result = SearchOrchestrator(analytics_kb, persist_dir=index_dir, backend="ollama",
                                settings=settings).ask("Which data quality problems were found?")
    assert result.fallback_reason is None and result.results
    assert result.answer and result.synthesis_error is None
    assert "[" + "1" * 5000 + "]" not in result.citation_note  # a 5,000-digit "marker" cites nothing


class _Flood:
    """A real HTTP server that answers every request 200 with ``size`` bytes of ``unit`` (as fast as the
    socket takes them), counting the bytes it got out before the client went away."""

    def __init__(self, unit: bytes, size: int) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        flood = self
        self.sent = 0

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.send_header("Content-Length", str(size))
                self.end_headers()
                block = unit * (64 * 1024 // len(unit))
                try:
                    while flood.sent < size:
                        self.wfile.write(block)
                        flood.sent += len(block)
                except OSError:  # the client stopped reading and closed
                    pass

            do_GET = do_POST = _answer  # noqa: N815 - http.server's own method names

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


EMPTY_PART = b'{"model": "m", "message": {"role": "assistant", "content": ""}, "done": false}\n'


@pytest.mark.parametrize("unit, what", [(b"x", "a line longer than"), (EMPTY_PART, "more than")])
def test_a_server_flooding_bytes_is_cut_off_by_every_backend(monkeypatch, unit: bytes, what: str) -> None:
    """One endless line, or endless empty reply parts: the client libraries buffer a line (and a model
    list) whole, so the bound is on the bytes as they arrive, for chat, stream and model list alike."""
    from kmds_desktop.llm import OpenAIBackend, abortable_request

    monkeypatch.setattr(abortable_request, "MAX_LINE_BYTES", 200_000)
    monkeypatch.setattr(abortable_request, "MAX_BODY_BYTES", 1_000_000)
    flood = _Flood(unit, 64 * MB)
    try:
        ollama_backend = OllamaBackend(flood.url, "m", timeout=30)
        openai_backend = OpenAIBackend(flood.url, "m", timeout=30)
        for call in (lambda: ollama_backend.chat("q"), lambda: "".join(ollama_backend.stream("q")),
                     ollama_backend.list_models, lambda: openai_backend.chat("q")):
            with pytest.raises(LLMBadReply) as info:
                call()
            assert what in str(info.value) and "stopped reading it" in str(info.value), info.value
            assert flood.url.removeprefix("http://") in str(info.value)
        assert flood.sent < 32 * MB  # stopped early, not read to the end
    finally:
        flood.close()
