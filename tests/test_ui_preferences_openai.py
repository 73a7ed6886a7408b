"""Preferences for the OpenAI-compatible backend (issue 25, 1): address, model and key; the key goes
to the keyring, never the settings file; a bad address is shown under its field."""

from __future__ import annotations

from kmds_desktop import secrets
from kmds_desktop.config import Settings, load_settings
from kmds_desktop.ui.preferences.dialog import PreferencesDialog


def test_openai_server_model_and_key(qtbot, jobs, data_home, memory_keyring) -> None:
    path = data_home / "settings.json"
    dialog = PreferencesDialog(Settings(), jobs, settings_path=path)
    llm = dialog.llm_page
    query = dialog.query_page
    qtbot.addWidget(dialog)
    dialog.show()
    llm.backend.setCurrentIndex(llm.backend.findData("openai"))
    llm.openai_url.setText("localhost:8080")
    assert dialog.save() is False and not path.exists()
    assert not dialog.field_errors["llm.openai_base_url"].isHidden()
    llm.openai_url.setText("http://127.0.0.1:1234/v1")
    llm.openai_model.setText("qwen2.5-coder-1.5b")
    llm.openai_key.setText("sk-local-secret")
    query.qg_openai.setText("http://127.0.0.1:1234")
    assert dialog.save() is True
    saved = load_settings(path)
    assert (saved.llm.backend, saved.llm.openai_base_url, saved.llm.openai_model) == (
        "openai", "http://127.0.0.1:1234/v1", "qwen2.5-coder-1.5b")
    assert saved.query_generation.openai_base_url == "http://127.0.0.1:1234"
    assert secrets.openai_api_key() == "sk-local-secret"
    assert "sk-local-secret" not in path.read_text()


def test_list_models_asks_the_openai_server_and_shows_what_it_offers(qtbot, jobs, data_home,
                                                                     memory_keyring) -> None:
    from PySide6.QtCore import Qt
    from support.fake_openai import FakeOpenAI, OpenAIScript

    with FakeOpenAI() as fake:
        fake.models["qwen2.5-coder-1.5b"] = OpenAIScript(["hi"])
        dialog = PreferencesDialog(Settings(), jobs, settings_path=data_home / "settings.json")
        page = dialog.llm_page
        qtbot.addWidget(dialog)
        dialog.show()
        page.backend.setCurrentIndex(page.backend.findData("openai"))
        page.openai_url.setText(fake.url)
        page.openai_model.clear()
        qtbot.mouseClick(page.openai_models_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: "offers" in page.openai_models_state.text(), timeout=10_000)
        assert page.openai_model.text() == "qwen2.5-coder-1.5b", "a one-model server's model is taken"
        assert "'qwen2.5-coder-1.5b' will answer" in page.openai_models_state.text()
        fake.models["llama-3.2-3b"] = OpenAIScript(["hi"])
        page.openai_model.setText("mistral-7b")
        qtbot.mouseClick(page.openai_models_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: "NOT among them" in page.openai_models_state.text(), timeout=10_000)
    page.openai_url.setText("http://127.0.0.1:9/v1")  # nothing listens there
    qtbot.mouseClick(page.openai_models_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "b00020" in page.openai_models_state.text(), timeout=15_000)
    assert page.openai_models_button.isEnabled()
