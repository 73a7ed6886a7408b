"""The KMDS ``kmds.search`` and BMLibrarian multi-model names, called exactly as their documentation
shows them: the real embedding model, a real in-memory ChromaDB, a KB served over real HTTP from
127.0.0.1, the real PostgreSQL test database and the fake Ollama server through the real client."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fake_ollama import ModelScript

from kmds_desktop import paths
from kmds_desktop.config import QueryGenerationSettings, Settings, get_query_generation_config, save_settings
from kmds_desktop.index.errors import KnowledgeBaseReadError
from kmds_desktop.literature import QueryAgent
from kmds_desktop.literature.queries.query_generation import MultiModelQueryGenerator
from kmds_desktop.search import SearchOrchestrator, SemanticIndex

ML_KB = "example_ml_kb_exp_workflow.xml"


@pytest.fixture()
def kb_server(kmds_data: Path) -> Iterator[str]:
    """The shared KB folder served over HTTP on 127.0.0.1 (no internet in tests); yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(kmds_data))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


# --------------------------------------------------------------------------- kmds.search


def test_orchestrator_without_persist_dir_keeps_the_index_in_memory(data_home: Path, kmds_data: Path,
                                                                     memory_keyring) -> None:
    orchestrator = SearchOrchestrator(str(kmds_data / ML_KB), persist_dir=None, backend="offline")
    result = orchestrator.ask("Which data quality problems were found?")
    assert result.results
    assert orchestrator.index.location == "memory" and orchestrator.index.persist_dir is None
    assert not paths.index_dir().exists() or not any(paths.index_dir().iterdir())


def test_semantic_index_default_model_and_build_from_a_url(kb_server: str, kmds_data: Path) -> None:
    assert SemanticIndex.DEFAULT_MODEL == "all-MiniLM-L6-v2"
    index = SemanticIndex()
    assert index.model_name == SemanticIndex.DEFAULT_MODEL
    url = f"{kb_server}/{ML_KB}"
    report = index.build(url)
    assert report.embedded == report.total >= 9  # 9 observations (and a workflow description if any)
    hits = index.search("missing values", n_results=3)
    assert hits and all(h["kb_id"] == report.kb_id for h in hits)
    assert index.build(url).embedded == 0  # the same URL is the same KB: nothing embedded again


def test_a_url_that_fails_is_named_as_given(kb_server: str) -> None:
    index = SemanticIndex()
    missing = f"{kb_server}/no-such-kb.xml"
    with pytest.raises(KnowledgeBaseReadError) as caught:
        index.build(missing)
    assert missing in str(caught.value) and "404" in str(caught.value)
    with pytest.raises(KnowledgeBaseReadError, match=r"http://127\.0\.0\.1:1/x\.xml"):
        index.build("http://127.0.0.1:1/x.xml")  # nothing listens on port 1


