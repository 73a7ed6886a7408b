"""Preferences: invalid values shown inline and not saved; valid ones saved; key in the keyring only."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt
from support.fake_ollama import ModelScript
from support.menus import click_menu

from kmds_desktop import secrets
from kmds_desktop.app.preferences import probe_llm_backend
from kmds_desktop.config import Settings, load_settings
from kmds_desktop.ui.preferences.dialog import PreferencesDialog


def _dialog(qtbot, jobs, data_home, settings=None):
    dialog = PreferencesDialog(settings or Settings(), jobs, settings_path=data_home / "settings.json")
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def test_invalid_values_are_shown_inline_and_not_saved(qtbot, jobs, data_home):
    path = data_home / "settings.json"
    dialog = _dialog(qtbot, jobs, data_home)
    llm = dialog.llm_page
    query = dialog.query_page
    llm.temperature.setText("5")  # the settings model allows 0..2
    query.qg_per_model.setText("zero")
    llm.ollama_host.setText("localhost 11434")
    assert dialog.save() is False
    assert dialog.isVisible()
    assert not path.exists()
    for key in ("llm.temperature", "query_generation.queries_per_model", "llm.ollama_host"):
        label = dialog.field_errors[key]
        assert not label.isHidden() and label.text(), key  # (its tab may be in the back)
    assert "2" in dialog.field_errors["llm.temperature"].text()
    assert dialog.tabs.currentIndex() == 0  # the LLM tab, where the first problem is

    llm.temperature.setText("0.7")
    query.qg_per_model.setText("2")
    llm.ollama_host.setText("http://127.0.0.1:11434")
    with qtbot.waitSignal(dialog.settings_saved) as sig:
        assert dialog.save() is True
    saved = load_settings(path)
    assert saved.llm.temperature == 0.7 and saved.query_generation.queries_per_model == 2
    assert sig.args[0].llm.temperature == 0.7
    assert all(label.isHidden() for label in dialog.field_errors.values())


def test_google_key_goes_to_the_keyring_never_the_file(qtbot, jobs, data_home, memory_keyring):
    dialog = _dialog(qtbot, jobs, data_home)
    page = dialog.llm_page
    page.backend.setCurrentIndex(page.backend.findData("google"))
    page.google_key.setText("AIza-secret-test-key")
    assert dialog.save()
    assert secrets.google_api_key() == "AIza-secret-test-key"
    text = (data_home / "settings.json").read_text(encoding="utf-8")
    assert "AIza-secret-test-key" not in text
    assert json.loads(text)["llm"]["backend"] == "google"
    status = probe_llm_backend(load_settings(data_home / "settings.json").llm).text
    assert status.startswith("google") and "no API key" not in status


def test_models_are_listed_from_the_server_on_a_worker(qtbot, jobs, data_home, fake_ollama):
    fake_ollama.models["llama3.1:8b"] = ModelScript()
    fake_ollama.models["qwen2.5:7b"] = ModelScript()
    settings = Settings()
    settings.llm.ollama_host = fake_ollama.url
    settings.query_generation.models = ["builtin:keywords", "mistral:7b"]
    dialog = _dialog(qtbot, jobs, data_home, settings)
    llm = dialog.llm_page
    query = dialog.query_page
    llm.refresh_models()
    qtbot.waitUntil(lambda: llm.ollama_model.count() == 2, timeout=10_000)
    assert "is installed" in llm.models_state.text()
    texts = [query.qg_models.item(i).text() for i in range(query.qg_models.count())]
    assert "mistral:7b  (not installed)" in texts and "qwen2.5:7b  ✓ installed" in texts
    jobs.wait_all(5_000)

    # Nothing listens on port 9: the job's error replaces the "Asking …" line set before it started.
    llm.ollama_host.setText("http://127.0.0.1:9")
    llm.refresh_models()
    assert llm.models_state.text().startswith("Asking http://127.0.0.1:9")
    assert not llm.refresh_models_button.isEnabled()
    (job,) = jobs.running("llm.models")
    qtbot.waitUntil(lambda: job.done, timeout=15_000)
    assert job.state == "failed"
    text = llm.models_state.text()
    assert "Cannot reach the Ollama server at http://127.0.0.1:9" in text and "Asking" not in text
    assert llm.refresh_models_button.isEnabled()
    assert llm.ollama_model.count() == 2, "the models listed before are kept"


def test_main_window_applies_saved_preferences(qtbot, make_window):
    window = make_window()
    window.open_preferences()
    dialog = window.active_dialog
    llm = dialog.llm_page
    idx = dialog.index_page
    assert isinstance(dialog, PreferencesDialog)
    llm.backend.setCurrentIndex(llm.backend.findData("offline"))
    idx.n_results.setText("7")
    dialog.buttons.button(dialog.buttons.StandardButton.Save).click()
    assert window.settings.llm.backend == "offline" and window.settings.index.n_results == 7
    status = window.llm_status
    qtbot.waitUntil(lambda: "offline" in status.text() and "checking" not in status.text(), timeout=10_000)


def test_connection_string_fills_the_server_fields_and_keeps_the_password_out(
    qtbot, jobs, data_home, memory_keyring
):
    dialog = _dialog(qtbot, jobs, data_home)
    page = dialog.literature_page
    page.lit_mode.setCurrentIndex(page.lit_mode.findData("external"))
    page.lit_dsn.setText("host=db.example.org port=6543 dbname=library user=reader password=s3cret-pw")
    assert dialog.save()
    saved = load_settings(data_home / "settings.json")
    lit = saved.literature
    assert (lit.mode, lit.host, lit.port, lit.dbname, lit.user) == ("external", "db.example.org", 6543,
                                                                     "library", "reader")
    assert "s3cret-pw" not in (data_home / "settings.json").read_text(encoding="utf-8")
    assert secrets.db_password("reader", "db.example.org") == "s3cret-pw"

    again = _dialog(qtbot, jobs, data_home, saved)
    again.literature_page.lit_dsn.setText("host=x port=notaport = =")
    assert again.save() is False
    assert not again.field_errors["literature.dsn"].isHidden()


def test_statement_timeout_and_chroma_server_are_validated_inline_then_saved(qtbot, jobs, data_home):
    path = data_home / "settings.json"
    dialog = _dialog(qtbot, jobs, data_home)
    idx = dialog.index_page
    lit = dialog.literature_page
    lit.lit_timeout.setText("-5")
    idx.index_mode.setCurrentIndex(idx.index_mode.findData("server"))
    assert idx.chroma_host.isEnabled() and idx.chroma_port.isEnabled()
    idx.chroma_port.setText("99999")
    assert dialog.save() is False
    assert not path.exists()
    for key in ("literature.statement_timeout_ms", "index.chroma_port"):
        assert not dialog.field_errors[key].isHidden() and dialog.field_errors[key].text(), key

    lit.lit_timeout.setText("1500")
    idx.chroma_host.setText("chroma.example.org")
    idx.chroma_port.setText("8001")
    assert dialog.save() is True
    saved = load_settings(path)
    assert saved.literature.statement_timeout_ms == 1500
    assert (saved.index.mode, saved.index.chroma_host, saved.index.chroma_port) == (
        "server", "chroma.example.org", 8001)


def _query_tab(qtbot, dialog) -> None:
    bar = dialog.tabs.tabBar()
    index = next(i for i in range(dialog.tabs.count()) if dialog.tabs.tabText(i) == "Query generation")
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(index).center())
    assert dialog.tabs.currentIndex() == index


def _click_model(qtbot, dialog, name: str) -> None:
    view = dialog.query_page.qg_models
    items = [view.item(i) for i in range(view.count())]
    item = next(i for i in items if i.data(Qt.ItemDataRole.UserRole) == name)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.visualItemRect(item).center())


def _listed(dialog) -> dict[str, bool]:
    items = [dialog.query_page.qg_models.item(i) for i in range(dialog.query_page.qg_models.count())]
    return {i.data(Qt.ItemDataRole.UserRole): i.checkState() == Qt.CheckState.Checked for i in items}


def test_journey_type_a_model_press_enter_remove_one_and_save(qtbot, make_window, data_home):
    """Preferences from the menu shortcut; Enter in the model field adds the model (the dialog stays
    open, as the field's hint promises); a model is removed by the button and by the Delete key."""
    settings = Settings()
    settings.query_generation.models = ["builtin:keywords", "mistral:7b", "gemma2:2b"]
    window = make_window(settings, auto_index=False)
    click_menu(qtbot, window, "&Edit", "&Preferences…")
    qtbot.waitUntil(lambda: isinstance(window.active_dialog, PreferencesDialog), timeout=5_000)
    dialog = window.active_dialog
    page = dialog.query_page
    _query_tab(qtbot, dialog)

    qtbot.mouseClick(page.qg_add, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(page.qg_add, "llama3.1:8b")
    qtbot.keyClick(page.qg_add, Qt.Key.Key_Return)
    assert dialog.isVisible() and dialog.result() == 0, "Enter closed the dialog"
    assert not (data_home / "settings.json").exists(), "Enter saved the settings"
    assert _listed(dialog) == {"builtin:keywords": True, "mistral:7b": True, "gemma2:2b": True,
                               "llama3.1:8b": True}
    assert page.qg_add.text() == ""

    assert not page.qg_remove.isEnabled()  # nothing selected yet
    _click_model(qtbot, dialog, "mistral:7b")
    assert page.qg_remove.isEnabled()
    qtbot.mouseClick(page.qg_remove, Qt.MouseButton.LeftButton)
    assert "mistral:7b" not in _listed(dialog)

    _click_model(qtbot, dialog, "gemma2:2b")
    qtbot.keyClick(page.qg_models, Qt.Key.Key_Delete)
    assert list(_listed(dialog)) == ["builtin:keywords", "llama3.1:8b"]

    qtbot.mouseClick(dialog.buttons.button(dialog.buttons.StandardButton.Save), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=5_000)
    saved = load_settings(data_home / "settings.json")
    assert saved.query_generation.models == ["builtin:keywords", "llama3.1:8b"]
    assert window.settings.query_generation.models == ["builtin:keywords", "llama3.1:8b"]


@pytest.mark.parametrize(
    ("tab", "page", "field", "text"),
    [("Query generation", "query_page", "qg_per_model", "2"),
     ("LLM", "llm_page", "google_model", "gemini-2.0-flash"),
     ("Semantic index", "index_page", "n_results", "7")],
)
def test_enter_in_any_field_neither_saves_nor_closes(qtbot, jobs, data_home, tab, page, field, text):
    """Enter in a line edit on any tab checks the form; only Save saves (issue 21, 1)."""
    dialog = _dialog(qtbot, jobs, data_home)
    bar = dialog.tabs.tabBar()
    index = next(i for i in range(dialog.tabs.count()) if dialog.tabs.tabText(i) == tab)
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(index).center())
    edit = getattr(getattr(dialog, page), field)
    qtbot.mouseClick(edit, Qt.MouseButton.LeftButton)
    edit.selectAll()
    qtbot.keyClicks(edit, text)
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    qtbot.keyClick(edit, Qt.Key.Key_Enter)
    assert dialog.isVisible() and dialog.result() == 0, "Enter closed the dialog"
    assert not (data_home / "settings.json").exists(), "Enter saved the settings"
    edit.selectAll()
    qtbot.keyClicks(edit, "x-not-a-number" if field != "google_model" else "")
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    assert dialog.isVisible()
    if field != "google_model":
        assert not dialog.field_errors[
            {"qg_per_model": "query_generation.queries_per_model", "n_results": "index.n_results"}[field]
        ].isHidden(), "Enter shows what is wrong under the field"


def test_retrieval_errors_and_hints_each_keep_their_own_lines(qtbot, jobs, data_home):
    """An invalid fusion k (and its neighbours) shows the error on a line of its own: no wrapped hint's
    text runs under an error line, however many errors the tab shows."""
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QLabel

    dialog = _dialog(qtbot, jobs, data_home)
    retrieval = dialog.retrieval_page
    bar = dialog.tabs.tabBar()
    index = next(i for i in range(dialog.tabs.count()) if dialog.tabs.tabText(i) == "Retrieval")
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(index).center())
    for edit, text in ((retrieval.ret_semantic_weight, "eleven"), (retrieval.ret_rerank_weight, "x"),
                       (retrieval.ret_fusion_k, "100000")):
        qtbot.mouseClick(edit, Qt.MouseButton.LeftButton)
        edit.selectAll()
        qtbot.keyClicks(edit, text)
    qtbot.keyClick(retrieval.ret_fusion_k, Qt.Key.Key_Return)
    error = dialog.field_errors["retrieval.fusion_k"]
    qtbot.waitUntil(lambda: error.isVisible() and error.height() > 0)
    qtbot.wait(50)  # the layout settles
    page = retrieval.ret_fusion_k.window()

    def text_rect(label: QLabel) -> QRect:
        """Where the label's text is drawn: its width, and the height its wrapped lines need."""
        top_left = label.mapTo(page, label.rect().topLeft())
        return QRect(top_left.x(), top_left.y(), label.width(), label.heightForWidth(label.width()))

    hint = next(lab for lab in dialog.findChildren(QLabel) if lab.text().startswith("1 to 1000"))
    assert hint.isVisible()
    assert not text_rect(hint).intersects(text_rect(error)), (text_rect(hint), text_rect(error))
    shown = [lab for lab in dialog.findChildren(QLabel) if lab.isVisible() and lab.wordWrap()
             and dialog.tabs.currentWidget().isAncestorOf(lab)]
    for label in shown:
        assert label.height() >= label.heightForWidth(label.width()), label.text()


