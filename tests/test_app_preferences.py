"""Preferences' LLM status without Qt: one definition of "installed" with the ask job's backend choice.

Real parts: the fake Ollama server through the real ``ollama`` client; the in-memory keyring.
"""

from __future__ import annotations

import pytest
from support.fake_ollama import ModelScript

from kmds_desktop.app.ask import settings_for_ask
from kmds_desktop.app.preferences import (
    extra_errors,
    field_of,
    list_ollama_models,
    load_settings_or_defaults,
    probe_llm_backend,
    server_address_error,
    split_conninfo,
    validate_form,
)
from kmds_desktop.config import LLMSettings, Settings, SettingsError
from kmds_desktop.llm.factory import choose_backend


def test_latest_tag_and_plain_name_are_one_model(fake_ollama, memory_keyring) -> None:
    fake_ollama.models["foo"] = ModelScript(["hi"])
    for configured in ("foo", "foo:latest"):
        for backend in ("ollama", "auto"):
            llm = LLMSettings(backend=backend, ollama_host=fake_ollama.url, ollama_model=configured)
            probe = probe_llm_backend(llm)
            assert probe.text == f"ollama · {configured} (ready)", (backend, configured, probe)
            assert probe.ready
            if backend == "auto":
                assert choose_backend(llm).name == "ollama"
    assert list_ollama_models(fake_ollama.url) == ["foo"]


def test_status_says_what_asking_would_use(fake_ollama, memory_keyring) -> None:
    fake_ollama.models["other"] = ModelScript(["hi"])
    missing = LLMSettings(backend="ollama", ollama_host=fake_ollama.url, ollama_model="foo")
    probe = probe_llm_backend(missing)
    assert probe.text == "ollama · foo (not installed)" and "other" in probe.tooltip and not probe.ready
    auto = LLMSettings(backend="auto", ollama_host=fake_ollama.url, ollama_model="foo")
    assert probe_llm_backend(auto).text == "offline (Ollama has no foo)"
    assert choose_backend(auto).name == "offline"
    gone = LLMSettings(backend="auto", ollama_host="http://127.0.0.1:9", ollama_model="foo")
    assert probe_llm_backend(gone).text == "offline (Ollama not reachable)"
    assert probe_llm_backend(LLMSettings(backend="offline")).text.startswith("offline (no LLM")
    assert not probe_llm_backend(gone).ready


def test_server_addresses_are_checked_in_the_form_and_on_the_command_line() -> None:
    assert server_address_error("http://127.0.0.1:11434") is None
    assert server_address_error(" https://ollama.lab/ ") is None
    for bad in ("", "127.0.0.1:11434", "http://host:11434/api", "ftp://host", "http://a b"):
        assert server_address_error(bad), bad
    with pytest.raises(SettingsError, match=r"llm\.ollama_host: not a server address"):
        settings_for_ask(Settings(), ollama_host="localhost:11434")
    assert settings_for_ask(Settings(), ollama_host="http://h:1").llm.ollama_host == "http://h:1"


def test_form_errors_land_under_the_field_they_belong_to() -> None:
    data = Settings().model_dump(mode="json")
    assert validate_form(data, ["llm.ollama_host"])[1] == {}
    data["llm"]["ollama_host"] = "localhost"
    data["llm"]["google_model"] = "  "
    data["query_generation"]["models"] = ["a", 5]  # a list item's error goes to the list's field
    data["literature"]["port"] = "not a port"
    data["ui"]["unknown"] = 1
    fields = ["llm.ollama_host", "llm.google_model", "query_generation.models", "literature.port"]
    settings, errors = validate_form(data, fields)
    assert settings is None
    assert set(errors) >= {"llm.ollama_host", "llm.google_model", "literature.port"}
    assert errors["llm.google_model"] == "cannot be empty"
    assert extra_errors(data) == {"llm.ollama_host": errors["llm.ollama_host"],
                                  "llm.google_model": "cannot be empty"}
    assert field_of("query_generation.models.1", fields) == "query_generation.models"
    assert field_of("ui.unknown", fields) == ""


def test_connection_string_splits_into_the_settings_fields_and_a_password() -> None:
    fields, password = split_conninfo("postgresql://alice:s3cret@db.lab:6543/papers")
    assert fields == {"host": "db.lab", "port": "6543", "dbname": "papers", "user": "alice"}
    assert password == "s3cret"
    assert split_conninfo("host=h dbname=d") == ({"host": "h", "dbname": "d"}, None)
    with pytest.raises(ValueError, match="not a valid connection string"):
        split_conninfo("host=h port")


def test_a_broken_settings_file_gives_defaults_and_is_kept_aside(data_home) -> None:
    from kmds_desktop import paths

    assert load_settings_or_defaults() == (Settings(), None)  # no file yet: defaults, no message
    path = paths.settings_file()
    path.write_text('{"llm": {"temperature": "hot"}}')
    settings, note = load_settings_or_defaults()
    assert settings == Settings() and note is not None
    assert "llm.temperature" in note and str(path) + ".broken" in note
    assert path.with_name("settings.json.broken").read_text() == path.read_text()


def test_the_model_count_agrees_with_its_noun():
    from kmds_desktop.app.preferences import models_summary

    assert models_summary(["llama3.2:1b"], "llama3.2:1b").startswith("1 model on the server; ")
    assert models_summary(["a", "b"], "c").startswith("2 models on the server; ")