def test_a_url_larger_than_the_limit_is_refused(kb_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from kmds_desktop.index import kb_source

    monkeypatch.setattr(kb_source, "MAX_URL_BYTES", 1000)
    with pytest.raises(KnowledgeBaseReadError, match="1,000 accepted"):
        SemanticIndex().build(f"{kb_server}/{ML_KB}")


def test_default_llm_is_google_and_without_a_key_the_result_says_so(kmds_data: Path, memory_keyring,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    orchestrator = SearchOrchestrator(str(kmds_data / ML_KB), settings=Settings())
    result = orchestrator.ask("Which data quality problems were found?")
    assert result.backend == "google"
    assert "GOOGLE_API_KEY" in result.backend_note and "could not be used" in result.backend_note
    assert result.fallback_code == "llm_error" and "GOOGLE_API_KEY" in result.fallback_reason
    assert result.synthesis == "extractive" and result.results  # the records are still found


def test_route_explanation_keeps_the_routers_reason_beside_the_fallback(fake_ollama, kmds_data: Path) -> None:
    from kmds_desktop.config import LLMSettings

    router_says = "The question asks about modelling choices."
    reply = ('{"intent_class": "modelling_choice_search", "filters": {"obs_type_filter": "Zebra"}, '
             f'"explanation": "{router_says}"}}')
    fake_ollama.models["m"] = ModelScript(
        replies=[lambda prompt, body: reply if "JSON" in prompt else "ok [1]"])
    settings = Settings(llm=LLMSettings(ollama_host=fake_ollama.url, ollama_model="m"))
    result = SearchOrchestrator(str(kmds_data / ML_KB), backend="ollama", settings=settings).ask(
        "Which modelling choices of the Zebra type were made?")  # the filter is grounded in the question
    assert result.fallback_code in ("empty_template", "empty_filtered")
    assert result.route_explanation.startswith(router_says)
    assert "Fell back to the offline router" in result.route_explanation  # the model's floor
    assert result.fallback_reason and result.fallback_reason in result.route_explanation


# --------------------------------------------------------------------------- BMLibrarian


def test_get_query_generation_config_has_the_documented_keys(data_home: Path) -> None:
    config = get_query_generation_config()
    models = config["models"]
    enabled = config["multi_model_enabled"]
    assert isinstance(models, list) and models and enabled is False
    for key in ("multi_model_enabled", "models", "queries_per_model", "execution_mode", "deduplicate_results",
                "show_all_queries_to_user", "allow_query_selection"):
        assert key in config
    chosen = QueryGenerationSettings(multi_model_enabled=True, models=["a", "b"])
    save_settings(Settings(query_generation=chosen))
    assert get_query_generation_config()["models"] == ["a", "b"]
    assert get_query_generation_config()["multi_model_enabled"] is True


def test_generator_accepts_an_ollama_host_string(fake_ollama) -> None:
    fake_ollama.models["m1"] = ModelScript(replies=["aspirin & cardiovascular"])
    generator = MultiModelQueryGenerator(fake_ollama.url, verbatim_models=["m1"])
    result = generator.generate_queries("What are the cardiovascular benefits of aspirin?",
                                        "system prompt", ["m1"], 1)
    assert [r.error for r in result.all_queries] == [None]
    assert result.unique_queries == ["aspirin & cardiovascular"]
    with pytest.raises(TypeError, match="chat"):
        MultiModelQueryGenerator(42)  # type: ignore[arg-type]


def test_generator_deduplicates_as_documented() -> None:
    generator = MultiModelQueryGenerator("http://localhost:11434")
    unique = generator._deduplicate_queries(["Query 1", "query 1", "Query 2"])
    assert len(unique) == 2


def test_human_review_receives_the_unique_queries_with_default_settings(pg_database, fake_ollama) -> None:
    fake_ollama.models["a"] = ModelScript(replies=["cystic & fibrosis"])
    fake_ollama.models["b"] = ModelScript(replies=["Cystic&Fibrosis"])
    settings = QueryGenerationSettings(multi_model_enabled=True, models=["a", "b"],
                                       ollama_host=fake_ollama.url, verbatim_query_models=["a", "b"])
    agent = QueryAgent(pg_database, settings)
    seen: list[list[str]] = []

    def human_query_modifier(queries: list[str]) -> list[str]:
        seen.append(list(queries))
        return queries

    docs = list(agent.find_abstracts_multi_query("cystic fibrosis", max_rows=5, human_in_the_loop=True,
                                                 human_query_modifier=human_query_modifier))
    assert seen == [agent.last_generation.unique_queries] == [["cystic & fibrosis"]]
    assert docs and all("id" in d for d in docs)


def test_query_agent_find_abstracts(pg_database, fake_ollama) -> None:
    fake_ollama.models["a"] = ModelScript(replies=["cystic <-> fibrosis & pseudomonas"])
    agent = QueryAgent(pg_database, QueryGenerationSettings(models=["a"], ollama_host=fake_ollama.url,
                                                            verbatim_query_models=["a"]))
    docs = list(agent.find_abstracts("Pseudomonas in cystic fibrosis?", max_rows=5))
    assert 0 < len(docs) <= 5 and all("id" in d for d in docs)
    fake_ollama.models["a"] = ModelScript(replies=["cystic <-> fibrosis & pseudomonas"])
    edited = list(agent.find_abstracts("Pseudomonas in cystic fibrosis?", max_rows=5, human_in_the_loop=True,
                                       human_query_modifier=lambda q: q.replace("pseudomonas", "tobramycin")))
    assert agent.last_result.queries[0].query == "cystic <-> fibrosis & tobramycin"
    assert {d["id"] for d in edited} != {d["id"] for d in docs}