def test_the_built_in_generators_embedding_neighbours_can_be_turned_off(qtbot, jobs, data_home):
    from PySide6.QtCore import QPoint, Qt

    dialog = _dialog(qtbot, jobs, data_home)
    dialog.tabs.setCurrentIndex(next(i for i in range(dialog.tabs.count())
                                     if dialog.tabs.tabText(i) == "Query generation"))
    box = dialog.query_page.qg_neighbours
    assert box.isChecked(), "on by default, as the settings say"
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton, pos=QPoint(8, box.height() // 2))  # its check box
    assert not box.isChecked()
    assert dialog.save() is True
    assert load_settings(data_home / "settings.json").query_generation.builtin_embedding_variants is False


def test_every_tab_fits_the_dialog_without_cutting_a_line(qtbot, jobs, data_home):
    """Each tab at the dialog's size shows its rows whole: no check box or hint runs past the right
    edge (the Retrieval tab's once did), and the Retrieval tab scrolls down to its last check box."""
    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QCheckBox, QScrollArea

    dialog = _dialog(qtbot, jobs, data_home)
    for i in range(dialog.tabs.count()):
        dialog.tabs.setCurrentIndex(i)
        qtbot.wait(50)
        page = dialog.tabs.widget(i)
        edge = dialog.tabs.geometry().right()  # what the dialog shows of the tab (a wider page is cut)
        for box in page.findChildren(QCheckBox):
            right = box.mapTo(dialog, QPoint(box.sizeHint().width(), 0)).x()
            assert right <= edge, (dialog.tabs.tabText(i), box.text(), right, edge)
    area = dialog.findChild(QScrollArea, "retrievalTabScroll")
    dialog.tabs.setCurrentWidget(area)
    last = dialog.retrieval_page.ret_database_vectors
    area.ensureWidgetVisible(last)
    qtbot.wait(50)
    assert last.visibleRegion().boundingRect().height() == last.height(), "the last check box is reachable"


def test_broad_rows_can_be_ranked_over_every_match(qtbot, jobs, data_home):
    """Preferences > Retrieval: the check box saves ``retrieval.exact_broad_rows`` (off by default)."""
    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QScrollArea

    dialog = _dialog(qtbot, jobs, data_home)
    area = dialog.findChild(QScrollArea, "retrievalTabScroll")
    dialog.tabs.setCurrentWidget(area)
    box = dialog.retrieval_page.ret_exact_broad
    area.ensureWidgetVisible(box)
    qtbot.wait(50)
    assert box.isVisible() and not box.isChecked(), "off by default, as the settings say"
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton, pos=QPoint(8, box.height() // 2))
    assert box.isChecked()
    assert dialog.save() is True
    assert load_settings(data_home / "settings.json").retrieval.exact_broad_rows is True
