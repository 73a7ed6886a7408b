""""Automatic" finds an OpenAI-compatible server on a usual port, and asks before it uses one.

The servers are real HTTP servers bound on free ports (the port list is injected; the defaults are
the usual ones: LM Studio 1234, llama.cpp 8080, vLLM 8000, Jan 1337). Only the model list is asked
for until the user confirms; the confirmation is remembered in the settings. Also: the documented
``--openai-url http://127.0.0.1:8080/v1`` is taken by ``kmds-desktop ask`` (an API root keeps its path).
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
from pathlib import Path

from support.fake_openai import FakeOpenAI, OpenAIScript

from kmds_desktop.app.ask import settings_for_ask
from kmds_desktop.app.llm_status import confirm_server
from kmds_desktop.config import LLMSettings, Settings
from kmds_desktop.llm import choose_backend
from kmds_desktop.llm.factory import USUAL_OPENAI_SERVERS, discover_openai_servers

DEMO = Path(__file__).resolve().parent.parent / "resources" / "demo_kb.xml"
NO_OLLAMA = "http://127.0.0.1:9"  # the discard port: nothing answers there


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_usual_ports_are_the_defaults() -> None:
    assert dict(USUAL_OPENAI_SERVERS) == {"LM Studio": 1234, "llama.cpp": 8080, "vLLM": 8000, "Jan": 1337}


def test_auto_finds_a_server_and_asks_before_sending_it_anything(monkeypatch) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setattr("kmds_desktop.secrets.google_api_key", lambda: None)
    with FakeOpenAI() as fake:
        fake.models["qwen2.5-coder-1.5b"] = OpenAIScript(replies=["never asked"])
        port = int(fake.url.rsplit(":", 1)[1])
        servers = (("LM Studio", _closed_port()), ("llama.cpp", port))
        found = discover_openai_servers(servers)
        assert [(f.name, f.base_url, f.models) for f in found] == [
            ("llama.cpp", f"{fake.url}/v1", ("qwen2.5-coder-1.5b",))]
        assert found[0].question == f"Found llama.cpp at 127.0.0.1:{port} — use it?"
        llm = LLMSettings(ollama_host=NO_OLLAMA)
        choice = choose_backend(llm, "auto", probe_timeout=0.5, openai_servers=servers)
        assert choice.name == "offline" and choice.llm is None  # not confirmed: not used
        assert choice.candidate == found[0] and found[0].question in choice.note
        assert fake.requests == []  # no prompt went to it
        # the user says yes: remembered, and "auto" now uses it with a model it serves
        confirmed = confirm_server(llm, choice.candidate.base_url)
        assert confirmed.confirmed_servers == [f"{fake.url}/v1"] and llm.confirmed_servers == []
        choice = choose_backend(confirmed, "auto", probe_timeout=0.5, openai_servers=servers)
        assert choice.name == "openai" and choice.llm is not None and choice.candidate is None
        assert choice.llm.model == "qwen2.5-coder-1.5b" and "llama.cpp" in choice.note
        assert choice.llm("hello") == "never asked"
        assert confirm_server(confirmed, f"{fake.url}/v1").confirmed_servers == [f"{fake.url}/v1"]


def test_the_documented_openai_url_is_taken_by_the_cli(data_home: Path, tmp_path: Path) -> None:
    assert settings_for_ask(Settings(), openai_base_url="http://127.0.0.1:8080/v1").llm.openai_base_url \
        == "http://127.0.0.1:8080/v1"
    from kmds_desktop.cli import main

    route = {"intent_class": "exploratory_search", "listing": True, "explanation": "named",
             "filters": {"obs_type_filter": "Data Quality Observation"}}
    with FakeOpenAI() as fake:
        fake.models["m"] = OpenAIScript(replies=[json.dumps(route), "Problems [1]."])
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["ask", str(DEMO), "What data quality problems were found?", "--backend", "openai",
                         "--openai-url", f"{fake.url}/v1", "--model", "m", "--json",
                         "--persist-dir", str(tmp_path / "index")])
        assert code == 0, err.getvalue()
        data = json.loads(out.getvalue())
        assert data["backend"] == "openai" and data["answer"] == "Problems [1]."
        assert data["route"]["filters"]["obs_type_filter"] == "Data Quality Observation"
        assert len(fake.requests) == 2
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["ask", str(DEMO), "q", "--backend", "openai", "--openai-url", "127.0.0.1:8080/v1"])
    assert code == 1 and "write it like http://127.0.0.1:8080/v1" in err.getvalue()
