"""The orchestrator with a real LLM client: the fake Ollama server driven through the real ``ollama``
client, the real embedding model, a real ChromaDB index, and KMDS files from ../shared."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.fake_google import FakeGoogle
from support.fake_ollama import ModelScript

from kmds_desktop.ask.routing import ROUTE_MAX_TOKENS
from kmds_desktop.config import LLMSettings, Settings
from kmds_desktop.kb import load_kb
from kmds_desktop.llm import GoogleBackend
from kmds_desktop.search import OrchestratorRoute, SearchFilters, SearchOrchestrator
from kmds_desktop.tasks import Cancelled, CancelToken

MODEL = "router:1b"
ANSWER = "Two data quality issues were recorded [1] and the time window was restricted [2]. Also [9]."


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ask-index")


@pytest.fixture(scope="module")
def analytics_kb(kmds_data: Path):
    """10 observations: exploratory, data representation and model selection, no modelling choice."""
    return load_kb(kmds_data / "example_analytics_kb_app_workflow.xml")


@pytest.fixture(scope="module")
def ml_kb(kmds_data: Path):
    return load_kb(kmds_data / "example_ml_kb_exp_workflow.xml")


def route_json(intent: str, **filters: Any) -> str:
    return json.dumps({"intent_class": intent, "filters": filters, "explanation": f"{intent} fits"})


def scripted(route_reply: str, answer: str = ANSWER):
    """A reply function: the route for the routing prompt, ``answer`` for the synthesis prompt."""
    def reply(prompt: str, body: dict[str, Any]) -> str:
        return route_reply if "Reply with one JSON object" in prompt else answer
    return reply


def make(kb, index_dir: Path, url: str, *, timeout: float = 30, model: str = MODEL, **kw: Any):
    settings = Settings(llm=LLMSettings(ollama_host=url, ollama_model=model, timeout_s=timeout))
    return SearchOrchestrator(kb, persist_dir=index_dir, backend="ollama", settings=settings, **kw)


def test_valid_route_runs_template_ranked_and_cited(fake_ollama, analytics_kb, index_dir) -> None:
    fake_ollama.models[MODEL] = ModelScript(replies=[scripted(route_json("exploratory_search"))])
    orch = make(analytics_kb, index_dir, fake_ollama.url, n_results=3)
    result = orch.ask("Were the ticket timestamps stored in a consistent datetime format?")

    assert result.backend == "ollama" and result.fallback_reason is None and result.fallback_code is None
    assert result.intent_class == "exploratory_search"
    assert result.route_explanation == "exploratory_search fits"
    assert result.route == result.proposed_route
    # an open question: the relevant records only (here the one about datetime formats), never padded
    assert 1 <= len(result.results) <= 3 and not result.listing
    assert "datetime formats" in result.results[0]["finding"]
    assert {r["category"] for r in result.results} == {"exploratory"}
    distances = [r["distance"] for r in result.results]
    assert distances == sorted(distances)
    # ranked by meaning, not display order: the timestamp-format finding (the last exploratory one) is first
    assert "inconsistent datetime formats" in result.results[0]["finding"]
    assert result.results[0]["finding_seq"] == 4
    for r in result.results:
        assert {"iri", "finding", "obs_type", "category", "workflow_name", "finding_seq", "intent",
                "distance", "score"} <= r.keys()
        assert analytics_kb.observation(r["iri"]) is not None
    # synthesis: the LLM's answer, with the citation of a record that does not exist removed
    assert result.synthesis == "llm"
    assert result.answer.startswith("Two data quality issues were recorded [1]")
    assert "[9]" not in result.answer
    routing, synthesis = fake_ollama.completion_requests()
    assert "modelling_choice_search" in routing.prompt and "semantic_search" in routing.prompt
    assert f"[1] ({result.results[0]['obs_type']}" in synthesis.prompt
    assert result.results[0]["finding"].split()[0] in synthesis.prompt
    assert {"route", "search", "synthesis", "total"} <= result.timings.keys()


def test_a_short_route_is_asked_for_capped_and_explained(fake_ollama, analytics_kb, index_dir) -> None:
    """The route is asked for short (template and listing; filters only when stated; no explanation: the
    reply's tokens are most of a route's time on a CPU), capped in tokens, and the route box still says
    who chose it."""
    short = json.dumps({"intent_class": "exploratory_search", "listing": False})
    fake_ollama.models[MODEL] = ModelScript(replies=[scripted(short)])
    result = make(analytics_kb, index_dir, fake_ollama.url, n_results=3).ask(
        "Were the ticket timestamps stored in a consistent datetime format?")
    assert result.intent_class == "exploratory_search" and result.fallback_code is None
    assert result.route_explanation == f"Chosen by ollama · {MODEL}."
    routing = fake_ollama.completion_requests()[0]
    assert routing.body["options"]["num_predict"] == ROUTE_MAX_TOKENS <= 100
    assert routing.body["format"]["required"] == ["intent_class", "listing"]
    assert "null" not in routing.prompt.split("Reply with one JSON object", 1)[1]


@pytest.mark.parametrize(
    "reply",
    [
        f"```json\n{route_json('model_selection_search')}\n```",
        f"It is about choosing models, so: {route_json('model_selection_search')}\nHope this helps!",
    ],
    ids=["fenced", "inside-prose"],
)
def test_fenced_and_prose_wrapped_routes(fake_ollama, analytics_kb, index_dir, reply: str) -> None:
    fake_ollama.models[MODEL] = ModelScript(replies=[scripted(reply)])
    result = make(analytics_kb, index_dir, fake_ollama.url).ask("How was the model chosen?")
    assert result.intent_class == "model_selection_search" and result.fallback_reason is None
    assert result.results and {r["category"] for r in result.results} == {"model_selection"}


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("I would search the exploratory observations for this one.", "invalid_route"),
        ('{"intent_class": "exploratory_search", "filters": {"finding_seq_min": "first"}}', "invalid_route"),
        (route_json("ticket_search"), "unknown_intent"),
    ],
    ids=["not-json", "bad-filter", "unknown-intent"],
)
def test_unusable_route_falls_back_to_the_offline_router(fake_ollama, analytics_kb, index_dir, reply,
                                                         code) -> None:
    """A model's reply that is no usable route: the offline router's route runs, as with no model (it
    is the model's floor), where a bare free-text search would find any record near the words."""
    fake_ollama.models[MODEL] = ModelScript(replies=[scripted(reply)])
    question = "Which data quality problems were found?"
    result = make(analytics_kb, index_dir, fake_ollama.url).ask(question)
    offline = SearchOrchestrator(analytics_kb, persist_dir=index_dir, backend="offline",
                                 settings=Settings()).retrieve(question)
    assert result.fallback_code == code and result.fallback_reason
    assert result.proposed_route is None and result.route.from_offline_router
    assert result.intent_class == offline.intent_class == "exploratory_search"
    assert [r["iri"] for r in result.results] == [r["iri"] for r in offline.results]
    assert result.route_explanation.startswith("Fell back to the offline router")
    assert result.synthesis == "llm" and result.answer.startswith("Two data quality")


def test_filters_are_applied(fake_ollama, ml_kb, index_dir) -> None:
    reply = route_json("exploratory_search", obs_type_filter="Data Quality", finding_seq_min=2,
                       finding_seq_max=4)
    fake_ollama.models[MODEL] = ModelScript(replies=[scripted(reply)])
    result = make(ml_kb, index_dir, fake_ollama.url, n_results=10).ask(
        "What data quality issues were seen in findings 2 to 4?")
    assert result.fallback_reason is None
    expected = {o.iri for o in ml_kb.observations if o.category == "exploratory"
                and "data quality" in o.obs_type.lower() and o.finding_seq is not None
                and 2 <= o.finding_seq <= 4}
    assert expected and {r["iri"] for r in result.results} == expected
    # the LLM's "Data Quality" is spelled as the KB spells the type
    assert result.route.filters == SearchFilters(obs_type_filter="Data Quality Observation",
                                                 finding_seq_min=2, finding_seq_max=4)
    assert result.listing and [r["finding_seq"] for r in result.results] == [2, 3, 4]


def test_empty_template_falls_back_to_semantic(fake_ollama, analytics_kb, index_dir) -> None:
    assert not [o for o in analytics_kb.observations if o.category == "modelling_choice"]
    fake_ollama.models[MODEL] = ModelScript(replies=[scripted(route_json("modelling_choice_search"))])
    result = make(analytics_kb, index_dir, fake_ollama.url).ask("Which modelling assumptions were made?")
    assert result.fallback_code == "empty_template"
    assert "modelling_choice_search found no observations" in result.fallback_reason
    assert result.proposed_route.intent_class == "modelling_choice_search"
    assert result.intent_class == "semantic_search" and 1 <= len(result.results) <= 5
    distances = [r["distance"] for r in result.results]
    assert distances == sorted(distances)


def test_filters_matching_nothing_fall_back(fake_ollama, analytics_kb, index_dir) -> None:
    fake_ollama.models[MODEL] = ModelScript(replies=[scripted(route_json("exploratory_search",
                                                                        keyword="zebra"))])
    result = make(analytics_kb, index_dir, fake_ollama.url).ask("Anything about zebras?")
    assert result.fallback_code == "empty_template" and "keyword 'zebra'" in result.fallback_reason
    assert result.results


def test_model_not_found_falls_back_and_answers_extractively(fake_ollama, analytics_kb, index_dir) -> None:
    fake_ollama.models["llama3.1:8b"] = ModelScript(replies=["unused"])
    result = make(analytics_kb, index_dir, fake_ollama.url, model="missing:7b").ask("What about tickets?")
    assert result.fallback_code == "llm_error"
    assert "missing:7b" in result.fallback_reason and "llama3.1:8b" in result.fallback_reason
    assert result.intent_class == "semantic_search" and result.results
    assert result.synthesis == "extractive" and "extractive summary" in result.answer
    assert "[1]" in result.answer
    # the model is known to be missing: synthesis did not ask again
    assert len(fake_ollama.completion_requests()) == 1


def test_server_down_falls_back_with_host_in_reason(analytics_kb, index_dir) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    result = make(analytics_kb, index_dir, url).ask("What about tickets?")
    assert result.fallback_code == "llm_error" and url in result.fallback_reason
    assert result.synthesis == "extractive" and result.results and result.answer


def test_timeout_falls_back(fake_ollama, analytics_kb, index_dir) -> None:
    fake_ollama.models[MODEL] = ModelScript(replies=[route_json("exploratory_search")], delay=3)
    start = time.monotonic()
    result = make(analytics_kb, index_dir, fake_ollama.url, timeout=0.5).ask("What about tickets?")
    assert time.monotonic() - start < 2.5
    assert result.fallback_code == "llm_error" and "did not finish within 0.5 s" in result.fallback_reason
    assert result.synthesis == "extractive" and result.results


def test_synthesis_failure_gives_extractive_answer(fake_ollama, analytics_kb, index_dir) -> None:
    fake_ollama.models[MODEL] = ModelScript(replies=[route_json("exploratory_search"), "never sent"],
                                            statuses=[200, 500], error="out of memory")
    result = make(analytics_kb, index_dir, fake_ollama.url).ask("Which data quality problems were found?")
    assert result.fallback_reason is None and result.intent_class == "exploratory_search"
    assert result.synthesis == "extractive" and "out of memory" in result.synthesis_error
    assert result.answer.startswith("The LLM could not write an answer")
    assert "Workflow ITSM modelling:" in result.answer and "Data Quality Observation" in result.answer
    assert all(f"[{i}]" in result.answer for i in range(1, len(result.results) + 1))


def test_ask_with_user_edited_route_skips_the_router(fake_ollama, ml_kb, index_dir) -> None:
    fake_ollama.models[MODEL] = ModelScript(replies=["A short answer [1]."])
    orch = make(ml_kb, index_dir, fake_ollama.url, n_results=10)
    route = OrchestratorRoute(intent_class="all_observations_search", explanation="edited").with_filters(
        finding_seq_min=1, finding_seq_max=2)
    result = orch.ask_with_route("What came first?", route)
    assert result.route == route and result.fallback_reason is None
    assert result.results and all(1 <= r["finding_seq"] <= 2 for r in result.results)
    assert len(fake_ollama.completion_requests()) == 1  # synthesis only
    # a dict route (as edited in a form) works too; an invalid one falls back and says so
    as_dict = orch.ask_with_route("What came first?", {"intent_class": "exploratory_search"})
    assert as_dict.intent_class == "exploratory_search"
    bad = orch.ask_with_route("What came first?", {"intent_class": "nope"})
    assert bad.fallback_code == "invalid_route" and bad.intent_class == "semantic_search"


def test_streaming_synthesis_yields_chunks(fake_ollama, analytics_kb, index_dir) -> None:
    fake_ollama.models[MODEL] = ModelScript(replies=[scripted(route_json("exploratory_search"))],
                                            chunk_size=6)
    stream = make(analytics_kb, index_dir, fake_ollama.url).ask_stream("Which data quality problems?")
    assert stream.result.results and stream.result.answer == ""
    chunks = list(stream)
    assert len(chunks) > 5 and "".join(chunks) == ANSWER
    assert stream.result.synthesis == "llm" and "[9]" not in stream.result.answer
    assert "synthesis" in stream.result.timings


def test_cancel_aborts_the_llm_call(fake_ollama, analytics_kb, index_dir) -> None:
    fake_ollama.models[MODEL] = ModelScript(replies=[route_json("exploratory_search")], delay=5)
    orch = make(analytics_kb, index_dir, fake_ollama.url)
    orch.refresh_index()
    token = CancelToken()
    threading.Timer(0.3, token.cancel).start()
    start = time.monotonic()
    with pytest.raises(Cancelled):
        orch.ask("What about tickets?", cancel=token)
    assert time.monotonic() - start < 2.0


def test_progress_is_reported(fake_ollama, analytics_kb, index_dir) -> None:
    fake_ollama.models[MODEL] = ModelScript(replies=[scripted(route_json("exploratory_search"))])
    seen: list[tuple[int, int | None, str]] = []
    make(analytics_kb, index_dir, fake_ollama.url).ask("Data quality?", progress=lambda *a: seen.append(a))
    steps = [s[0] for s in seen]
    assert sorted(set(steps)) == [0, 1, 2, 3, 4]
    assert steps == sorted(steps) and all(total == 4 for _, total, _ in seen)
    assert all(message.startswith("preparing the index") for step, _, message in seen if step == 0)


def test_google_backend_as_llm(analytics_kb, index_dir) -> None:
    with FakeGoogle([route_json("model_selection_search"), "Model 1 was selected [1]."]) as fake:
        backend = GoogleBackend(api_key="test-key", base_url=fake.url)
        orch = SearchOrchestrator(analytics_kb, persist_dir=index_dir, llm_fn=backend, settings=Settings())
        result = orch.ask("Which model was selected?")
    assert result.backend == "google" and result.intent_class == "model_selection_search"
    assert result.answer == "Model 1 was selected [1]."


def test_user_callable_and_backend_choice(
    fake_ollama, analytics_kb, index_dir, monkeypatch, memory_keyring
) -> None:
    calls: list[str] = []

    def my_llm(prompt: str) -> str:
        calls.append(prompt)
        return route_json("exploratory_search") if len(calls) == 1 else "Custom answer [1]."

    result = SearchOrchestrator(analytics_kb, persist_dir=index_dir, llm_fn=my_llm, settings=Settings()).ask(
        "Data quality?")
    assert result.backend == "callable" and result.answer == "Custom answer [1]." and len(calls) == 2

    def broken(prompt: str) -> str:
        raise RuntimeError("quota exhausted")

    result = SearchOrchestrator(analytics_kb, persist_dir=index_dir, llm_fn=broken, settings=Settings()).ask(
        "Data quality?")
    assert result.fallback_code == "llm_error" and "quota exhausted" in result.fallback_reason
    assert result.synthesis == "extractive"

    class ChatObject:  # a user object that has its own ``chat`` (no cancel) and fails in it
        name = "mine"

        def chat(self, prompt: str) -> str:
            raise KeyError("no such prompt")

        def __call__(self, prompt: str) -> str:
            raise TimeoutError("my server is slow")

    result = SearchOrchestrator(analytics_kb, persist_dir=index_dir, llm_fn=ChatObject(),
                                settings=Settings()).ask("Data quality?")
    assert result.backend == "mine" and result.fallback_code == "llm_error"
    assert "my server is slow" in result.fallback_reason and result.synthesis == "extractive"

    # auto: Ollama answers -> ollama; nothing answers and no key -> offline

    fake_ollama.models["llama3.1:8b"] = ModelScript(replies=[scripted(route_json("exploratory_search"))])
    auto = SearchOrchestrator(analytics_kb, persist_dir=index_dir, ollama_host=fake_ollama.url,
                              backend="auto", settings=Settings())
    assert auto.resolve_backend() == "ollama"
    fake_ollama.models.clear()
    offline = SearchOrchestrator(analytics_kb, persist_dir=index_dir, ollama_host=fake_ollama.url,
                                 backend="auto", settings=Settings())
    assert offline.resolve_backend() == "offline" and "no model" in offline.backend_note
    # explicit google without a key: every LLM step falls back, with the key's sources named
    no_key = SearchOrchestrator(analytics_kb, persist_dir=index_dir, backend="google", settings=Settings())
    result = no_key.ask("Data quality?")
    assert result.backend == "google" and "GOOGLE_API_KEY" in result.fallback_reason
    assert result.synthesis == "extractive"


def test_index_is_per_kb_and_built_when_missing(tmp_path: Path, analytics_kb, ml_kb) -> None:
    from kmds_desktop.index import SemanticIndex

    fresh = tmp_path / "fresh-index"
    a = SearchOrchestrator(analytics_kb, persist_dir=fresh, backend="offline", settings=Settings())
    b = SearchOrchestrator(ml_kb, persist_dir=fresh, backend="offline", settings=Settings())
    ra = a.ask("customer purchases and revenue")
    rb = b.ask("customer purchases and revenue")
    store = SemanticIndex(fresh)
    assert store.count(kb_id=analytics_kb.kb_id) > 0 and store.count(kb_id=ml_kb.kb_id) > 0
    # both files use the same IRIs: the index entries must come from each KB's own entries
    assert ra.results and {r["kb_id"] for r in ra.results} == {analytics_kb.kb_id}
    assert rb.results and {r["kb_id"] for r in rb.results} == {ml_kb.kb_id}
    assert all(ml_kb.observation(r["iri"]).finding == r["finding"] for r in rb.results)
    assert {r["finding"] for r in ra.results}.isdisjoint(r["finding"] for r in rb.results)


def test_template_ranking_matches_exact_ranking(kmds_data: Path, index_dir: Path) -> None:
    """The relevant records are the leading records of the exact ranking (identical findings of the
    KB's two workflows merged into one record citing both)."""
    kb = load_kb(kmds_data / "test_kb_exp_workflow.xml")
    def llm(prompt: str) -> str:
        return route_json("data_representation_search") if "JSON" in prompt else "ok"

    orch = SearchOrchestrator(kb, persist_dir=index_dir, settings=Settings(), n_results=4, llm_fn=llm)
    question = "scaling numeric attributes before clustering"
    result = orch.ask(question)
    members = [o.iri for o in kb.observations if o.category == "data_representation"]
    assert len(members) > 4 and result.fallback_reason is None
    exact, seen = [], set()
    for iri, distance in orch.index.rank(question, members, kb_id=kb.kb_id):
        text = kb.observation(iri).finding
        if text not in seen:
            seen.add(text)
            exact.append((iri, distance))
    n = len(result.results)
    assert 1 <= n <= 4
    assert [r["iri"] for r in result.results] == [iri for iri, _ in exact[:n]]
    assert [r["distance"] for r in result.results] == pytest.approx([d for _, d in exact[:n]], abs=1e-4)
    assert all(len(r["workflows"]) == 2 and r["also"] for r in result.results)


def test_edited_kb_is_reindexed_and_cleared_index_rebuilt(kmds_data: Path, index_dir: Path) -> None:
    kb = load_kb(kmds_data / "example_ml_kb_exp_workflow.xml")
    first = SearchOrchestrator(kb, persist_dir=index_dir, backend="offline", settings=Settings())
    first.ask("customer revenue")
    target = next(o for o in kb.observations if o.category == "exploratory")
    kb.update_observation(target.iri, finding="Zebra crossings dominate the pedestrian accident records.")
    # a new orchestrator on the edited (unsaved) KB sees the edit: the index was brought up to date
    again = SearchOrchestrator(kb, persist_dir=index_dir, backend="offline", settings=Settings())
    hit = again.ask("pedestrian accidents at zebra crossings").results[0]
    assert hit["iri"] == target.iri and hit["finding"].startswith("Zebra crossings")
    # the index is emptied behind the orchestrator's back: the next question rebuilds it
    again.index.clear(kb_id=kb.kb_id)
    assert again.ask("pedestrian accidents at zebra crossings").results[0]["iri"] == target.iri


def test_every_citation_maps_to_its_result(fake_ollama, ml_kb, index_dir) -> None:
    """[n] in the synthesis prompt and in the answer is results[n-1], for every n the model was shown
    (the prompt carries a few of the records under their view numbers); a citation of a record it
    was not shown is dropped."""
    answer = " ".join(f"Point {i} [{i}]." for i in range(1, 6))
    listing = json.dumps({"intent_class": "all_observations_search", "listing": True, "explanation": "all"})
    fake_ollama.models[MODEL] = ModelScript(replies=[scripted(listing, answer)])
    result = make(ml_kb, index_dir, fake_ollama.url, n_results=5).ask("Summarise what was found")
    assert result.synthesis == "llm" and len(result.results) == 5
    shown = result.given_records
    assert 0 < len(shown) < 5
    assert result.answer == " ".join(f"Point {i}" + (f" [{i}]." if i in shown else ".") for i in range(1, 6))
    prompt = fake_ollama.completion_requests()[-1].prompt
    assert [int(x.split("]")[0][1:]) for x in prompt.splitlines() if x.startswith("[")] == shown
    for n in shown:
        hit = result.results[n - 1]
        assert result.citations[n] == hit["iri"]
        line = next(x for x in prompt.splitlines() if x.startswith(f"[{n}] ("))
        assert " ".join(hit["finding"].split())[:60] in line


def test_stream_dropped_midway_ends_with_extractive_answer(fake_ollama, analytics_kb, index_dir) -> None:
    fake_ollama.models[MODEL] = ModelScript(replies=[scripted(route_json("exploratory_search"))],
                                            chunk_size=6, drop_after=[None, 3])  # synthesis drops
    stream = make(analytics_kb, index_dir, fake_ollama.url).ask_stream("Which data quality problems?")
    chunks = list(stream)
    result = stream.result
    assert chunks[:3] == [ANSWER[0:6], ANSWER[6:12], ANSWER[12:18]]
    assert result.synthesis == "extractive" and "in the middle of the reply" in result.synthesis_error
    assert result.answer == "".join(chunks).strip()
    assert result.answer.startswith(ANSWER[:18]) and "extractive summary" in result.answer
    assert all(f"[{i}]" in result.answer for i in range(1, len(result.results) + 1))


def test_google_key_stays_out_of_the_result(analytics_kb, index_dir) -> None:
    secret = "AIza-secret-in-orchestrator-42"
    with FakeGoogle(["unused"], api_key="the-real-key") as fake:
        backend = GoogleBackend(api_key=secret, base_url=fake.url)
        result = SearchOrchestrator(analytics_kb, persist_dir=index_dir, llm_fn=backend,
                                    settings=Settings()).ask("Which model was selected?")
    assert result.fallback_code == "llm_error" and "GOOGLE_API_KEY" in result.fallback_reason
    assert result.synthesis == "extractive" and result.results
    assert secret not in json.dumps(result.to_dict(), default=str)


def test_auto_offline_says_why_and_that_no_llm_was_used(
    analytics_kb, index_dir, monkeypatch, memory_keyring
) -> None:
    import socket

    from kmds_desktop.commands.ask import format_result

    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}"
    result = SearchOrchestrator(analytics_kb, persist_dir=index_dir, ollama_host=down, backend="auto",
                                settings=Settings()).ask("Which model was selected?")
    assert result.backend == "offline" and result.synthesis == "offline" and result.fallback_reason is None
    assert result.answer.startswith("No LLM was used (offline mode)")
    assert down in result.backend_note and "no Google API key" in result.backend_note
    assert f"Backend: offline (answer: offline) — {result.backend_note}" in format_result(result.to_dict())
