"""Preferences: invalid values shown inline and not saved; valid ones saved; key in the keyring only."""

from __future__ import annotations

import json

import pytest
from support.fake_ollama import ModelScript

from kmds_desktop import secrets
from kmds_desktop.app.preferences import probe_llm_backend
from kmds_desktop.config import Settings, load_settings
from kmds_desktop.ui.preferences import PreferencesDialog
from kmds_desktop.ui.workers import JobRunner


@pytest.fixture()
def jobs(qtbot):
    runner = JobRunner()
    yield runner
    runner.shutdown()


def _dialog(qtbot, jobs, data_home, settings=None):
    dialog = PreferencesDialog(settings or Settings(), jobs, settings_path=data_home / "settings.json")
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def test_invalid_values_are_shown_inline_and_not_saved(qtbot, jobs, data_home):
    path = data_home / "settings.json"
    dialog = _dialog(qtbot, jobs, data_home)
    dialog.temperature.setText("5")  # the settings model allows 0..2
    dialog.qg_per_model.setText("zero")
    dialog.ollama_host.setText("localhost 11434")
    assert dialog.save() is False
    assert dialog.isVisible()
    assert not path.exists()
    for key in ("llm.temperature", "query_generation.queries_per_model", "llm.ollama_host"):
        label = dialog.field_errors[key]
        assert not label.isHidden() and label.text(), key  # (its tab may be in the back)
    assert "2" in dialog.field_errors["llm.temperature"].text()
    assert dialog.tabs.currentIndex() == 0  # the LLM tab, where the first problem is

    dialog.temperature.setText("0.7")
    dialog.qg_per_model.setText("2")
    dialog.ollama_host.setText("http://127.0.0.1:11434")
    with qtbot.waitSignal(dialog.settings_saved) as sig:
        assert dialog.save() is True
    saved = load_settings(path)
    assert saved.llm.temperature == 0.7 and saved.query_generation.queries_per_model == 2
    assert sig.args[0].llm.temperature == 0.7
    assert all(label.isHidden() for label in dialog.field_errors.values())


def test_google_key_goes_to_the_keyring_never_the_file(qtbot, jobs, data_home, memory_keyring):
    dialog = _dialog(qtbot, jobs, data_home)
    dialog.backend.setCurrentIndex(dialog.backend.findData("google"))
    dialog.google_key.setText("AIza-secret-test-key")
    assert dialog.save()
    assert secrets.google_api_key() == "AIza-secret-test-key"
    text = (data_home / "settings.json").read_text(encoding="utf-8")
    assert "AIza-secret-test-key" not in text
    assert json.loads(text)["llm"]["backend"] == "google"
    status, _tip = probe_llm_backend(load_settings(data_home / "settings.json").llm)
    assert status.startswith("google") and "no API key" not in status


def test_models_are_listed_from_the_server_on_a_worker(qtbot, jobs, data_home, fake_ollama):
    fake_ollama.models["llama3.1:8b"] = ModelScript()
    fake_ollama.models["qwen2.5:7b"] = ModelScript()
    settings = Settings()
    settings.llm.ollama_host = fake_ollama.url
    settings.query_generation.models = ["builtin:keywords", "mistral:7b"]
    dialog = _dialog(qtbot, jobs, data_home, settings)
    dialog.refresh_models()
    qtbot.waitUntil(lambda: dialog.ollama_model.count() == 2, timeout=10_000)
    assert "is installed" in dialog.models_state.text()
    texts = [dialog.qg_models.item(i).text() for i in range(dialog.qg_models.count())]
    assert "mistral:7b  (not installed)" in texts and "qwen2.5:7b  ✓ installed" in texts
    jobs.wait_all(5_000)

    dialog.ollama_host.setText("http://127.0.0.1:9")
    dialog.refresh_models()
    qtbot.waitUntil(lambda: "127.0.0.1:9" in dialog.models_state.text(), timeout=15_000)
    jobs.wait_all(15_000)


def test_main_window_applies_saved_preferences(qtbot, make_window):
    window = make_window()
    window.open_preferences()
    dialog = window.active_dialog
    assert isinstance(dialog, PreferencesDialog)
    dialog.backend.setCurrentIndex(dialog.backend.findData("offline"))
    dialog.n_results.setText("7")
    dialog.buttons.button(dialog.buttons.StandardButton.Save).click()
    assert window.settings.llm.backend == "offline" and window.settings.index.n_results == 7
    status = window.llm_status
    qtbot.waitUntil(lambda: "offline" in status.text() and "checking" not in status.text(), timeout=10_000)


def test_connection_string_fills_the_server_fields_and_keeps_the_password_out(
    qtbot, jobs, data_home, memory_keyring
):
    dialog = _dialog(qtbot, jobs, data_home)
    dialog.lit_mode.setCurrentIndex(dialog.lit_mode.findData("external"))
    dialog.lit_dsn.setText("host=db.example.org port=6543 dbname=library user=reader password=s3cret-pw")
    assert dialog.save()
    saved = load_settings(data_home / "settings.json")
    lit = saved.literature
    assert (lit.mode, lit.host, lit.port, lit.dbname, lit.user) == ("external", "db.example.org", 6543,
                                                                     "library", "reader")
    assert "s3cret-pw" not in (data_home / "settings.json").read_text(encoding="utf-8")
    assert secrets.db_password("reader", "db.example.org") == "s3cret-pw"

    again = _dialog(qtbot, jobs, data_home, saved)
    again.lit_dsn.setText("host=x port=notaport = =")
    assert again.save() is False
    assert not again.field_errors["literature.dsn"].isHidden()


def test_statement_timeout_and_chroma_server_are_validated_inline_then_saved(qtbot, jobs, data_home):
    path = data_home / "settings.json"
    dialog = _dialog(qtbot, jobs, data_home)
    dialog.lit_timeout.setText("-5")
    dialog.index_mode.setCurrentIndex(dialog.index_mode.findData("server"))
    assert dialog.chroma_host.isEnabled() and dialog.chroma_port.isEnabled()
    dialog.chroma_port.setText("99999")
    assert dialog.save() is False
    assert not path.exists()
    for key in ("literature.statement_timeout_ms", "index.chroma_port"):
        assert not dialog.field_errors[key].isHidden() and dialog.field_errors[key].text(), key

    dialog.lit_timeout.setText("1500")
    dialog.chroma_host.setText("chroma.example.org")
    dialog.chroma_port.setText("8001")
    assert dialog.save() is True
    saved = load_settings(path)
    assert saved.literature.statement_timeout_ms == 1500
    assert (saved.index.mode, saved.index.chroma_host, saved.index.chroma_port) == (
        "server", "chroma.example.org", 8001)
