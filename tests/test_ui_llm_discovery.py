""""Automatic" asks first, in the window: a server found on a usual port is used only after a yes.

A real HTTP server on a free port answers ``/v1/models`` (the window's port list is injected; the
defaults are the usual ports). The status probe finds it; the bar above the panels asks "Found
llama.cpp at 127.0.0.1:PORT — use it?" and nothing is sent to it before the click; Yes is written to
the settings file and the status line names the server, and the next question is answered by it;
No is remembered and not asked again. Preferences' "List models" fills the model list.
"""

from __future__ import annotations

import json
import os
import socket

import pytest
from PySide6.QtCore import Qt
from support.fake_openai import FakeOpenAI, OpenAIScript

from kmds_desktop.config import Settings, load_settings
from kmds_desktop.ui.preferences.dialog import PreferencesDialog

NO_OLLAMA = "http://127.0.0.1:9"  # the discard port: nothing answers there
TIMEOUT = 120_000  # the first question loads the embedding model
ROUTE = {"intent_class": "exploratory_search", "listing": True, "explanation": "named",
         "filters": {"obs_type_filter": "Data Quality Observation", "workflow": None,
                     "finding_seq_min": None, "finding_seq_max": None, "keyword": None}}


@pytest.fixture()
def no_google(monkeypatch) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setattr("kmds_desktop.secrets.google_api_key", lambda: None)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _automatic() -> Settings:
    settings = Settings()
    settings.llm.backend = "auto"
    settings.llm.ollama_host = NO_OLLAMA
    return settings


def _probe(qtbot, window, servers) -> None:
    """The window's status probe with ``servers`` as the usual ports, to its end."""
    window.openai_servers = servers
    window.refresh_llm_status()
    qtbot.waitUntil(lambda: "checking" not in window.llm_status.text(), timeout=30_000)


def test_automatic_asks_before_it_uses_a_found_server(qtbot, make_window, kmds_data, data_home,
                                                      no_google) -> None:
    with FakeOpenAI() as fake:
        # "{": the one token the route prompt read ahead gets (the window drops it)
        fake.models["qwen2.5-coder-1.5b"] = OpenAIScript(replies=["{", json.dumps(ROUTE), "Problems [1]."])
        port = int(fake.url.rsplit(":", 1)[1])
        window = make_window(_automatic())
        _probe(qtbot, window, (("LM Studio", _closed_port()), ("llama.cpp", port)))
        bar = window.server_question
        qtbot.waitUntil(bar.isVisible, timeout=10_000)
        assert f"Found llama.cpp at 127.0.0.1:{port} — use it?" in bar.label.text()
        assert "offline" in window.llm_status.text()  # not used before the answer
        assert fake.requests == []  # nothing but the model list went to it
        qtbot.mouseClick(bar.yes_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: f"at 127.0.0.1:{port} (ready)" in window.llm_status.text(), timeout=30_000)
        assert "openai · qwen2.5-coder-1.5b" in window.llm_status.text() and not bar.isVisible()
        saved = load_settings(data_home / "settings.json")
        assert saved.llm.confirmed_servers == [f"{fake.url}/v1"] and saved.llm.backend == "auto"
        # once a KB is open, the server reads its route prompt ahead of the first question (one token)
        with qtbot.waitSignal(window.kb_loaded, timeout=30_000):
            window.open_kb(kmds_data / "example_analytics_kb_app_workflow.xml")
        qtbot.waitUntil(lambda: len(fake.requests) == 1, timeout=30_000)
        qtbot.waitUntil(lambda: not window.jobs.is_busy("ask.warm"), timeout=30_000)
        ahead = fake.requests[0]
        assert ahead["max_tokens"] == 1 and ahead["model"] == "qwen2.5-coder-1.5b"
        # the next question is answered by it, its route prompt beginning as the one read ahead
        window.ask.question.setPlainText("What data quality problems were found?")
        with qtbot.waitSignal(window.ask.answer_finished, timeout=TIMEOUT) as sig:
            qtbot.keyClick(window.ask.question, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        result = sig.args[0]
        assert result.backend == "openai" and result.answer == "Problems [1]."
        assert result.fallback_code is None  # the route came from the model, after the read-ahead
        assert [r["model"] for r in fake.requests] == ["qwen2.5-coder-1.5b"] * 3
        read_ahead, routed = (json.dumps(r["messages"]) for r in fake.requests[:2])
        assert len(os.path.commonprefix([read_ahead, routed])) >= 0.9 * len(read_ahead)


def test_a_no_is_remembered_and_not_asked_again(qtbot, make_window, data_home, no_google) -> None:
    with FakeOpenAI() as fake:
        fake.models["m"] = OpenAIScript(replies=["never asked"])
        servers = (("llama.cpp", int(fake.url.rsplit(":", 1)[1])),)
        window = make_window(_automatic())
        _probe(qtbot, window, servers)
        bar = window.server_question
        qtbot.waitUntil(bar.isVisible, timeout=10_000)
        qtbot.mouseClick(bar.no_button, Qt.MouseButton.LeftButton)
        assert not bar.isVisible()
        qtbot.waitUntil(lambda: "checking" not in window.llm_status.text(), timeout=30_000)
        assert load_settings(data_home / "settings.json").llm.declined_servers == [f"{fake.url}/v1"]
        _probe(qtbot, window, servers)
        assert not bar.isVisible() and "offline" in window.llm_status.text()
        assert fake.requests == []


def test_list_models_fills_the_model_list(qtbot, jobs, data_home, memory_keyring) -> None:
    with FakeOpenAI() as fake:
        for name in ("qwen2.5-coder-1.5b", "llama-3.2-3b"):
            fake.models[name] = OpenAIScript(["hi"])
        dialog = PreferencesDialog(Settings(), jobs, settings_path=data_home / "settings.json")
        page = dialog.llm_page
        qtbot.addWidget(dialog)
        dialog.show()
        page.openai_url.setText(fake.url)
        page.openai_model.setText("llama-3.2-3b")
        qtbot.mouseClick(page.openai_models_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: "offers" in page.openai_models_state.text(), timeout=10_000)
        listed = [page.openai_model.itemText(i) for i in range(page.openai_model.count())]
        assert listed == ["llama-3.2-3b", "qwen2.5-coder-1.5b"]
        assert page.openai_model.text() == "llama-3.2-3b"
        page.openai_model.setCurrentIndex(1)  # picked from the list
        assert dialog.save() is True
    assert load_settings(data_home / "settings.json").llm.openai_model == "qwen2.5-coder-1.5b"
