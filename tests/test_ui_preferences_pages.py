"""Each Preferences page on its own, with no dialog around it: ``load(settings)`` then
``apply(data)`` gives back every value of the page's section, and nothing of the others; the
signals a page sends for what only the dialog can do (check the whole form, show an error it found
itself, the models a server listed) are sent."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from PySide6.QtCore import Qt

from kmds_desktop.config import Settings, validate_settings
from kmds_desktop.ui.preferences.form import PreferencesPage
from kmds_desktop.ui.preferences.index_page import IndexPage
from kmds_desktop.ui.preferences.literature_page import LiteraturePage
from kmds_desktop.ui.preferences.llm_page import LLMPage
from kmds_desktop.ui.preferences.query_page import QueryPage
from kmds_desktop.ui.preferences.retrieval_page import RetrievalPage

#: A value different from the default for every setting a page shows.
CHANGED: dict[str, dict[str, Any]] = {
    "llm": {"backend": "openai", "ollama_host": "http://ollama.example:11434", "ollama_model": "qwen2.5:7b",
            "google_model": "gemini-2.0-flash", "openai_base_url": "http://127.0.0.1:1234/v1",
            "openai_model": "local-model", "temperature": 0.6, "timeout_s": 30.0},
    "query_generation": {"multi_model_enabled": True, "models": ["builtin:keywords", "mistral:7b"],
                         "queries_per_model": 2, "temperature": 0.4, "ollama_host": "http://qg.example:11434",
                         "openai_base_url": "http://127.0.0.1:9999/v1", "timeout_s": 45.0,
                         "builtin_embedding_variants": False,
                         "verbatim_query_models": ["openai:local", "qwen2.5-coder:1.5b"]},
    "literature": {"mode": "external", "host": "db.example.org", "port": 6543, "dbname": "library",
                   "user": "reader", "statement_timeout_ms": 1500, "max_rows": 500},
    "retrieval": {"semantic_row": False, "hypothetical_row": False, "fusion": "best_rank", "fusion_k": 40,
                  "semantic_weight": 2.5, "fulltext_ranking": "ts_rank_cd", "exact_broad_rows": True,
                  "rerank": False, "rerank_weight": 0.3, "embed_after_import": False,
                  "allow_vectors_in_external_database": True, "use_database_vectors": False},
    "index": {"mode": "server", "chroma_host": "chroma.example.org", "chroma_port": 8001,
              "embedding_model": "all-mpnet-base-v2", "n_results": 7},
}

PAGES = {"llm": LLMPage, "query_generation": QueryPage, "literature": LiteraturePage,
         "retrieval": RetrievalPage, "index": IndexPage}


def _page(section: str, qtbot, jobs) -> PreferencesPage:
    page = PAGES[section](jobs) if section == "llm" else PAGES[section]()
    qtbot.addWidget(page)
    return page


def _round_trip(page: PreferencesPage, shown: Settings) -> tuple[Settings, dict[str, Any], dict[str, Any]]:
    """``shown`` loaded into ``page``, then applied onto the default settings: (the settings that
    validate from it, the dict before, the dict after)."""
    page.load(shown)
    data = Settings().model_dump(mode="json")
    before = copy.deepcopy(data)
    page.apply(data)
    return validate_settings(data), before, data


@pytest.mark.parametrize("section", list(PAGES))
def test_each_page_gives_back_the_settings_it_was_given(section, qtbot, jobs) -> None:
    defaults = getattr(Settings(), section)
    for name, value in CHANGED[section].items():
        assert getattr(defaults, name) != value, f"{section}.{name} must differ from its default"
    changed = validate_settings({section: CHANGED[section]})
    page = _page(section, qtbot, jobs)

    saved, before, after = _round_trip(page, changed)
    assert getattr(saved, section) == getattr(changed, section)
    assert {k: v for k, v in after.items() if k != section} == {
        k: v for k, v in before.items() if k != section}, "a page writes its own section only"

    # Loaded again, the page shows the new settings only (no model list left from the first load).
    saved, _before, _after = _round_trip(page, Settings())
    assert getattr(saved, section) == defaults


def test_the_retrieval_pages_number_fields_ask_for_the_form_to_be_checked(qtbot) -> None:
    page = RetrievalPage()
    qtbot.addWidget(page)
    page.load(Settings())
    with qtbot.waitSignal(page.check_requested, timeout=1_000):
        qtbot.keyClick(page.ret_fusion_k, Qt.Key.Key_Return)
    assert page.ret_rerank_weight.isEnabled()
    page.ret_rerank.setChecked(False)
    assert not page.ret_rerank_weight.isEnabled(), "the weight is for re-ranking, now off"


def test_the_llm_page_reports_an_address_it_cannot_ask_and_asks_nothing(qtbot, jobs) -> None:
    page = LLMPage(jobs)
    qtbot.addWidget(page)
    page.load(Settings())
    page.ollama_host.setText("localhost 11434")
    with qtbot.waitSignal(page.errors_found, timeout=1_000) as sig:
        page.refresh_models()
    assert set(sig.args[0]) == {"llm.ollama_host"}
    assert jobs.running("llm.models") == [] and page.refresh_models_button.isEnabled()
    page.show_errors(sig.args[0])
    assert not page.field_errors["llm.ollama_host"].isHidden()


def test_the_query_page_marks_its_models_from_a_servers_list(qtbot) -> None:
    page = QueryPage()
    qtbot.addWidget(page)
    page.load(validate_settings({"query_generation": {"models": ["builtin:keywords", "mistral:7b"]}}))
    page.mark_installed(["qwen2.5:7b"])
    texts = [page.qg_models.item(i).text() for i in range(page.qg_models.count())]
    assert texts == ["builtin:keywords", "mistral:7b  (not installed)", "qwen2.5:7b  ✓ installed"]
    assert page.ticked_models() == ["builtin:keywords", "mistral:7b"], "the server's others come unticked"
    page.qg_add.setText("gemma2:2b")  # typed by hand: ticked, and not on the server
    qtbot.keyClick(page.qg_add, Qt.Key.Key_Return)
    assert page.ticked_models() == ["builtin:keywords", "mistral:7b", "gemma2:2b"]
    assert page.qg_models.item(3).text() == "gemma2:2b" and page.qg_add.text() == ""
